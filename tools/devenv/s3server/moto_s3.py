"""moto's S3 server with SigV4 checked, for the e2e of etcd backups to S3.

Run with the Python of moto's own virtualenv (corral.devenv.s3server makes it): moto pins
python-dateutil below 3 through botocore, and corral's test tools need 3, so the two cannot
share one environment.

    python moto_s3.py HOST PORT CERT KEY BUCKET

It makes one IAM user allowed everything, its access key and the bucket in moto's backends
(no request), prints `{"accessKey": ..., "secretKey": ...}` on one line, then serves HTTPS.
Every request is authenticated: INITIAL_NO_AUTH_ACTION_COUNT must be 0 in the environment
before moto is imported.
"""

import json
import os
import sys

if os.environ.get("INITIAL_NO_AUTH_ACTION_COUNT") != "0":
    sys.exit("moto_s3.py: set INITIAL_NO_AUTH_ACTION_COUNT=0, or nothing is authenticated")

from moto.core import DEFAULT_ACCOUNT_ID
from moto.iam.models import iam_backends
from moto.s3.models import s3_backends
from moto.server import main

USER = "etcd-backups"
ALLOW_ALL = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
}

host, port, cert, key, bucket = sys.argv[1:6]
iam = iam_backends[DEFAULT_ACCOUNT_ID]["global"]
iam.create_user("us-east-1", USER)
iam.put_user_policy(USER, "all", json.dumps(ALLOW_ALL))
access = iam.create_access_key(USER)
s3_backends[DEFAULT_ACCOUNT_ID]["aws"].create_bucket(bucket, "us-east-1")
print(json.dumps({"accessKey": access.access_key_id, "secretKey": access.secret_access_key}),
      flush=True)  # fmt: skip
main(["-H", host, "-p", port, "-c", cert, "-k", key])
