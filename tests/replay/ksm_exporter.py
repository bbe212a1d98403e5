"""A fake kube-state-metrics for tests: `/metrics` with the kube_deployment_* and kube_pod_*
series `autoscaler record` reads, set from the test (mirroring the Kubernetes-API test server).
Only stdlib; binds 127.0.0.1 on an ephemeral port."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.prometheus_server import ScrapeTarget


class KsmExporter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._deployments: dict[tuple[str, str], dict[str, float]] = {}
        self._pods: dict[tuple[str, str], dict[str, float]] = {}
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                body = exporter.render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> KsmExporter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    @property
    def address(self) -> str:
        port = self._server.server_address[1]
        return f"127.0.0.1:{port}"

    def target(self) -> ScrapeTarget:
        return ScrapeTarget(address=self.address, metrics_path="/metrics", job="kube-state-metrics")

    def set_deployment(self, namespace: str, name: str, status: dict[str, Any], spec_replicas: int,
                       generation: int) -> None:
        with self._lock:
            self._deployments[(namespace, name)] = {
                "kube_deployment_spec_replicas": spec_replicas,
                "kube_deployment_status_replicas": status.get("replicas", 0),
                "kube_deployment_status_replicas_updated": status.get("updatedReplicas", 0),
                "kube_deployment_status_replicas_ready": status.get("readyReplicas", 0),
                "kube_deployment_metadata_generation": generation,
                "kube_deployment_status_observed_generation": status.get("observedGeneration", generation),
            }

    def set_pod(self, namespace: str, name: str, *, created: float, scheduled: float | None, ready_at: float | None,
                ready: bool, running: bool) -> None:
        with self._lock:
            values: dict[str, float] = {"kube_pod_created": created, "ready": 1.0 if ready else 0.0,
                                        "kube_pod_container_status_running": 1.0 if running else 0.0}
            if scheduled is not None:
                values["kube_pod_status_scheduled_time"] = scheduled
            if ready_at is not None:
                values["kube_pod_status_ready_time"] = ready_at
            self._pods[(namespace, name)] = values

    def render(self) -> str:
        lines: list[str] = []
        with self._lock:
            for (ns, name), d in sorted(self._deployments.items()):
                for metric, v in d.items():
                    lines.append(f'{metric}{{namespace="{ns}",deployment="{name}"}} {float(v)!r}')
            for (ns, pod), d in sorted(self._pods.items()):
                for metric, v in d.items():
                    if metric == "ready":
                        for cond, val in (("true", v), ("false", 1.0 - v), ("unknown", 0.0)):
                            lines.append(f'kube_pod_status_ready{{namespace="{ns}",pod="{pod}",condition="{cond}"}} {val!r}')
                    elif metric == "kube_pod_container_status_running":
                        lines.append(f'{metric}{{namespace="{ns}",pod="{pod}",container="vllm"}} {v!r}')
                    else:
                        lines.append(f'{metric}{{namespace="{ns}",pod="{pod}"}} {v!r}')
        return "\n".join(lines) + "\n"
