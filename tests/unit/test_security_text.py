"""Which characters a `/v3` text may hold: none may hold NUL or a lone surrogate; names and
descriptions no control or bidirectional formatting characters (descriptions keep tabs and
line breaks)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.core.api import text

BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069",
        "\u200e", "\u200f", "\u061c"]  # fmt: skip
CONTROLS = ["\x00", "\x01", "\x1b", "\x7f", "\x85", "\x9f"]


@pytest.mark.parametrize("char", [*BIDI, *CONTROLS, "\t", "\n", "\r", "\u2028", "\u2029"])
def test_a_name_refuses_control_and_bidirectional_characters(char: str) -> None:
    with pytest.raises(text.TextError) as refused:
        text.check_name(f"invoice{char}fdp.exe", "displayName")
    assert refused.value.field == "displayName"
    assert f"U+{ord(char):04X}" in refused.value.message
    assert char not in refused.value.message


@pytest.mark.parametrize("char", [*BIDI, *CONTROLS])
def test_a_description_refuses_them_too(char: str) -> None:
    with pytest.raises(text.TextError) as refused:
        text.check_description(f"a{char}b", "description")
    assert refused.value.field == "description"


def test_a_description_keeps_tabs_and_line_breaks_and_names_keep_any_script() -> None:
    assert text.check_description("line one\n\tline two\r\n", "description")
    for name in ("Prod \u2013 EU", "生产集群", "עברית", "مرحبا", "😀 team", "a.b_c-d e"):
        assert text.check_name(name, "name") == name


@given(st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"))))
def test_any_text_without_them_is_a_name(value: str) -> None:
    if not any(c in value for c in BIDI):
        assert text.check_name(value, "name") == value


def test_unstorable_finds_nul_and_lone_surrogates_anywhere_and_names_the_path() -> None:
    assert text.unstorable({"a": ["ok", {"b": "fine\n"}], "n": 1}) is None
    refused = ", which no text of the API may hold"
    assert text.unstorable({"a": ["ok", {"b": "x\x00"}]}) == ("a[1].b", "U+0000" + refused)
    assert text.unstorable({"spec": {"image": "\ud800"}}) == ("spec.image", "U+D800" + refused)
    assert text.unstorable({"labels": {"k\udfff": "v"}}) == ("labels", "U+DFFF" + refused)
    assert text.unstorable({"\x00": 1}) == ("", "U+0000" + refused)
    assert text.unstorable({"n": [1.5, float("nan")]}) == ("n[1]", "nan, which is no JSON number")
    assert text.unstorable({"n": float("-inf")}) == ("n", "-inf, which is no JSON number")
    # A pair is one character, not two lone halves.
    assert text.unstorable({"emoji": "\U0001f600"}) is None
