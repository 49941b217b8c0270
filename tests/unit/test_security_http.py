"""Parsers of what arrives over HTTP: request heads, bodies, label selectors (issue 9)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.apiserver.http import serving
from corral.apiserver.http.body import MAX_DEPTH, nesting, parse_object
from corral.apiserver.http.errors import ApiError
from corral.apiserver.http.query import label_selector
from corral.apiserver.middleware import response_headers

# Every text but the two characters no text of the API may hold (NUL, lone surrogates).
texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=1000)
@given(st.binary(max_size=512))
def test_any_bytes_are_an_object_or_the_apis_error(raw: bytes) -> None:
    try:
        assert isinstance(parse_object(raw), dict)
    except ApiError as error:
        # Unparsable, or parsed with a character no text may hold (`\u0000`, `\ud800`).
        assert (error.status, error.code) in ((400, "InvalidBodyContent"), (422, "InvalidFormat"))


@settings(max_examples=200, deadline=1000)
@given(st.dictionaries(texts, json_values, max_size=5))
def test_any_json_object_of_reasonable_depth_parses_back(value: dict[str, Any]) -> None:
    assert parse_object(json.dumps(value).encode()) == value


@settings(max_examples=200, deadline=1000)
@given(
    st.dictionaries(texts, json_values, min_size=1, max_size=5),
    st.sampled_from(["\x00", "\ud800", "\udfff"]),
    st.booleans(),
)
def test_a_nul_or_a_lone_surrogate_anywhere_is_refused_naming_where(
    value: dict[str, Any], char: str, in_key: bool
) -> None:
    key = sorted(value)[0]
    value = {**value, f"{key}{char}": 1} if in_key else {**value, key: [{"deep": f"a{char}"}]}
    with pytest.raises(ApiError) as refused:
        parse_object(json.dumps(value).encode())
    assert (refused.value.status, refused.value.code) == (422, "InvalidFormat")
    assert refused.value.field_name == (None if in_key else f"{key}[0].deep"[:256] or None)
    assert f"U+{ord(char):04X}" in refused.value.message


def test_nan_and_infinity_are_not_json_and_name_their_field() -> None:
    for constant in ("NaN", "Infinity", "-Infinity", "1e400"):
        with pytest.raises(ApiError) as refused:
            parse_object(f'{{"spec": {{"scale": [{constant}]}}}}'.encode())
        assert (refused.value.status, refused.value.code) == (422, "InvalidFormat")
        assert refused.value.field_name == "spec.scale[0]"


@settings(max_examples=50, deadline=2000)
@given(st.integers(min_value=1, max_value=50_000), st.sampled_from("[{"))
def test_depth_is_bounded_whatever_the_nesting(depth: int, bracket: str) -> None:
    closing = "]" if bracket == "[" else "}"
    inner = (bracket + ('"k":' if bracket == "{" else "")) * depth + "1" + closing * depth
    raw = ('{"a": ' + inner + "}").encode()
    try:
        body = parse_object(raw)
    except ApiError as error:
        assert error.code == "InvalidBodyContent"
        assert depth + 1 > MAX_DEPTH
    else:
        assert nesting(body) == depth + 1 <= MAX_DEPTH


def test_an_empty_body_is_an_empty_object_and_a_list_is_refused() -> None:
    assert parse_object(b"  \n") == {}
    with pytest.raises(ApiError, match="JSON object"):
        parse_object(b"[1, 2]")


@settings(max_examples=300, deadline=1000)
@given(st.text(max_size=200), st.dictionaries(st.text(max_size=10), st.text(max_size=10)))
def test_any_label_selector_text_gives_a_predicate(selector: str, labels: dict[str, str]) -> None:
    assert isinstance(label_selector(selector)(labels), bool)


async def test_a_malformed_head_gets_the_json_error_without_its_bytes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = web.Application()
    app.on_response_prepare.append(response_headers)
    runner = await serving.start(app, serving.listen("127.0.0.1", 0))
    try:
        host, port = runner.addresses[0][:2]
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nCookie: R_SESS=token-abc:" + b"S" * 9000
                     + b"\r\n\r\n")  # fmt: skip
        with caplog.at_level(logging.DEBUG):
            answer = await reader.read()
        writer.close()
    finally:
        await runner.cleanup()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") or head.startswith(b"HTTP/1.0 400")
    assert b"application/json" in head and b"Server: corral" in head
    assert json.loads(body)["code"] == "BadRequest"
    assert b"SSSS" not in answer and b"token-abc" not in answer
    assert "token-abc" not in caplog.text and "SSSS" not in caplog.text
    assert "LineTooLong" in caplog.text
