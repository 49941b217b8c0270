from __future__ import annotations

from multidict import MultiDict

from corral.apiserver import envelope
from corral.apiserver.schemas import Field, Schema

SCHEMA = Schema(
    id="thing",
    plural="things",
    fields={
        "color": Field("string", create=True),
        "size": Field("int", update=True),
        "secret": Field("string", create=True, write_only=True),
    },
    resource_methods=("GET", "PUT"),
    collection_methods=("GET", "POST"),
)
BASE = "https://h"


def items() -> list[dict]:
    return [{"id": f"t{i}", "color": c, "size": i}
            for i, c in enumerate(["red", "blue", "red", "green", "red"])]  # fmt: skip


def collect(query: str) -> dict:
    pairs = [tuple(p.split("=", 1)) for p in query.split("&") if p]
    return envelope.collection(BASE, SCHEMA, items(), MultiDict(pairs), "/v3/things", True)


def test_resource_links_follow_the_methods() -> None:
    rendered = envelope.resource(BASE, SCHEMA, {"id": "t1"}, actions=["paint"])
    assert rendered["links"] == {
        "self": "https://h/v3/things/t1",
        "update": "https://h/v3/things/t1",
    }
    assert rendered["actions"] == {"paint": "https://h/v3/things/t1?action=paint"}
    assert (rendered["type"], rendered["baseType"]) == ("thing", "thing")


def test_collection_shape() -> None:
    body = collect("")
    assert body["type"] == "collection" and body["resourceType"] == "thing"
    assert body["createTypes"] == {"thing": "https://h/v3/things"}
    assert body["pagination"] == {"limit": 1000, "total": 5}
    assert body["links"] == {"self": "https://h/v3/things"}
    assert "secret" not in body["filters"]  # write-only fields are not filters
    assert body["filters"]["color"] is None


def test_filters_with_modifiers_and_unknown_keys_ignored() -> None:
    assert [i["id"] for i in collect("color=red")["data"]] == ["t0", "t2", "t4"]
    assert [i["id"] for i in collect("color_ne=red")["data"]] == ["t1", "t3"]
    assert [i["id"] for i in collect("color_in=blue&color_in=green")["data"]] == ["t1", "t3"]
    assert [i["id"] for i in collect("color_notin=red&size=3")["data"]] == ["t3"]
    assert len(collect("bogus=1")["data"]) == 5
    assert collect("color_in=blue&color_in=green")["filters"]["color"] == [
        {"modifier": "in", "value": ["blue", "green"]}
    ]


def test_sort_and_pages() -> None:
    assert [i["id"] for i in collect("sort=color")["data"]][:2] == ["t1", "t3"]
    assert collect("sort=size&order=desc")["data"][0]["id"] == "t4"
    page = collect("limit=2")
    assert [i["id"] for i in page["data"]] == ["t0", "t1"]
    assert page["pagination"]["next"] == "https://h/v3/things?limit=2&marker=t2"
    second = collect("limit=2&marker=t2")
    assert [i["id"] for i in second["data"]] == ["t2", "t3"]
    assert second["pagination"]["previous"].endswith("marker=t0")
    assert collect("limit=-1")["pagination"]["limit"] == 10000
    assert collect("limit=abc")["pagination"]["limit"] == 1000


def test_writable_drops_fields_the_operation_may_not_set() -> None:
    body = {"color": "red", "size": 3, "id": "x", "status": {}}
    assert SCHEMA.writable(body, creating=True) == {"color": "red"}
    assert SCHEMA.writable(body, creating=False) == {"size": 3}
