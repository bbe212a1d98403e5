"""The PromQL the controller sends: one instant query per vLLM signal whatever the number of
targets, and how their results become per-pod samples."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from typing import Final

from autoscaler.adapters.prometheus.errors import PrometheusBadResponse
from autoscaler.adapters.prometheus.parsing import Sample
from autoscaler.adapters.prometheus.promql import quote_string, regex_matcher
from autoscaler.policy.types import LatencyHistogram, MetricSample

_LOG = logging.getLogger(__name__)

WAITING_METRIC: Final = "vllm:num_requests_waiting"
COMPLETED_METRIC: Final = "vllm:request_success_total"  # counter, label finished_reason
RUNNING_METRIC: Final = "vllm:num_requests_running"
KV_METRIC: Final = "vllm:kv_cache_usage_perc"  # vLLM >= 0.9.2
KV_METRIC_LEGACY: Final = "vllm:gpu_cache_usage_perc"  # deprecated 0.9.2, removed 0.12.0
PROMPT_TOKENS_METRIC: Final = "vllm:prompt_tokens_total"  # counter
GENERATION_TOKENS_METRIC: Final = "vllm:generation_tokens_total"  # counter
TTFT_METRIC: Final = "vllm:time_to_first_token_seconds"  # histogram
TPOT_METRIC: Final = "vllm:request_time_per_output_token_seconds"  # histogram, per request, vLLM >= 0.11
TPOT_METRIC_LEGACY: Final = "vllm:time_per_output_token_seconds"  # histogram, per token; removed by 0.16
QUEUE_TIME_METRIC: Final = "vllm:request_queue_time_seconds"  # histogram, time in WAITING

MAX_HISTOGRAM_BUCKETS: Final = 64
"""Buckets of one pod's histogram (vLLM has at most 22): a pod with more gets None."""

FIELD_LABEL: Final = "vqa_field"  # tags each result series as "value" or "timestamp"
UNIT_LABEL: Final = "vqa_unit"  # "token" on the buckets of a histogram that counts tokens, not requests
PER_TOKEN_FAMILIES: Final = frozenset({TPOT_METRIC_LEGACY})
"""Histogram families observed once per output token (vLLM <= 0.10's TPOT), not once per request:
their counts are rescaled to the pod's finished requests (`per_request`) before they are summed
with per-request histograms or held against a requests/s minimum."""
_VALUE: Final = "value"
_TIMESTAMP: Final = "timestamp"

SERVER_LABELS: Final = "engine, model_name"
"""What tells one vLLM engine's series from another's in a pod: its engine index and the model
it serves (two servers in one pod both number their engine 0). The queries first take the max
over series equal in these (one engine scraped by two jobs), then add or max the engines."""

# signal key -> (metric name, aggregation over engines)
SIGNALS: Final[Mapping[str, tuple[str, str]]] = {
    "waiting": (WAITING_METRIC, "sum"),
    "running": (RUNNING_METRIC, "sum"),
    "kv": (KV_METRIC, "max"),
    "kv_legacy": (KV_METRIC_LEGACY, "max"),
    "completed": (COMPLETED_METRIC, "rate"),
    "prompt_tokens": (PROMPT_TOKENS_METRIC, "rate"),
    "generation_tokens": (GENERATION_TOKENS_METRIC, "rate"),
}

# histogram key -> histogram families, by preference per pod (a pod with a series of the first
# family gets that one, else the next)
HISTOGRAMS: Final[Mapping[str, tuple[str, ...]]] = {
    "ttft": (TTFT_METRIC,),
    "tpot": (TPOT_METRIC, TPOT_METRIC_LEGACY),
    "queue_time": (QUEUE_TIME_METRIC,),
}

QUERIES_PER_FETCH: Final = len(SIGNALS) + len(HISTOGRAMS)
"""Instant queries of one `fetch()`, whatever the number of namespaces, targets and pods."""

# --------------------------------------------------------------------------- queries


def _tag(expr: str, field: str) -> str:
    # label_replace with an empty source label and an empty regex always matches: sets the tag.
    return f'label_replace({expr}, "{FIELD_LABEL}", "{field}", "", "")'


def _signal_query(metric: str, aggregation: str, namespace_matcher: str, rate_window: str) -> str:
    selector = f"{metric}{{{namespace_matcher}}}"
    series = f"namespace, pod, {SERVER_LABELS}"
    per_engine = f"max by ({series}) ({selector})"
    if aggregation == "rate":
        if metric == COMPLETED_METRIC:
            series = f"namespace, pod, {SERVER_LABELS}, finished_reason"
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


def _histogram_parts(family: str, matcher: str, rate_window: str) -> tuple[str, str]:
    """(value, timestamp) expressions of one histogram family: per pod and `le`, the bucket
    rates summed over engines (the max over duplicated series of one engine first); per pod, the
    oldest engine's latest `+Inf` bucket sample time."""
    buckets = f"{family}_bucket{{{matcher}}}"
    value = f"sum by (namespace, pod, le) (max by (namespace, pod, {SERVER_LABELS}, le) (rate({buckets}[{rate_window}])))"
    if family in PER_TOKEN_FAMILIES:
        value = f'label_replace({value}, "{UNIT_LABEL}", "token", "", "")'
    inf_bucket = f'{family}_bucket{{{matcher}, le="+Inf"}}'
    timestamp = f"min by (namespace, pod) (max by (namespace, pod, {SERVER_LABELS}) (timestamp({inf_bucket})))"
    return value, timestamp


def _histogram_query(families: Sequence[str], matcher: str, rate_window: str) -> str:
    """One query for a histogram whatever the number of pods: the first family a pod has
    (by presence of its `+Inf` bucket series), `or`-ed per (namespace, pod)."""
    value, timestamp = _histogram_parts(families[0], matcher, rate_window)
    newer_stamps = timestamp
    for family in families[1:]:
        old_value, old_timestamp = _histogram_parts(family, matcher, rate_window)
        value = f"{value} or on (namespace, pod) ({old_value} unless on (namespace, pod) {newer_stamps})"
        timestamp = f"{timestamp} or {old_timestamp}"
        newer_stamps = f"({timestamp})"
    return f"{_tag(value, _VALUE)} or {_tag(timestamp, _TIMESTAMP)}"


def _all_queries(matcher: str, rate_window_seconds: int) -> dict[str, str]:
    window = f"{rate_window_seconds}s"
    queries = {key: _signal_query(metric, agg, matcher, window) for key, (metric, agg) in SIGNALS.items()}
    queries.update({key: _histogram_query(families, matcher, window) for key, families in HISTOGRAMS.items()})
    return queries


def _check_rate_window(seconds: int) -> None:
    if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 1:
        raise ValueError(f"rate_window_seconds must be a positive integer, got {seconds!r}")


def build_queries(namespaces: Sequence[str], rate_window_seconds: int = 60) -> dict[str, str]:
    """The PromQL of one fetch, keyed like `SIGNALS` then `HISTOGRAMS`. Pure; raises ValueError
    on no/empty namespace."""
    _check_rate_window(rate_window_seconds)
    if isinstance(namespaces, str):
        raise TypeError("namespaces must be a sequence of names, not a string")
    if not namespaces:
        raise ValueError("no namespace to query")
    for ns in namespaces:
        if not isinstance(ns, str) or not ns:
            raise ValueError(f"invalid namespace {ns!r}")
    return _all_queries(regex_matcher("namespace", namespaces), rate_window_seconds)


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
    return _all_queries(matcher, rate_window_seconds)


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


_LE_RE: Final = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")


def _parse_le(raw: str | None) -> float | None:
    """A bucket's upper bound as Prometheus clients write it ("+Inf", "1", "1.0", "2.5e+00"),
    or None when it is none of these (or negative, or NaN)."""
    if raw in ("+Inf", "Inf"):
        return math.inf
    if raw is None or not _LE_RE.match(raw):
        return None
    bound = float(raw)
    return bound if bound >= 0 else None


def _buckets_of(raw: Sequence[tuple[str | None, float]]) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """Bounds (ascending, ending at +Inf) and cumulative rates of one pod's bucket series, or
    None when they cannot be a histogram: an `le` that is no bound, too many buckets, no +Inf.
    Two spellings of one bound ("1" and "1.0", from two engines) add up, as engines do."""
    if len(raw) > MAX_HISTOGRAM_BUCKETS:
        return None
    by_bound: dict[float, float] = {}
    for le, rate in raw:
        bound = _parse_le(le)
        if bound is None:
            return None
        by_bound[bound] = by_bound.get(bound, 0.0) + rate
    if math.inf not in by_bound:
        return None
    bounds = tuple(sorted(by_bound))
    return bounds, tuple(by_bound[b] for b in bounds)


def histogram_from_buckets(
    buckets: Sequence[tuple[str | None, float]], timestamp: float,
    layouts: dict[tuple[float, ...], tuple[float, ...]] | None = None,
) -> LatencyHistogram | None:
    """The histogram of one pod's (le, rate) bucket series at one instant, or None when they
    cannot be one (see `_buckets_of`). Shared by `fetch()` and `autoscaler record`. With
    `layouts` (one per fetch), pods with equal bounds share one tuple: the decision core then
    recognises the layout without comparing the bounds (`slo_capacity._usable`)."""
    parsed = _buckets_of(buckets)
    if parsed is None:
        return None
    bounds = parsed[0] if layouts is None else layouts.setdefault(parsed[0], parsed[0])
    return LatencyHistogram(bounds, parsed[1], timestamp)


def _pod_key(labels: dict[str, str]) -> tuple[str, str] | None:
    ns, pod = labels.get("namespace", ""), labels.get("pod", "")
    return (ns, pod) if ns and pod else None


def _histogram_halves(
    samples: list[Sample], what: str
) -> tuple[dict[tuple[str, str], list[tuple[str | None, float]]], dict[tuple[str, str], float]]:
    """The (le, rate) bucket series and the sample timestamp of each pod of one histogram query."""
    buckets: dict[tuple[str, str], list[tuple[str | None, float]]] = {}
    stamps: dict[tuple[str, str], float] = {}
    for labels, value, _eval_time in samples:
        field = labels.get(FIELD_LABEL)
        if field not in (_VALUE, _TIMESTAMP):
            raise PrometheusBadResponse(f"{what}: series without a valid {FIELD_LABEL} label: {labels}")
        key = _pod_key(labels)
        if key is None:
            continue
        if field == _VALUE:
            buckets.setdefault(key, []).append((labels.get("le"), value))
            continue
        if key in stamps:
            raise PrometheusBadResponse(f"{what}: two timestamp series for pod {key[0]}/{key[1]}")
        if not math.isfinite(value):
            raise PrometheusBadResponse(f"{what}: sample timestamp {value!r} of {key[0]}/{key[1]} is not finite")
        stamps[key] = value
    return buckets, stamps


def per_token_pods(samples: list[Sample]) -> set[tuple[str, str]]:
    """The pods whose histogram in one histogram query's answer counts tokens (`UNIT_LABEL`)."""
    return {key for labels, _value, _t in samples
            if labels.get(UNIT_LABEL) == "token" and (key := _pod_key(labels)) is not None}


def per_request(histogram: LatencyHistogram | None, completed: MetricSample | None) -> LatencyHistogram | None:
    """A per-token histogram weighted as one of requests: every bucket rate times the pod's
    finished requests/s over its tokens/s, so that the share within a bound stays the tokens'
    and the pod counts as many requests as it finished (a per-request TPOT family counts one a
    finished request). None, never a guess, without a finite non-negative request rate.

    Worked example: bounds (0.05, 0.1, +Inf), token rates (600, 900, 1000), 2 requests/s
    finished: (1.2, 1.8, 2.0): 90 % within 0.1 s, 2 requests/s. No tokens: as it is.
    """
    if histogram is None or completed is None or not 0.0 <= completed.value < math.inf:
        return None
    count = histogram.count_per_second
    if not count > 0.0:
        return histogram
    scale = completed.value / count
    return LatencyHistogram(histogram.upper_bounds, tuple(r * scale for r in histogram.cumulative_per_second),
                            histogram.timestamp)


def _per_pod_histograms(samples: list[Sample], what: str) -> dict[tuple[str, str], LatencyHistogram]:
    """Join the tagged bucket-rate/timestamp series of one histogram query into a histogram per
    pod. A pod needs both halves (as in `_per_pod`). A pod whose buckets cannot be a histogram
    (see `_buckets_of`) is left out (None, never zero) and logged; rates that are NaN or
    decreasing are kept: the histogram's `health()` says NAN."""
    buckets, stamps = _histogram_halves(samples, what)
    out: dict[tuple[str, str], LatencyHistogram] = {}
    layouts: dict[tuple[float, ...], tuple[float, ...]] = {}
    malformed = 0
    for key, raw in buckets.items():
        stamp = stamps.get(key)
        if stamp is None:
            continue
        histogram = histogram_from_buckets(raw, stamp, layouts)
        if histogram is None:
            malformed += 1
            continue
        out[key] = histogram
    if malformed:
        _LOG.warning("%s: %d pods whose buckets are no histogram (bad le, no +Inf, over %d buckets): absent",
                     what, malformed, MAX_HISTOGRAM_BUCKETS)
    return out
