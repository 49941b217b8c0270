"""S3-compatible targets of etcd backups (docs/provisioning.md, "S3 targets"): the `etcd.s3`
block of an rke2 or k3s cluster's configuration, as Rancher v2's `rkeConfig.etcd.s3`, the
cloud credential kind that holds its keys, and the pieces of the Jobs that copy a snapshot to
and from it.

Pure: the API server checks the block with `target` when a cluster is written (and the
credential's owner itself); the operator reads it again with `target` when it takes a backup.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.core.api import addresses
from corral.core.errors import Invalid, unknown
from corral.core.provisioning import catalog

# A cloud credential of this kind (`s3credentialConfig`) needs no node driver: corral declares
# its fields itself. Both are required where a cluster names it.
CREDENTIAL_DRIVER = "s3"
CREDENTIAL_FIELDS = ("accessKey", "secretKey")
CREDENTIAL_SCHEMA: dict[str, Any] = {
    "fields": {
        name: {"type": "string", "description": description, "default": None,
               "required": True, "secret": True}
        for name, description in (
            ("accessKey", "The access key id of the S3-compatible service"),
            ("secretKey", "The secret access key; never returned, never logged"),
        )
    }
}  # fmt: skip

# Where the Jobs' containers find the target's keys and CA: a Secret volume made for that Job.
MOUNT = "/s3"
CA_FILE = "ca.crt"
# Where a restore puts a downloaded snapshot: a volume of the Job's own, as the backups claim
# is mounted read-only.
DOWNLOADS = "/downloads"

MAX_ENDPOINT = 255
MAX_FOLDER = 256
MAX_REGION = 32
MAX_CREDENTIAL_NAME = 64
MAX_CA = 32 * 1024
# host or IPv4 address, an optional port: no scheme and no path (HTTPS is always used).
_ENDPOINT = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?$")
# S3's rules for bucket names (3 to 63 lowercase letters, digits, dots and hyphens).
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_REGION = re.compile(r"^[a-z0-9-]*$")
# Object key segments: printable, no backslash; `..` and empty segments are refused apart.
_FOLDER = re.compile(r"^[A-Za-z0-9!_.*'()/ -]*$")
_PEM = "-----BEGIN CERTIFICATE-----"


@dataclass(frozen=True)
class Target:
    endpoint: str
    bucket: str
    folder: str
    region: str
    endpoint_ca: str
    skip_ssl_verify: bool
    credential: str  # the CloudCredential's name

    def key(self, filename: str) -> str:
        return f"{self.folder}/{filename}" if self.folder else filename

    def location(self, filename: str) -> str:
        return f"s3://{self.bucket}/{self.key(filename)}"

    def described(self) -> dict[str, Any]:
        """The status's `s3` block, as Rancher's snapshot records have it: never a key."""
        return {
            "endpoint": self.endpoint,
            "bucket": self.bucket,
            "folder": self.folder,
            "region": self.region,
            "skipSSLVerify": self.skip_ssl_verify,
            "cloudCredentialName": self.credential,
            **({"endpointCA": self.endpoint_ca} if self.endpoint_ca else {}),
        }


def target(config: Mapping[str, Any] | None, config_field: str) -> Target | None:
    """The S3 target `config` (a cluster's rke2Config or k3sConfig) names in `etcd.s3`; None
    without one. Invalid naming the field when the block is not acceptable."""
    etcd = (config or {}).get("etcd")
    where = f"{config_field}.etcd"
    if etcd is None:
        return None
    if not isinstance(etcd, Mapping):
        raise Invalid(f"{where} must be an object", where)
    block = etcd.get("s3")
    where = f"{where}.s3"
    if block is None:
        return None
    if not isinstance(block, Mapping):
        raise Invalid(f"{where} must be an object", where)
    known = {"endpoint", "bucket", "folder", "region", "endpointCA", "skipSSLVerify",
             "cloudCredentialName"}  # fmt: skip
    for name in block:
        if name not in known:
            raise unknown(f"{where}.{name}", "an S3 target")
    endpoint = _text(block, "endpoint", where, MAX_ENDPOINT, required=True)
    if not _ENDPOINT.match(endpoint) or not _port_ok(endpoint):
        raise Invalid(f"{where}.endpoint must be host[:port], without a scheme or a path",
                      f"{where}.endpoint")  # fmt: skip
    bucket = _text(block, "bucket", where, 63, required=True)
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise Invalid(f"{where}.bucket must be an S3 bucket name: 3 to 63 lowercase letters, "
                      "digits, dots and hyphens", f"{where}.bucket")  # fmt: skip
    folder = _text(block, "folder", where, MAX_FOLDER).strip("/")
    if not _FOLDER.match(folder) or any(p in ("", ".", "..") for p in folder.split("/")[:-1]) \
            or folder.split("/")[-1] in (".", ".."):  # fmt: skip
        raise Invalid(f"{where}.folder must be a path of letters, digits and !_.*'()- without "
                      "empty, . or .. parts", f"{where}.folder")  # fmt: skip
    region = _text(block, "region", where, MAX_REGION)
    if not _REGION.match(region):
        raise Invalid(f"{where}.region must be lowercase letters, digits and hyphens",
                      f"{where}.region")  # fmt: skip
    ca = _text(block, "endpointCA", where, MAX_CA)
    if ca and _PEM not in ca:
        raise Invalid(f"{where}.endpointCA must be PEM certificates", f"{where}.endpointCA")
    skip = block.get("skipSSLVerify", False)
    if not isinstance(skip, bool):
        raise Invalid(f"{where}.skipSSLVerify must be true or false", f"{where}.skipSSLVerify")
    credential = _text(block, "cloudCredentialName", where, MAX_CREDENTIAL_NAME, required=True)
    return Target(endpoint, bucket, folder, region, ca, skip, credential)


def check_endpoint(target: Target, where: str, allow_link_local: bool) -> None:
    """Invalid (naming `<where>.endpoint`) when the endpoint is a link-local or metadata
    address and the setting allow-link-local-endpoints does not allow it: the Jobs that copy
    snapshots run in the management cluster, on a cloud's machine."""
    host, field = target.endpoint.partition(":")[0], f"{where}.endpoint"
    if not allow_link_local and addresses.is_metadata_host(host):
        raise Invalid(f"{field} {host} is a link-local or cloud metadata address; the "
                      "setting allow-link-local-endpoints allows it", field)  # fmt: skip


def check_release(release: catalog.Release, where: str) -> None:
    """A version whose catalog entry has no `etcd-s3` cannot copy to a target."""
    if catalog.ETCD_S3 not in release.components:
        raise Invalid(f"version {release.version} of the catalog has no {catalog.ETCD_S3} "
                      "component: its backups cannot go to an S3 target", where)  # fmt: skip


def check_credential(credential: Mapping[str, Any] | None, target: Target, where: str) -> None:
    """Invalid unless `credential` (a CloudCredential) is of the S3 kind."""
    field = f"{where}.cloudCredentialName"
    if credential is None:
        raise Invalid(f"cloud credential {target.credential} not found", field,
                      code="InvalidReference")  # fmt: skip
    driver = (credential.get("spec") or {}).get("driver")
    if driver != CREDENTIAL_DRIVER:
        raise Invalid(f"cloud credential {target.credential} is of driver {driver}, not "
                      f"{CREDENTIAL_DRIVER} (an s3credentialConfig)", field,
                      code="InvalidReference")  # fmt: skip


def job_secret_data(credential: Mapping[str, Any], target: Target) -> dict[str, str]:
    """The `stringData` of the Secret a Job's containers read the target's keys (and CA) from:
    `credential` is the decoded credential. Invalid when a key is missing."""
    missing = [n for n in CREDENTIAL_FIELDS if not isinstance(credential.get(n), str)]
    if missing:
        raise Invalid(f"cloud credential {target.credential} lacks {', '.join(missing)}",
                      "cloudCredentialName")  # fmt: skip
    data = {name: str(credential[name]) for name in CREDENTIAL_FIELDS}
    if target.endpoint_ca:
        data[CA_FILE] = target.endpoint_ca
    return data


def argv(
    component: catalog.Component, operation: str, target: Target, filename: str, path: str
) -> list[str]:
    """The `etcd-s3` command line of `operation` (upload, download, delete) of `filename`:
    names and flags only, never a key (those are files under MOUNT)."""
    args = [
        *component.command,
        operation,
        f"--endpoint={target.endpoint}",
        f"--bucket={target.bucket}",
        f"--key={target.key(filename)}",
        f"--credentials={MOUNT}",
    ]
    if path:
        args.append(f"--file={path}")
    if target.region:
        args.append(f"--region={target.region}")
    if target.endpoint_ca:
        args.append(f"--ca={MOUNT}/{CA_FILE}")
    if target.skip_ssl_verify:
        args.append("--skip-ssl-verify")
    return args


def _text(block: Mapping[str, Any], name: str, where: str, limit: int,
          required: bool = False) -> str:  # fmt: skip
    value = block.get(name)
    if value is None or value == "":
        if required:
            raise Invalid(f"{where}.{name} is required", f"{where}.{name}",
                          code="MissingRequired")  # fmt: skip
        return ""
    if not isinstance(value, str) or len(value) > limit:
        raise Invalid(f"{where}.{name} must be text of at most {limit} characters",
                      f"{where}.{name}")  # fmt: skip
    return value


def _port_ok(endpoint: str) -> bool:
    _, colon, port = endpoint.partition(":")
    return not colon or 0 < int(port) < 65536


def cluster_target(spec: Mapping[str, Any]) -> Target | None:
    """The S3 target of a Cluster's spec (its rke2Config or k3sConfig); None without one."""
    for field in ("rke2Config", "k3sConfig"):
        if isinstance(spec.get(field), Mapping):
            return target(spec[field], field)
    return None


def recorded(status: Mapping[str, Any]) -> Target | None:
    """The target an EtcdBackup's status says its file went to; None for a volume's backup."""
    block = status.get("s3")
    if not str(status.get("location", "")).startswith("s3://") or not isinstance(block, dict):
        return None
    described = {k: v for k, v in block.items() if k != "size"}
    return target({"etcd": {"s3": described}}, "status")
