"""The pod network corral installs in a provisioned cluster (core/provisioning/network.py)."""

from __future__ import annotations

import json

import pytest

from corral.core.provisioning import catalog, network
from corral.operator.controlplane.network import RESOURCES, plugin_of

FLANNEL = catalog.Component("localhost/flannel:1", ("/opt/bin/flanneld",))
POLICIES = catalog.Component("localhost/kube-router:1", ("/usr/local/bin/kube-router",))
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
    objects = network.objects("flannel", WITH_NETWORK, "10.42.0.0/16", "10.43.0.0/16")[:6]
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


@pytest.mark.parametrize("plugin", ["canal", "flannel"])
def test_both_plugins_enforce_network_policies_as_rke2_and_k3s_do(plugin: str) -> None:
    objects = network.objects(plugin, WITH_NETWORK, "10.42.0.0/16", "10.43.0.0/16")
    assert kinds(objects)[-4:] == [
        ("ServiceAccount", "kube-router"),
        ("ClusterRole", "corral:kube-router"),
        ("ClusterRoleBinding", "corral:kube-router"),
        ("DaemonSet", "kube-router"),
    ]
    enforcer = objects[-1]["spec"]["template"]["spec"]["containers"][0]
    assert enforcer["command"][0] == "/usr/local/bin/kube-router"
    # The policy controller alone: flannel routes and kube-proxy serves Services.
    assert {"--run-firewall=true", "--run-router=false", "--run-service-proxy=false",
            "--hostname-override=$(NODE_NAME)",
            "--service-cluster-ip-range=10.43.0.0/16"} <= set(enforcer["command"])  # fmt: skip


def test_the_enforcer_has_netfilter_s_rights_and_reads_the_api_only() -> None:
    objects = network.objects("canal", WITH_NETWORK, "10.42.0.0/16", "10.43.0.0/16")
    role, daemonset = objects[-3], objects[-1]
    container = daemonset["spec"]["template"]["spec"]["containers"][0]
    assert container["securityContext"] == {
        "privileged": False,
        "capabilities": {"add": ["NET_ADMIN", "NET_RAW"]},
    }
    verbs = {verb for rule in role["rules"] for verb in rule["verbs"]}
    assert verbs == {"get", "list", "watch"}
    granted = {(group, resource) for rule in role["rules"] for group in rule["apiGroups"]
               for resource in rule["resources"]}  # fmt: skip
    assert ("networking.k8s.io", "networkpolicies") in granted
    assert not any(resource.startswith("secrets") for _, resource in granted)


def test_none_gets_only_kube_proxy_s_reading_and_simulated_workers_nothing() -> None:
    only = network.objects("none", WITH_NETWORK, "10.42.0.0/16", "10.43.0.0/16")
    assert kinds(only) == [("ClusterRoleBinding", "corral:node-proxier")]
    assert only[0]["roleRef"]["name"] == "system:node-proxier"
    assert network.objects("canal", SIMULATED, "10.42.0.0/16", "10.43.0.0/16") == []


def test_the_cluster_roles_are_not_the_project_sync_s_to_remove() -> None:
    for body in network.objects("canal", WITH_NETWORK, "10.42.0.0/16", "10.43.0.0/16"):
        assert "app.kubernetes.io/managed-by" not in body["metadata"].get("labels", {})


def test_the_plugin_is_the_admitted_one_or_the_flavour_s_default() -> None:
    assert plugin_of({"driver": "rke2", "rke2Config": {"networking": {"plugin": "none"}}}) == "none"
    assert plugin_of({"driver": "rke2"}) == "canal"
    assert plugin_of({"driver": "k3s", "k3sConfig": {}}) == "flannel"


def test_what_an_earlier_enforcer_left_is_stale_and_nothing_wanted_is() -> None:
    wanted = network.objects("canal", WITH_NETWORK, "10.42.0.0/16", "10.43.0.0/16")
    earlier = [
        ("DaemonSet", "kube-system", "kube-network-policies"),
        ("ServiceAccount", "kube-system", "kube-network-policies"),
        ("ClusterRole", "", "corral:kube-network-policies"),
    ]
    found = [network.identity(obj) for obj in wanted] + earlier
    assert network.stale(wanted, found) == earlier
    assert network.stale(wanted, [network.identity(obj) for obj in wanted]) == []


def test_every_object_of_the_network_is_found_again_to_prune() -> None:
    for plugin in ("canal", "none"):
        for body in network.objects(plugin, WITH_NETWORK, "10.42.0.0/16", "10.43.0.0/16"):
            assert body["kind"] in RESOURCES
            assert body["metadata"]["labels"] == network.LABELS
