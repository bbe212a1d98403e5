"""Prometheus faults, injected for real: the proxy in front of a real Prometheus refuses,
resets, stalls, answers 5xx/422, empties or corrupts answers; the exporter loses pods or
renames the KV metric. For each: no scale-down caused by the fault, replicas within bounds, the
fault in the logs and the metrics, and the next tick after it clears acts normally.

The fleet is idle on 4 replicas with no scale-down window: on healthy data the controller
scales down at once (4 -> 3), so a hold during the fault is the fault's doing. No Event is
recorded for a Prometheus fault: it is controller-wide (one Prometheus for every target), and
shows in `vllm_autoscaler_errors_total{kind="prometheus"}`, the `metrics_unreadable` log line
and the reason `hold_metrics_unhealthy` of every target.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from tests.faults.harness import (
    NAME,
    NS,
    PODS,
    Stack,
    events,
    log_events,
    make_harness,
    replicas,
    seed_cluster,
    write_config,
)
from tests.kube_api_server import KubeApiServer

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Fault:
    id: str
    inject: Callable[[Stack], None]
    error: str | None  # error_type in the metrics_unreadable line; None: Prometheus answered
    unhealthy: dict[str, str]  # pod -> health the decision reports
    retried: bool = False  # the source retried the query (recorded waits)
    clear: Callable[[Stack], None] = lambda s: s.proxy.set_mode("pass")


ALL_ABSENT = {p: "absent" for p in PODS}
ALL_NAN = {p: "nan" for p in PODS}


def _nan_pod(s: Stack) -> None:
    s.exporter.set(NS, "qwen-1", nan=True)  # vLLM itself exports NaN (e.g. a broken engine)
    s.prometheus.wait_for_series(f'vllm:num_requests_waiting{{namespace="{NS}",pod="qwen-1"}} != 0')


def _nan_pod_clear(s: Stack) -> None:
    s.exporter.set(NS, "qwen-1", nan=False)
    s.wait_for({"waiting": 0, "kv": 0.05}, pods=["qwen-1"])


def _pods_gone(s: Stack) -> None:
    for p in ("qwen-2", "qwen-3"):  # scrapes answer 404: Prometheus marks their series stale
        s.exporter.set(NS, p, status=404)
    s.prometheus.wait_for_series(f'count(vllm:num_requests_waiting{{namespace="{NS}"}})',
                                 lambda r: bool(r) and float(r[0]["value"][1]) == 2)


def _pods_back(s: Stack) -> None:
    for p in ("qwen-2", "qwen-3"):
        s.exporter.set(NS, p, status=200)
    s.wait_for({"waiting": 0, "kv": 0.05})


FAULTS = [
    Fault("down", lambda s: s.proxy.set_mode("down"), "PrometheusUnavailable", ALL_ABSENT, retried=True),
    Fault("connection-reset", lambda s: s.proxy.set_mode("reset"), "PrometheusUnavailable", ALL_ABSENT, retried=True),
    Fault("slow", lambda s: s.proxy.set_mode("slow", delay_seconds=3), "PrometheusUnavailable", ALL_ABSENT,
          retried=True),
    Fault("http-500", lambda s: s.proxy.set_mode("status", status=500), "PrometheusBadResponse", ALL_ABSENT,
          retried=True),
    Fault("http-503", lambda s: s.proxy.set_mode("status", status=503), "PrometheusBadResponse", ALL_ABSENT,
          retried=True),
    Fault("http-422",
          lambda s: s.proxy.set_mode("status", status=422, error="query timed out in expression evaluation"),
          "PrometheusQueryError", ALL_ABSENT),
    Fault("empty-result", lambda s: s.proxy.set_mode("empty"), None, ALL_ABSENT),
    Fault("nan-values", lambda s: s.proxy.set_mode("nan"), None, ALL_NAN),
    Fault("inf-values", lambda s: s.proxy.set_mode("inf"), None, ALL_NAN),
    Fault("nan-from-one-pod", _nan_pod, None, {"qwen-1": "nan"}, clear=_nan_pod_clear),
    Fault("stale-samples", lambda s: s.proxy.set_mode("lag", seconds=20), None, {p: "stale" for p in PODS}),
    Fault("some-pods-missing", _pods_gone, None, {"qwen-2": "absent", "qwen-3": "absent"}, clear=_pods_back),
    Fault("some-pods-dropped-by-proxy", lambda s: s.proxy.drop_pods(["qwen-0"]), None, {"qwen-0": "absent"}),
    Fault("duplicated-series", lambda s: s.proxy.set_mode("duplicate"), "PrometheusBadResponse", ALL_ABSENT),
    Fault("kv-metric-renamed-unknown",
          lambda s: s.proxy.set_mode("drop_metric", metrics=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")),
          None, ALL_ABSENT),
]


@pytest.mark.parametrize("fault", FAULTS, ids=[f.id for f in FAULTS])
def test_prometheus_fault_holds_shows_and_recovers(
    fault: Fault, stack: Stack, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    seed_cluster(kube_server, replicas=4)
    config = write_config(tmp_path / "autoscaler.yaml", stack.proxy.url, stale_after_seconds=10)
    if fault.id == "stale-samples":  # Prometheus must hold 20 s of history to lag behind
        time.sleep(max(0.0, stack.started + 25 - time.time()))
    h = make_harness(config, kubeconfig_path)
    try:
        fault.inject(stack)
        with capture_logs() as logs:
            during = h.tick()

        # no scale-down caused by the fault (healthy data would scale 4 -> 3 right now)
        assert during.decision is not None, during
        assert (during.action, during.decision.desired_replicas) == ("hold", 4)
        assert during.decision.reason.value == "hold_metrics_unhealthy"
        assert replicas(kube_server) == 4
        assert kube_server.requests_matching(method="PATCH") == []
        # ... in the logs
        [line] = [x for x in logs if x["event"] == "decision"]
        assert line["unhealthy_pods"] == fault.unhealthy and line["reason"] == "hold_metrics_unhealthy"
        if fault.error is not None:
            [err] = [x for x in logs if x["event"] == "metrics_unreadable"]
            assert err["error_type"] == fault.error and err["log_level"] == "error"
            assert h.errors("prometheus") == 1
        else:
            assert "metrics_unreadable" not in log_events(logs)
            assert h.errors("prometheus") == 0
        assert bool(h.prom_sleeps) == fault.retried
        # ... and in the metrics
        labels = {"namespace": NS, "deployment": NAME}
        assert h.metric("vllm_autoscaler_unhealthy_pods", **labels) == len(fault.unhealthy)
        assert h.metric("vllm_autoscaler_decision_reason", reason="hold_metrics_unhealthy", **labels) == 1
        assert h.metric("vllm_autoscaler_desired_replicas", **labels) == 4
        assert events(kube_server) == []

        # the fault clears: the next tick acts on the (idle) data at once
        fault.clear(stack)
        with capture_logs() as logs:
            after = h.tick()
        assert after.decision is not None
        assert (after.action, after.decision.desired_replicas, after.decision.reason.value) == (
            "patched", 3, "scale_down"), after.decision
        assert replicas(kube_server) == 3
        assert [e["reason"] for e in events(kube_server)] == ["ScaledDown"]
        assert h.metric("vllm_autoscaler_unhealthy_pods", **labels) == 0
        assert "metrics_unreadable" not in log_events(logs)
    finally:
        h.close()


def test_kv_metric_renamed_to_the_legacy_name_mid_run_keeps_scaling(
    stack: Stack, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    """vLLM rolled back to a version exporting only `vllm:gpu_cache_usage_perc` while the
    controller runs: the KV reading falls back to it by presence, no tick is lost."""
    seed_cluster(kube_server, replicas=4)
    config = write_config(tmp_path / "autoscaler.yaml", stack.proxy.url, scale_down_period_seconds=1)
    h = make_harness(config, kubeconfig_path)
    try:
        first = h.tick()
        assert first.decision is not None and (first.action, first.decision.desired_replicas) == ("patched", 3)
        for p in PODS:
            stack.exporter.set(NS, p, kv_metric="old", kv=0.06)
        stack.prometheus.wait_for_series(f'vllm:gpu_cache_usage_perc{{namespace="{NS}"}} == 0.06',
                                         lambda r: len(r) == 4)
        stack.prometheus.wait_for_series(f'vllm:kv_cache_usage_perc{{namespace="{NS}"}}', lambda r: r == [])
        time.sleep(1.1)  # one scale-down period
        with capture_logs() as logs:
            second = h.tick()
        assert second.decision is not None
        [line] = [x for x in logs if x["event"] == "decision"]
        assert line["unhealthy_pods"] == {}
        assert line["kv_cache_usage_mean"] == pytest.approx(0.06)  # read from the legacy name
        assert (second.action, second.decision.desired_replicas) == ("patched", 2)
        assert h.errors("prometheus") == 0
    finally:
        h.close()


def test_series_duplicated_by_a_second_scrape_job_read_once(
    stack: Stack, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    """A ServiceMonitor and a PodMonitor both scrape the pods (two jobs, same series but for
    `job`): the queries collapse the duplicates, the decision is the one of single series."""
    seed_cluster(kube_server, replicas=4)
    config = write_config(tmp_path / "autoscaler.yaml", stack.proxy.url)
    single = stack.exporter.targets()
    stack.prometheus.reload([*single, *stack.exporter.targets(job="vllm-podmonitor")])
    h = make_harness(config, kubeconfig_path)
    try:
        stack.prometheus.wait_for_series(f'count(vllm:num_requests_waiting{{namespace="{NS}"}})',
                                         lambda r: bool(r) and float(r[0]["value"][1]) == 8, timeout=20)
        stack.prometheus.wait_for_series(
            f'count(sum by (pod) (rate(vllm:request_success_total{{namespace="{NS}",job="vllm-podmonitor"}}[4s])))',
            lambda r: bool(r) and float(r[0]["value"][1]) == 4, timeout=20)
        with capture_logs() as logs:
            outcome = h.tick()
        [line] = [x for x in logs if x["event"] == "decision"]
        assert line["unhealthy_pods"] == {} and line["running_total"] == 4  # 4 pods x 1, not 8
        assert line["completed_per_second"] == pytest.approx(2.0, rel=0.2)  # 4 x 0.5/s, not 4/s
        assert outcome.decision is not None and (outcome.action, outcome.decision.desired_replicas) == ("patched", 3)
        assert h.errors("prometheus") == 0
    finally:
        h.close()
        stack.prometheus.reload(single)
