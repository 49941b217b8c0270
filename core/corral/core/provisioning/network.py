"""The pod network corral installs in a provisioned cluster (docs/provisioning.md, "Pod network").

- connectivity, for both: flanneld on every node, with the kube subnet manager (each node's
  pod range is the one the controller manager allocated) and the VXLAN backend; a second
  container writes the node's CNI configuration (the standard `bridge`, `host-local` and
  `portmap` plugins over flannel's subnet) once flannel has one, which is what flannel's own
  CNI plugin would do at every pod's start;
- NetworkPolicies, for both: kube-router's network policy controller alone on every node (the
  enforcer k3s embeds beside flannel: iptables verdicts over ipset sets of pod addresses, no
  dependency on the CNI). `canal` (rke2's default) is flannel plus an enforcer; `flannel` is
  k3s' default, and k3s enforces NetworkPolicies beside flannel too, so both get one.
  SIG Network's kube-network-policies was the first choice and is not used: it hands new
  connections to itself with nftables' `queue` expression, which some kernels lack (the
  development machine's does), and then enforces nothing; iptables and ipset are in every
  kernel that runs kube-proxy.
- `none`: nothing.

The images and commands are the version catalog's (`flannel`, `network-policies`); corral adds
the flags. Everything is in `kube-system`, which the rke2 flavour's PodSecurity exempts.
"""

from __future__ import annotations

import json
from typing import Any

from corral.core.provisioning import catalog

NAMESPACE = "kube-system"
FLANNEL = "kube-flannel"
NETWORK_POLICIES = "kube-router"
FLANNEL_BACKEND = "vxlan"
# VXLAN's 50 bytes under a 1500-byte link.
FLANNEL_MTU = 1450
CNI_CONFIG = "10-flannel.conflist"
# Written by flanneld on the node, read by the CNI container.
SUBNET_ENV = "/run/flannel/subnet.env"
# kube-router's default. Its /healthz fails once the policy controller misses a sync.
HEALTH_PORT = 20244

PLUGINS_WITH_FLANNEL = ("flannel", "canal")


def objects(
    plugin: str, release: catalog.Release, cluster_cidr: str, service_cidr: str
) -> list[dict[str, Any]]:
    """What the cluster's pod network is made of, in the order to apply it. A release without
    node binaries has no machines to connect (its workers are simulated): nothing. The
    catalog holds a release with node binaries to both network components."""
    components = release.components
    if release.node is None:
        return []
    found = [_node_proxier()]
    if plugin not in PLUGINS_WITH_FLANNEL:
        return found
    found += _flannel(components[catalog.FLANNEL], cluster_cidr)
    found += _network_policies(components[catalog.NETWORK_POLICIES], service_cidr)
    return found


def identity(obj: dict[str, Any]) -> tuple[str, str, str]:
    """(kind, namespace, name): what tells two objects of the pod network apart."""
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace") or "", meta["name"])


def stale(
    wanted: list[dict[str, Any]], found: list[tuple[str, str, str]]
) -> list[tuple[str, str, str]]:
    """What `found` (identities of the objects carrying `LABELS`) holds that `wanted` does
    not: left by an earlier pod network (a version of corral whose enforcer was another), to
    delete."""
    kept = {identity(obj) for obj in wanted}
    return [key for key in found if key not in kept]


def _flannel(component: catalog.Component, cluster_cidr: str) -> list[dict[str, Any]]:
    net_conf = {"Network": cluster_cidr, "Backend": {"Type": FLANNEL_BACKEND}}
    pod_env = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    ]
    flanneld = {
        "name": "kube-flannel",
        "image": component.image,
        "imagePullPolicy": "IfNotPresent",
        "command": [
            *component.command,
            "--ip-masq",
            "--kube-subnet-mgr",
            "--net-config-path=/etc/kube-flannel/net-conf.json",
        ],
        "env": pod_env,
        "resources": {"requests": {"cpu": "50m", "memory": "50Mi"}},
        "securityContext": {
            "privileged": False,
            "capabilities": {"add": ["NET_ADMIN", "NET_RAW"]},
        },
        "volumeMounts": [
            {"name": "run", "mountPath": "/run/flannel"},
            {"name": "config", "mountPath": "/etc/kube-flannel/"},
            {"name": "xtables-lock", "mountPath": "/run/xtables.lock"},
        ],
    }
    cni = {
        "name": "install-cni",
        "image": component.image,
        "imagePullPolicy": "IfNotPresent",
        "command": [
            "/bin/sh",
            "-c",
            _CNI_SCRIPT,
            "install-cni",
            CNI_CONFIG,
            json.dumps(_CNI_TEMPLATE),
        ],
        "resources": {"requests": {"cpu": "5m", "memory": "8Mi"}},
        "volumeMounts": [
            {"name": "run", "mountPath": "/run/flannel", "readOnly": True},
            {"name": "cni", "mountPath": "/etc/cni/net.d"},
        ],
    }
    rules = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
    ]
    return [
        *_account(FLANNEL, rules),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(FLANNEL),
            "data": {"net-conf.json": json.dumps(net_conf)},
        },
        _daemonset(
            FLANNEL,
            [flanneld, cni],
            [
                _host_path("run", "/run/flannel", "DirectoryOrCreate"),
                _host_path("cni", "/etc/cni/net.d", "DirectoryOrCreate"),
                {"name": "config", "configMap": {"name": FLANNEL}},
                _host_path("xtables-lock", "/run/xtables.lock", "FileOrCreate"),
            ],
        ),
    ]


# The conflist flannel's CNI plugin would make, written whenever flannel's subnet changes.
# flanneld writes the node's gateway (10.42.3.1/24); host-local wants the network (.0/24).
_CNI_SCRIPT = r"""
set -eu
target="/etc/cni/net.d/$1"; template=$2; written=""
while :; do
  if [ -f /run/flannel/subnet.env ]; then
    . /run/flannel/subnet.env
    gateway=${FLANNEL_SUBNET%/*}
    network="${gateway%.*}.0/${FLANNEL_SUBNET#*/}"
    conf=$(printf '%s' "$template" | sed -e "s|@NETWORK@|$network|" -e "s|@GATEWAY@|$gateway|")
    if [ "$conf" != "$written" ]; then
      printf '%s\n' "$conf" > "$target.tmp" && mv "$target.tmp" "$target"
      written=$conf
      echo "wrote $target for $network"
    fi
    sleep 10
  else
    sleep 1
  fi
done
"""
_CNI_TEMPLATE = {
    "cniVersion": "1.0.0",
    "name": "cbr0",
    "plugins": [
        {
            "type": "bridge",
            "bridge": "cni0",
            "isGateway": True,
            "isDefaultGateway": True,
            # flanneld masquerades what leaves the cluster's range (--ip-masq).
            "ipMasq": False,
            "hairpinMode": True,
            "mtu": FLANNEL_MTU,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": "@NETWORK@", "gateway": "@GATEWAY@"}]],
            },
        },
        {"type": "portmap", "capabilities": {"portMappings": True}},
    ],
}


def _network_policies(component: catalog.Component, service_cidr: str) -> list[dict[str, Any]]:
    container = {
        "name": NETWORK_POLICIES,
        "image": component.image,
        "imagePullPolicy": "IfNotPresent",
        "command": [
            *component.command,
            "--run-firewall=true",
            "--run-router=false",
            "--run-service-proxy=false",
            "--hostname-override=$(NODE_NAME)",
            # Traffic to Services is left to kube-proxy; the policies judge what reaches pods.
            f"--service-cluster-ip-range={service_cidr}",
            f"--health-port={HEALTH_PORT}",
            "--v=1",
        ],
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": HEALTH_PORT},
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
        },
        # It writes the node's filter table (iptables-restore) and its ipsets: netfilter's
        # rights, not a privileged container.
        "securityContext": {
            "privileged": False,
            "capabilities": {"add": ["NET_ADMIN", "NET_RAW"]},
        },
        "volumeMounts": [{"name": "xtables-lock", "mountPath": "/run/xtables.lock"}],
    }
    # Reading only. Pods, namespaces and NetworkPolicies are what it enforces; its own Node
    # gives its address (the pods whose hostIP it is are the ones it guards). kube-router starts
    # informers of Services, Endpoints and EndpointSlices whichever controllers run and waits
    # for all of them to sync before enforcing anything, so it must be able to list those too.
    rules = [
        {"apiGroups": [""], "resources": ["pods", "namespaces", "services", "endpoints"],
         "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"],
         "verbs": ["list", "watch"]},
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
         "verbs": ["list", "watch"]},
    ]  # fmt: skip
    volumes = [_host_path("xtables-lock", "/run/xtables.lock", "FileOrCreate")]
    return [*_account(NETWORK_POLICIES, rules), _daemonset(NETWORK_POLICIES, [container], volumes)]


def _node_proxier() -> dict[str, Any]:
    """kube-proxy runs as its node (the installer gives it the kubelet's certificate), which
    may read only its own pods: the built-in role kube-proxy's own identity has lets it follow
    Services and EndpointSlices."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "corral:node-proxier", "labels": LABELS},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "system:node-proxier",
        },
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}
        ],
    }


def _host_path(name: str, path: str, kind: str) -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": path, "type": kind}}


def _account(name: str, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": f"corral:{name}", "labels": LABELS},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"corral:{name}", "labels": LABELS},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": f"corral:{name}",
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}],
        },
    ]


def _daemonset(
    name: str, containers: list[dict[str, Any]], volumes: list[dict[str, Any]]
) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": _meta(name),
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": {**labels, **LABELS}},
                "spec": {
                    "hostNetwork": True,
                    "priorityClassName": "system-node-critical",
                    "serviceAccountName": name,
                    # Every node, whatever its taints: no pod runs without the network.
                    "tolerations": [{"operator": "Exists"}],
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "containers": containers,
                    "volumes": volumes,
                },
            },
        },
    }


# Not corral's project-sync label: these are the cluster's, kept by the provisioner alone.
LABELS = {"app.kubernetes.io/part-of": "corral-pod-network"}


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "namespace": NAMESPACE, "labels": LABELS}
