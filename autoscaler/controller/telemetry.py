"""The controller's own Prometheus metrics, and /metrics, /healthz, /readyz.

Metric names start with `vllm_autoscaler_`. Every decision's reason is a label value of
`vllm_autoscaler_decisions_total`, and the current one is the label of
`vllm_autoscaler_decision_reason` (value 1), so dashboards can show reasons over time.
"""

from __future__ import annotations

import asyncio
import platform
import threading
from collections.abc import Callable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from autoscaler import __version__
from autoscaler.policy import COMPILED_MODULES
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
        self.min_replicas = Gauge(
            "vllm_autoscaler_min_replicas", "The effective lower bound (min_replicas).", TARGET, registry=r,
        )
        self.paused = Gauge(
            "vllm_autoscaler_paused",
            "1 while the Deployment's vllm-queue-autoscaler.io/paused annotation stops every write, else 0.",
            TARGET, registry=r,
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
        self.signal_replicas = Gauge(
            "vllm_autoscaler_signal_replicas",
            "Replicas each signal asked for at the last tick (before stabilisation and limits).",
            (*TARGET, "signal"), registry=r,
        )
        self.slo_objective = Gauge(
            "vllm_autoscaler_slo_objective_seconds", "The SLO in force: the TTFT bound (length-aware when set) and TPOT.",
            (*TARGET, "latency"), registry=r,
        )
        self.slo_attainment = Gauge(
            "vllm_autoscaler_slo_attainment_ratio",
            "Share of the rate window's requests within the SLO, from vLLM's histograms; NaN when unknown.",
            (*TARGET, "latency"), registry=r,
        )
        self.slo_capacity = Gauge(
            "vllm_autoscaler_slo_capacity_tokens_per_second",
            "One replica's capacity within the SLO (learned, or the cold start); NaN without SLO data.",
            (*TARGET, "kind"), registry=r,
        )
        self.slo_headroom = Gauge(
            "vllm_autoscaler_slo_headroom_ratio",
            "Headroom on the SLO replicas for growth within the next replica's lead time.",
            TARGET, registry=r,
        )
        self.slo_headroom_horizon = Gauge(
            "vllm_autoscaler_slo_headroom_horizon_seconds",
            "The lead time the SLO headroom covers: the next replica's, a new node's included when no GPU is free.",
            TARGET, registry=r,
        )
        self.build_info = Gauge(
            "vllm_autoscaler_build_info",
            "1, labelled with the controller's version, its Python's, and its decision core's build (compiled, pure).",
            ("version", "python_version", "policy"), registry=r,
        )
        policy_build = "compiled" if COMPILED_MODULES else "pure"
        self.build_info.labels(__version__, platform.python_version(), policy_build).set(1)

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
        self.record_signals(labels, decision)

    def record_signals(self, labels: tuple[str, str], decision: Decision) -> None:
        """The per-signal replica estimates and the SLO step's values (DecisionValues)."""
        v = decision.values
        for signal, replicas in (("queue", v.queue_replicas), ("kv_cache", v.kv_replicas), ("batch", v.batch_replicas),
                                 ("forecast", v.forecast_replicas), ("slo", v.slo_replicas)):
            self.signal_replicas.labels(*labels, signal).set(replicas)
        nan = float("nan")
        for latency, bound, attained in (("ttft", v.slo_ttft_seconds, v.ttft_attainment),
                                         ("tpot", v.slo_tpot_seconds, v.tpot_attainment)):
            self.slo_objective.labels(*labels, latency).set(bound)
            self.slo_attainment.labels(*labels, latency).set(nan if attained is None else attained)
        for kind, cap in (("prompt", v.capacity_prompt_tokens_per_second),
                          ("generation", v.capacity_generation_tokens_per_second)):
            self.slo_capacity.labels(*labels, kind).set(nan if cap is None else cap)
        self.slo_headroom.labels(*labels).set(v.headroom_ratio)
        self.slo_headroom_horizon.labels(*labels).set(v.headroom_horizon_seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class HealthServer:
    """Serves /metrics, /healthz (the loop is alive) and /readyz (a tick has succeeded) on
    `host:port`. Port 0 picks a free port (see `.port`).

    One asyncio loop in one daemon thread, whatever the number of clients: an idle or slow
    connection costs a socket, never a thread. Bounded: at most `max_connections` open at once
    (more are closed at once), a request must arrive within `request_timeout_seconds` and fit
    in `MAX_REQUEST_BYTES`; one request per connection (`Connection: close`)."""

    MAX_REQUEST_BYTES = 8192

    def __init__(
        self,
        metrics: ControllerMetrics,
        healthy: Callable[[], bool],
        ready: Callable[[], bool],
        host: str = "0.0.0.0",
        port: int = 9102,
        *,
        max_connections: int = 64,
        request_timeout_seconds: float = 5.0,
    ) -> None:
        self.metrics = metrics
        self.healthy = healthy
        self.ready = ready
        self.max_connections = max_connections
        self.request_timeout_seconds = request_timeout_seconds
        self.open_connections = 0
        self._loop = asyncio.new_event_loop()
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, host, port, reuse_address=True, limit=self.MAX_REQUEST_BYTES)
        )
        self._thread = threading.Thread(target=self._loop.run_forever, name="health-server", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.sockets[0].getsockname()[1])

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        async def close() -> None:
            self._server.close()
            await self._server.wait_closed()

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        else:
            self._loop.run_until_complete(close())
        self._loop.close()

    def _answer(self, path: str) -> tuple[int, bytes, str]:
        text = "text/plain; charset=utf-8"
        if path == "/metrics":
            return 200, self.metrics.render(), CONTENT_TYPE_LATEST
        if path == "/healthz":
            ok = self.healthy()
            return (200, b"ok\n", text) if ok else (503, b"tick loop or leader election stalled\n", text)
        if path == "/readyz":
            ok = self.ready()
            return (200, b"ok\n", text) if ok else (503, b"no successful tick yet\n", text)
        return 404, b"not found\n", text

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.open_connections >= self.max_connections:
            writer.close()  # over the bound: no thread, no buffer, no wait
            return
        self.open_connections += 1
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.request_timeout_seconds)
            except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                return
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = request_line.split(" ")
            if len(parts) != 3 or parts[0] not in ("GET", "HEAD"):
                code, body, ctype = 405, b"method not allowed\n", "text/plain; charset=utf-8"
            else:
                try:
                    # the callbacks are quick reads of in-memory state; /metrics renders the registry
                    code, body, ctype = self._answer(parts[1].split("?", 1)[0])
                except Exception:  # a failing callback is a failing probe, never a dead server
                    code, body, ctype = 500, b"internal error\n", "text/plain; charset=utf-8"
            reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 500: "Internal Server Error",
                      503: "Service Unavailable"}[code]
            header = (f"HTTP/1.1 {code} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                      "Connection: close\r\n\r\n").encode("latin-1")
            writer.write(header + (b"" if parts[0] == "HEAD" else body))
            try:
                await asyncio.wait_for(writer.drain(), self.request_timeout_seconds)
            except (TimeoutError, ConnectionError):
                return
        finally:
            self.open_connections -= 1
            writer.close()
