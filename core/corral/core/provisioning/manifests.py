"""The objects of a hosted control plane in its cluster's namespace of the management cluster,
as plain dicts for server-side apply (docs/provisioning.md, "How a cluster is provisioned").

- Services `etcd` and `kube-apiserver`: made first, so that their ClusterIPs can go into the
  certificates (`services`).
- A ConfigMap of the flavour's apiserver configuration files (`configuration`).
- StatefulSet `etcd`: one member, its data on a PersistentVolumeClaim (`etcd`).
- Deployment `control-plane`: kube-apiserver, kube-controller-manager, kube-scheduler and, when
  the release has it, kwok for the simulated nodes of the kwok driver (`control_plane`).

Pure: what runs follows from the Plan alone, so the same plan always gives the same objects
and a changed plan rolls exactly what changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.core.api import names
from corral.core.provisioning import catalog
from corral.core.provisioning import pki as cp

ETCD_CLIENT_PORT = 2379
ETCD_PEER_PORT = 2380
ETCD_METRICS_PORT = 2381
KWOK_PORT = 10250
# How long a hosted apiserver being replaced serves on (its pod's grace period covers it).
SHUTDOWN_DELAY_SECONDS = 5
CLUSTER_CIDR = "10.42.0.0/16"
SERVICE_CIDR = "10.43.0.0/16"
# A /24 per node: 254 pods, more than the kubelet's 110, and 256 nodes in CLUSTER_CIDR.
NODE_CIDR_MASK = 24
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"

CONTROL_PLANE = "control-plane"
CONFIGURATION = "control-plane-config"
ETCD_DATA = "etcd-data"
ETCD_DATA_ROOT = "/var/lib/etcd"
ETCD_VOLUME_SIZE = "2Gi"
COMPONENT_LABEL = "app.kubernetes.io/component"
ANNOTATION_PKI_GENERATION = "management.svc.io/pki-generation"
ANNOTATION_CONFIGURATION = "management.svc.io/configuration-hash"

# What each component asks of its node: about what it uses at rest (a whole idle control plane
# measures about 41 millicores, most of it the apiserver's), so that a node takes as many
# control planes as it can run. A start's burst (most of a core for seconds) runs on what
# nobody asked for: requesting it kept a 2-core node to 8 clusters, and of ten created at once
# five had their control plane placed and etcd never (docs/provisioning.md).
REQUESTS = {
    "etcd": {"cpu": "10m", "memory": "64Mi"},
    "kube-apiserver": {"cpu": "25m", "memory": "256Mi"},
    "kube-controller-manager": {"cpu": "10m", "memory": "64Mi"},
    "kube-scheduler": {"cpu": "5m", "memory": "32Mi"},
    "kwok": {"cpu": "5m", "memory": "32Mi"},
}

# Where each container finds its files.
PKI_ROOT = "/pki"
CONFIG_ROOT = "/etc/corral"
# The pod's own scratch volume (an emptyDir), where kwok's wrapper writes its stages.
KWOK_SCRATCH = "/tmp"  # noqa: S108


@dataclass(frozen=True)
class Generations:
    """The certificate generations of a control plane's Secrets: etcd's own (its CA and
    serving certificate) and the highest of all, which the control plane runs."""

    etcd: int
    control_plane: int


@dataclass(frozen=True)
class Plan:
    """What one hosted control plane runs."""

    cluster: str  # the cluster's id: also its namespace
    flavour: str  # the cluster's driver: rke2 or k3s
    release: catalog.Release
    addresses: cp.Addresses
    # The certificate generation each workload runs, from its Secrets' annotations: a change
    # rolls it. etcd has its own, so a rotation that leaves its certificates alone leaves it
    # running (a single member's restart is most of a rotation's outage).
    pki_generation: int
    storage_class: str = ""  # empty: the management cluster's default
    etcd_data_dir: str = "data-0"
    etcd_pki_generation: int = 1
    etcd_replicas: int = 1
    control_plane_replicas: int = 1
    # The release the Deployment keeps while etcd rolls first to `release`'s image in a
    # version change (section 2.11 of the plan); None: the Deployment runs `release` too.
    previous: catalog.Release | None = None

    @property
    def control_plane_release(self) -> catalog.Release:
        return self.previous or self.release


# rke2 hardens what the upstream defaults leave open (docs/provisioning.md, "Flavours"):
# anonymous requests reach only the health endpoints, and every namespace gets PodSecurity
# `baseline` unless it says otherwise. k3s keeps the upstream defaults.
RKE2_AUTHENTICATION = {
    "apiVersion": "apiserver.config.k8s.io/v1",
    "kind": "AuthenticationConfiguration",
    "anonymous": {
        "enabled": True,
        "conditions": [{"path": "/livez"}, {"path": "/readyz"}, {"path": "/healthz"}],
    },
}
RKE2_ADMISSION = {
    "apiVersion": "apiserver.config.k8s.io/v1",
    "kind": "AdmissionConfiguration",
    "plugins": [
        {
            "name": "PodSecurity",
            "configuration": {
                "apiVersion": "pod-security.admission.config.k8s.io/v1",
                "kind": "PodSecurityConfiguration",
                "defaults": {
                    "enforce": "baseline",
                    "enforce-version": "latest",
                    "audit": "restricted",
                    "audit-version": "latest",
                    "warn": "restricted",
                    "warn-version": "latest",
                },
                "exemptions": {
                    "usernames": [],
                    "runtimeClasses": [],
                    "namespaces": ["kube-system"],
                },
            },
        }
    ],
}


def apiserver_files(flavour: str) -> dict[str, str]:
    """The configuration files of the flavour's kube-apiserver, by file name."""
    if flavour != "rke2":
        return {}
    return {
        "authentication.json": json.dumps(RKE2_AUTHENTICATION, sort_keys=True),
        "admission.json": json.dumps(RKE2_ADMISSION, sort_keys=True),
    }


def apiserver_flags(flavour: str) -> list[str]:
    if flavour != "rke2":
        return []
    return [
        f"--authentication-config={CONFIG_ROOT}/authentication.json",
        f"--admission-control-config-file={CONFIG_ROOT}/admission.json",
        "--profiling=false",
    ]


def labels(cluster: str, component: str | None = None) -> dict[str, str]:
    found = {names.LABEL_CLUSTER: cluster, names.LABEL_MANAGED_BY: names.MANAGED_BY}
    if component is not None:
        found[COMPONENT_LABEL] = component
    return found


def selector(cluster: str, component: str) -> dict[str, str]:
    return {names.LABEL_CLUSTER: cluster, COMPONENT_LABEL: component}


def services(cluster: str) -> list[dict[str, Any]]:
    """The two Services; never recreated while the cluster lives, as certificates name their
    ClusterIPs."""
    return [
        _service(cluster, cp.ETCD_SERVICE, "etcd", ETCD_CLIENT_PORT),
        _service(cluster, cp.APISERVER_SERVICE, CONTROL_PLANE, cp.APISERVER_PORT),
    ]


def _service(cluster: str, name: str, component: str, port: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": cluster, "labels": labels(cluster, component)},
        "spec": {
            "type": "ClusterIP",
            "selector": selector(cluster, component),
            # etcd must answer while it is not Ready yet: its readiness needs its peers' view.
            "publishNotReadyAddresses": component == "etcd",
            "ports": [{"name": name, "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }


def pki_secret(
    cluster: str,
    name: str,
    files: Mapping[str, bytes],
    generation: int,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One of the control plane's certificate Secrets, marked with its PKI generation (what
    the pods that mount it were rolled for)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": cluster,
            "labels": labels(cluster),
            "annotations": {ANNOTATION_PKI_GENERATION: str(generation), **(annotations or {})},
        },
        "type": "Opaque",
        "data": cp.encode(files),
    }


def configuration(plan: Plan) -> dict[str, Any]:
    files = apiserver_files(plan.flavour)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": CONFIGURATION,
            "namespace": plan.cluster,
            "labels": labels(plan.cluster, CONTROL_PLANE),
        },
        "data": dict(files),
    }


def etcd(plan: Plan) -> dict[str, Any]:
    component = plan.release.component(catalog.ETCD)
    peer = f"http://127.0.0.1:{ETCD_PEER_PORT}"
    pki_dir = f"{PKI_ROOT}/etcd"
    argv = [
        *component.command,
        # The same name, peer URL and token on every start and after a restore: a single
        # member that restarts from its own data, or from a restored copy, is the same member.
        "--name=etcd",
        f"--data-dir={ETCD_DATA_ROOT}/{plan.etcd_data_dir}",
        f"--listen-client-urls=https://0.0.0.0:{ETCD_CLIENT_PORT}",
        f"--advertise-client-urls=https://{plan.addresses.etcd_ip}:{ETCD_CLIENT_PORT}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=etcd={peer}",
        f"--initial-cluster-token={plan.cluster}",
        f"--listen-metrics-urls=http://0.0.0.0:{ETCD_METRICS_PORT}",
        f"--cert-file={pki_dir}/tls.crt",
        f"--key-file={pki_dir}/tls.key",
        f"--trusted-ca-file={pki_dir}/ca.crt",
        "--client-cert-auth",
        "--log-level=warn",
    ]
    container = {
        "name": "etcd",
        "image": component.image,
        "imagePullPolicy": "IfNotPresent",
        # A container that fails says why in its status, which `progress` shows.
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "command": argv,
        "ports": [{"name": "client", "containerPort": ETCD_CLIENT_PORT}],
        "readinessProbe": _http_probe("/readyz", ETCD_METRICS_PORT, "HTTP", period=2),
        "livenessProbe": _http_probe("/livez", ETCD_METRICS_PORT, "HTTP", period=10, failures=6),
        "startupProbe": _http_probe("/livez", ETCD_METRICS_PORT, "HTTP", period=1, failures=180),
        "resources": {"requests": REQUESTS["etcd"]},
        "volumeMounts": [
            {"name": ETCD_DATA, "mountPath": ETCD_DATA_ROOT},
            {"name": "pki", "mountPath": pki_dir, "readOnly": True},
        ],
        "securityContext": _root_without_capabilities(),
    }
    claim: dict[str, Any] = {
        "metadata": {"name": ETCD_DATA, "labels": labels(plan.cluster, "etcd")},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": ETCD_VOLUME_SIZE}},
        },
    }
    if plan.storage_class:
        claim["spec"]["storageClassName"] = plan.storage_class
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": "etcd",
            "namespace": plan.cluster,
            "labels": labels(plan.cluster, "etcd"),
        },
        "spec": {
            "replicas": plan.etcd_replicas,
            "serviceName": cp.ETCD_SERVICE,
            "selector": {"matchLabels": selector(plan.cluster, "etcd")},
            "template": {
                "metadata": {
                    "labels": labels(plan.cluster, "etcd"),
                    "annotations": {ANNOTATION_PKI_GENERATION: str(plan.etcd_pki_generation)},
                },
                "spec": {
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 10,
                    "containers": [container],
                    "volumes": [_secret_volume("pki", cp.ETCD)],
                },
            },
            "volumeClaimTemplates": [claim],
            # Deleting the cluster removes the data; scaling to 0 for a restore keeps it.
            "persistentVolumeClaimRetentionPolicy": {
                "whenDeleted": "Delete",
                "whenScaled": "Retain",
            },
        },
    }


def control_plane(plan: Plan) -> dict[str, Any]:
    # kube-controller-manager exits when the apiserver is not healthy within 10 s of its start,
    # as it is not while etcd starts beside it, and its restarts back off for tens of seconds.
    # The apiserver is therefore a sidecar (an init container that keeps running): the kubelet
    # starts the other components once its startup probe passes, and it still counts for the
    # pod's readiness and is stopped last.
    apiserver = {**_apiserver(plan), "restartPolicy": "Always"}
    containers = [_controller_manager(plan), _scheduler(plan)]
    volumes = [
        _secret_volume("apiserver", cp.APISERVER),
        _secret_volume("controller-manager", cp.CONTROLLER_MANAGER),
        _secret_volume("scheduler", cp.SCHEDULER),
        {"name": "config", "configMap": {"name": CONFIGURATION}},
    ]
    if plan.control_plane_release.simulates_nodes:
        containers.append(_kwok(plan))
        volumes += [_secret_volume("kwok", cp.KWOK), {"name": "kwok-tmp", "emptyDir": {}}]
    configuration_hash = _digest(apiserver_files(plan.flavour))
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": CONTROL_PLANE,
            "namespace": plan.cluster,
            "labels": labels(plan.cluster, CONTROL_PLANE),
        },
        "spec": {
            "replicas": plan.control_plane_replicas,
            "selector": {"matchLabels": selector(plan.cluster, CONTROL_PLANE)},
            # The new apiserver is Ready on the same etcd before the old one goes.
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {
                "metadata": {
                    "labels": labels(plan.cluster, CONTROL_PLANE),
                    "annotations": {
                        ANNOTATION_PKI_GENERATION: str(plan.pki_generation),
                        ANNOTATION_CONFIGURATION: configuration_hash,
                    },
                },
                "spec": {
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 15,
                    "initContainers": [apiserver],
                    "containers": containers,
                    "volumes": volumes,
                },
            },
        },
    }


def _apiserver(plan: Plan) -> dict[str, Any]:
    component = plan.control_plane_release.component(catalog.APISERVER)
    files = f"{PKI_ROOT}/apiserver"
    argv = [
        *component.command,
        f"--etcd-servers=https://{plan.addresses.etcd_ip}:{ETCD_CLIENT_PORT}",
        f"--etcd-cafile={files}/etcd-ca.crt",
        f"--etcd-certfile={files}/etcd-client.crt",
        f"--etcd-keyfile={files}/etcd-client.key",
        "--bind-address=0.0.0.0",
        f"--secure-port={cp.APISERVER_PORT}",
        "--advertise-address=$(POD_IP)",
        f"--tls-cert-file={files}/tls.crt",
        f"--tls-private-key-file={files}/tls.key",
        f"--client-ca-file={files}/ca.crt",
        f"--kubelet-client-certificate={files}/kubelet-client.crt",
        f"--kubelet-client-key={files}/kubelet-client.key",
        f"--kubelet-certificate-authority={files}/ca.crt",
        "--kubelet-preferred-address-types=InternalIP",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={files}/sa.pub",
        f"--service-account-signing-key-file={files}/sa.key",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--allow-privileged=true",
        # A pod being replaced (a roll, a rotation) answers /readyz false at once and serves on
        # for this long, while its Service stops sending to it: stopping at once left clients
        # of the Service refused until every node's kube-proxy had caught up.
        f"--shutdown-delay-duration={SHUTDOWN_DELAY_SECONDS}s",
        *apiserver_flags(plan.flavour),
    ]
    return {
        "name": "kube-apiserver",
        "image": component.image,
        "imagePullPolicy": "IfNotPresent",
        # A container that fails says why in its status, which `progress` shows.
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "command": argv,
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "ports": [{"name": "https", "containerPort": cp.APISERVER_PORT}],
        "readinessProbe": _http_probe("/readyz", cp.APISERVER_PORT, "HTTPS", period=2),
        "livenessProbe": _http_probe("/livez", cp.APISERVER_PORT, "HTTPS", period=10, failures=6),
        "startupProbe": _http_probe("/livez", cp.APISERVER_PORT, "HTTPS", period=1, failures=180),
        "resources": {"requests": REQUESTS["kube-apiserver"]},
        "volumeMounts": [
            {"name": "apiserver", "mountPath": files, "readOnly": True},
            {"name": "config", "mountPath": CONFIG_ROOT, "readOnly": True},
        ],
        "securityContext": _unprivileged(),
    }


def _controller_manager(plan: Plan) -> dict[str, Any]:
    component = plan.control_plane_release.component(catalog.CONTROLLER_MANAGER)
    files = f"{PKI_ROOT}/controller-manager"
    argv = [
        *component.command,
        *_controller_flags(files),
        f"--root-ca-file={files}/ca.crt",
        f"--service-account-private-key-file={files}/sa.key",
        "--use-service-account-credentials=true",
        # Each node's pod range, which the pod network (flannel) routes.
        "--allocate-node-cidrs=true",
        f"--cluster-cidr={CLUSTER_CIDR}",
        f"--node-cidr-mask-size={NODE_CIDR_MASK}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        # Signs the kubelet certificates corral approved, and only those: kcm's own approver
        # never approves them (the join credential may not ask for nodeclient).
        f"--cluster-signing-cert-file={files}/ca.crt",
        f"--cluster-signing-key-file={files}/ca.key",
    ]
    return _component_container("kube-controller-manager", component, argv, files)


def _scheduler(plan: Plan) -> dict[str, Any]:
    component = plan.control_plane_release.component(catalog.SCHEDULER)
    files = f"{PKI_ROOT}/scheduler"
    argv = [*component.command, *_controller_flags(files)]
    return _component_container("kube-scheduler", component, argv, files)


def _controller_flags(files: str) -> list[str]:
    """What kcm and the scheduler share: their kubeconfig for everything they call, leader
    election (two pods overlap while the control plane rolls), and health on loopback."""
    kubeconfig = f"{files}/kubeconfig"
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=true",
        "--bind-address=127.0.0.1",
    ]


def _kwok(plan: Plan) -> dict[str, Any]:
    component = plan.control_plane_release.component(catalog.KWOK)
    files = f"{PKI_ROOT}/kwok"
    argv = [
        *component.command,
        f"--kubeconfig={files}/kubeconfig",
        f"--tls-cert-file={files}/tls.crt",
        f"--tls-private-key-file={files}/tls.key",
        # Only the nodes the kwok driver makes; never a real machine's.
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector="
        f"{names.KWOK_NODE_ANNOTATION}={names.KWOK_NODE_VALUE}",
        "--manage-nodes-with-label-selector=",
        "--manage-single-node=",
        # Its "kubelets" answer on the pod's loopback, where this pod's apiserver dials them
        # for logs, verified against the cluster CA.
        "--node-ip=127.0.0.1",
        "--node-name=localhost",
        f"--node-port={KWOK_PORT}",
        f"--server-address=127.0.0.1:{KWOK_PORT}",
        f"--cidr={CLUSTER_CIDR}",
        "--node-lease-duration-seconds=40",
    ]
    container = _component_container("kwok", component, argv, files)
    # kwok reads ~/.kwok; HOME on a scratch volume keeps it from the image's own files.
    container["env"] = [{"name": "HOME", "value": KWOK_SCRATCH}]
    container["volumeMounts"].append({"name": "kwok-tmp", "mountPath": KWOK_SCRATCH})
    return container


def _component_container(
    name: str, component: catalog.Component, argv: list[str], files: str
) -> dict[str, Any]:
    return {
        "name": name,
        "image": component.image,
        "imagePullPolicy": "IfNotPresent",
        # A container that fails says why in its status, which `progress` shows.
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "command": argv,
        "resources": {"requests": REQUESTS[name]},
        "volumeMounts": [{"name": files.rsplit("/", 1)[1], "mountPath": files, "readOnly": True}],
        "securityContext": _unprivileged(),
    }


def _secret_volume(name: str, secret: str) -> dict[str, Any]:
    return {"name": name, "secret": {"secretName": secret, "defaultMode": 0o400}}


def _http_probe(
    path: str, port: int, scheme: str, period: int, failures: int = 3
) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": port, "scheme": scheme},
        "periodSeconds": period,
        "timeoutSeconds": 5,
        "failureThreshold": failures,
    }


def _unprivileged() -> dict[str, Any]:
    # Root in the container reads the 0400 Secret files; no capability, no escalation.
    return _root_without_capabilities() | {"readOnlyRootFilesystem": True}


def _root_without_capabilities() -> dict[str, Any]:
    # hostPath volumes ignore fsGroup and the provisioned directory is root's: etcd runs as
    # root with every capability dropped.
    return {
        "runAsUser": 0,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }


def _digest(files: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(dict(files), sort_keys=True).encode()).hexdigest()[:16]
