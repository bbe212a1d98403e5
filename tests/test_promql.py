"""Escaping helpers of autoscaler.adapters.prometheus.promql: tables of hostile names plus round-trip properties.

Round trips use a reference decoder of PromQL/Go double-quoted strings (below) and Python's
`re`, whose semantics for backslash-escaped metacharacters match RE2's.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.adapters.prometheus.promql import (
    equal_matcher,
    quote_string,
    regex_alternation,
    regex_escape,
    regex_matcher,
    validate_label_name,
)

_SIMPLE = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "r": "\r", "t": "\t", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def go_unquote(literal: str) -> str:
    """Decode a double-quoted PromQL string literal the way Prometheus' lexer + strconv do."""
    assert literal[0] == '"' and literal[-1] == '"', literal
    body = literal[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\n":
            raise ValueError("raw newline: unterminated quoted string")
        if ch == '"':
            raise ValueError("unescaped quote")
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _SIMPLE:
            out.append(_SIMPLE[nxt])
            i += 2
        elif nxt == "x":
            out.append(chr(int(body[i + 2 : i + 4], 16)))
            i += 4
        else:
            raise ValueError(f"invalid escape \\{nxt}")
    return "".join(out)


HOSTILE = [
    "default",
    "kube-system",
    'a"b',
    "a\\b",
    "trailing\\",
    "new\nline",
    "cr\rtab\t",
    "close}brace",
    '"} or vector(1) or {x="',
    "a|b",
    ".*",
    "^anchored$",
    "(group)",
    "[class]",
    "{1,2}",
    "plus+star*?",
    "dollar$",
    "back\\\\slashes",
    "nul\x00ctl\x1f\x7f",
    "ünïcødé-名前",
    "emoji-🚀",
    "",
]


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        ("default", '"default"'),
        ('a"b', '"a\\"b"'),
        ("a\\b", '"a\\\\b"'),
        ("new\nline", '"new\\nline"'),
        ("tab\there", '"tab\\there"'),
        ("cr\r", '"cr\\r"'),
        ("nul\x00", '"nul\\x00"'),
        ("del\x7f", '"del\\x7f"'),
        ("close}brace", '"close}brace"'),
        ("ünï", '"ünï"'),
        ("", '""'),
    ],
)
def test_quote_string_table(value: str, literal: str) -> None:
    assert quote_string(value) == literal


@pytest.mark.parametrize("value", HOSTILE)
def test_quote_string_round_trips_hostile_names(value: str) -> None:
    literal = quote_string(value)
    assert "\n" not in literal
    assert go_unquote(literal) == value


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ("default", "default"),
        ("kube-system", "kube-system"),  # '-' is not special outside a class: not escaped
        ("a.b", "a\\.b"),
        ("a|b", "a\\|b"),
        (".*", "\\.\\*"),
        ("^x$", "\\^x\\$"),
        ("(g)[c]{1,2}", "\\(g\\)\\[c\\]\\{1,2\\}"),
        ("p+s*q?", "p\\+s\\*q\\?"),
        ("back\\slash", "back\\\\slash"),
        ('quote"', 'quote"'),  # not a regex metacharacter; quote_string handles it
        ("new\nline", "new\nline"),  # RE2 matches a literal newline; quote_string escapes it
    ],
)
def test_regex_escape_table(value: str, escaped: str) -> None:
    assert regex_escape(value) == escaped


def test_regex_escape_never_escapes_alphanumerics() -> None:
    # RE2 rejects unknown escapes such as \q or \-; only QuoteMeta's set may be escaped.
    escaped = regex_escape("".join(chr(c) for c in range(32, 127)))
    for m in re.finditer(r"\\(.)", escaped):
        assert m.group(1) in "\\.+*?()|[]{}^$"


def test_regex_alternation_sorted_deduplicated_anchored() -> None:
    assert regex_alternation(["b", "a", "b"]) == "^(?:a|b)$"
    assert regex_alternation(["ns.x", "a|b"]) == "^(?:a\\|b|ns\\.x)$"


def test_regex_alternation_rejects_empty_set() -> None:
    with pytest.raises(ValueError):
        regex_alternation([])


@pytest.mark.parametrize("value", [v for v in HOSTILE if v])
def test_regex_alternation_matches_exactly_the_values(value: str) -> None:
    regex = regex_alternation([value, "other"])
    assert re.fullmatch(regex, value, flags=re.DOTALL)
    assert re.fullmatch(regex, "other")
    for near_miss in (value + "x", "x" + value, value[:-1], "a", "b", "ab", "abc"):
        if near_miss not in (value, "other"):
            assert not re.fullmatch(regex, near_miss, flags=re.DOTALL), near_miss


def test_regex_metacharacters_do_not_widen_the_match() -> None:
    regex = regex_alternation([".*"])
    assert not re.fullmatch(regex, "anything")
    regex = regex_alternation(["a|c"])
    assert not re.fullmatch(regex, "c")


@pytest.mark.parametrize(
    ("values", "matcher"),
    [
        (["a", "b"], 'namespace=~"^(?:a|b)$"'),
        (["a.b"], 'namespace=~"^(?:a\\\\.b)$"'),  # regex \. then string-escaped \\.
        (['q"'], 'namespace=~"^(?:q\\")$"'),
        (["n\nl"], 'namespace=~"^(?:n\\nl)$"'),
        (["a\\b"], 'namespace=~"^(?:a\\\\\\\\b)$"'),  # regex \\ then each \ string-escaped
    ],
)
def test_regex_matcher_table(values: list[str], matcher: str) -> None:
    assert regex_matcher("namespace", values) == matcher


def test_equal_matcher() -> None:
    assert equal_matcher("pod", 'x"y') == 'pod="x\\"y"'


@pytest.mark.parametrize("name", ["", "1abc", "a-b", "a b", "a}", 'a"', "ns\n"])
def test_invalid_label_names_rejected(name: str) -> None:
    with pytest.raises(ValueError):
        validate_label_name(name)
    with pytest.raises(ValueError):
        regex_matcher(name, ["x"])


@pytest.mark.parametrize("name", ["namespace", "pod", "_x", "__name__", "a1_B"])
def test_valid_label_names(name: str) -> None:
    assert validate_label_name(name) == name


@given(st.text())
def test_quote_string_round_trip_property(value: str) -> None:
    literal = quote_string(value)
    assert "\n" not in literal
    assert go_unquote(literal) == value


@given(st.lists(st.text(min_size=1), min_size=1, max_size=5), st.text(min_size=1))
def test_regex_alternation_property(values: list[str], probe: str) -> None:
    regex = go_unquote(quote_string(regex_alternation(values)))
    for v in values:
        assert re.fullmatch(regex, v, flags=re.DOTALL)
    assert bool(re.fullmatch(regex, probe, flags=re.DOTALL)) == (probe in values)
