"""Read a plain Prometheus `query_range` JSON export as a recording.

Accepted documents (optionally gzip-compressed):

* one `/api/v1/query_range` answer (`{"status": "success", "data": {"resultType": "matrix",
  ...}}`) of the raw series, e.g. the answer of
  `{__name__=~"vllm:num_requests_(waiting|running)|vllm:kv_cache_usage_perc|vllm:gpu_cache_usage_perc|vllm:request_success_total|kube_deployment_spec_replicas", namespace="llm"}`;
* a JSON object or list holding several such answers (e.g. one per metric name).

The series are aggregated per pod and step as the live queries do: per engine the max over
duplicated series, then the sum over engines (waiting, running), the max with NaN propagation
(KV usage, `vllm:kv_cache_usage_perc` preferred per pod), and the per-step increase of
`vllm:request_success_total` (counter resets handled) as requests finished per second; likewise
`vllm:prompt_tokens_total` and `vllm:generation_tokens_total` as tokens per second, and the
`_bucket` counters of the latency histograms (TTFT, TPOT with the per-request family preferred
per pod, queue time) as bucket rates summed over engines, one `LatencyHistogram` per pod and step.
What an export cannot give is said in the metadata notes: sample timestamps are the step
times (a raw range answer drops them, so staleness cannot be seen), readiness is the presence
of a vLLM series, and the spec replicas come from `kube_deployment_spec_replicas` if present,
else the count of such pods.

Limits (docs/limits.md): the export holds at most 256 MiB (`format.MAX_EXPORT_BYTES`), JSON nested
at most 100 deep, sample times in Unix seconds 0 .. 253402300799 (year 9999), finite values
within +/-1e15; two samples of a counter at the same time are one.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

from autoscaler.adapters.prometheus import (
    COMPLETED_METRIC,
    GENERATION_TOKENS_METRIC,
    HISTOGRAMS,
    KV_METRIC,
    KV_METRIC_LEGACY,
    PER_TOKEN_FAMILIES,
    PROMPT_TOKENS_METRIC,
    RUNNING_METRIC,
    WAITING_METRIC,
    PrometheusBadResponse,
    Series,
    histogram_from_buckets,
    parse_matrix,
    per_request,
)
from autoscaler.config.bounded import LimitError, check_depth, depth_error
from autoscaler.policy.types import LatencyHistogram, MetricSample
from autoscaler.replay.format import (
    MAX_TIMESTAMP,
    MAX_VALUE,
    Header,
    RecordedPod,
    Recording,
    RecordingError,
    Step,
)

_GAUGES = (WAITING_METRIC, RUNNING_METRIC, KV_METRIC, KV_METRIC_LEGACY)
_COUNTERS = {COMPLETED_METRIC: "completed", PROMPT_TOKENS_METRIC: "prompt_tokens",
             GENERATION_TOKENS_METRIC: "generation_tokens"}
_BUCKETS = {f"{family}_bucket": family for families in HISTOGRAMS.values() for family in families}
CounterKey = tuple[str, str, str]  # (signal or histogram family, pod, le or "") of series summed per step


def _increase_rates(points: list[tuple[float, float]], out: dict[int, float]) -> None:
    """Add one counter series' per-step increase per second (resets handled) to `out` (ms -> rate)."""
    points.sort()
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        if t1 <= t0:  # the same sample twice (two exports of one series): no time, no increase
            continue
        inc = v1 - v0 if v1 >= v0 else v1
        out[_key(t1)] = out.get(_key(t1), 0.0) + inc / (t1 - t0)


BucketIndex = dict[tuple[str, str], list[tuple[str, dict[int, float]]]]  # (family, pod) -> [(le, ms -> rate)]


def _histograms_at(index: BucketIndex, pod: str, ms: int, completed: MetricSample | None) -> dict[str, LatencyHistogram]:
    """A pod's histograms at one step from its bucket-counter rates: the first family of each
    `HISTOGRAMS` entry the pod has at that step (like the live query), none if malformed; a
    family that counts tokens weighted by the pod's finished requests (`per_request`, as the
    live fetch)."""
    out: dict[str, LatencyHistogram] = {}
    for key, families in HISTOGRAMS.items():
        for family in families:
            buckets = [(le, d[ms]) for le, d in index.get((family, pod), ()) if ms in d]
            if buckets:
                histogram = histogram_from_buckets(buckets, ms / 1000)
                if histogram is not None and family in PER_TOKEN_FAMILIES:
                    histogram = per_request(histogram, completed)
                if histogram is not None:
                    out[key] = histogram
                break
    return out


def _answers(doc: Any) -> list[Any]:
    if isinstance(doc, dict) and "status" in doc:
        return [doc]
    if isinstance(doc, dict):
        return [a for v in doc.values() for a in _answers(v)]
    if isinstance(doc, list):
        return [a for v in doc for a in _answers(v)]
    return []


def _key(t: float) -> int:
    return round(t * 1000)


def _nanmax(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return max(finite) if finite else math.nan


def recording_from_export(text: str, source: str) -> Recording:
    try:
        doc = json.loads(text)
        check_depth(doc, source)  # `_answers` recurses
    except json.JSONDecodeError as exc:
        raise RecordingError(f"{source}: not JSON (corrupt or truncated at char {exc.pos})") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise RecordingError(f"{source}: {str(exc).split(';')[0]}") from None
    except RecursionError:  # ~1,000 levels: the parser's own limit
        raise RecordingError(str(depth_error(source))) from None
    except LimitError as exc:
        raise RecordingError(str(exc)) from None
    answers = _answers(doc)
    if not answers:
        raise RecordingError(f"{source}: neither a vqa-recording nor a Prometheus query_range answer")
    series: list[Series] = []
    for a in answers:
        try:
            series += parse_matrix(a)
        except PrometheusBadResponse as exc:
            raise RecordingError(f"{source}: bad query_range answer: {exc}") from None
    # (metric, pod, engine) -> ms -> values of duplicates; counters keyed also by finished_reason
    gauges: dict[tuple[str, str, str], dict[int, list[float]]] = {}
    counters: dict[tuple[str, str, str, str, str], list[tuple[float, float]]] = {}
    spec: dict[int, float] = {}
    namespaces: set[str] = set()
    deployments: set[str] = set()
    times: set[int] = set()
    for labels, points in series:
        for t, v in points:
            if not 0.0 <= t <= MAX_TIMESTAMP or (math.isfinite(v) and not -MAX_VALUE <= v <= MAX_VALUE):
                raise RecordingError(f"{source}: sample [{t!r}, {v!r}] of {labels.get('__name__', '?')} is out of range "
                                     f"(allowed: Unix seconds 0 .. {MAX_TIMESTAMP:.0f}; a value NaN, +/-Inf or within "
                                     f"+/-{MAX_VALUE:g})")
        name = labels.get("__name__", "")
        if name == "kube_deployment_spec_replicas":
            deployments.add(labels.get("deployment", ""))
            for t, v in points:
                spec[_key(t)] = v
                times.add(_key(t))
            continue
        pod = labels.get("pod", "")
        if not pod:
            continue
        if name in _GAUGES:
            namespaces.add(labels.get("namespace", ""))
            d = gauges.setdefault((name, pod, labels.get("engine", "")), {})
            for t, v in points:
                d.setdefault(_key(t), []).append(v)
                times.add(_key(t))
        elif name in _COUNTERS or name in _BUCKETS:
            signal, le = (_COUNTERS[name], "") if name in _COUNTERS else (_BUCKETS[name], labels.get("le", ""))
            k = (signal, pod, le, labels.get("engine", ""), labels.get("finished_reason", "") + "|" + labels.get("instance", ""))
            counters.setdefault(k, []).extend(points)
    if not gauges:
        raise RecordingError(f"{source}: the export has no series {WAITING_METRIC}, {RUNNING_METRIC} or KV usage")
    if len(namespaces) > 1:
        raise RecordingError(f"{source}: the export spans namespaces {sorted(namespaces)}: export one Deployment")
    if len(deployments) > 1:  # their spec replicas would be read as one (the last one written wins)
        raise RecordingError(f"{source}: the export's kube_deployment_spec_replicas spans Deployments "
                             f"{sorted(deployments)[:5]}: export one Deployment")
    grid = sorted(times)
    if not grid:  # series without a sample (IndexError below before)
        raise RecordingError(f"{source}: the export's series have no samples")
    diffs = Counter(b - a for a, b in zip(grid, grid[1:]))
    step_ms = diffs.most_common(1)[0][0] if diffs else 15_000
    # requests/s, tokens/s and bucket rates per pod and step from the counters
    rates: dict[CounterKey, dict[int, float]] = {}
    for (signal, pod, le, _, _), points in counters.items():
        _increase_rates(points, rates.setdefault((signal, pod, le), {}))
    completed = {pod: per_ms for (signal, pod, _), per_ms in rates.items() if signal == "completed"}
    # per (metric, pod) -> ms -> aggregated over engines
    agg: dict[tuple[str, str], dict[int, float]] = {}
    engines: dict[tuple[str, str], dict[int, list[float]]] = {}
    for (name, pod, _), d in gauges.items():
        e = engines.setdefault((name, pod), {})
        for ms, vals in d.items():
            e.setdefault(ms, []).append(_nanmax(vals))
    for (name, pod), e in engines.items():
        out = agg.setdefault((name, pod), {})
        for ms, per_engine in e.items():
            if name in (WAITING_METRIC, RUNNING_METRIC):
                out[ms] = sum(per_engine)
            else:
                out[ms] = math.nan if any(math.isnan(v) for v in per_engine) else max(per_engine)
    pods_all = sorted({pod for _, pod in agg})
    index: BucketIndex = {}
    for (signal, pod, le), per_ms in rates.items():
        if signal in _BUCKETS.values():
            index.setdefault((signal, pod), []).append((le, per_ms))
    histogram_pods = {pod for _, pod in index}
    steps: list[Step] = []
    for ms in grid:
        t = ms / 1000
        recorded: list[RecordedPod] = []
        for pod in pods_all:
            def s(metric: str, pod: str = pod) -> MetricSample | None:
                v = agg.get((metric, pod), {}).get(ms)
                return None if v is None else MetricSample(v, t)

            w, r, kv_new, kv_old = s(WAITING_METRIC), s(RUNNING_METRIC), s(KV_METRIC), s(KV_METRIC_LEGACY)
            if w is None and r is None and kv_new is None and kv_old is None:
                continue
            kv, kv_name = (kv_new, KV_METRIC) if kv_new is not None else (kv_old, KV_METRIC_LEGACY if kv_old else None)
            c = completed.get(pod, {}).get(ms)
            done = None if c is None else MetricSample(c, t)
            pt, gt = rates.get(("prompt_tokens", pod, ""), {}).get(ms), rates.get(("generation_tokens", pod, ""), {}).get(ms)
            hist = _histograms_at(index, pod, ms, done) if pod in histogram_pods else {}
            recorded.append(RecordedPod(
                pod, True, None, w, r, kv, kv_name, done,
                prompt_tokens=None if pt is None else MetricSample(pt, t),
                generation_tokens=None if gt is None else MetricSample(gt, t),
                ttft=hist.get("ttft"), tpot=hist.get("tpot"), queue_time=hist.get("queue_time"),
            ))
        sp = spec.get(ms)
        spec_int = int(sp) if sp is not None and math.isfinite(sp) else (None if spec else len(recorded))
        steps.append(Step(t=t, spec=spec_int, ready=len(recorded), pods=tuple(recorded)))
    namespace = next(iter(namespaces))
    deployment = next(iter(deployments)) if len(deployments) == 1 else ""
    notes = [
        "imported from a Prometheus query_range export: sample timestamps are the step times",
        "readiness = presence of a vLLM series; pods in flight are not known",
        "spec replicas from kube_deployment_spec_replicas" if spec else "spec replicas = number of pods with a vLLM series",
        "completed requests/s, tokens/s and latency bucket rates = per-step counter increase (not rate() over "
        "the controller's window)",
    ]
    header = Header(namespace, deployment, step_ms / 1000, grid[0] / 1000, grid[-1] / 1000, {
        "source": "prometheus query_range export", "readiness_source": "vllm_series",
        "spec_source": "kube_deployment_spec_replicas" if spec else "ready_pods", "notes": notes,
    })
    return Recording(header, tuple(steps))
