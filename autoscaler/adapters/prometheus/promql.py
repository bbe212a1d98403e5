"""Pure helpers to build PromQL text safely from untrusted strings.

Two different escaping layers are involved when a value ends up inside a regex matcher
(`label=~"..."`):

1. RE2 regex escaping (`regex_escape`): the value must match literally, so regex
   metacharacters are backslash-escaped exactly like Go's `regexp.QuoteMeta` does. RE2
   rejects backslash escapes of letters/digits that it does not know (e.g. `\\-` is fine,
   `\\q` is an error), so we escape only the metacharacters, never "everything
   non-alphanumeric" like Python's `re.escape` would.
2. PromQL string-literal escaping (`quote_string`): the whole matcher value (regex or not)
   is embedded in a double-quoted PromQL string, which is unquoted with Go's string rules
   before the regex is compiled. Backslash, double quote and newline must be escaped (a raw
   newline is a syntax error, "unterminated quoted string"); other control characters are
   escaped too so the query stays printable.

Nothing here performs I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "quote_string",
    "regex_escape",
    "regex_alternation",
    "validate_label_name",
    "equal_matcher",
    "regex_matcher",
]

# The characters Go's regexp.QuoteMeta escapes (RE2 syntax metacharacters).
_RE2_META = frozenset("\\.+*?()|[]{}^$")

_STRING_ESCAPES = {
    "\\": "\\\\",
    '"': '\\"',
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\v": "\\v",
}

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")


def quote_string(value: str) -> str:
    """Return `value` as a double-quoted PromQL string literal (quotes included).

    E.g. the 3-character value  a"b  becomes the 6-character literal  "a\\"b" .
    """
    out = ['"']
    for ch in value:
        esc = _STRING_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def regex_escape(value: str) -> str:
    """Escape RE2 metacharacters so that the regex matches `value` literally (Go's QuoteMeta)."""
    return "".join("\\" + ch if ch in _RE2_META else ch for ch in value)


def regex_alternation(values: Iterable[str]) -> str:
    """An anchored RE2 regex matching exactly one of `values`: `^(?:a|b)$`.

    The values are de-duplicated and sorted so the same set always yields the same query
    text. The result is a regex, not yet a PromQL string: pass it through `quote_string`
    (or use `regex_matcher`). Raises ValueError for an empty set, because `^(?:)$` would
    match the empty string, i.e. every series *without* the label, which is never what a
    caller with "no values" means.
    """
    unique = sorted(set(values))
    if not unique:
        raise ValueError("regex_alternation needs at least one value")
    return "^(?:" + "|".join(regex_escape(v) for v in unique) + ")$"


def validate_label_name(name: str) -> str:
    """Return `name` if it is a valid Prometheus label name, else raise ValueError."""
    if not _LABEL_NAME.match(name):
        raise ValueError(f"invalid Prometheus label name: {name!r}")
    return name


def equal_matcher(label: str, value: str) -> str:
    """`label="value"` with `value` escaped."""
    return f"{validate_label_name(label)}={quote_string(value)}"


def regex_matcher(label: str, values: Iterable[str]) -> str:
    """`label=~"^(?:v1|v2)$"`: the label equals one of `values` (each matched literally)."""
    return f"{validate_label_name(label)}=~{quote_string(regex_alternation(values))}"
