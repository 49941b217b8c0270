from __future__ import annotations

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature

from corral.core.api import condition_types as ct
from corral.core.clusters import observe
from corral.core.provisioning import manifests, rotation
from corral.core.provisioning import pki as cp

ADDRESSES = cp.Addresses(namespace="c-abc12", apiserver_ip="10.0.0.17", etcd_ip="10.0.0.18")
CLUSTER_CA_LEAVES = (cp.APISERVER, cp.CONTROLLER_MANAGER, cp.SCHEDULER, cp.KWOK, cp.ADMIN)


@pytest.fixture(scope="module")
def stored() -> dict[str, dict[str, bytes]]:
    return cp.issue(cp.Authorities.create("c-abc12"), ADDRESSES, cp.new_service_account_key())


def load(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def signed_by(leaf: bytes, ca: bytes) -> bool:
    try:
        load(leaf).verify_directly_issued_by(load(ca))
    except (ValueError, InvalidSignature):
        return False
    return True


@pytest.mark.parametrize(
    ("given", "parsed"),
    [
        (None, ()),
        ("", ()),
        ([], ()),
        ("kube-apiserver", ("kube-apiserver",)),
        ("kubelet, etcd", ("etcd", "kubelet")),
        (["kube-proxy", "kube-scheduler"], ("kube-scheduler", "kube-proxy")),
    ],
)
def test_services_are_a_list_or_rancher_text_in_a_fixed_order(
    given: object, parsed: tuple[str, ...]
) -> None:
    assert rotation.parse_services(given) == parsed


@pytest.mark.parametrize("given", ["kube-dns", ["etcd", "coredns"], [1], {"etcd": True}, 3])
def test_an_unknown_service_or_shape_is_refused_saying_which(given: object) -> None:
    with pytest.raises(ValueError, match="service"):
        rotation.parse_services(given)


def test_an_unknown_service_is_named_with_the_known_ones() -> None:
    with pytest.raises(ValueError) as refused:
        rotation.parse_services("etcd,kube-dns")
    assert "kube-dns" in str(refused.value) and "kube-apiserver" in str(refused.value)


def test_the_messages_are_ranchers_and_say_kube_proxy_has_nothing() -> None:
    proxy = "; kube-proxy has no certificates here: simulated nodes run no kube-proxy"
    assert rotation.message(rotation.Request(1, ca=True)) == (
        "rotating CA certificates and all components" + proxy
    )
    assert rotation.message(rotation.Request(1)) == (
        "rotating certificates for all components" + proxy
    )
    assert rotation.message(rotation.Request(1, services=("etcd", "kubelet"))) == (
        "rotating etcd, kubelet certificates"
    )
    assert rotation.message(rotation.Request(1, services=("kube-proxy",))).endswith(proxy)


def test_the_request_round_trips_through_the_spec() -> None:
    request = rotation.Request(3, ca=True, services=("etcd",))
    spec = {rotation.ACTION: request.spec()}
    assert rotation.Request.from_spec(spec) == request
    assert "expires" not in request.spec()
    renewal = rotation.Request(4, services=("etcd",), expires="2027-11-29T07:00:00Z")
    assert rotation.Request.from_spec({rotation.ACTION: renewal.spec()}) == renewal
    assert rotation.Request.from_spec({}) is None


def test_a_renewal_says_which_certificates_and_when_they_expire() -> None:
    request = rotation.Request(4, services=("kube-scheduler",), expires="2027-11-29T07:00:00Z")
    assert rotation.message(request) == (
        "renewing the kube-scheduler certificates, which expire on 2027-11-29T07:00:00Z"
    )


def test_a_rotation_is_owed_until_its_generation_is_recorded() -> None:
    spec = {rotation.ACTION: rotation.Request(2).spec()}
    assert rotation.requested(spec, None) == rotation.Request(2)
    assert rotation.requested(spec, {rotation.STATUS_FIELD: 1}) == rotation.Request(2)
    assert rotation.requested(spec, {rotation.STATUS_FIELD: 2}) is None
    assert rotation.requested({}, {rotation.STATUS_FIELD: 0}) is None


@pytest.mark.parametrize(
    ("request_", "secrets"),
    [
        # corral's bootstrap administrator is kube-apiserver's client, renewed with it.
        (rotation.Request(1, services=("kube-apiserver",)), (cp.APISERVER, cp.ADMIN)),
        (rotation.Request(1, services=("etcd",)), (cp.ETCD,)),
        (rotation.Request(1, services=("kubelet",)), (cp.KWOK,)),
        (rotation.Request(1, services=("kube-proxy",)), ()),
        (
            rotation.Request(1),
            (cp.ETCD, cp.APISERVER, cp.CONTROLLER_MANAGER, cp.SCHEDULER, cp.KWOK, cp.ADMIN),
        ),
        # A new cluster CA replaces all it signs, whatever was named; etcd's CA stays.
        (rotation.Request(1, ca=True, services=("kube-scheduler",)), (cp.CA, *CLUSTER_CA_LEAVES)),
        (
            rotation.Request(1, ca=True),
            (cp.CA, cp.ETCD_CA, cp.ETCD, *CLUSTER_CA_LEAVES),
        ),
    ],
)
def test_each_request_replaces_the_secrets_holding_its_certificates_cas_first(
    request_: rotation.Request, secrets: tuple[str, ...]
) -> None:
    assert rotation.secrets(request_) == secrets


def test_a_leaf_rotation_keeps_the_cas_and_the_service_account_key(
    stored: dict[str, dict[str, bytes]],
) -> None:
    request = rotation.Request(1, services=("kube-apiserver",))
    issued = rotation.reissue(request, "c-abc12", ADDRESSES, stored, rotation.secrets(request))
    assert set(issued) == {cp.APISERVER, cp.ADMIN}
    new, old = issued[cp.APISERVER], stored[cp.APISERVER]
    assert load(new["tls.crt"]).serial_number != load(old["tls.crt"]).serial_number
    assert signed_by(new["tls.crt"], stored[cp.CA]["ca.crt"])
    assert new["ca.crt"] == old["ca.crt"] and new["etcd-ca.crt"] == old["etcd-ca.crt"]
    assert new["sa.key"] == old["sa.key"] and new["sa.pub"] == old["sa.pub"]


def test_a_ca_rotation_signs_every_leaf_with_the_new_cas(
    stored: dict[str, dict[str, bytes]],
) -> None:
    request = rotation.Request(1, ca=True)
    issued = rotation.reissue(request, "c-abc12", ADDRESSES, stored, rotation.secrets(request))
    ca, etcd_ca = issued[cp.CA]["ca.crt"], issued[cp.ETCD_CA]["ca.crt"]
    assert ca != stored[cp.CA]["ca.crt"] and etcd_ca != stored[cp.ETCD_CA]["ca.crt"]
    assert signed_by(issued[cp.APISERVER]["tls.crt"], ca)
    assert signed_by(issued[cp.APISERVER]["etcd-client.crt"], etcd_ca)
    assert signed_by(issued[cp.ETCD]["tls.crt"], etcd_ca)
    assert issued[cp.APISERVER]["ca.crt"] == ca == issued[cp.CONTROLLER_MANAGER]["ca.crt"]
    assert issued[cp.APISERVER]["sa.key"] == stored[cp.APISERVER]["sa.key"]
    assert issued[cp.CONTROLLER_MANAGER]["sa.key"] == stored[cp.APISERVER]["sa.key"]


def test_a_resumed_rotation_signs_the_rest_with_the_ca_it_wrote(
    stored: dict[str, dict[str, bytes]],
) -> None:
    request = rotation.Request(1, ca=True, services=("kube-apiserver",))
    first = rotation.reissue(request, "c-abc12", ADDRESSES, stored, [cp.CA])
    resumed = {**stored, **first}
    rest = [name for name in rotation.secrets(request) if name != cp.CA]
    issued = rotation.reissue(request, "c-abc12", ADDRESSES, resumed, rest)
    assert cp.CA not in issued
    assert signed_by(issued[cp.APISERVER]["tls.crt"], first[cp.CA]["ca.crt"])
    assert not signed_by(issued[cp.APISERVER]["tls.crt"], stored[cp.CA]["ca.crt"])


def test_corral_trusts_old_and_new_cas_each_once(stored: dict[str, dict[str, bytes]]) -> None:
    old, new = stored[cp.CA]["ca.crt"], stored[cp.ETCD_CA]["ca.crt"]
    both = rotation.trusted(old, new)
    assert [c.subject for c in x509.load_pem_x509_certificates(both)] == [
        load(old).subject,
        load(new).subject,
    ]
    assert rotation.trusted(both, new) == both
    assert rotation.trusted(None, new) == rotation.trusted(b"", new) == new


def statefulset(
    generation: int = 2,
    annotation: str = "2",
    observed: int = 2,
    current: str = "r2",
    updated: int = 1,
    ready: int = 1,
) -> dict[str, object]:
    return {
        "metadata": {"generation": generation},
        "spec": {
            "replicas": 1,
            "template": {
                "metadata": {"annotations": {manifests.ANNOTATION_PKI_GENERATION: annotation}}
            },
        },
        "status": {
            "observedGeneration": observed,
            "currentRevision": current,
            "updateRevision": "r2",
            "updatedReplicas": updated,
            "readyReplicas": ready,
        },
    }


def test_etcd_has_rolled_once_its_one_replica_runs_the_new_template_and_is_ready() -> None:
    assert rotation.rolled(statefulset(), 2)
    assert not rotation.rolled(None, 2)
    assert not rotation.rolled(statefulset(annotation="1"), 2)
    assert not rotation.rolled(statefulset(observed=1), 2)
    assert not rotation.rolled(statefulset(current="r1"), 2)
    assert not rotation.rolled(statefulset(updated=0), 2)
    assert not rotation.rolled(statefulset(ready=0), 2)


def test_updated_is_false_while_the_certificates_rotate() -> None:
    probe = observe.Probe(reachable=True, ready=True)
    provisioning = {"step": rotation.STEP, "message": "rotating kube-apiserver certificates"}
    conditions = observe.cluster_conditions("k3s", True, probe, [], provisioning=provisioning)
    updated = next(c for c in conditions if c.type == ct.UPDATED)
    assert (updated.status, updated.reason) == ("False", "RotatingCertificates")
    assert updated.message == "rotating kube-apiserver certificates"
    done = observe.cluster_conditions("k3s", True, probe, [], provisioning={"step": "Provisioned"})
    assert next(c for c in done if c.type == ct.UPDATED).status == "True"
