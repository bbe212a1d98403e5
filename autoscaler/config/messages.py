"""Validation messages: every problem of the document as one line `key = value, must be ...`,
the range taken from the models' `Field` constraints."""

from __future__ import annotations

import difflib
import json
import math
import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Union

import annotated_types
import yaml
from pydantic import (
    BaseModel,
)
from pydantic.fields import FieldInfo

from autoscaler.config.bounded import load_yaml

# --- errors -------------------------------------------------------------------------------------


MAX_PROBLEMS = 100
"""Problems listed at most; beyond, one line says how many more (a file of 60,000 unknown keys
is one mistake, not a reading list)."""


class ConfigError(Exception):
    """The document is unusable. `problems` holds one line per problem, `key = value, must be ...`
    (or `<source>: ...` for problems of the document as a whole: unreadable, invalid YAML, empty)."""

    def __init__(self, problems: Sequence[str], *, source: str = "<string>") -> None:
        unique = list(dict.fromkeys(problems))  # de-duplicated, in order
        if len(unique) > MAX_PROBLEMS:  # 60,000 unknown keys made 60,000 lines, and one log line of them
            unique = [*unique[:MAX_PROBLEMS], f"... and {len(unique) - MAX_PROBLEMS:,} more problems"]
        self.problems: list[str] = unique
        self.source = source
        super().__init__("\n".join(self.problems))

    def __str__(self) -> str:
        return "\n".join(self.problems)


class _Problems(ValueError):
    """Raised inside a model validator with problems already formatted as lines (relative to the
    model's own location); `_problem_lines` prefixes them with that location."""

    def __init__(self, lines: Sequence[str]) -> None:
        super().__init__("; ".join(lines))
        self.lines = list(lines)


# --- pydantic errors -> `key = value, must be ...` ------------------------------------------------

_TYPE_WORDS: dict[type, str] = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "a mapping",
}

_TYPE_ERRORS: dict[str, str] = {
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}

_BOUND_ERRORS: dict[str, tuple[str, str]] = {
    "greater_than_equal": ("ge", ">="),
    "greater_than": ("gt", ">"),
    "less_than_equal": ("le", "<="),
    "less_than": ("lt", "<"),
}

_KEY_PROBLEM = re.compile(r"([A-Za-z_][\w.]*) = (.*)", re.DOTALL)


def _problem_lines(
    errors: Sequence[Mapping[str, Any]], *, root: type[BaseModel], data: object = None
) -> list[str]:
    """One `path = value, must be ...` line per pydantic error, `path` relative to `root`
    (`data` is the validated input, to find values pydantic does not report)."""
    lines: list[str] = []
    for err in errors:
        loc = tuple(err["loc"])
        kind = str(err["type"])
        ctx: Mapping[str, Any] = err.get("ctx") or {}
        value = err.get("input")
        error = ctx.get("error")
        if kind == "value_error" and isinstance(error, _Problems):  # already lines, relative to loc
            prefix = format_path(loc)
            lines.extend(_join(prefix, line) for line in error.lines)
            continue
        if kind == "value_error" and error is not None:
            message = str(error)
            match = _KEY_PROBLEM.fullmatch(message)
            if match:  # a cross-field check naming its key: "min_replicas = 12, must be <= ..."
                lines.append(_one_line(_join(format_path(loc), match.group(1)) + " = " + match.group(2)))
            else:
                lines.append(_one_line(f"{format_path(loc) or '(document)'} = {_fmt_value(value)}, {message}"))
            continue
        path = format_path(loc) or "(document)"
        if kind == "missing":
            lines.append(f"{path} = (missing), must be set")
        elif kind == "extra_forbidden":
            lines.append(f"{path} = {_fmt_value(value)}, {_unknown_key_hint(root, loc)}")
        elif kind == "invalid_key":  # a non-string key such as `1:`; pydantic's input is the key
            lines.append(f"{path} = {_fmt_value(_lookup(data, loc))}, unknown key (keys are names)")
        elif kind in _BOUND_ERRORS:
            name, op = _BOUND_ERRORS[kind]
            if isinstance(value, float) and math.isnan(value):
                info = _field_at(root, loc)
                lines.append(f"{path} = {_fmt_value(value)}, must be {_expected(info, 'a number')}")
            else:
                lines.append(f"{path} = {_fmt_value(value)}, must be {op} {_fmt_number(ctx.get(name))}")
        elif kind in _TYPE_ERRORS:
            info = _field_at(root, loc)
            hint = (" (YAML reads an unquoted yes, no, on, off, true or false as a boolean: quote it)"
                    if isinstance(value, bool) and kind == "string_type" else "")
            lines.append(f"{path} = {_fmt_value(value)}, must be {_expected(info, _TYPE_ERRORS[kind])}{hint}")
        elif kind in ("string_too_short", "string_too_long"):
            info = _field_at(root, loc)
            lines.append(f"{path} = {_fmt_value(value)}, must be {_expected(info, 'a string')}")
        elif str(err.get("msg", "")).startswith("must be "):  # our own PydanticCustomErrors
            lines.append(_one_line(f"{path} = {_fmt_value(value)}, {err['msg']}"))
        else:
            msg = str(err.get("msg", kind))
            lines.append(_one_line(f"{path} = {_fmt_value(value)}, must be valid ({msg[:1].lower()}{msg[1:]})"))
    return lines


def _lookup(data: object, loc: Sequence[str | int]) -> object:
    for part in loc:
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return None
    return data


LIST_FIELDS = frozenset({"targets", "annotation_keys", "namespaces", "match_expressions", "values"})
"""Config fields that hold lists: an int after one of them in an error's location is an index."""


def format_path(loc: Sequence[str | int]) -> str:
    """`("targets", 0, "max_replicas")` -> `targets[0].max_replicas`: an item of a list field is
    indexed (`annotation_keys[0]`, `match_expressions[1].operator`); a key that is a number is a
    key (`defaults.1`); odd keys are quoted."""
    out = ""
    previous: str | int | None = None
    for part in loc:
        if isinstance(part, int) and previous in LIST_FIELDS:
            out += f"[{part}]"
        else:
            text = str(part)
            if not re.fullmatch(r"[A-Za-z0-9_-]+", text):
                out += "[" + json.dumps(text) + "]"
            else:
                out += ("." if out else "") + text
        previous = part
    return out


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _model_at(root: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model that owns the keys found at `loc` (walks field annotations, list items)."""
    current: Any = root
    for part in loc:
        current = _unwrap(current)
        if isinstance(part, int):
            continue  # list item: _unwrap already stepped into list[X]
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        info = current.model_fields.get(part)
        if info is None:
            return None
        current = info.annotation
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """Strip Optional / Annotated / list[...] down to the item type."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        elif origin is list:
            annotation = typing.get_args(annotation)[0]
        else:
            return annotation


def _field_at(root: type[BaseModel], loc: Sequence[str | int]) -> FieldInfo | None:
    if not loc or not isinstance(loc[-1], str):
        return None
    owner = _model_at(root, loc[:-1])
    return owner.model_fields.get(loc[-1]) if owner is not None else None


def _expected(info: FieldInfo | None, fallback: str) -> str:
    """`an integer >= 1 and <= 64`, `a number > 0 and <= 1, or null`: from the field's constraints."""
    if info is None:
        return fallback
    base = _unwrap(info.annotation)
    text = _TYPE_WORDS.get(base, fallback) if isinstance(base, type) else fallback
    bounds = [f"{op} {_fmt_number(getattr(m, attr))}" for m in info.metadata
              for attr, op in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))
              if isinstance(m, annotated_types.BaseMetadata) and hasattr(m, attr)]
    if bounds:
        text += " " + " and ".join(bounds)
    lengths = {attr: getattr(m, attr) for m in info.metadata for attr in ("min_length", "max_length")
               if isinstance(m, annotated_types.BaseMetadata) and getattr(m, attr, None) is not None}
    if lengths:  # `a string of 1 to 253 characters`
        low, high = lengths.get("min_length", 0), lengths.get("max_length")
        text += f" of {low} to {high} characters" if high is not None else f" of at least {low} characters"
    if _allows_none(info.annotation):
        text += ", or null"
    return text


def _allows_none(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _allows_none(typing.get_args(annotation)[0])
    return origin in (Union, types.UnionType) and type(None) in typing.get_args(annotation)


def _unknown_key_hint(root: type[BaseModel], loc: Sequence[str | int]) -> str:
    key = str(loc[-1])
    elsewhere = _sections_of(key, root)  # the exact key in another section says more than a near one here
    if elsewhere:
        return f"unknown key here (it belongs under {' or '.join(elsewhere)})"
    owner = _model_at(root, loc[:-1])
    allowed = list(owner.model_fields) if owner is not None else []
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if not close:  # a key without its unit: `ttft` for `ttft_seconds`
        close = sorted((name for name in allowed if name.startswith(key + "_")), key=len)[:1]
    if close:
        return f"unknown key (did you mean {close[0]}?)"
    return "unknown key"


def _sections_of(key: str, root: type[BaseModel]) -> list[str]:
    """Where else in the document `key` is valid: the sections `root` lists in its `key_sections`."""
    places: tuple[tuple[str, type[BaseModel]], ...] = getattr(root, "key_sections", ())
    return [where for where, model in places if key in model.model_fields]


def _fmt_number(value: object) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def _fmt_value(value: object) -> str:
    """A value as one short line, YAML-flavoured: null, true, 600, llm/qwen, "600" (a string)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        text = repr(value)
    elif isinstance(value, str):
        text = value if _plain_string(value) else json.dumps(value)
    else:
        text = _bounded_json(value, 61)
    return text if len(text) <= 60 else text[:57] + "..."


def _bounded_json(value: object, limit: int) -> str:
    """JSON of `value`, but stop once `limit` characters are out: a YAML alias bomb (a few
    lines that expand to billions of nodes) must not be serialised whole to show 60 of them."""
    parts: list[str] = []
    size = 0

    def walk(v: object) -> None:
        nonlocal size
        if size > limit:
            return
        if isinstance(v, dict):
            emit("{")
            for i, (k, item) in enumerate(v.items()):
                if size > limit:
                    return
                emit((", " if i else "") + json.dumps(str(k)) + ": ")
                walk(item)
            emit("}")
        elif isinstance(v, list | tuple):
            emit("[")
            for i, item in enumerate(v):
                if size > limit:
                    return
                if i:
                    emit(", ")
                walk(item)
            emit("]")
        else:
            try:
                emit(json.dumps(v, default=str))
            except (TypeError, ValueError):
                emit(repr(v))

    def emit(text: str) -> None:
        nonlocal size
        parts.append(text)
        size += len(text)

    walk(value)
    return "".join(parts)


def _plain_string(value: str) -> bool:
    """True when the string reads back as itself (so quoting it would only add noise)."""
    if not value or value != value.strip() or not value.isprintable():
        return False
    try:
        return bool(load_yaml(value) == value)  # bounded: a string may read as a deep or aliased document
    except yaml.YAMLError:
        return False


def _one_line(text: str) -> str:
    return " ".join(text.split()) if any(c in text for c in "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029") else text


def _kind(value: object) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return f"a {type(value).__name__}"
