"""A workload's kept rendering (`routes.workloads.rendering_key`) is kept while what it shows
stands, and no longer: a new version of its object, or a Service, Ingress or pod of its own
namespace coming, changing or going, gives a new key; those of another namespace do not."""

from __future__ import annotations

import datetime
from typing import Any

from aiohttp import web
from lightkube.resources.core_v1 import Pod, Service
from lightkube.resources.networking_v1 import Ingress
from multidict import MultiDict

from corral.apiserver.auth.access import Access
from corral.apiserver.auth.authn import Principal
from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import DEPS
from corral.apiserver.resources.family import Ask
from corral.apiserver.routes import workloads as route
from corral.apiserver.services.workloads import Neighbours, Scope, Workload
from corral.core.auth.tokens import TokenRecord
from corral.core.kube.informer import Informer, Obj
from corral.core.workloads.kinds import KINDS
from tests.unit.held import holding

BASE = "https://corral.test"


def namespaced(resource: Any) -> Informer:
    by_namespace = {"namespace": lambda obj: [obj["metadata"]["namespace"]]}
    return Informer(None, resource, by_namespace, versioned=("namespace",))  # type: ignore[arg-type]


def deployment(namespace: str, version: str) -> Obj:
    return {"metadata": {"name": "web", "namespace": namespace, "resourceVersion": version},
            "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {}}}}  # fmt: skip


def test_a_workload_is_rendered_again_only_after_it_or_its_namespace_changed() -> None:
    token = TokenRecord.from_object(
        {
            "metadata": {
                "name": "t",
                "resourceVersion": "1",
                "creationTimestamp": "2026-11-28T10:00:00Z",
            },
            "spec": {"userId": "u-1"},
        }
    )
    who = Caller(Principal("u-1", token, False, True), Access("u-1", True, {}, {}))
    deps = holding(web.Application(), external_url=BASE)[DEPS]
    ask = Ask(deps, who, BASE, {"project": "local:p-1"}, MultiDict(),
              datetime.datetime.now(datetime.UTC))  # fmt: skip
    near = Neighbours(namespaced(Service), namespaced(Ingress), namespaced(Pod))
    where = Scope("local:p-1", "local", "owner", who.downstream())

    def key(version: str = "1") -> Any:
        found = Workload(where, KINDS["deployment"], deployment("home", version), near)
        return route.rendering_key(ask, found)

    first = key()
    assert key() == first
    assert key("2") != first
    for cache in (near.services, near.ingresses, near.pods):
        cache.put({"metadata": {"name": "x", "namespace": "elsewhere", "resourceVersion": "5"}})
        assert key() == first, cache.name
    seen = {first}
    for cache in (near.services, near.ingresses, near.pods):
        cache.put({"metadata": {"name": "x", "namespace": "home", "resourceVersion": "6"}})
        assert key() not in seen, cache.name
        seen.add(key())
        cache.put({"metadata": {"name": "x", "namespace": "home", "resourceVersion": "7"},
                   "spec": {"changed": True}})  # fmt: skip
        assert key() not in seen, cache.name
        seen.add(key())
