"""Provisioned clusters whose workers are real machines, for `make run`: k3s clusters whose
control planes run on the real node, each given one real worker by a node pool of the local
cloud. Everything goes through /v3, as the README shows a newcomer doing it by hand, so what
`make run` gives is what any client can make."""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from corral.devenv import v3
from corral.devenv.process import Process
from corral.devenv.waiting import wait_for

DRIVER = "localcloud"
TEMPLATE = "machine"
# A hosted control plane takes about 40 s and a machine about as long on an idle machine;
# these allow for a cold, busy one.
PROVISION_TIMEOUT = 300.0
JOIN_TIMEOUT = 300.0


@dataclass(frozen=True)
class Admin:
    """The environment's API as its admin."""

    url: str
    context: ssl.SSLContext
    token: str

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return v3.post_json(self.url + path, body, self.context, self.token)

    def get(self, path: str) -> dict[str, Any]:
        return v3.get_json(self.url + path, self.context, self.token)


def provision(
    admin: Admin,
    names: list[str],
    version: str,
    driver: tuple[str, str],
    watch: Iterable[Process],
) -> list[str]:
    """Create one k3s cluster per name, each with a pool of one real worker, and wait until
    every worker is Ready. `driver` is the local cloud driver's file url and checksum. The
    clusters are created together, so their control planes start side by side."""
    watched = list(watch)
    template = _register_cloud(admin, driver, watched)
    clusters = [
        admin.post("/v3/clusters", {"name": name, "k3sConfig": {"kubernetesVersion": version}})
        for name in names
    ]
    ids = [str(c["id"]) for c in clusters]
    for cluster_id in ids:
        wait_for(f"cluster {cluster_id} active", partial(_active, admin, cluster_id),
                 PROVISION_TIMEOUT, watched)  # fmt: skip
    for name, cluster_id in zip(names, ids, strict=True):
        admin.post("/v3/nodepools", {"clusterId": cluster_id, "hostnamePrefix": f"{name}-w",
                                     "quantity": 1, "worker": True,
                                     "nodeTemplateName": template})  # fmt: skip
    for cluster_id in ids:
        wait_for(f"a real worker of {cluster_id} Ready", partial(_worker_ready, admin, cluster_id),
                 JOIN_TIMEOUT, watched)  # fmt: skip
    return ids


def _register_cloud(admin: Admin, driver: tuple[str, str], watch: list[Process]) -> str:
    """Register the local cloud's driver as a user's and give it a template; the template id."""
    url, checksum = driver
    admin.post("/v3/nodedrivers", {"name": DRIVER, "url": url, "checksum": checksum,
                                   "active": True})  # fmt: skip
    wait_for("the local cloud driver active",
             lambda: admin.get(f"/v3/nodedrivers/{DRIVER}")["state"] == "active",
             PROVISION_TIMEOUT, watch)  # fmt: skip
    template = admin.post("/v3/nodetemplates", {"name": TEMPLATE, f"{DRIVER}Config": {}})
    return str(template["id"])


def _active(admin: Admin, cluster_id: str) -> bool:
    return bool(admin.get(f"/v3/clusters/{cluster_id}")["state"] == "active")


def _worker_ready(admin: Admin, cluster_id: str) -> bool:
    nodes = admin.get(f"/v3/clusters/{cluster_id}/nodes")["data"]
    return any(n.get("worker") and n.get("state") == "active" for n in nodes)
