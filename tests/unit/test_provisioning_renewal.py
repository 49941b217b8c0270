from __future__ import annotations

import datetime
from typing import Any

import pytest
from cryptography import x509

from corral.core.provisioning import pki as cp
from corral.core.provisioning import renewal, rotation

ADDRESSES = cp.Addresses(namespace="c-abc12", apiserver_ip="10.0.0.17", etcd_ip="10.0.0.18")
NOW = datetime.datetime(2027, 6, 1, 12, 0, tzinfo=datetime.UTC)
LEAVES = (cp.ETCD, cp.APISERVER, cp.CONTROLLER_MANAGER, cp.SCHEDULER, cp.KWOK, cp.ADMIN)


def expiring(days: float, sooner: dict[str, float] | None = None) -> dict[str, datetime.datetime]:
    """Every leaf Secret expiring `days` from NOW, those in `sooner` that many days instead."""
    given = sooner or {}
    return {name: NOW + datetime.timedelta(days=given.get(name, days)) for name in LEAVES}


def cluster(spec: dict[str, Any], provisioning: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "spec": {"driver": "k3s", "kubernetesVersion": "v1.36.3+k3s1", **spec},
        "status": {"provisioning": {"appliedVersion": "v1.36.3", **(provisioning or {})}},
    }


def test_the_expiries_are_each_secrets_first_leaf_and_no_ca() -> None:
    secrets = cp.issue(cp.Authorities.create("c-abc12"), ADDRESSES, cp.new_service_account_key())
    serving = x509.load_pem_x509_certificate(secrets[cp.APISERVER]["tls.crt"])

    found = cp.expiries(secrets)

    # The scheduler's and the admin's Secrets hold only a kubeconfig: its certificate is read.
    assert set(found) == set(LEAVES)
    year = serving.not_valid_after_utc
    assert all(abs(expiry - year) < datetime.timedelta(minutes=1) for expiry in found.values())


def test_nothing_is_asked_while_every_leaf_has_more_than_thirty_days() -> None:
    assert renewal.request(None, expiring(30.01), NOW) is None
    assert renewal.request(None, {}, NOW) is None


def test_the_services_of_the_due_leaves_are_renewed_as_the_next_rotation() -> None:
    previous = rotation.Request(2, ca=True)
    due = expiring(200, {cp.SCHEDULER: 29, cp.KWOK: 12})

    asked = renewal.request(previous, due, NOW)

    assert asked == rotation.Request(
        3, services=("kube-scheduler", "kubelet"), expires="2027-06-13T12:00:00Z"
    )
    assert rotation.secrets(asked) == (cp.SCHEDULER, cp.KWOK)
    assert rotation.message(asked) == (
        "renewing the kube-scheduler, kubelet certificates, which expire on 2027-06-13T12:00:00Z"
    )


def test_leaves_issued_together_are_renewed_together_and_the_admin_with_the_apiserver() -> None:
    asked = renewal.request(None, expiring(20), NOW)

    assert asked is not None and asked.generation == 1
    assert asked.services == (
        "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"
    )  # fmt: skip
    assert set(rotation.secrets(asked)) == set(LEAVES)
    assert not asked.ca


def test_expired_leaves_are_renewed_too() -> None:
    asked = renewal.request(None, expiring(200, {cp.ETCD: -40}), NOW)
    assert asked is not None and asked.services == ("etcd",)
    assert asked.expires == "2027-04-22T12:00:00Z"


@pytest.mark.parametrize(
    ("days", "seconds"),
    [
        (30 + 1 / 24, 3600.0),  # due in an hour
        (30, 0.0),
        (-5, 0.0),  # due, or expired: at once, never a negative timer
        (31.5, 86400.0),  # a day at most, however far
        (3650 * 100, 86400.0),
    ],
)
def test_the_provisioner_is_woken_when_the_first_leaf_falls_due_within_a_day(
    days: float, seconds: float
) -> None:
    assert renewal.wake_in(expiring(400, {cp.SCHEDULER: days}), NOW) == pytest.approx(seconds)


def test_no_wake_without_leaves() -> None:
    assert renewal.wake_in({}, NOW) is None


RESTORE = {"name": "c-abc12:snap", "generation": 1}


def owing(request: rotation.Request) -> dict[str, Any]:
    """A cluster whose rotation `request` is asked and not done (the one before it is)."""
    return cluster({rotation.ACTION: request.spec()}, {rotation.STATUS_FIELD: 1})


def test_a_rotation_restore_or_version_change_under_way_holds_a_due_renewal_back() -> None:
    due = expiring(400, {cp.SCHEDULER: 12})
    assert not renewal.blocked(cluster({}), due, NOW)
    done = rotation.Request(1, services=("etcd",)).spec()
    assert not renewal.blocked(cluster({rotation.ACTION: done}, {rotation.STATUS_FIELD: 1}), due,
                               NOW)  # fmt: skip
    assert renewal.blocked(owing(rotation.Request(2, services=("etcd",))), due, NOW)
    assert renewal.blocked(cluster({"etcdSnapshotRestore": RESTORE}), due, NOW)
    assert renewal.blocked(cluster({}, {"appliedVersion": "v1.35.8"}), due, NOW)
    assert renewal.wanted(cluster({}, {"appliedVersion": "v1.35.8"}), due, NOW) is None
    assert renewal.wanted(cluster({}), due, NOW) == rotation.Request(
        1, services=("kube-scheduler",), expires="2027-06-13T12:00:00Z"
    )


def test_an_expired_leaf_joins_a_version_change_or_a_restore() -> None:
    # A roll with an expired leaf cannot finish: waiting for it would wait for good.
    gone = expiring(400, {cp.APISERVER: 0})
    for rolling in (cluster({}, {"appliedVersion": "v1.35.8"}),
                    cluster({"etcdSnapshotRestore": RESTORE})):  # fmt: skip
        assert not renewal.blocked(rolling, gone, NOW)
        assert renewal.wanted(rolling, gone, NOW) == rotation.Request(
            1, services=("kube-apiserver",), expires="2027-06-01T12:00:00Z"
        )


def test_an_expired_leaf_widens_a_rotation_that_leaves_it_out_and_waits_for_one_that_renews_it(
) -> None:  # fmt: skip
    gone = expiring(400, {cp.APISERVER: -2, cp.SCHEDULER: 10})
    scheduler = owing(rotation.Request(2, services=("kube-scheduler",)))
    assert not renewal.blocked(scheduler, gone, NOW)
    # The next generation, with the rotation's services and those of every due leaf.
    assert renewal.wanted(scheduler, gone, NOW) == rotation.Request(
        3, services=("kube-apiserver", "kube-scheduler"), expires="2027-05-30T12:00:00Z"
    )
    for renews in (rotation.Request(2, services=("kube-apiserver",)), rotation.Request(2),
                   rotation.Request(2, ca=True, services=("etcd",))):  # fmt: skip
        assert renewal.blocked(owing(renews), gone, NOW), renews
        assert renewal.wanted(owing(renews), gone, NOW) is None


@pytest.mark.parametrize(
    ("days", "seconds"),
    [(400, 86400.0), (0.5, 43200.0), (0, 86400.0), (-3, 86400.0)],
)
def test_a_renewal_held_back_is_woken_when_the_next_leaf_expires(
    days: float, seconds: float
) -> None:
    # One expired already wakes nothing: what holds the renewal back moves on by itself.
    found = expiring(400, {cp.KWOK: days})
    assert renewal.expiry_in(found, NOW) == pytest.approx(seconds)
    assert renewal.expiry_in(expiring(-1), NOW) is None
    assert renewal.expiry_in({}, NOW) is None


def test_the_event_says_what_was_renewed_and_when_it_expired() -> None:
    asked = rotation.Request(3, services=("kube-scheduler",), expires="2027-06-13T12:00:00Z")
    assert renewal.event_message(asked) == (
        "renewed the kube-scheduler certificates (expiring on 2027-06-13T12:00:00Z): the control "
        "plane runs the new ones"
    )
