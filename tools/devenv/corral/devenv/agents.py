"""A local cluster registered through its agent, the steps a user and the manifest's Deployment
take: the registration command run as the cluster's admin, then the agent's environment read
back from what the manifest made there. The end-to-end test and the tunnel's bench share them.

kwok's nodes run no containers, so the agent runs as a process of this host (or of the
cluster's network namespace) with that environment, in place of the Deployment's pod.
"""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from corral.core import kubeconfig
from corral.core.tunnel import manifest
from corral.devenv.controlplane import ControlPlane
from corral.devenv.waiting import wait_for

KUBECTL_TIMEOUT = 60.0
# A kubectl command line of a cluster, given its arguments.
Kubectl = Callable[..., list[str]]


def kubectl_json(kubectl: Kubectl, *args: str) -> dict[str, Any]:
    """An object of a downstream cluster, read with kubectl as its admin."""
    done = subprocess.run(kubectl(*args, "-o", "json"), capture_output=True, text=True,
                          timeout=KUBECTL_TIMEOUT, check=True)  # fmt: skip
    return yaml.safe_load(done.stdout)  # type: ignore[no-any-return]


def run_registration(
    command: str, devkube: Path, plane: ControlPlane, directory: Path, enter: Sequence[str] = ()
) -> subprocess.CompletedProcess[str]:
    """The registration command (`kubectl apply -f …`) run by the cluster's admin, as the user
    runs it, with a `kubectl` of that admin first on PATH; `enter` runs it elsewhere (in the
    cluster's network namespace)."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(exist_ok=True)
    wrapper = bin_dir / "kubectl"
    config = plane.kubeconfig_path
    wrapper.write_text(f'#!/bin/sh\nexec {devkube} kubectl --kubeconfig={config} "$@"\n')
    wrapper.chmod(0o755)
    return subprocess.run([*enter, "/bin/sh", "-c", command],
                          env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
                          capture_output=True, text=True, timeout=KUBECTL_TIMEOUT,
                          check=False)  # fmt: skip


def agent_environment(kubectl: Kubectl, plane: ControlPlane, directory: Path) -> dict[str, str]:
    """What the manifest's Deployment gives its container, read back from the cluster: its
    environment (the credential from its Secret) and, in place of the mounted token, a
    kubeconfig of the manifest's ServiceAccount token for the cluster's API server."""
    deployment = kubectl_json(kubectl, "-n", manifest.NAMESPACE, "get", "deployment",
                              manifest.NAME)  # fmt: skip
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env: dict[str, str] = {}
    for variable in container["env"]:
        if "value" in variable:
            env[variable["name"]] = variable["value"]
            continue
        reference = variable["valueFrom"]["secretKeyRef"]
        secret = kubectl_json(kubectl, "-n", manifest.NAMESPACE, "get", "secret",
                              reference["name"])  # fmt: skip
        env[variable["name"]] = base64.b64decode(secret["data"][reference["key"]]).decode()

    def token_issued() -> dict[str, Any] | None:
        secret = kubectl_json(kubectl, "-n", manifest.NAMESPACE, "get", "secret",
                              manifest.TOKEN_SECRET)  # fmt: skip
        return secret if "token" in (secret.get("data") or {}) else None

    token = wait_for("the agent's ServiceAccount token", token_issued, 30)["data"]
    built = kubeconfig.build(
        "agent", plane.server, base64.b64decode(token["ca.crt"]),
        kubeconfig.Credentials(token=base64.b64decode(token["token"]).decode()),
    )  # fmt: skip
    path = directory / "agent.kubeconfig"
    path.write_text(yaml.safe_dump(built))
    path.chmod(0o600)
    return {**env, "PATH": os.environ["PATH"], "KUBECONFIG": str(path)}
