"""The PromQL the controller sends: one instant query per vLLM signal whatever the number of
targets, and how their results become per-pod samples."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Final

from autoscaler.adapters.prometheus.errors import PrometheusBadResponse
from autoscaler.adapters.prometheus.parsing import Sample
from autoscaler.adapters.prometheus.promql import quote_string, regex_matcher
from autoscaler.policy.types import MetricSample

_LOG = logging.getLogger(__name__)

WAITING_METRIC: Final = "vllm:num_requests_waiting"
COMPLETED_METRIC: Final = "vllm:request_success_total"  # counter, label finished_reason
RUNNING_METRIC: Final = "vllm:num_requests_running"
KV_METRIC: Final = "vllm:kv_cache_usage_perc"  # vLLM >= 0.9.2
KV_METRIC_LEGACY: Final = "vllm:gpu_cache_usage_perc"  # deprecated 0.9.2, removed 0.12.0

FIELD_LABEL: Final = "vqa_field"  # tags each result series as "value" or "timestamp"
_VALUE: Final = "value"
_TIMESTAMP: Final = "timestamp"

# signal key -> (metric name, aggregation over engines)
SIGNALS: Final[Mapping[str, tuple[str, str]]] = {
    "waiting": (WAITING_METRIC, "sum"),
    "running": (RUNNING_METRIC, "sum"),
    "kv": (KV_METRIC, "max"),
    "kv_legacy": (KV_METRIC_LEGACY, "max"),
    "completed": (COMPLETED_METRIC, "rate"),
}

# --------------------------------------------------------------------------- queries


def _tag(expr: str, field: str) -> str:
    # label_replace with an empty source label and an empty regex always matches: sets the tag.
    return f'label_replace({expr}, "{FIELD_LABEL}", "{field}", "", "")'


def _signal_query(metric: str, aggregation: str, namespace_matcher: str, rate_window: str) -> str:
    selector = f"{metric}{{{namespace_matcher}}}"
    series = "namespace, pod, engine"
    per_engine = f"max by ({series}) ({selector})"
    if aggregation == "rate":
        series = "namespace, pod, engine, finished_reason"
        value = f"sum by (namespace, pod) (max by ({series}) (rate({selector}[{rate_window}])))"
    elif aggregation == "sum":
        value = f"sum by (namespace, pod) ({per_engine})"
    elif aggregation == "max":
        nan_engines = f"({per_engine} != {per_engine})"
        value = (
            f"(max by (namespace, pod) ({per_engine}) unless on (namespace, pod) {nan_engines})"
            f" or sum by (namespace, pod) {nan_engines}"
        )
    else:  # pragma: no cover - SIGNALS is a constant
        raise ValueError(aggregation)
    timestamp = f"min by (namespace, pod) (max by ({series}) (timestamp({selector})))"
    return f"{_tag(value, _VALUE)} or {_tag(timestamp, _TIMESTAMP)}"


def _check_rate_window(seconds: int) -> None:
    if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 1:
        raise ValueError(f"rate_window_seconds must be a positive integer, got {seconds!r}")


def build_queries(namespaces: Sequence[str], rate_window_seconds: int = 60) -> dict[str, str]:
    """The PromQL of one fetch, keyed like `SIGNALS`. Pure; raises ValueError on no/empty namespace."""
    _check_rate_window(rate_window_seconds)
    if isinstance(namespaces, str):
        raise TypeError("namespaces must be a sequence of names, not a string")
    if not namespaces:
        raise ValueError("no namespace to query")
    for ns in namespaces:
        if not isinstance(ns, str) or not ns:
            raise ValueError(f"invalid namespace {ns!r}")
    matcher = regex_matcher("namespace", namespaces)
    window = f"{rate_window_seconds}s"
    return {key: _signal_query(metric, agg, matcher, window) for key, (metric, agg) in SIGNALS.items()}


def build_target_queries(namespace: str, pod_regex: str, rate_window_seconds: int = 60) -> dict[str, str]:
    """The PromQL of `build_queries`, restricted to the pods of one namespace whose name matches
    the RE2 regex `pod_regex` (anchored by Prometheus): what `autoscaler record` evaluates
    over a range, so that each step holds exactly what a live `fetch()` at that instant reads.
    Pure; raises ValueError on an empty namespace or regex."""
    _check_rate_window(rate_window_seconds)
    if not isinstance(namespace, str) or not namespace:
        raise ValueError(f"invalid namespace {namespace!r}")
    if not isinstance(pod_regex, str) or not pod_regex:
        raise ValueError(f"invalid pod regex {pod_regex!r}")
    matcher = f"{regex_matcher('namespace', [namespace])}, pod=~{quote_string(pod_regex)}"
    window = f"{rate_window_seconds}s"
    return {key: _signal_query(metric, agg, matcher, window) for key, (metric, agg) in SIGNALS.items()}


def _per_pod(samples: list[Sample], what: str) -> dict[tuple[str, str], MetricSample]:
    """Join the tagged value/timestamp series of one signal query into samples per pod."""
    values: dict[tuple[str, str], float] = {}
    stamps: dict[tuple[str, str], float] = {}
    skipped = 0
    for labels, value, _eval_time in samples:
        field = labels.get(FIELD_LABEL)
        if field == _VALUE:
            target = values
        elif field == _TIMESTAMP:
            target = stamps
        else:
            raise PrometheusBadResponse(f"{what}: series without a valid {FIELD_LABEL} label: {labels}")
        ns, pod = labels.get("namespace", ""), labels.get("pod", "")
        if not ns or not pod:
            skipped += 1
            continue
        key = (ns, pod)
        if key in target:
            raise PrometheusBadResponse(f"{what}: two {field} series for pod {ns}/{pod}")
        target[key] = value
    if skipped:
        _LOG.debug("%s: %d series without namespace/pod label skipped", what, skipped)
    # A pod needs both halves, else it is absent for this signal. For gauges both come from
    # the same instant selector and always pair up; rate() legitimately has only one half:
    # a timestamp without a rate when the window holds a single sample, and a rate without
    # a timestamp for up to a window after the pod went away (range selectors keep the
    # samples before a staleness marker, instant selectors drop the series at once).
    unpaired = values.keys() ^ stamps.keys()
    if unpaired:
        _LOG.debug("%s: %d pods with only a value or only a timestamp: absent", what, len(unpaired))
    out: dict[tuple[str, str], MetricSample] = {}
    for key, value in values.items():
        if key not in stamps:
            continue
        ts = stamps[key]
        if not math.isfinite(ts):
            raise PrometheusBadResponse(f"{what}: sample timestamp {ts!r} of {key[0]}/{key[1]} is not finite")
        out[key] = MetricSample(value=value, timestamp=ts)
    return out
