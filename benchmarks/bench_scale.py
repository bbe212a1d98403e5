"""Scale bench: one controller, 1,000 Deployments (5,000 pods), per tick.

    python benchmarks/bench_scale.py [--deployments 1000] [--pods-per-deployment 5] [--ticks 3]

What runs (loopback only, everything stopped at the end):

* the Kubernetes-API test server (`tests/kube_api_server.py`), in this process, seeded with
  the Deployments (10 namespaces), their pods (ready, bound) and GPU nodes (8 GPUs each,
  25 % spare);
* a real Prometheus (`prometheus` on PATH or $PROMETHEUS_BIN) scraping ONE exporter path
  that serves every pod's vLLM series with `namespace`/`pod` labels (`honor_labels: true`),
  every 5 s: waiting, running, KV-cache usage and `vllm:request_success_total` (two finished
  reasons) per pod and engine, i.e. 25,000 series for 5,000 pods;
* the controller in a CHILD process (so that its peak RSS is its own, not the test servers'):
  `Controller.tick()` with a config of 1,000 targets, real clock, JSON logs to /dev/null.

Measured per tick: Prometheus queries (Prometheus' own `prometheus_http_requests_total`
for /api/v1/query), Kubernetes requests (the API test server's request log, split into list
calls and the rest), wall and CPU time of the tick. Then, in the child, a breakdown: one
`KubeClient.snapshot`, one `PrometheusSource.fetch`, `build_observation` for every target,
and `decide()` for every target over those same observations and the controller's states,
CPU time by `time.process_time` (best of 5). Peak RSS of the child (`ru_maxrss`).

The load is steady (every pod at 0 waiting, 4 running, KV 0.5): the decisions hold, so no
per-target write (patch, Event) muddles the per-tick request count. Writes, when decisions
do change, are one GET + one PATCH of the scale and one Event per changed target.

Writes `benchmarks/results/scale.json` and prints a table. Budgets (issue 6): Prometheus
queries and Kubernetes list calls per tick constant in the number of targets, decide() for
all targets <= 50 ms CPU, peak RSS < 300 MB. Exit 0 even over budget (the figures are the
point); `--strict` exits 1 when a budget is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "results" / "scale.json"
NAMESPACES = 10
GPUS_PER_NODE = 8
SCRAPE_INTERVAL_SECONDS = 5
DECIDE_BUDGET_MS = 50.0
RSS_BUDGET_MB = 300.0
CONTROLLER_NAMESPACE = "vllm-queue-autoscaler"


# --------------------------------------------------------------------------- the fleet


def fleet(deployments: int, pods_per_deployment: int) -> list[tuple[str, str, list[str]]]:
    """[(namespace, deployment, [pod names])], spread over NAMESPACES namespaces."""
    out = []
    for i in range(deployments):
        ns = f"team-{i % NAMESPACES:02d}"
        name = f"model-{i:04d}"
        pods = [f"{name}-6d8f9c7b5-{j:05d}" for j in range(pods_per_deployment)]
        out.append((ns, name, pods))
    return out


class FleetExporter:
    """One /metrics path serving the vLLM series of every pod, labelled namespace/pod."""

    def __init__(self, pods: list[tuple[str, str]]) -> None:
        self.pods = pods
        self.started = time.time()
        self.scrapes = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def body(self) -> bytes:
        elapsed = time.time() - self.started
        stop, length = 1.0 * elapsed, 0.05 * elapsed  # requests finished per pod: 1.05/s
        lines = [
            "# TYPE vllm:num_requests_waiting gauge",
            "# TYPE vllm:num_requests_running gauge",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            "# TYPE vllm:request_success_total counter",
        ]
        for ns, pod in self.pods:
            labels = f'namespace="{ns}",pod="{pod}",engine="0",model_name="m"'
            lines.append(f"vllm:num_requests_waiting{{{labels}}} 0.0")
            lines.append(f"vllm:num_requests_running{{{labels}}} 4.0")
            lines.append(f"vllm:kv_cache_usage_perc{{{labels}}} 0.5")
            lines.append(f'vllm:request_success_total{{{labels},finished_reason="stop"}} {stop:.3f}')
            lines.append(f'vllm:request_success_total{{{labels},finished_reason="length"}} {length:.3f}')
        return ("\n".join(lines) + "\n").encode()

    def start(self) -> FleetExporter:
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                data = exporter.body()
                exporter.scrapes += 1
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="fleet-exporter")
        self._thread.start()
        return self

    @property
    def address(self) -> str:
        assert self._server is not None
        return f"127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def start_prometheus(workdir: Path, exporter: FleetExporter) -> Any:
    import yaml

    from tests.prometheus_server import PrometheusServer

    class FleetPrometheus(PrometheusServer):
        def _write_config(self, targets: Any) -> None:
            config = {
                "global": {"scrape_interval": f"{SCRAPE_INTERVAL_SECONDS}s",
                           "scrape_timeout": f"{SCRAPE_INTERVAL_SECONDS}s",
                           "evaluation_interval": f"{SCRAPE_INTERVAL_SECONDS}s"},
                "scrape_configs": [{"job_name": "vllm-fleet", "honor_labels": True,
                                    "static_configs": [{"targets": [exporter.address]}]}],
            }
            self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))

    return FleetPrometheus(workdir, scrape_interval=f"{SCRAPE_INTERVAL_SECONDS}s").start()


def seed_cluster(server: Any, layout: list[tuple[str, str, list[str]]]) -> int:
    from tests.kube_api_server import deployment, node, pod

    total_pods = sum(len(p) for _, _, p in layout)
    nodes = -(-int(total_pods * 1.25) // GPUS_PER_NODE)
    for k in range(nodes):
        server.put(node(f"gpu-node-{k:04d}", gpus=GPUS_PER_NODE))
    now = time.time()
    slot = 0
    for ns, name, pods in layout:
        server.put(deployment(name, ns, replicas=len(pods), labels={"app": name}))
        for pod_name in pods:
            server.put(pod(pod_name, ns, labels={"app": name}, state="ready",
                           node_name=f"gpu-node-{slot // GPUS_PER_NODE:04d}", created_at=now - 3600,
                           scheduled_at=now - 3598, started_at=now - 3580, ready_at=now - 3400))
            slot += 1
    return nodes


def write_config(path: Path, prometheus_url: str, layout: list[tuple[str, str, list[str]]]) -> None:
    import yaml

    doc = {
        "controller": {
            "tick_seconds": 15,
            "prometheus": {"url": prometheus_url, "timeout_seconds": 10, "rate_window_seconds": 60},
            "namespace": CONTROLLER_NAMESPACE,
        },
        "defaults": {"max_replicas": 10},
        "targets": [{"namespace": ns, "deployment": name} for ns, name, _ in layout],
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


# --------------------------------------------------------------------------- the controller (child)


def child(config: str, kubeconfig: str) -> None:
    """Tick on demand: read a command per line on stdin, answer one JSON line on stdout."""
    from autoscaler.config import ConfigWatcher
    from autoscaler.adapters.kubernetes import KubeClient
    from autoscaler.controller.logs import configure_logging
    from autoscaler.controller.loop import Controller
    from autoscaler.controller.observe import build_observation
    from autoscaler.policy import decide
    from autoscaler.adapters.prometheus import build_queries

    out = sys.stdout
    devnull = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the child
    configure_logging(devnull)  # the decision lines are written (and serialised) like in production
    kube = KubeClient.from_environment(kubeconfig=kubeconfig, request_timeout_seconds=60.0)
    controller = Controller(watcher=ConfigWatcher(config), kube=kube, controller_namespace=CONTROLLER_NAMESPACE)

    def answer(doc: dict[str, Any]) -> None:
        out.write(json.dumps(doc) + "\n")
        out.flush()

    answer({"ready": True})
    for line in sys.stdin:
        command = line.strip()
        if command == "tick":
            wall, cpu = time.perf_counter(), time.process_time()
            outcomes = controller.tick()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            actions: dict[str, int] = {}
            for o in outcomes:
                actions[o.action] = actions.get(o.action, 0) + 1
            reasons: dict[str, int] = {}
            for o in outcomes:
                if o.decision is not None:
                    reasons[o.decision.reason.value] = reasons.get(o.decision.reason.value, 0) + 1
            answer({"wall_s": wall, "cpu_s": cpu, "targets": len(outcomes), "actions": actions, "reasons": reasons})
        elif command == "measure":
            cfg = controller.watcher.current
            namespaces = sorted({t.namespace for t in cfg.targets})
            source = controller._source(cfg.controller.prometheus)  # noqa: SLF001 - the one the ticks used
            t0 = time.perf_counter()
            snapshot = kube.snapshot(namespaces)
            t1 = time.perf_counter()
            now = time.time()
            metrics = source.fetch(namespaces, now=now)
            t2 = time.perf_counter()
            jobs = []
            for target, policy in cfg.effective_policies():
                dep = snapshot.deployment(target.namespace, target.deployment)
                assert dep is not None, target.name
                jobs.append((policy, build_observation(snapshot, dep, metrics), controller.states[target.key]))
            t3 = time.perf_counter()
            deps = [d for d in snapshot.deployments]
            p0 = time.perf_counter()
            for dep in deps:
                snapshot.pods_of(dep)
            p1 = time.perf_counter()
            for dep in deps:
                snapshot.free_gpus_for(dep)
            p2 = time.perf_counter()
            q_times = {}
            for key, promql in build_queries(namespaces, cfg.controller.prometheus.rate_window_seconds).items():
                q0 = time.perf_counter()
                source.query(promql, now=now)
                q_times[key] = time.perf_counter() - q0
            runs = []
            for _ in range(5):
                c0 = time.process_time()
                for policy, observation, state in jobs:
                    decide(policy, observation, state, now)
                runs.append(time.process_time() - c0)
            answer({
                "snapshot_wall_s": t1 - t0,
                "fetch_wall_s": t2 - t1,
                "build_observations_wall_s": t3 - t2,
                "pods_of_all_wall_s": p1 - p0,
                "free_gpus_for_all_wall_s": p2 - p1,
                "query_wall_s": q_times,
                "decide_cpu_s_runs": runs,
                "pods_with_metrics": len(metrics),
                "ready_pods_observed": sum(len(o.ready_pods) for _, o, _ in jobs),
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
            })
        elif command == "quit":
            break
    controller.close()


# --------------------------------------------------------------------------- the parent


def prometheus_queries(prom: Any) -> float:
    return float(prom.self_metric("prometheus_http_requests_total", {"handler": "/api/v1/query"}))


def run(deployments: int, pods_per_deployment: int, ticks: int) -> dict[str, Any]:
    from tests.kube_api_server import KubeApiServer

    layout = fleet(deployments, pods_per_deployment)
    pods = [(ns, p) for ns, _, names in layout for p in names]
    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    exporter = FleetExporter(pods).start()
    prom = None
    proc: subprocess.Popen[str] | None = None
    try:
        with KubeApiServer() as server:
            t = time.perf_counter()
            nodes = seed_cluster(server, layout)
            seed_s = time.perf_counter() - t
            prom = start_prometheus(work / "prometheus", exporter)
            # two scrapes at least, so that rate() has its two samples for every pod
            t = time.perf_counter()
            prom.wait_for_series("count(rate(vllm:request_success_total[60s]))",
                                 lambda r: bool(r) and int(float(r[0]["value"][1])) == 2 * len(pods),
                                 timeout=120, interval=1.0)
            fill_s = time.perf_counter() - t
            series = int(float(prom.query('count({__name__=~"vllm:.*"})')[0]["value"][1]))
            config = work / "autoscaler.yaml"
            write_config(config, prom.url, layout)
            kubeconfig = server.write_kubeconfig(work / "kubeconfig")
            env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
            env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
            proc = subprocess.Popen([sys.executable, __file__, "--child", str(config), str(kubeconfig)],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
            assert proc.stdin is not None and proc.stdout is not None

            def ask(command: str) -> dict[str, Any]:
                assert proc is not None and proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(command + "\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"controller child exited ({proc.wait()}) on {command!r}")
                doc: dict[str, Any] = json.loads(line)
                return doc

            assert json.loads(proc.stdout.readline()).get("ready")
            per_tick = []
            for i in range(ticks):
                server.clear_requests()
                q0 = prometheus_queries(prom)
                result = ask("tick")
                q1 = prometheus_queries(prom)
                reqs = list(server.requests)
                lists = [r for r in reqs if r.method == "GET" and _is_list(r.path)]
                result.update(
                    tick=i + 1,
                    prometheus_queries=int(q1 - q0),
                    kubernetes_requests=len(reqs),
                    kubernetes_list_calls=len(lists),
                    kubernetes_other=sorted({f"{r.method} {r.path}" for r in reqs if r not in lists})[:10],
                )
                per_tick.append(result)
                if i + 1 < ticks:
                    time.sleep(1.0)
            breakdown = ask("measure")
            ask_quit(proc)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if prom is not None:
            prom.stop()
        exporter.stop()
        shutil.rmtree(work, ignore_errors=True)

    decide_ms = min(breakdown["decide_cpu_s_runs"]) * 1000
    steady = per_tick[1:] or per_tick
    return {
        "benchmark": "scale",
        "deployments": deployments,
        "pods": len(pods),
        "namespaces": NAMESPACES,
        "nodes": nodes,
        "prometheus_series": series,
        "scrape_interval_seconds": SCRAPE_INTERVAL_SECONDS,
        "seed_seconds": round(seed_s, 2),
        "prometheus_fill_seconds": round(fill_s, 2),
        "ticks": per_tick,
        "prometheus_queries_per_tick": sorted({t["prometheus_queries"] for t in per_tick}),
        "kubernetes_list_calls_per_tick": sorted({t["kubernetes_list_calls"] for t in per_tick}),
        "kubernetes_requests_per_tick": [t["kubernetes_requests"] for t in per_tick],
        "tick_wall_seconds_steady": round(statistics.median(t["wall_s"] for t in steady), 3),
        "tick_cpu_seconds_steady": round(statistics.median(t["cpu_s"] for t in steady), 3),
        "breakdown": {
            "snapshot_wall_seconds": round(breakdown["snapshot_wall_s"], 3),
            "fetch_wall_seconds": round(breakdown["fetch_wall_s"], 3),
            "build_observations_wall_seconds": round(breakdown["build_observations_wall_s"], 3),
            "pods_of_all_targets_wall_seconds": round(breakdown["pods_of_all_wall_s"], 3),
            "free_gpus_for_all_targets_wall_seconds": round(breakdown["free_gpus_for_all_wall_s"], 3),
            "query_wall_seconds": {k: round(v, 3) for k, v in breakdown["query_wall_s"].items()},
            "pods_with_metrics": breakdown["pods_with_metrics"],
            "ready_pods_observed": breakdown["ready_pods_observed"],
        },
        "decide_cpu_ms_all_targets": round(decide_ms, 1),
        "decide_cpu_us_per_target": round(decide_ms * 1000 / deployments, 1),
        "decide_budget_ms": DECIDE_BUDGET_MS,
        "decide_within_budget": decide_ms <= DECIDE_BUDGET_MS,
        "controller_peak_rss_mb": round(breakdown["peak_rss_mb"], 1),
        "rss_budget_mb": RSS_BUDGET_MB,
        "rss_within_budget": breakdown["peak_rss_mb"] < RSS_BUDGET_MB,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def ask_quit(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("quit\n")
    proc.stdin.flush()
    proc.wait(timeout=30)


def _is_list(path: str) -> bool:
    """A collection path (list call), e.g. /api/v1/pods, /apis/apps/v1/namespaces/x/deployments."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    collections = {"pods", "nodes", "deployments", "horizontalpodautoscalers", "events", "configmaps", "leases"}
    return bool(parts) and parts[-1] in collections


def print_table(r: dict[str, Any]) -> None:
    rows = [
        ("Deployments / pods / nodes", f"{r['deployments']} / {r['pods']} / {r['nodes']}"),
        ("vLLM series in Prometheus", str(r["prometheus_series"])),
        ("Prometheus queries per tick", ", ".join(map(str, r["prometheus_queries_per_tick"]))),
        ("Kubernetes list calls per tick", ", ".join(map(str, r["kubernetes_list_calls_per_tick"]))),
        ("Kubernetes requests per tick (all)", ", ".join(map(str, r["kubernetes_requests_per_tick"]))),
        ("tick wall time (steady, median)", f"{r['tick_wall_seconds_steady']:.2f} s"),
        ("tick CPU time (steady, median)", f"{r['tick_cpu_seconds_steady']:.2f} s"),
        ("  snapshot (list + parse)", f"{r['breakdown']['snapshot_wall_seconds']:.2f} s"),
        ("  Prometheus fetch (5 queries + parse)", f"{r['breakdown']['fetch_wall_seconds']:.2f} s"),
        ("  build_observation x targets", f"{r['breakdown']['build_observations_wall_seconds']:.2f} s"),
        ("    of which pods_of() x targets", f"{r['breakdown']['pods_of_all_targets_wall_seconds']:.2f} s"),
        ("    of which free_gpus_for() x targets",
         f"{r['breakdown']['free_gpus_for_all_targets_wall_seconds']:.2f} s"),
        ("decide() CPU, all targets", f"{r['decide_cpu_ms_all_targets']:.1f} ms "
                                      f"({r['decide_cpu_us_per_target']:.0f} us/target; budget {DECIDE_BUDGET_MS:.0f} ms"
                                      f"{'' if r['decide_within_budget'] else ', OVER BUDGET'})"),
        ("controller peak RSS", f"{r['controller_peak_rss_mb']:.0f} MB (budget {RSS_BUDGET_MB:.0f} MB"
                                f"{'' if r['rss_within_budget'] else ', OVER BUDGET'})"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--child", nargs=2, metavar=("CONFIG", "KUBECONFIG"), help=argparse.SUPPRESS)
    parser.add_argument("--deployments", type=int, default=1000)
    parser.add_argument("--pods-per-deployment", type=int, default=5)
    parser.add_argument("--ticks", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a budget is missed")
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    result = run(args.deployments, args.pods_per_deployment, args.ticks)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print_table(result)
    print(f"wrote {args.out}")
    constant = len(result["prometheus_queries_per_tick"]) == 1 and len(result["kubernetes_list_calls_per_tick"]) == 1
    ok = constant and result["decide_within_budget"] and result["rss_within_budget"]
    return 0 if ok or not args.strict else 1


if __name__ == "__main__":
    sys.exit(main())
