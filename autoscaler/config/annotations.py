"""Annotations on a target Deployment, merged over the ConfigMap: a team pauses or bounds its own
Deployment without editing the central ConfigMap.

Scheme (docs/annotations.md): one annotation per key, `vllm-queue-autoscaler.io/<key>`, where
`<key>` is the ConfigMap's policy key verbatim (`max_replicas`, `slo.ttft_seconds`: a nested key
dotted), plus `vllm-queue-autoscaler.io/paused: "true"`. A value is a string read as one scalar
(`2`, `0.5`, `null`, `true`; anything else stays a string) and validated by the same models
as the ConfigMap, so its problem reads the same: `vllm-queue-autoscaler.io/max_replicas = 0,
must be an integer >= 1 and <= 10000`.

Precedence, key by key: built-in default < ConfigMap `defaults` < the ConfigMap's target entry
< the Deployment's annotations. An invalid policy annotation (a bad value, an unknown key, or an
effective policy that does not validate, such as `min_replicas` above the ConfigMap's
`max_replicas`) leaves the target on its ConfigMap policy, every policy annotation ignored: a
half-applied set (a new minimum without its new maximum) is no one's intent. A valid `paused`
is honoured even then: pausing never writes, so it is always safe.

`vllm-queue-autoscaler.io/managed` and `vllm-queue-autoscaler.io/lint-ignore` are not policy:
`autoscaler lint` reads them, and the controller warns about a Deployment marked managed that no
`targets` entry lists and no `target_selector` finds.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from autoscaler.config.messages import _fmt_value, _problem_lines
from autoscaler.config.model import (
    BUILTIN,
    CONFIGMAP_DEFAULTS,
    CONFIGMAP_TARGET,
    POLICY_KEYS,
    AutoscalerConfig,
    PolicyOverrides,
    TargetConfig,
    merge_policy,
)
from autoscaler.policy.params import PolicyParams

__all__ = [
    "ANNOTATION", "BUILTIN", "CONFIGMAP_DEFAULTS", "CONFIGMAP_TARGET", "LINT_IGNORE", "MANAGED", "NOT_POLICY",
    "PAUSED", "PREFIX", "SOURCES", "TargetSettings", "flatten", "key_problems", "managed", "not_allowed", "paused", "policy_annotations",
    "resolve", "scalar", "sources",
]

PREFIX = "vllm-queue-autoscaler.io/"
PAUSED = PREFIX + "paused"
MANAGED = PREFIX + "managed"
LINT_IGNORE = PREFIX + "lint-ignore"
NOT_POLICY = frozenset({PAUSED, MANAGED, LINT_IGNORE})
"""Annotations under the prefix that are not policy keys."""

ANNOTATION = "annotation"
SOURCES = (BUILTIN, CONFIGMAP_DEFAULTS, CONFIGMAP_TARGET, ANNOTATION)
"""Where an effective value comes from, lowest precedence first."""

_INT = re.compile(r"[-+]?[0-9]+")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_KEY_OF_LINE = re.compile(r"([A-Za-z_][\w.]*) = ")


@dataclass(frozen=True)
class TargetSettings:
    """A target's effective settings: its policy, whether it is paused, where each policy value
    came from, and the problems of its annotations (empty: all applied)."""

    policy: PolicyParams
    paused: bool = False
    sources: dict[str, str] = field(default_factory=dict)
    """Every policy key (`slo.ttft_seconds` dotted) -> one of SOURCES."""
    problems: tuple[str, ...] = ()
    annotations: dict[str, Any] = field(default_factory=dict)
    """The policy keys the annotations set (dotted), as applied: empty when a problem voided them."""

    def overridden(self) -> dict[str, str]:
        """The keys whose value is not the built-in one's source, with their source (for a log line)."""
        return {key: source for key, source in self.sources.items() if source != BUILTIN}


def scalar(text: str) -> Any:
    """An annotation's string as one scalar: `null`, `~` or empty -> None; `true`/`false` (any
    case) -> bool; an integer; a finite decimal number; anything else the string itself (so
    that the model says what it should be)."""
    value = text.strip()
    lowered = value.lower()
    if lowered in ("", "null", "~"):
        return None
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        if _INT.fullmatch(value):
            return int(value)
        if _FLOAT.fullmatch(value):
            number = float(value)
            return number if math.isfinite(number) else value
    except ValueError:  # an integer of more digits than int() converts (sys.get_int_max_str_digits)
        pass
    return value


def _nested(flat: Mapping[str, Any]) -> dict[str, Any]:
    """`{"slo.ttft_seconds": 1}` -> `{"slo": {"ttft_seconds": 1}}` (one level, as PolicyParams nests)."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        head, dot, rest = key.partition(".")
        if dot and rest:
            section = out.setdefault(head, {})
            if isinstance(section, dict):
                section[rest] = value
            else:  # `slo` given whole and `slo.x` too: the model reports `slo`
                continue
        else:
            out[key] = value
    return out


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"slo": {"ttft_seconds": 1}}` -> `{"slo.ttft_seconds": 1}`."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def policy_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    """The annotations under PREFIX that name a policy key (not paused, managed, lint-ignore),
    keyed by that key (`max_replicas`, `slo.ttft_seconds`), sorted."""
    return {name[len(PREFIX):]: value for name, value in sorted(annotations.items())
            if name.startswith(PREFIX) and name not in NOT_POLICY}


def paused(annotations: Mapping[str, str]) -> tuple[bool, str | None]:
    """(paused?, the problem of the annotation's value, if any). Absent = not paused."""
    raw = annotations.get(PAUSED)
    if raw is None:
        return False, None
    value = raw.strip().lower()
    if value in ("true", "false"):
        return value == "true", None
    return False, f'{PAUSED} = {_fmt_value(raw)}, must be "true" or "false"'


def key_problems(annotations: Mapping[str, str]) -> list[str]:
    """The problems each annotation has on its own (a bad `paused`, an unknown key, a value out
    of its range), in the ConfigMap's words; not the rules between keys, which depend on the
    ConfigMap the annotations are merged over. For a check without the cluster (`autoscaler
    lint`).

    Worked example: paused "yes", max_replicas "0": two lines, `... paused = "yes", must be
    "true" or "false"` and `... max_replicas = 0, must be >= 1`; min_replicas "20" alone: none
    (whether it exceeds max_replicas depends on the ConfigMap).
    """
    problem = paused(annotations)[1]
    problems = [problem] if problem else []
    nested = _nested({key: scalar(value) for key, value in policy_annotations(annotations).items()})
    try:
        PolicyOverrides.model_validate(nested)
    except ValidationError as exc:
        problems += [PREFIX + line for line in _problem_lines(exc.errors(), root=PolicyOverrides, data=nested)]
    return problems


def not_allowed(raw: Mapping[str, str], allowed: list[str] | None) -> list[str]:
    """One line per policy annotation whose key `controller.annotation_keys` does not list (None:
    every key is allowed). A refused key leaves the target on its ConfigMap policy, as an invalid
    one does: the ConfigMap's owner decides what teams may change (Knative caps its per-revision
    annotations the same way, with max-scale-limit).

    Worked example: allowed [min_replicas, max_replicas], annotations max_replicas "6" and
    max_gpus "16": one line, `vllm-queue-autoscaler.io/max_gpus = 16, not allowed here
    (controller.annotation_keys: min_replicas, max_replicas)`; allowed None: none.
    """
    if allowed is None:
        return []
    listed = ", ".join(allowed) or "none"
    return [f"{PREFIX}{key} = {_fmt_value(scalar(value))}, not allowed here (controller.annotation_keys: {listed})"
            for key, value in raw.items() if key not in allowed and key in POLICY_KEYS]


def resolve(config: AutoscalerConfig, target: TargetConfig, annotations: Mapping[str, str]) -> TargetSettings:
    """The effective settings of `target` (listed in `config`, or found by its selector) whose
    Deployment carries `annotations`. Never raises on a bad annotation: it is a problem line,
    and the target keeps its ConfigMap policy."""
    is_paused, pause_problem = paused(annotations)
    problems = [pause_problem] if pause_problem else []
    base = config.base_policy(target)
    raw = policy_annotations(annotations)
    applied: dict[str, Any] = {}
    policy = base
    refused = not_allowed(raw, config.controller.annotation_keys)
    if refused:
        problems += refused
    elif raw:
        parsed = {key: scalar(value) for key, value in raw.items()}
        checked = _validate(config, target, parsed)
        if isinstance(checked, PolicyParams):
            applied, policy = parsed, checked
        else:
            problems += checked
    return TargetSettings(policy=policy, paused=is_paused, sources=sources(config, target, applied),
                          problems=tuple(problems), annotations=applied)


def _configmap_policy(config: AutoscalerConfig, target: TargetConfig) -> dict[str, Any]:
    """The ConfigMap's keys for `target`: `defaults` merged with its entry (if listed)."""
    listed = config.find_target(*target.key)
    return merge_policy(config.defaults.as_dict(), listed.overrides() if listed is not None else {})


def _validate(config: AutoscalerConfig, target: TargetConfig, parsed: Mapping[str, Any]) -> PolicyParams | list[str]:
    """The effective policy when the annotations are valid, alone and over the ConfigMap's
    policy; else one line per problem, in the ConfigMap's words with the annotation's name as
    the key."""
    nested = _nested(parsed)
    try:
        PolicyOverrides.model_validate(nested)
    except ValidationError as exc:
        return [PREFIX + line for line in _problem_lines(exc.errors(), root=PolicyOverrides, data=nested)]
    try:
        return PolicyParams.model_validate(merge_policy(_configmap_policy(config, target), nested))
    except ValidationError as exc:
        lines = []
        for line in _problem_lines(exc.errors(), root=PolicyParams):
            match = _KEY_OF_LINE.match(line)
            if match and match.group(1) in parsed:
                lines.append(PREFIX + line)
            else:  # a cross-field rule on a key the ConfigMap set: name the annotations in play
                given = ", ".join(f"{PREFIX}{key} = {_fmt_value(value)}" for key, value in parsed.items())
                lines.append(f"{line} in the effective policy of {target.name} with {given}")
        return lines


def sources(config: AutoscalerConfig, target: TargetConfig, applied: Mapping[str, Any]) -> dict[str, str]:
    """Every policy key (dotted, in PolicyParams order) -> where its effective value comes from."""
    out = config.configmap_sources(target)
    for key in applied:
        if key in out:
            out[key] = ANNOTATION
    return out


def managed(annotations: Mapping[str, str]) -> bool:
    """Whether the Deployment is marked `vllm-queue-autoscaler.io/managed: "true"`."""
    return annotations.get(MANAGED, "").strip().lower() == "true"
