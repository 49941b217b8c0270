"""An S3-compatible server on this host for the tests of etcd backups to S3: moto's, over
HTTPS with a certificate of the test's, checking every request's SigV4 signature.

moto cannot live in corral's environment (through botocore it pins python-dateutil below 3,
which the test extra's kubernetes client needs), so it gets a virtualenv of its own, made
once per moto version under ~/.cache/corral with pip from PyPI, as any test dependency is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import IO, NamedTuple

from corral.devenv.host import run

MOTO = "moto[server]==5.2.5"
SCRIPT = Path(__file__).parents[2] / "s3server" / "moto_s3.py"
STOP_TIMEOUT = 10.0


class Keys(NamedTuple):
    access_key: str
    secret_key: str


def virtualenv() -> Path:
    """moto's virtualenv, made when missing (about a minute: moto, boto3, flask)."""
    configured = os.environ.get("CORRAL_S3_VENV")
    root = (
        Path(configured)
        if configured
        else Path.home() / ".cache" / "corral" / f"s3-{MOTO.replace('[server]==', '-')}"
    )
    python = root / "bin" / "python"
    if not (root / ".complete").exists():
        run([sys.executable, "-m", "venv", "--clear", str(root)])
        run([str(python), "-m", "pip", "install", "--quiet", MOTO])
        (root / ".complete").touch()
    return python


class S3Server:
    """moto's S3 on `host:port`, one bucket, one user's keys; stopped by its process id."""

    def __init__(self, host: str, port: int, cert: Path, key: Path, bucket: str, log: Path):
        self.endpoint = f"{host}:{port}"
        self.bucket = bucket
        self._log: IO[bytes] = log.open("wb")
        environment = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"}
        self._process = subprocess.Popen(
            [str(virtualenv()), str(SCRIPT), host, str(port), str(cert), str(key), bucket],
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=environment,
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            self.stop()
            raise RuntimeError(f"moto's S3 server ended before it was ready: see {log}")
        given = json.loads(line)
        self.keys = Keys(given["accessKey"], given["secretKey"])

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._log.close()


if __name__ == "__main__":
    if sys.argv[1:] != ["fetch"]:
        sys.exit("usage: python -m corral.devenv.s3server fetch")
    print(virtualenv())
