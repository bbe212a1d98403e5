"""`autoscaler record`: capture, for one Deployment, every series the decision core reads.

Each step `t = start + k * step` of the recording holds exactly what a live
`PrometheusSource.fetch(now=t)` would have read for the target's pods: the recorder evaluates
the very same PromQL (`prometheus_source.build_target_queries`, restricted to the pods of the
Deployment by `pod_regex`) as range queries, so a range step and an instant query at the same
instant see the same samples (Prometheus evaluates each step of a range query as an instant
query). Live ticks map to steps when they fall on the grid: record with `--start` = a tick
time and `--step` = the tick period (see docs/replay.md).

Kubernetes state comes from kube-state-metrics when Prometheus has it (`kube_pod_*`,
`kube_deployment_*`); without it, readiness is the presence of a vLLM series and the spec
replicas are the count of such pods. The header's metadata says which source was used.

All Prometheus I/O goes through `PrometheusSource.query_range` (chunked below the 11,000
points-per-series limit).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from autoscaler.adapters.prometheus import (
    FIELD_LABEL,
    HISTOGRAMS,
    KV_METRIC,
    KV_METRIC_LEGACY,
    UNIT_LABEL,
    Series,
    build_target_queries,
    histogram_from_buckets,
    per_request,
)
from autoscaler.adapters.prometheus.promql import quote_string, regex_matcher
from autoscaler.policy.types import LatencyHistogram, MetricSample, PodStage
from autoscaler.replay.format import Header, RecordedPod, Step

SIGNAL_QUERY_KEYS = ("waiting", "running", "kv", "kv_legacy", "completed", "prompt_tokens", "generation_tokens")
HISTOGRAM_QUERY_KEYS = tuple(HISTOGRAMS)


class RangeSource(Protocol):
    def query_range(self, promql: str, start: float, end: float, step_seconds: float) -> list[Series]: ...


def deployment_pod_regex(deployment: str) -> str:
    """Pods a Deployment creates are named `<deployment>-<pod-template-hash>-<5 chars>`."""
    escaped = "".join("\\" + c if c in "\\.+*?()|[]{}^$" else c for c in deployment)
    return f"{escaped}-[a-z0-9]{{1,10}}-[a-z0-9]{{5}}"


def kube_queries(namespace: str, deployment: str, pod_regex: str) -> dict[str, str]:
    """kube-state-metrics PromQL of the target (all optional)."""
    ns = regex_matcher("namespace", [namespace])
    dep = f"{ns}, deployment={quote_string(deployment)}"
    pods = f"{ns}, pod=~{quote_string(pod_regex)}"
    return {
        "spec": f"max(kube_deployment_spec_replicas{{{dep}}})",
        "ready_replicas": f"max(kube_deployment_status_replicas_ready{{{dep}}})",
        "updated_replicas": f"max(kube_deployment_status_replicas_updated{{{dep}}})",
        "status_replicas": f"max(kube_deployment_status_replicas{{{dep}}})",
        "generation": f"max(kube_deployment_metadata_generation{{{dep}}})",
        "observed_generation": f"max(kube_deployment_status_observed_generation{{{dep}}})",
        "pod_ready": f'max by (pod) (kube_pod_status_ready{{{pods}, condition="true"}})',
        "pod_created": f"max by (pod) (kube_pod_created{{{pods}}})",
        "pod_scheduled": f"max by (pod) (kube_pod_status_scheduled_time{{{pods}}})",
        "pod_ready_time": f"max by (pod) (kube_pod_status_ready_time{{{pods}}})",
        "pod_unschedulable": f"max by (pod) (kube_pod_status_unschedulable{{{pods}}})",
        "pod_running": f"min by (pod) (kube_pod_container_status_running{{{pods}}})",
        "pod_deleted": f"max by (pod) (kube_pod_deletion_timestamp{{{pods}}})",
        "pod_finished": f'max by (pod) (kube_pod_status_phase{{{pods}, phase=~"Succeeded|Failed"}})',
    }


def demand_queries(namespace: str, pod_regex: str, window_seconds: int) -> dict[str, str]:
    """Fleet request/token rates and request-length histograms (for the demand rebuild)."""
    sel = f"{regex_matcher('namespace', [namespace])}, pod=~{quote_string(pod_regex)}"
    w = f"{window_seconds}s"
    return {
        "requests_per_second": f"sum(rate(vllm:request_success_total{{{sel}}}[{w}]))",
        "prompt_tokens_per_second": f"sum(rate(vllm:prompt_tokens_total{{{sel}}}[{w}]))",
        "generation_tokens_per_second": f"sum(rate(vllm:generation_tokens_total{{{sel}}}[{w}]))",
        "prompt_tokens_buckets": f"sum by (le) (rate(vllm:request_prompt_tokens_bucket{{{sel}}}[{w}]))",
        "generation_tokens_buckets": f"sum by (le) (rate(vllm:request_generation_tokens_bucket{{{sel}}}[{w}]))",
    }


def _key(t: float) -> int:
    return round(t * 1000)


PerPod = dict[str, dict[int, float]]  # pod -> ms -> value


def _by_pod(series: list[Series]) -> PerPod:
    out: PerPod = {}
    for labels, points in series:
        pod = labels.get("pod", "")
        if not pod:
            continue
        d = out.setdefault(pod, {})
        for t, v in points:
            d[_key(t)] = v
    return out


def _scalar(series: list[Series]) -> dict[int, float]:
    out: dict[int, float] = {}
    for _, points in series:
        for t, v in points:
            out[_key(t)] = v
    return out


def _signal(series: list[Series]) -> dict[str, dict[int, MetricSample]]:
    """Pair the value and timestamp halves of one signal query, per pod and step, like
    `prometheus_source._per_pod` does for one instant: a pod needs both halves."""
    values: PerPod = {}
    stamps: PerPod = {}
    for labels, points in series:
        pod = labels.get("pod", "")
        if not pod or not labels.get("namespace"):
            continue
        target = values if labels.get(FIELD_LABEL) == "value" else stamps if labels.get(FIELD_LABEL) == "timestamp" else None
        if target is None:
            continue
        d = target.setdefault(pod, {})
        for t, v in points:
            d[_key(t)] = v
    out: dict[str, dict[int, MetricSample]] = {}
    for pod, vals in values.items():
        ts = stamps.get(pod, {})
        paired = {k: MetricSample(value=v, timestamp=ts[k]) for k, v in vals.items() if k in ts and math.isfinite(ts[k])}
        if paired:
            out[pod] = paired
    return out


def _histograms(series: list[Series]) -> dict[str, dict[int, LatencyHistogram]]:
    """The histogram of each pod at each step from one histogram query's range answer, joined as
    `prometheus_source._per_pod_histograms` does at one instant: a pod needs both halves, and
    buckets that are no histogram leave the pod without one at that step."""
    buckets: dict[str, dict[int, list[tuple[str | None, float]]]] = {}
    stamps: PerPod = {}
    for labels, points in series:
        pod = labels.get("pod", "")
        field = labels.get(FIELD_LABEL)
        if not pod or not labels.get("namespace"):
            continue
        if field == "value":
            per_step = buckets.setdefault(pod, {})
            le = labels.get("le")
            for t, v in points:
                per_step.setdefault(_key(t), []).append((le, v))
        elif field == "timestamp":
            d = stamps.setdefault(pod, {})
            for t, v in points:
                d[_key(t)] = v
    out: dict[str, dict[int, LatencyHistogram]] = {}
    for pod, per_step in buckets.items():
        ts = stamps.get(pod, {})
        made = {k: histogram_from_buckets(raw, ts[k]) for k, raw in per_step.items() if k in ts and math.isfinite(ts[k])}
        kept = {k: h for k, h in made.items() if h is not None}
        if kept:
            out[pod] = kept
    return out


def _per_token_pods(series: list[Series]) -> set[str]:
    """The pods whose histogram in one histogram query's range answer counts tokens, as
    `prometheus_source.per_token_pods` finds them at one instant."""
    return {pod for labels, _ in series if labels.get(UNIT_LABEL) == "token" and (pod := labels.get("pod", ""))}


@dataclass(frozen=True)
class RawResults:
    """The answers of every query, keyed like the query dicts above."""

    signals: Mapping[str, list[Series]]
    kube: Mapping[str, list[Series]]
    demand: Mapping[str, list[Series]]


def assemble(
    namespace: str,
    deployment: str,
    start: float,
    end: float,
    step_seconds: float,
    raw: RawResults,
    metadata: dict[str, Any],
) -> tuple[Header, list[Step]]:
    """Join the range answers into steps. Pure."""
    sig = {k: _signal(raw.signals.get(k, [])) for k in SIGNAL_QUERY_KEYS}
    hist = {k: _histograms(raw.signals.get(k, [])) for k in HISTOGRAM_QUERY_KEYS}
    per_token_tpot = _per_token_pods(raw.signals.get("tpot", []))
    spec = _scalar(raw.kube.get("spec", []))
    ready_replicas = _scalar(raw.kube.get("ready_replicas", []))
    updated = _scalar(raw.kube.get("updated_replicas", []))
    status_replicas = _scalar(raw.kube.get("status_replicas", []))
    generation = _scalar(raw.kube.get("generation", []))
    observed = _scalar(raw.kube.get("observed_generation", []))
    pod_kube = {k: _by_pod(v) for k, v in raw.kube.items() if k.startswith("pod_")}
    have_ksm_pods = bool(pod_kube.get("pod_created")) and bool(pod_kube.get("pod_ready"))
    notes: list[str] = list(metadata.get("notes", []))
    metadata = dict(metadata)
    metadata["readiness_source"] = "kube_pod_status_ready" if have_ksm_pods else "vllm_series"
    metadata["spec_source"] = "kube_deployment_spec_replicas" if spec else "ready_pods"
    metadata["startup_source"] = "kube_pod_created/kube_pod_status_*_time" if have_ksm_pods else "none"
    if not have_ksm_pods:
        notes.append("no kube_pod_* series: a pod is ready when it has a vLLM series; pods in flight are not known")
    if not spec:
        notes.append("no kube_deployment_spec_replicas: spec replicas = number of pods with a vLLM series")
    notes.append("free GPUs are not recorded: replay reads them as unknown (node provisioning counted in lead time)")
    metadata["notes"] = notes

    demand_scalar = {k: _scalar(v) for k, v in raw.demand.items() if not k.endswith("_buckets")}
    demand_buckets: dict[str, dict[str, dict[int, float]]] = {}
    for dkey, series in raw.demand.items():
        if dkey.endswith("_buckets"):
            per_le: dict[str, dict[int, float]] = {}
            for labels, points in series:
                le = labels.get("le")
                if le is not None:
                    per_le[le] = {_key(t): v for t, v in points}
            demand_buckets[dkey] = per_le

    n = int(math.floor((end - start) / step_seconds + 1e-9)) + 1
    steps: list[Step] = []
    for i in range(n):
        t = start + i * step_seconds
        k = _key(t)
        vllm_pods = {pod for s in sig.values() for pod, d in s.items() if k in d}
        vllm_pods.update(pod for h in hist.values() for pod, dh in h.items() if k in dh)
        pods: list[RecordedPod] = []
        if have_ksm_pods:
            names = {pod for pod, d in pod_kube["pod_created"].items() if k in d}
        else:
            names = vllm_pods
        for name in sorted(names):
            def at(key: str, pod: str = name) -> float | None:
                return pod_kube.get(key, {}).get(pod, {}).get(k)

            kv = sig["kv"].get(name, {}).get(k)
            kv_name: str | None = KV_METRIC if kv is not None else None
            if kv is None:
                kv = sig["kv_legacy"].get(name, {}).get(k)
                kv_name = KV_METRIC_LEGACY if kv is not None else None
            stage: PodStage | None = None
            if have_ksm_pods:
                ready = at("pod_ready") == 1.0
                terminating = at("pod_deleted") is not None
                finished = at("pod_finished") == 1.0
                if not (ready or terminating or finished):
                    if at("pod_unschedulable") == 1.0 or at("pod_scheduled") is None:
                        stage = PodStage.UNSCHEDULABLE
                    elif at("pod_running") == 1.0:
                        stage = PodStage.LOADING
                    else:
                        stage = PodStage.SCHEDULED
                if (terminating or finished) and not ready:
                    continue
                if terminating or finished:
                    continue
            else:
                ready = True
            pods.append(
                RecordedPod(
                    name=name,
                    ready=ready,
                    stage=stage,
                    waiting=sig["waiting"].get(name, {}).get(k),
                    running=sig["running"].get(name, {}).get(k),
                    kv=kv,
                    kv_metric=kv_name,
                    completed=sig["completed"].get(name, {}).get(k),
                    created=at("pod_created"),
                    scheduled=at("pod_scheduled"),
                    ready_at=at("pod_ready_time"),
                    prompt_tokens=sig["prompt_tokens"].get(name, {}).get(k),
                    generation_tokens=sig["generation_tokens"].get(name, {}).get(k),
                    ttft=hist["ttft"].get(name, {}).get(k),
                    tpot=(per_request(hist["tpot"].get(name, {}).get(k), sig["completed"].get(name, {}).get(k))
                          if name in per_token_tpot else hist["tpot"].get(name, {}).get(k)),
                    queue_time=hist["queue_time"].get(name, {}).get(k),
                )
            )
        spec_now = spec.get(k)
        spec_int = int(spec_now) if spec_now is not None and math.isfinite(spec_now) else None
        if not spec:
            spec_int = sum(1 for p in pods if p.ready)
        rr = ready_replicas.get(k)
        ready_int = int(rr) if rr is not None and math.isfinite(rr) else sum(1 for p in pods if p.ready)
        # like cluster.rollout_in_progress (kubectl rollout status without the availability clause)
        up, sr, gen, obs_gen = updated.get(k), status_replicas.get(k), generation.get(k), observed.get(k)
        rollout = bool(
            (gen is not None and obs_gen is not None and obs_gen < gen)
            or (up is not None and spec_int is not None and up < spec_int)
            or (up is not None and sr is not None and sr > up)
        )
        demand: dict[str, Any] = {}
        for dk, d in demand_scalar.items():
            if k in d:
                demand[dk] = d[k]
        for dk, per_le in demand_buckets.items():
            b = {le: d[k] for le, d in per_le.items() if k in d}
            if b:
                demand[dk] = b
        steps.append(Step(t=t, spec=spec_int, ready=ready_int, rollout=rollout, pods=tuple(pods), demand=demand))
    header = Header(namespace, deployment, step_seconds, start, start + (n - 1) * step_seconds, metadata)
    return header, steps


def record(
    source: RangeSource,
    *,
    namespace: str,
    deployment: str,
    start: float,
    end: float,
    step_seconds: float,
    pod_regex: str | None = None,
    rate_window_seconds: int = 60,
    prometheus_url: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Header, list[Step]]:
    """Run every query over [start, end] and assemble the steps. Raises `PrometheusError`."""
    regex = pod_regex or deployment_pod_regex(deployment)
    signal_q = build_target_queries(namespace, regex, rate_window_seconds)
    kube_q = kube_queries(namespace, deployment, regex)
    window = max(rate_window_seconds, int(math.ceil(step_seconds)))
    demand_q = demand_queries(namespace, regex, window)
    total = len(signal_q) + len(kube_q) + len(demand_q)
    done = 0

    def run(queries: Mapping[str, str]) -> dict[str, list[Series]]:
        nonlocal done
        out = {}
        for key, promql in queries.items():
            out[key] = source.query_range(promql, start, end, step_seconds)
            done += 1
            if progress is not None:
                progress(done, total)
        return out

    raw = RawResults(signals=run(signal_q), kube=run(kube_q), demand=run(demand_q))
    metadata: dict[str, Any] = {
        "recorded_at": time.time(),
        "prometheus": prometheus_url,
        "pod_regex": regex,
        "rate_window_seconds": rate_window_seconds,
        "demand_window_seconds": window,
        "queries": {**signal_q, **kube_q, **demand_q},
    }
    return assemble(namespace, deployment, start, end, step_seconds, raw, metadata)
