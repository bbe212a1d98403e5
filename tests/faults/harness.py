"""What the fault tests share: one real Prometheus scraping four vLLM pods, a fault proxy in
front of it, and helpers to build a `Controller` against the Kubernetes-API test server.

Nothing of ours is mocked: the Controller, KubeClient and PrometheusSource are the real ones;
only their sleeps between retries are recorded instead of slept (both take a `sleep`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from autoscaler.config import ConfigWatcher, PrometheusSettings
from autoscaler.adapters.kubernetes import KubeClient
from autoscaler.controller.loop import Controller, TargetOutcome
from autoscaler.adapters.prometheus import PrometheusSource
from autoscaler.controller.telemetry import ControllerMetrics
from tests.faults.prometheus_proxy import PrometheusProxy
from tests.kube_api_server import KubeApiServer, deployment, node, pod
from tests.prometheus_server import PrometheusServer
from tests.vllm_exporter import VllmExporter

NS = "llm"
NAME = "qwen"
PODS = [f"{NAME}-{i}" for i in range(4)]
MIN, MAX = 1, 8
IDLE = {"waiting": 0, "running": 1, "kv": 0.05}  # 4 replicas for this is too many: scale down
BUSY = {"waiting": 15, "running": 8, "kv": 0.95}


@dataclass
class Stack:
    """The shared Prometheus side: exporter -> Prometheus -> fault proxy."""

    exporter: VllmExporter
    prometheus: PrometheusServer
    proxy: PrometheusProxy
    started: float = field(default_factory=time.time)

    def reset(self, **values: Any) -> None:
        """Proxy to pass-through (no token asked), every pod exporting `values` (IDLE by
        default) under the current KV name, fresh; waits until Prometheus reads exactly that."""
        self.proxy.set_mode("pass")
        self.proxy.bearer_tokens = None
        want = {**IDLE, **values}
        for p in PODS:
            self.exporter.set(NS, p, waiting=want["waiting"], running=want["running"], kv=want["kv"],
                              kv_metric="new", nan=False, status=200, clear_timestamp=True)
        self.wait_for(want)

    def wait_for(self, values: dict[str, Any], pods: Sequence[str] = PODS) -> None:
        kv = float(values["kv"])
        self.prometheus.wait_for_series(
            f'vllm:kv_cache_usage_perc{{namespace="{NS}"}}',
            lambda r: {x["metric"]["pod"] for x in r if abs(float(x["value"][1]) - kv) < 1e-9} >= set(pods),
            timeout=20,
        )
        self.prometheus.wait_for_series(
            f'vllm:num_requests_waiting{{namespace="{NS}"}}',
            lambda r: {x["metric"]["pod"] for x in r if float(x["value"][1]) == float(values["waiting"])} >= set(pods),
            timeout=20,
        )
        self.prometheus.wait_for_series(
            f'sum by (pod) (rate(vllm:request_success_total{{namespace="{NS}"}}[4s]))',
            lambda r: {x["metric"]["pod"] for x in r} >= set(pods),
            timeout=20,
        )


def start_stack(prometheus_binary: str, workdir: Path) -> Iterator[Stack]:
    exporter = VllmExporter().start()
    prometheus: PrometheusServer | None = None
    proxy: PrometheusProxy | None = None
    try:
        for p in PODS:
            exporter.set(NS, p, completed=0.5, engines=1, waiting=IDLE["waiting"], running=IDLE["running"],
                         kv=IDLE["kv"])
        prometheus = PrometheusServer(workdir, exporter.targets(), binary=prometheus_binary).start()
        proxy = PrometheusProxy(prometheus.url).start()
        stack = Stack(exporter, prometheus, proxy)
        stack.wait_for(IDLE)
        stack.started = time.time()  # from now on Prometheus holds the pods' history
        yield stack
    finally:
        if proxy is not None:
            proxy.stop()
        if prometheus is not None:
            prometheus.stop()
        exporter.stop()


# ---- config and cluster


def write_config(path: Path, prometheus_url: str, *, controller: dict[str, Any] | None = None,
                 **target: Any) -> Path:
    doc = {
        "controller": {
            "tick_seconds": 15,
            "prometheus": {"url": prometheus_url, "timeout_seconds": 1, "rate_window_seconds": 4},
            "metrics_port": 9102,
            "state_configmap": "vllm-queue-autoscaler-state",
            "namespace": "autoscaler",
            **(controller or {}),
        },
        # no scale-down window: idle pods scale down at the next healthy tick, so a hold during
        # a fault is the fault's doing, and the first tick after it shows the recovery
        "defaults": {"scale_down_window_seconds": 0, "scale_down_window_lead_times": 0, "min_replicas": MIN, "max_replicas": MAX},
        "targets": [{"namespace": NS, "deployment": NAME, **target}],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def seed_cluster(server: KubeApiServer, replicas: int = 4, **deployment_kw: Any) -> None:
    now = time.time()
    server.seed(node("gpu-node-1", gpus=8),
                deployment(NAME, NS, replicas=replicas, labels={"app": NAME}, **deployment_kw))
    for i in range(replicas):
        server.put(pod(f"{NAME}-{i}", NS, labels={"app": NAME}, state="ready", created_at=now - 900,
                       scheduled_at=now - 898, started_at=now - 880, ready_at=now - 700))


def operator_scales(server: KubeApiServer, replicas: int) -> None:
    """`kubectl scale --replicas` and the deployment controller catching up (no rollout)."""
    dep = server.get("deployments", NS, NAME)
    assert dep is not None
    generation = int(dep["metadata"].get("generation", 1)) + 1
    server.update("deployments", NS, NAME, {
        "metadata": {"generation": generation}, "spec": {"replicas": replicas},
        "status": {"observedGeneration": generation, "replicas": replicas, "updatedReplicas": replicas}})


def replicas(server: KubeApiServer) -> int:
    dep = server.get("deployments", NS, NAME)
    assert dep is not None
    return int(dep["spec"]["replicas"])


@dataclass
class Harness:
    """A Controller on the test cluster; `sleeps` are the retry waits it asked for."""

    controller: Controller
    kube: KubeClient
    metrics: ControllerMetrics
    sleeps: list[float] = field(default_factory=list)
    prom_sleeps: list[float] = field(default_factory=list)

    def tick(self) -> TargetOutcome:
        [outcome] = self.controller.tick()
        assert outcome.decision is None or MIN <= outcome.decision.desired_replicas <= MAX
        return outcome

    def metric(self, name: str, **labels: str) -> float:
        """A sample of the controller's /metrics text (0 when absent)."""
        text = self.metrics.render().decode()
        for line in text.splitlines():
            m = re.match(r"([a-zA-Z_:]+)(\{[^}]*\})? (\S+)$", line)
            if m is None or m.group(1) != name:
                continue
            got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
            if all(got.get(k) == v for k, v in labels.items()):
                return float(m.group(3))
        return 0.0

    def errors(self, kind: str) -> float:
        return self.metric("vllm_autoscaler_errors_total", namespace=NS, deployment=NAME, kind=kind)

    def close(self) -> None:
        self.controller.close()
        self.kube.close()


def make_harness(config: Path, kubeconfig: Path, *, clock: Any = time.time, request_timeout: float = 2.0,
                 reporting_instance: str = "fault-test", **controller_kw: Any) -> Harness:
    sleeps: list[float] = []
    prom_sleeps: list[float] = []
    kube = KubeClient.from_environment(kubeconfig=str(kubeconfig), sleep=sleeps.append,
                                       request_timeout_seconds=request_timeout, reporting_instance=reporting_instance)

    def prometheus_factory(settings: PrometheusSettings) -> PrometheusSource:
        # what default_prometheus_factory builds, retry waits recorded instead of slept
        return PrometheusSource(settings.url, timeout_seconds=settings.timeout_seconds,
                                bearer_token_file=settings.bearer_token_file,
                                rate_window_seconds=settings.rate_window_seconds, sleep=prom_sleeps.append)

    metrics = ControllerMetrics()
    controller = Controller(watcher=ConfigWatcher(config), kube=kube, clock=clock, metrics=metrics,
                            prometheus_factory=prometheus_factory, **controller_kw)
    return Harness(controller, kube, metrics, sleeps, prom_sleeps)


def events(server: KubeApiServer, reason: str | None = None) -> list[dict[str, Any]]:
    return [e for e in server.list("events", NS) if reason is None or e["reason"] == reason]


def log_events(logs: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(x["event"]) for x in logs]
