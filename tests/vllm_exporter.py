"""A fake set of vLLM pods for tests: one HTTP server, one `/metrics` text per pod.

Each pod is served at `/pods/{namespace}/{pod}/metrics` (names outside `[A-Za-z0-9.-]`
are encoded as `_xx` hex, `exporter.metrics_path()` gives the path) in vLLM's real
exposition format (prometheus_client text format 0.0.4), modelled on
tests/data/vllm-metrics (V1 engine `vllm/v1/metrics/loggers.py` names, labels and HELP
texts; the V0/0.7 `/metrics` sample from the AIBrix docs for the old layout):

* gauges `vllm:num_requests_running`, `vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc`
  (vLLM >= 0.9.2) and/or `vllm:gpu_cache_usage_perc` (<= 0.11, removed in 0.12),
* counters `vllm:prompt_tokens_total`, `vllm:generation_tokens_total`,
  `vllm:request_success_total{finished_reason}` (with their `_created` series),
* the histograms `vllm:time_to_first_token_seconds`, `vllm:request_queue_time_seconds`, and by
  version `vllm:request_time_per_output_token_seconds` (>= 0.11, per request) and/or
  `vllm:time_per_output_token_seconds` (< 0.16, per output token), with each version's bucket
  bounds (vllm_metric_definitions_by_version.csv), and `vllm:cache_config_info`,

labelled `model_name` and, from vLLM 0.8, `engine` (one series per data-parallel engine).

    with VllmExporter() as exp:
        exp.set("ns", "pod-a", waiting=5, running=2, kv=0.4, engines=2)
        exp.set("ns", "pod-b", version="0.7.3")      # no engine label, old KV name
        exp.set("ns", "pod-c", nan=True)             # every gauge NaN
        exp.set("ns", "pod-d", status=500)           # scrape fails
        exp.set("ns", "pod-e", slo_metrics=False)    # no token counters, no latency histograms
        exp.remove("ns", "pod-a")                    # 404 from now on

Only stdlib; binds 127.0.0.1 on an ephemeral port.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from tests.prometheus_server import ScrapeTarget

KvMetric = Literal["new", "old", "both"]
Number = float | int
Values = Number | Sequence[Number]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DEFAULT_MODEL = "meta-llama/Llama-3.1-8B-Instruct"

TPOT_NEW = "vllm:request_time_per_output_token_seconds"
TPOT_OLD = "vllm:time_per_output_token_seconds"
TTFT = "vllm:time_to_first_token_seconds"
QUEUE_TIME = "vllm:request_queue_time_seconds"

# version -> (kv_metric, engine_label, TPOT histograms); from vllm_metric_presence_matrix.csv
VERSIONS: dict[str, tuple[KvMetric, bool, tuple[str, ...]]] = {
    "0.7.3": ("old", False, (TPOT_OLD,)),  # V1 without engine label, gpu_cache_usage_perc only
    "0.8.5": ("old", True, (TPOT_OLD,)),  # engine label added in 0.8.x
    "0.9.2": ("both", True, (TPOT_OLD,)),  # kv_cache_usage_perc added, old name DEPRECATED
    "0.10.1": ("both", True, (TPOT_OLD,)),
    "0.11.0": ("new", True, (TPOT_NEW, TPOT_OLD)),  # old KV name hidden; per-request TPOT added
    "0.12.0": ("new", True, (TPOT_NEW,)),  # old KV name removed; old TPOT hidden
}

_TTFT_BUCKETS_OLD = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
_TTFT_BUCKETS = (*_TTFT_BUCKETS_OLD, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # from 0.9.x
_TPOT_BUCKETS_OLD = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
_TPOT_BUCKETS = (*_TPOT_BUCKETS_OLD, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
_REQUEST_LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                            120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
# histogram -> (HELP, bounds of 0.7.3, bounds of later versions)
HISTOGRAM_SPECS: dict[str, tuple[str, tuple[float, ...], tuple[float, ...]]] = {
    TTFT: ("Histogram of time to first token in seconds.", _TTFT_BUCKETS_OLD, _TTFT_BUCKETS),
    TPOT_NEW: ("Histogram of time_per_output_token_seconds per request.", _TPOT_BUCKETS, _TPOT_BUCKETS),
    TPOT_OLD: ("Histogram of time per output token in seconds.", _TPOT_BUCKETS_OLD, _TPOT_BUCKETS),
    QUEUE_TIME: ("Histogram of time spent in WAITING phase for request.", _REQUEST_LATENCY_BUCKETS,
                 _REQUEST_LATENCY_BUCKETS),
}
# default latencies: each finished request observes these values, in equal shares
DEFAULT_LATENCIES: dict[str, tuple[float, ...]] = {
    TTFT: (0.03, 0.07), TPOT_NEW: (0.04,), TPOT_OLD: (0.04, 0.12), QUEUE_TIME: (0.2, 0.4, 0.9, 3.0),
}
PROMPT_TOKENS_PER_REQUEST = 148.0
GENERATION_TOKENS_PER_REQUEST = 955.0


def go_float(value: float) -> str:
    """Format a sample value the way prometheus_client does (floatToGoString)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def path_segment(name: str) -> str:
    """Injective, URL-path-safe encoding of a name (DNS names stay as they are)."""
    if not name:
        return "_"
    out = []
    for ch in name:
        if ch.isascii() and (ch.isalnum() or ch in ".-"):
            out.append(ch)
        else:
            out.extend(f"_{b:02x}" for b in ch.encode("utf-8"))
    return "".join(out)


@dataclass
class PodState:
    namespace: str
    pod: str
    engines: int = 1
    waiting: Values = 0
    running: Values = 0
    kv: Values = 0.0
    completed: Values = 0.0  # requests/s finished by the pod (drives the counters)
    kv_metric: KvMetric = "new"
    engine_label: bool = True
    nan: bool = False
    status: int = 200
    timestamp_ms: int | None = None  # explicit sample timestamp on every line (stale data)
    model_name: str = DEFAULT_MODEL
    slo_metrics: bool = True  # token counters and latency histograms
    tpot_families: tuple[str, ...] = (TPOT_NEW,)
    old_buckets: bool = False  # 0.7.x bucket bounds
    latencies: dict[str, tuple[float, ...]] = field(default_factory=lambda: dict(DEFAULT_LATENCIES))
    le_format: str = "repr"  # "repr" ("1.0", as prometheus_client), "exp" ("1.000000e+00"), "g" ("1")
    created: float = field(default_factory=time.time)
    scrapes: int = 0


def _split_sum(total: Values, engines: int) -> list[float]:
    """Per-engine values of a gauge whose pod total is `total` (summed over engines)."""
    if isinstance(total, Sequence):
        return [float(v) for v in total]
    t = float(total)
    if not math.isfinite(t):
        return [t] * engines
    if t == int(t):
        q, r = divmod(int(t), engines)
        return [float(q + (1 if i < r else 0)) for i in range(engines)]
    return [t / engines] * engines


def _split_max(value: Values, engines: int) -> list[float]:
    if isinstance(value, Sequence):
        return [float(v) for v in value]
    return [float(value)] * engines


class VllmExporter:
    """Serves `/pods/{namespace}/{pod}/metrics` for a mutable set of fake vLLM pods."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._host = host
        self._lock = threading.Lock()
        self._pods: dict[tuple[str, str], PodState] = {}
        self._by_path: dict[str, tuple[str, str]] = {}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.requests: list[str] = []  # paths requested, in order

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> VllmExporter:
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                status, body, ctype = exporter._handle(self.path)
                data = body.encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self._server = ThreadingHTTPServer((self._host, 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="vllm-exporter", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> VllmExporter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "exporter not started"
        return int(self._server.server_address[1])

    @property
    def address(self) -> str:
        return f"{self._host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"http://{self.address}"

    # ------------------------------------------------------------------ pods

    @staticmethod
    def metrics_path(namespace: str, pod: str) -> str:
        return f"/pods/{path_segment(namespace)}/{path_segment(pod)}/metrics"

    def set(
        self,
        namespace: str,
        pod: str,
        *,
        waiting: Values | None = None,
        running: Values | None = None,
        kv: Values | None = None,
        completed: Values | None = None,
        engines: int | None = None,
        kv_metric: KvMetric | None = None,
        engine_label: bool | None = None,
        version: str | None = None,
        nan: bool | None = None,
        status: int | None = None,
        timestamp: float | None = None,
        clear_timestamp: bool = False,
        model_name: str | None = None,
        slo_metrics: bool | None = None,
        latencies: dict[str, tuple[float, ...]] | None = None,
        le_format: str | None = None,
    ) -> PodState:
        """Create or update a pod; only the given fields change.

        waiting/running: the pod total (split over engines) or one value per engine.
        kv: one value for every engine, or one per engine.
        completed: requests/s the pod finishes (total or per engine); the counters grow
        linearly with wall time at that rate (setting it restarts them: a counter reset).
        `version` picks `kv_metric` and `engine_label` from VERSIONS. `timestamp` (Unix
        seconds) is written on every sample line, so Prometheus stores that time instead of
        the scrape time. `slo_metrics=False` drops the token counters and latency histograms;
        `latencies` sets, per histogram name, the values each finished request observes (equal
        shares); `le_format` how bucket bounds are written.
        """
        key = (namespace, pod)
        with self._lock:
            state = self._pods.get(key)
            if state is None:
                state = PodState(namespace=namespace, pod=pod)
            if version is not None:
                state.kv_metric, state.engine_label, state.tpot_families = VERSIONS[version]
                state.old_buckets = version == "0.7.3"
            if slo_metrics is not None:
                state.slo_metrics = slo_metrics
            if latencies is not None:
                state.latencies = {**state.latencies, **latencies}
            if le_format is not None:
                state.le_format = le_format
            if engines is not None:
                state.engines = engines
            if completed is not None:
                state.created = time.time()
            for name, value in (("waiting", waiting), ("running", running), ("kv", kv), ("completed", completed)):
                if value is not None:
                    setattr(state, name, value)
                    if isinstance(value, Sequence):
                        state.engines = len(value)
            if kv_metric is not None:
                state.kv_metric = kv_metric
            if engine_label is not None:
                state.engine_label = engine_label
            if nan is not None:
                state.nan = nan
            if status is not None:
                state.status = status
            if timestamp is not None:
                state.timestamp_ms = int(timestamp * 1000)
            if clear_timestamp:
                state.timestamp_ms = None
            if model_name is not None:
                state.model_name = model_name
            if not state.engine_label and state.engines != 1:
                raise ValueError("a pod without engine label has exactly one engine")
            for name in ("waiting", "running", "kv", "completed"):
                v = getattr(state, name)
                if isinstance(v, Sequence) and len(v) != state.engines:
                    raise ValueError(f"{name}: {len(v)} values for {state.engines} engines")
            self._pods[key] = state
            self._by_path[self.metrics_path(namespace, pod)] = key
            return state

    def remove(self, namespace: str, pod: str) -> None:
        with self._lock:
            self._pods.pop((namespace, pod), None)
            self._by_path.pop(self.metrics_path(namespace, pod), None)

    def pods(self) -> list[tuple[str, str]]:
        with self._lock:
            return sorted(self._pods)

    def scrape_count(self, namespace: str, pod: str) -> int:
        with self._lock:
            state = self._pods.get((namespace, pod))
            return state.scrapes if state else 0

    def targets(self, job: str = "vllm", pods: Sequence[tuple[str, str]] | None = None) -> list[ScrapeTarget]:
        """One Prometheus static target per pod, carrying `namespace`/`pod` labels."""
        chosen = self.pods() if pods is None else list(pods)
        return [
            ScrapeTarget(
                address=self.address,
                metrics_path=self.metrics_path(ns, pod),
                labels={"namespace": ns, "pod": pod},
                job=job,
            )
            for ns, pod in chosen
        ]

    # ------------------------------------------------------------------ rendering

    def render(self, namespace: str, pod: str) -> str:
        with self._lock:
            state = self._pods[(namespace, pod)]
            return _render(state)

    def _handle(self, path: str) -> tuple[int, str, str]:
        with self._lock:
            self.requests.append(path)
            key = self._by_path.get(path.split("?", 1)[0])
            state = self._pods.get(key) if key else None
            if state is None:
                return 404, f"no pod at {path}\n", "text/plain; charset=utf-8"
            state.scrapes += 1
            if state.status != 200:
                return state.status, "Internal Server Error\n", "text/plain; charset=utf-8"
            return 200, _render(state), CONTENT_TYPE


def format_le(bound: float, style: str) -> str:
    """A bucket bound as an exporter writes it: prometheus_client's "1.0", or "1.000000e+00", "1"."""
    if math.isinf(bound):
        return "+Inf"
    if style == "exp":
        return f"{bound:e}"
    if style == "g":
        return f"{bound:g}"
    return go_float(bound)


def _histogram(s: PodState, name: str, counts: list[float], labels: Any, ts: str) -> list[str]:
    """The exposition lines of one histogram: per engine, `counts[engine]` observations shared
    equally among `s.latencies[name]`."""
    help_text, old, new = HISTOGRAM_SPECS[name]
    bounds = (*(old if s.old_buckets else new), math.inf)
    values = s.latencies[name]
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
    for e, count in enumerate(counts):
        for le in bounds:
            within = count * sum(1 for v in values if v <= le) / len(values)
            le_label = f'le="{format_le(le, s.le_format)}"'
            lines.append(f"{name}_bucket{labels(e, le_label)} {go_float(within)}{ts}")
        lines.append(f"{name}_count{labels(e)} {go_float(count)}{ts}")
        lines.append(f"{name}_sum{labels(e)} {go_float(count * sum(values) / len(values))}{ts}")
    return lines


def _render(s: PodState) -> str:
    n = s.engines
    waiting = _split_sum(s.waiting, n)
    running = _split_sum(s.running, n)
    kv = _split_max(s.kv, n)
    if s.nan:
        waiting = running = kv = [math.nan] * n
    ts = f" {s.timestamp_ms}" if s.timestamp_ms is not None else ""
    model = escape_label_value(s.model_name)

    def labels(engine: int, extra: str = "") -> str:
        # prometheus_client keeps the declared label order: model_name, engine, then extras
        parts = [f'model_name="{model}"']
        if s.engine_label:
            parts.append(f'engine="{engine}"')
        if extra:
            parts.append(extra)
        return "{" + ",".join(parts) + "}"

    lines: list[str] = []

    def gauge(name: str, help_text: str, values: list[float]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} gauge")
        for e, v in enumerate(values):
            lines.append(f"{name}{labels(e)} {go_float(v)}{ts}")

    def counter(name: str, help_text: str, values: list[float], extra: str = "") -> None:
        lines.append(f"# HELP {name}_total {help_text}")
        lines.append(f"# TYPE {name}_total counter")
        for e, v in enumerate(values):
            lines.append(f"{name}_total{labels(e, extra)} {go_float(v)}{ts}")

    lines.append("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig")
    lines.append("# TYPE vllm:cache_config_info gauge")
    lines.append(
        'vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",'
        f'gpu_memory_utilization="0.9",num_gpu_blocks="81767"}} 1.0{ts}'
    )
    gauge("vllm:num_requests_running", "Number of requests in model execution batches.", running)
    gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", waiting)
    if s.kv_metric in ("old", "both"):
        help_old = "GPU KV-cache usage. 1 means 100 percent usage."
        if s.kv_metric == "both":
            help_old += "DEPRECATED: Use vllm:kv_cache_usage_perc instead."
        gauge("vllm:gpu_cache_usage_perc", help_old, kv)
    if s.kv_metric in ("new", "both"):
        gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kv)

    # counters: linear in time at `completed` requests/s (frozen with a frozen timestamp, or
    # Prometheus would drop "different value but same timestamp" samples)
    at = s.timestamp_ms / 1000 if s.timestamp_ms is not None else time.time()
    elapsed = max(0.0, at - s.created)
    finished = [c * elapsed for c in _split_sum(s.completed, n)]
    engines = range(n)
    if s.slo_metrics:
        counter("vllm:prompt_tokens", "Number of prefill tokens processed.",
                [PROMPT_TOKENS_PER_REQUEST * f for f in finished])
        counter("vllm:generation_tokens", "Number of generation tokens processed.",
                [GENERATION_TOKENS_PER_REQUEST * f for f in finished])
    lines.append("# HELP vllm:request_success_total Count of successfully processed requests.")
    lines.append("# TYPE vllm:request_success_total counter")
    for reason, share in (("stop", 0.75), ("length", 0.25), ("abort", 0.0)):
        for e in engines:
            extra = f'finished_reason="{reason}"'
            lines.append(f"vllm:request_success_total{labels(e, extra)} {go_float(share * finished[e])}{ts}")
    lines.append("# HELP vllm:request_success_created Count of successfully processed requests.")
    lines.append("# TYPE vllm:request_success_created gauge")
    for reason in ("stop", "length", "abort"):
        for e in engines:
            extra = f'finished_reason="{reason}"'
            lines.append(f"vllm:request_success_created{labels(e, extra)} {go_float(s.created)}{ts}")

    if s.slo_metrics:
        for name in (TTFT, *s.tpot_families, QUEUE_TIME):
            # the old TPOT observes every output token, the others every request
            per_request = GENERATION_TOKENS_PER_REQUEST if name == TPOT_OLD else 1.0
            lines += _histogram(s, name, [per_request * f for f in finished], labels, ts)
    return "\n".join(lines) + "\n"
