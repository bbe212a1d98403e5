"""The autoscaler's ConfigMap document: typed, validated and defaulted in this one place.

Shape (YAML)::

    controller:          # how the controller itself runs (ControllerSettings)
      tick_seconds: 15
      prometheus: {url: ..., timeout_seconds: 5, bearer_token_file: null, ...}
      ...
    defaults:            # any subset of PolicyParams keys
      scale_down_window_seconds: 600
    targets:             # may be empty: the controller then idles
      - namespace: llm
        deployment: qwen3-8b
        max_replicas: 8  # any PolicyParams key, overriding `defaults` for this target

The policy keys are never listed here: `PolicyOverrides` and `TargetConfig` are generated from the
fields of `PolicyParams` (same types, same ranges), every key optional. The effective policy of a
target is `PolicyParams(**{**defaults, **target overrides})`, validated as a whole.

Every problem is reported as one line `key = value, must be ...` where `key` is the dotted path in
the document (`targets[0].max_replicas`); ranges in those lines come from the models' `Field`
constraints, never from text written per key.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import os
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Union

import annotated_types
import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from autoscaler.policy.params import PolicyParams

__all__ = [
    "AutoscalerConfig",
    "ConfigError",
    "ConfigWatcher",
    "ControllerSettings",
    "PolicyOverrides",
    "PrometheusSettings",
    "TargetConfig",
    "format_path",
    "load_config_file",
    "load_config_text",
]

_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)
"""Every model of the document: unknown keys are errors, no silent coercion (`"5"`, `true` and
`2.0` are not integers), immutable once loaded."""


# --- errors -------------------------------------------------------------------------------------


class ConfigError(Exception):
    """The document is unusable. `problems` holds one line per problem, `key = value, must be ...`
    (or `<source>: ...` for problems of the document as a whole: unreadable, invalid YAML, empty)."""

    def __init__(self, problems: Sequence[str], *, source: str = "<string>") -> None:
        self.problems: list[str] = list(dict.fromkeys(problems))  # de-duplicated, in order
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


# --- Kubernetes names ----------------------------------------------------------------------------

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _dns_label(value: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.fullmatch(value):
        raise PydanticCustomError(
            "dns1123_label",
            "must be a DNS-1123 label (lowercase a-z, 0-9 and '-', alphanumeric at both ends, "
            "at most 63 characters)",
        )
    return value


def _dns_subdomain(value: str) -> str:
    if len(value) > 253 or not _DNS_SUBDOMAIN.fullmatch(value):
        raise PydanticCustomError(
            "dns1123_subdomain",
            "must be a DNS-1123 subdomain (lowercase a-z, 0-9, '-' and '.', alphanumeric at both ends, "
            "at most 253 characters)",
        )
    return value


def _absolute_path(value: str | None) -> str | None:
    if value is not None and not os.path.isabs(value):
        raise PydanticCustomError("absolute_path", "must be an absolute path (or null)")
    return value


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
DnsSubdomain = Annotated[str, AfterValidator(_dns_subdomain)]
AbsolutePath = Annotated[str | None, AfterValidator(_absolute_path)]


# --- controller settings ------------------------------------------------------------------------


class PrometheusSettings(BaseModel):
    """Where and how the controller queries Prometheus."""

    model_config = _STRICT

    url: str = Field(
        default="http://prometheus-operated.monitoring.svc:9090",
        description="Base URL of the Prometheus HTTP API (http:// or https://).",
    )
    timeout_seconds: float = Field(default=5.0, gt=0.0, le=300.0, description="Timeout of one query.")
    bearer_token_file: AbsolutePath = Field(
        default=None, description="File holding a bearer token (the token itself is never in the ConfigMap)."
    )
    ca_file: AbsolutePath = Field(default=None, description="PEM CA bundle to verify an https:// Prometheus.")
    insecure_skip_tls_verify: bool = Field(default=False, description="Do not verify Prometheus' certificate.")
    rate_window_seconds: int = Field(
        default=60, ge=2, le=3600,
        description="Window of rate(vllm:request_success_total[...]), the per-pod throughput; >= 4 scrape intervals.",
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not re.fullmatch(r"https?://[^\s/?#]+(/[^\s]*)?", value):
            raise PydanticCustomError("http_url", "must be an http:// or https:// URL")
        return value


class ControllerSettings(BaseModel):
    """How the controller itself runs (not how it scales: that is `PolicyParams`)."""

    model_config = _STRICT

    tick_seconds: float = Field(
        default=15.0, ge=1.0, le=3600.0, description="One decision round per target every tick."
    )
    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings)
    metrics_port: int = Field(default=9102, ge=1, le=65535, description="Port of /metrics, /healthz and /readyz.")
    state_configmap: DnsSubdomain = Field(
        default="vllm-queue-autoscaler-state", description="ConfigMap where learned lead times are kept."
    )
    namespace: DnsLabel = Field(
        default="vllm-queue-autoscaler",
        description="The controller's own namespace (env POD_NAMESPACE overrides it at runtime).",
    )

    @field_validator("prometheus", mode="before")
    @classmethod
    def _null_is_empty(cls, value: object) -> object:
        return {} if value is None else value

    @model_validator(mode="after")
    def _timeout_within_tick(self) -> ControllerSettings:
        if self.prometheus.timeout_seconds > self.tick_seconds:
            raise ValueError(
                f"prometheus.timeout_seconds = {_fmt_number(self.prometheus.timeout_seconds)}, "
                f"must be <= tick_seconds ({_fmt_number(self.tick_seconds)})"
            )
        return self


# --- policy overrides, generated from PolicyParams -----------------------------------------------


class _PolicyOverridesBase(BaseModel):
    model_config = _STRICT

    def as_dict(self) -> dict[str, Any]:
        """The policy keys the document sets, in `PolicyParams` order (an explicit `null` counts)."""
        return {k: getattr(self, k) for k in PolicyParams.model_fields if k in self.model_fields_set}


class _TargetConfigBase(BaseModel):
    model_config = _STRICT

    namespace: DnsLabel = Field(description="Namespace of the vLLM Deployment.")
    deployment: DnsSubdomain = Field(description="Name of the vLLM Deployment.")

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.deployment)

    @property
    def name(self) -> str:
        return f"{self.namespace}/{self.deployment}"

    def overrides(self) -> dict[str, Any]:
        """The policy keys this target sets, in `PolicyParams` order."""
        return {k: getattr(self, k) for k in PolicyParams.model_fields if k in self.model_fields_set}


def _optional_policy_fields() -> dict[str, Any]:
    """Every `PolicyParams` field with its type and constraints, but not required (unset = inherit)."""
    fields: dict[str, Any] = {}
    for name, info in PolicyParams.model_fields.items():
        annotation: Any = info.annotation
        if info.metadata:
            annotation = Annotated[(annotation, *info.metadata)]
        fields[name] = (annotation, Field(None, description=info.description))
    return fields


if TYPE_CHECKING:
    PolicyOverrides = _PolicyOverridesBase
    TargetConfig = _TargetConfigBase
else:
    PolicyOverrides = create_model(
        "PolicyOverrides",
        __base__=_PolicyOverridesBase,
        __doc__="Any subset of the PolicyParams keys, each validated like PolicyParams does.",
        **_optional_policy_fields(),
    )
    TargetConfig = create_model(
        "TargetConfig",
        __base__=_TargetConfigBase,
        __doc__="One vLLM Deployment to autoscale, with optional overrides of any PolicyParams key.",
        **_optional_policy_fields(),
    )


# --- the document --------------------------------------------------------------------------------


class AutoscalerConfig(BaseModel):
    """The whole ConfigMap document. Constructing one validates every target's effective policy."""

    model_config = _STRICT

    controller: ControllerSettings = Field(default_factory=ControllerSettings)
    defaults: PolicyOverrides = Field(default_factory=PolicyOverrides)
    targets: list[TargetConfig] = Field(description="Deployments to autoscale; [] = idle.")

    _policies: dict[tuple[str, str], PolicyParams] = PrivateAttr(default_factory=dict)

    @field_validator("controller", "defaults", mode="before")
    @classmethod
    def _null_is_empty(cls, value: object) -> object:
        # A section whose keys are all commented out is YAML null: treat it as empty.
        return {} if value is None else value

    @field_validator("targets", mode="before")
    @classmethod
    def _null_is_no_targets(cls, value: object) -> object:
        return [] if value is None else value

    @model_validator(mode="after")
    def _effective_policies(self) -> AutoscalerConfig:
        problems: list[str] = []
        first_index: dict[tuple[str, str], int] = {}
        defaults = self.defaults.as_dict()
        for i, target in enumerate(self.targets):
            where = f"targets[{i}]"
            if target.key in first_index:
                problems.append(
                    f"{where} = {target.name}, must be unique (namespace, deployment), "
                    f"already at targets[{first_index[target.key]}]"
                )
                continue
            first_index[target.key] = i
            try:
                self._policies[target.key] = PolicyParams.model_validate({**defaults, **target.overrides()})
            except ValidationError as exc:
                for line in _problem_lines(exc.errors(), root=PolicyParams):
                    problems.append(f"{where}.{line} in the effective policy of {target.name}")
        if problems:
            raise _Problems(problems)
        return self

    def policy_for(self, target: TargetConfig) -> PolicyParams:
        """The effective policy of one of this config's targets (`defaults` merged with its overrides)."""
        try:
            return self._policies[target.key]
        except KeyError:
            raise KeyError(f"{target.name} is not a target of this config") from None

    def effective_policies(self) -> Iterator[tuple[TargetConfig, PolicyParams]]:
        """Every target, in document order, with its effective policy."""
        for target in self.targets:
            yield target, self._policies[target.key]

    def find_target(self, namespace: str, deployment: str) -> TargetConfig | None:
        for target in self.targets:
            if target.key == (namespace, deployment):
                return target
        return None

    def warnings(self) -> list[str]:
        """Valid but probably unintended settings, one line each (the config is still used)."""
        notes: list[str] = []
        if not self.targets:
            notes.append("targets = [], no targets: the controller runs but scales nothing")
        prom = self.controller.prometheus
        if prom.insecure_skip_tls_verify and prom.ca_file is not None:
            notes.append(
                "controller.prometheus.ca_file = "
                f"{_fmt_value(prom.ca_file)}, ignored because insecure_skip_tls_verify is true"
            )
        return notes


# --- loading -------------------------------------------------------------------------------------


def load_config_text(text: str, source: str = "<string>") -> AutoscalerConfig:
    """Parse and validate one document; raise `ConfigError` listing every problem found."""
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError([_yaml_problem(exc, source)], source=source) from None
    if data is None:
        raise ConfigError(
            [f"{source}: empty document, must be a mapping with keys controller, defaults, targets"],
            source=source,
        )
    if not isinstance(data, dict):
        raise ConfigError(
            [f"{source}: document is {_kind(data)}, must be a mapping with keys controller, defaults, targets"],
            source=source,
        )
    try:
        return AutoscalerConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_problem_lines(exc.errors(), root=AutoscalerConfig, data=data), source=source) from None


def load_config_file(path: str | os.PathLike[str]) -> AutoscalerConfig:
    """Read and validate the document at `path` (UTF-8); unreadable -> `ConfigError` of one line."""
    source = os.fspath(path)
    return load_config_text(_read_text(source), source=source)


def _read_text(source: str) -> str:
    try:
        return Path(source).read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError([f"{source}: cannot read: {exc.strerror or exc}"], source=source) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{source}: cannot read: not UTF-8 ({exc.reason} at byte {exc.start})"], source=source) from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key repeated in one mapping (PyYAML silently keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # unhashable key: let SafeLoader report it
                continue
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {first.start_mark.line + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def _yaml_problem(exc: yaml.YAMLError, source: str) -> str:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        what = ": ".join(p for p in (exc.context, exc.problem) if p)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        return _one_line(f"{where}: invalid YAML: {what}")
    return _one_line(f"{source}: invalid YAML: {exc}")


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
            lines.append(f"{path} = {_fmt_value(value)}, must be {_expected(info, _TYPE_ERRORS[kind])}")
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


def format_path(loc: Sequence[str | int]) -> str:
    """`("targets", 0, "max_replicas")` -> `targets[0].max_replicas`; odd keys are quoted."""
    out = ""
    previous: str | int | None = None
    for part in loc:
        if isinstance(part, int) and previous == "targets":
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
    owner = _model_at(root, loc[:-1])
    allowed = list(owner.model_fields) if owner is not None else []
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if close:
        return f"unknown key (did you mean {close[0]}?)"
    elsewhere = _sections_of(key, root)
    if elsewhere:
        return f"unknown key here (it belongs under {' or '.join(elsewhere)})"
    return "unknown key"


def _sections_of(key: str, root: type[BaseModel]) -> list[str]:
    if root is not AutoscalerConfig:
        return []
    places: list[tuple[str, type[BaseModel]]] = [("controller", ControllerSettings), ("controller.prometheus", PrometheusSettings),
              ("defaults or a target", PolicyOverrides)]
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
        return bool(yaml.safe_load(value) == value)
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


# --- live reload ---------------------------------------------------------------------------------


class ConfigWatcher:
    """The last good config of a file that may change under us (a mounted ConfigMap).

    The kubelet updates a mounted ConfigMap by writing a new timestamped directory and atomically
    swapping the `..data` symlink, so the file's own mtime is no signal: `poll()` re-reads the file
    and compares a hash of its content. An invalid new version is rejected once (counted in
    `rejected_total`, kept in `last_error`) and the last good config stays in force; a valid one
    replaces `current`, bumps `generation` and calls `on_change(old, new)`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        on_change: Callable[[AutoscalerConfig, AutoscalerConfig], None] | None = None,
    ) -> None:
        """Load the file now; raise `ConfigError` if it is invalid (the controller must not start)."""
        self.path = os.fspath(path)
        self.on_change = on_change
        text = _read_text(self.path)
        self.current: AutoscalerConfig = load_config_text(text, source=self.path)
        self.content_hash: str = _digest(text)
        """Hash of the content `current` was loaded from."""
        self.generation: int = 1  # 1 = the initial load; +1 per applied change
        self.rejected_total: int = 0
        self.last_error: ConfigError | None = None
        self._seen_hash = self.content_hash  # last content examined, good or bad

    def poll(self) -> bool:
        """Re-read the file; return True when a new valid config replaced `current`.

        Each distinct bad version (or read failure) is counted once, however many ticks it stays.
        """
        error: ConfigError | None = None
        try:
            text = _read_text(self.path)
            digest = _digest(text)
        except ConfigError as exc:
            text, digest, error = "", _digest("\0unreadable\0" + str(exc)), exc
        if digest == self._seen_hash:
            return False
        self._seen_hash = digest
        if error is None:
            try:
                new = load_config_text(text, source=self.path)
            except ConfigError as exc:
                error = exc
        if error is not None:
            self.rejected_total += 1
            self.last_error = error
            return False
        self.last_error = None
        if digest == self.content_hash:  # back to the version in force after a rejected one
            return False
        old, self.current, self.content_hash = self.current, new, digest
        self.generation += 1
        if self.on_change is not None:
            self.on_change(old, new)
        return True


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
