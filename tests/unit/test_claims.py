"""The claim on a cluster's identity, made by an import or backfilled by the operator for a
cluster imported before claims existed."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from lightkube import ApiError
from lightkube.resources.core_v1 import Secret

from corral.core.clusters import observe
from corral.core.kube import claims, kinds

UID = "0b8a6f55-7f56-4a46-9d1d-3c1b1f3a2e10"
CLUSTER = {"metadata": {"name": "c-mine", "uid": "u-1"}, "spec": {"driver": "imported"}}


def conflict() -> ApiError:
    class Response:
        status_code = 409

        def json(self) -> dict[str, Any]:
            return {"code": 409, "message": "exists", "reason": "AlreadyExists"}

    return ApiError(response=Response())  # type: ignore[arg-type]


class Kube:
    """The management cluster, with a claim already held by `holder` when given."""

    def __init__(self, holder: str | None = None, owned: bool = True) -> None:
        self.existing = None
        if holder is not None:
            owner = {**CLUSTER, "metadata": {"name": holder, "uid": "u-2"}}
            self.existing = claims.claim_object(UID, holder, owner=owner if owned else None)
        self.created: list[Secret] = []
        self.patched: list[tuple[Any, str, dict[str, Any]]] = []

    async def create(self, obj: Secret) -> Secret:
        if self.existing is not None:
            raise conflict()
        self.created.append(obj)
        return obj

    async def get(self, *_: Any, **__: Any) -> Secret:
        assert self.existing is not None
        return self.existing

    async def patch(self, kind: Any, name: str, body: dict[str, Any], **_: Any) -> None:
        self.patched.append((kind, name, body))


def test_a_claim_is_named_from_the_identity_and_owned_by_its_cluster() -> None:
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    claim = claims.claim_object(UID, "c-mine", owner=CLUSTER, now=now)
    assert claim.metadata is not None and claim.metadata.name == claims.claim_name(UID)
    assert claims.claim_name(UID) == claims.claim_name(UID) != claims.claim_name(UID + "x")
    assert claim.metadata.name.startswith("cluster-claim-") and len(claim.metadata.name) <= 63
    assert claim.type == claims.CLAIM_TYPE and claim.metadata.namespace == "svc-system"
    assert claims.holder(claim) == "c-mine"
    assert claim.metadata.annotations == {
        claims.ANNOTATION_CLUSTER: "c-mine",
        claims.ANNOTATION_IDENTITY: UID,
        claims.ANNOTATION_CLAIMED_AT: now.isoformat(),
    }
    [owner] = claim.metadata.ownerReferences or []
    assert (owner.kind, owner.name, owner.uid) == ("Cluster", "c-mine", "u-1")
    assert claims.claim_object(UID, "c-mine").metadata.ownerReferences is None  # type: ignore[union-attr]


def test_only_an_imported_cluster_without_an_identity_is_unclaimed() -> None:
    assert claims.unclaimed(CLUSTER)
    annotated = {**CLUSTER, "metadata": {"annotations": {claims.ANNOTATION_IDENTITY: UID}}}
    assert not claims.unclaimed(annotated)
    assert not claims.unclaimed({"metadata": {}, "spec": {"driver": "local"}})


async def test_backfill_claims_and_annotates() -> None:
    kube = Kube()
    assert await claims.backfill(kube, UID, CLUSTER) is None  # type: ignore[arg-type]
    [created] = kube.created
    assert created.metadata is not None and created.metadata.ownerReferences
    [(kind, name, body)] = kube.patched
    assert (kind, name) == (kinds.Cluster, "c-mine")
    assert body == {"metadata": {"annotations": {claims.ANNOTATION_IDENTITY: UID}}}


async def test_backfill_finishes_its_own_claim() -> None:
    kube = Kube(holder="c-mine", owned=False)
    assert await claims.backfill(kube, UID, CLUSTER) is None  # type: ignore[arg-type]
    assert [p[0] for p in kube.patched] == [Secret, kinds.Cluster]


async def test_backfill_never_takes_another_clusters_claim() -> None:
    kube = Kube(holder="c-other")
    assert await claims.backfill(kube, UID, CLUSTER) == "c-other"  # type: ignore[arg-type]
    assert kube.created == [] and kube.patched == []


@pytest.mark.parametrize("failures", [{}, {"projects": "boom"}])
def test_a_duplicate_import_shows_on_updated(failures: dict[str, str]) -> None:
    probe = observe.Probe(True, True)
    found = {
        c.type: c
        for c in observe.cluster_conditions("imported", True, probe, [], failures, "c-other")
    }
    assert (found["Updated"].status, found["Updated"].reason) == ("False", "DuplicateImport")
    assert found["Updated"].message.startswith("this cluster is already imported as c-other")
    assert ("projects: boom" in found["Updated"].message) == bool(failures)
    assert found["Ready"].status == "True"
