"""The controller's own Prometheus metrics, and /metrics, /healthz, /readyz.

Metric names start with `vllm_autoscaler_`. Every decision's reason is a label value of
`vllm_autoscaler_decisions_total`, and the current one is the label of
`vllm_autoscaler_decision_reason` (value 1), so dashboards can show reasons over time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from autoscaler.policy.types import Decision, Reason

TARGET = ("namespace", "deployment")


class ControllerMetrics:
    """All metrics of one controller process, in their own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.desired = Gauge("vllm_autoscaler_desired_replicas", "Replicas the last decision asked for.", TARGET, registry=r)
        self.current = Gauge("vllm_autoscaler_current_replicas", "Spec replicas seen at the last tick.", TARGET, registry=r)
        self.ready = Gauge("vllm_autoscaler_ready_replicas", "Ready pods seen at the last tick.", TARGET, registry=r)
        self.max_replicas = Gauge(
            "vllm_autoscaler_max_replicas",
            "The effective upper bound: min(max_replicas, max_gpus // gpus_per_replica).", TARGET, registry=r,
        )
        self.decisions = Counter(
            "vllm_autoscaler_decisions", "Decisions made, by reason.", (*TARGET, "reason"), registry=r
        )
        self.reason = Gauge(
            "vllm_autoscaler_decision_reason", "1 for the reason of the last decision.", (*TARGET, "reason"), registry=r
        )
        self.lead_time = Gauge(
            "vllm_autoscaler_lead_time_seconds", "Expected seconds until a replica asked for now serves.", TARGET,
            registry=r,
        )
        self.model_load = Gauge(
            "vllm_autoscaler_model_load_seconds", "Learned (or default) model load time.", TARGET, registry=r
        )
        self.in_flight = Gauge(
            "vllm_autoscaler_pods_in_flight", "Pods on their way, by stage.", (*TARGET, "stage"), registry=r
        )
        self.waiting = Gauge("vllm_autoscaler_waiting_requests", "Waiting requests over ready pods.", TARGET, registry=r)
        self.unhealthy = Gauge(
            "vllm_autoscaler_unhealthy_pods", "Ready pods whose samples are missing, stale or NaN.", TARGET, registry=r
        )
        self.scales = Counter(
            "vllm_autoscaler_scale_operations", "Scale subresource writes.", (*TARGET, "direction"), registry=r
        )
        self.errors = Counter(
            "vllm_autoscaler_errors", "Errors, by where they happened.", (*TARGET, "kind"), registry=r
        )
        self.tick_duration = Histogram(
            "vllm_autoscaler_tick_duration_seconds", "Duration of one control-loop tick.", registry=r,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.last_tick = Gauge(
            "vllm_autoscaler_last_tick_timestamp_seconds", "When the last tick started.", registry=r
        )
        self.config_reloads = Counter(
            "vllm_autoscaler_config_reloads", "ConfigMap reloads, by result.", ("result",), registry=r
        )
        self.leader = Gauge(
            "vllm_autoscaler_leader", "1 while this replica holds the lease and may act.", registry=r
        )
        self.config_generation = Gauge(
            "vllm_autoscaler_config_generation", "Generation of the config in force.", registry=r
        )

    def record_decision(self, namespace: str, deployment: str, decision: Decision) -> None:
        labels = (namespace, deployment)
        self.desired.labels(*labels).set(decision.desired_replicas)
        self.current.labels(*labels).set(decision.current_replicas)
        self.ready.labels(*labels).set(decision.values.ready_replicas)
        self.decisions.labels(*labels, decision.reason.value).inc()
        for reason in Reason:
            self.reason.labels(*labels, reason.value).set(1 if reason is decision.reason else 0)
        self.lead_time.labels(*labels).set(decision.values.lead_time_seconds)
        self.model_load.labels(*labels).set(decision.values.model_load_seconds)
        for stage in ("unschedulable", "scheduled", "loading"):
            self.in_flight.labels(*labels, stage).set(decision.values.pods_in_flight_by_stage.get(stage, 0))
        self.waiting.labels(*labels).set(decision.values.waiting_total)
        self.unhealthy.labels(*labels).set(len(decision.values.unhealthy_pods))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class HealthServer:
    """Serves /metrics, /healthz (the loop is alive) and /readyz (a tick has succeeded) on
    `host:port` in a daemon thread. Port 0 picks a free port (see `.port`)."""

    def __init__(
        self,
        metrics: ControllerMetrics,
        healthy: Callable[[], bool],
        ready: Callable[[], bool],
        host: str = "0.0.0.0",
        port: int = 9102,
    ) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, outer.metrics.render(), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    ok = outer.healthy()
                    self._send(200 if ok else 503, b"ok\n" if ok else b"tick loop stalled\n")
                elif path == "/readyz":
                    ok = outer.ready()
                    self._send(200 if ok else 503, b"ok\n" if ok else b"no successful tick yet\n")
                else:
                    self._send(404, b"not found\n")

            def _send(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - silence access logs
                return

        self.metrics = metrics
        self.healthy = healthy
        self.ready = ready
        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="health-server", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
