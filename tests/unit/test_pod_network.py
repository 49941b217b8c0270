"""The pod network corral installs in a provisioned cluster (core/provisioning/network.py)."""

from __future__ import annotations

import json

from corral.core.provisioning import catalog, network
from corral.operator.controlplane.network import plugin_of

FLANNEL = catalog.Component("localhost/flannel:1", ("/opt/bin/flanneld",))
POLICIES = catalog.Component("localhost/netpol:1", ("/bin/kube-network-policies",))
NODE = {
    name: catalog.Asset(f"/assets/{name}", "0" * 64)
    for name in (catalog.KUBELET, catalog.KUBE_PROXY, catalog.CNI_PLUGINS)
}
WITH_NETWORK = catalog.Release(
    "v1.36.3", {catalog.FLANNEL: FLANNEL, catalog.NETWORK_POLICIES: POLICIES}, NODE
)
SIMULATED = catalog.Release("v1.36.3", {})


def kinds(objects: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(o["kind"], o["metadata"]["name"]) for o in objects]  # type: ignore[index]


def test_flannel_is_an_account_its_configuration_and_a_daemonset_on_every_node() -> None:
    objects = network.objects("flannel", WITH_NETWORK, "10.42.0.0/16")
    assert kinds(objects) == [
        ("ClusterRoleBinding", "corral:node-proxier"),
        ("ServiceAccount", "kube-flannel"),
        ("ClusterRole", "corral:kube-flannel"),
        ("ClusterRoleBinding", "corral:kube-flannel"),
        ("ConfigMap", "kube-flannel"),
        ("DaemonSet", "kube-flannel"),
    ]
    config = json.loads(objects[4]["data"]["net-conf.json"])
    assert config == {"Network": "10.42.0.0/16", "Backend": {"Type": "vxlan"}}
    pod = objects[5]["spec"]["template"]["spec"]
    assert pod["hostNetwork"] and pod["tolerations"] == [{"operator": "Exists"}]
    flanneld, cni = pod["containers"]
    assert flanneld["image"] == FLANNEL.image
    assert flanneld["command"][:1] == ["/opt/bin/flanneld"]
    assert {"--ip-masq", "--kube-subnet-mgr"} <= set(flanneld["command"])
    assert cni["image"] == FLANNEL.image


def test_canal_adds_the_network_policy_enforcer() -> None:
    objects = network.objects("canal", WITH_NETWORK, "10.42.0.0/16")
    assert kinds(objects)[-4:] == [
        ("ServiceAccount", "kube-network-policies"),
        ("ClusterRole", "corral:kube-network-policies"),
        ("ClusterRoleBinding", "corral:kube-network-policies"),
        ("DaemonSet", "kube-network-policies"),
    ]
    enforcer = objects[-1]["spec"]["template"]["spec"]["containers"][0]
    assert enforcer["command"][0] == "/bin/kube-network-policies"
    assert "--hostname-override=$(NODE_NAME)" in enforcer["command"]


def test_none_gets_only_kube_proxy_s_reading_and_simulated_workers_nothing() -> None:
    only = network.objects("none", WITH_NETWORK, "10.42.0.0/16")
    assert kinds(only) == [("ClusterRoleBinding", "corral:node-proxier")]
    assert only[0]["roleRef"]["name"] == "system:node-proxier"
    assert network.objects("canal", SIMULATED, "10.42.0.0/16") == []


def test_the_cluster_roles_are_not_the_project_sync_s_to_remove() -> None:
    for body in network.objects("canal", WITH_NETWORK, "10.42.0.0/16"):
        assert "app.kubernetes.io/managed-by" not in body["metadata"].get("labels", {})


def test_the_plugin_is_the_admitted_one_or_the_flavour_s_default() -> None:
    assert plugin_of({"driver": "rke2", "rke2Config": {"networking": {"plugin": "none"}}}) == "none"
    assert plugin_of({"driver": "rke2"}) == "canal"
    assert plugin_of({"driver": "k3s", "k3sConfig": {}}) == "flannel"
