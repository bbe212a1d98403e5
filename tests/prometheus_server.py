"""Run a real Prometheus server for integration tests (127.0.0.1, ephemeral port).

    server = PrometheusServer(tmp_path, targets=exporter.targets())
    server.start()
    try:
        server.wait_for_series('vllm:num_requests_waiting', lambda r: len(r) == 3)
        server.reload(new_targets)
    finally:
        server.stop()

Static targets carry `__metrics_path__`, `namespace` and `pod` as target labels, so the
scraped series are labelled like with Kubernetes pod service discovery plus the usual
relabeling. Scrape interval 1 s. Only stdlib (+PyYAML, a project dependency).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

INSTALL_HINT = (
    "The integration tests start a real Prometheus: run `make prometheus` (installs Debian's "
    "package) or `make test`, or put a Prometheus 2.x binary on PATH or in $PROMETHEUS_BIN."
)


class PrometheusNotInstalled(RuntimeError):
    pass


def find_prometheus() -> str:
    """Path of the Prometheus binary ($PROMETHEUS_BIN, else `prometheus` on PATH)."""
    explicit = os.environ.get("PROMETHEUS_BIN")
    if explicit:
        if os.access(explicit, os.X_OK):
            return explicit
        raise PrometheusNotInstalled(f"PROMETHEUS_BIN={explicit!r} is not executable. {INSTALL_HINT}")
    found = shutil.which("prometheus")
    if not found:
        raise PrometheusNotInstalled(f"`prometheus` is not on PATH. {INSTALL_HINT}")
    return found


@dataclass(frozen=True)
class ScrapeTarget:
    address: str  # host:port
    metrics_path: str = "/metrics"
    labels: Mapping[str, str] = field(default_factory=dict)
    job: str = "vllm"


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the test process dies, even by SIGKILL (Linux)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def render_config(targets: Sequence[ScrapeTarget], scrape_interval: str = "1s") -> str:
    jobs: dict[str, list[dict[str, Any]]] = {}
    for t in targets:
        labels = {"__metrics_path__": t.metrics_path, **dict(t.labels)}
        jobs.setdefault(t.job, []).append({"targets": [t.address], "labels": labels})
    config = {
        "global": {
            "scrape_interval": scrape_interval,
            "scrape_timeout": scrape_interval,
            "evaluation_interval": scrape_interval,
        },
        "scrape_configs": [
            {"job_name": job, "static_configs": static} for job, static in sorted(jobs.items())
        ],
    }
    return str(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))


class PrometheusServer:
    def __init__(
        self,
        workdir: Path,
        targets: Sequence[ScrapeTarget] = (),
        *,
        scrape_interval: str = "1s",
        binary: str | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.targets = list(targets)
        self.scrape_interval = scrape_interval
        self.binary = binary or find_prometheus()
        self.extra_args = list(extra_args)
        self.config_path = self.workdir / "prometheus.yml"
        self.log_path = self.workdir / "prometheus.log"
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float = 30.0) -> PrometheusServer:
        self._write_config(self.targets)
        last_error = ""
        for _attempt in range(3):  # the free port may be taken between probe and bind
            self.port = free_port()
            self._spawn()
            try:
                self._wait_ready(timeout)
                return self
            except RuntimeError as exc:
                last_error = str(exc)
                self.stop()
                if "address already in use" not in last_error:
                    break
        raise RuntimeError(f"Prometheus did not start: {last_error}")

    def _spawn(self) -> None:
        data = self.workdir / "data"
        shutil.rmtree(data, ignore_errors=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        args = [
            self.binary,
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={data}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-lifecycle",
            "--storage.tsdb.retention.time=1h",
            # Hidden flag (2.x/3.x): apply discovered targets after 100 ms instead of 5 s. The
            # discovery manager still batches its first update for ~5 s, so expect ~5 s from
            # start (or reload) to the first scrape of a new target.
            "--scrape.discovery-reload-interval=100ms",
            *self.extra_args,
        ]
        self._proc = subprocess.Popen(
            args,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.workdir,
            start_new_session=True,  # Ctrl-C of pytest must not reach it before teardown
            preexec_fn=_die_with_parent,
        )

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                code = None if proc is None else proc.returncode
                raise RuntimeError(f"prometheus exited with {code}; log:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"prometheus not ready after {timeout}s; log:\n{self.log_tail()}")
            time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        try:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=timeout)
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "<no log>"
        return "\n".join(text.splitlines()[-lines:])

    # ------------------------------------------------------------------ config

    def _write_config(self, targets: Sequence[ScrapeTarget]) -> None:
        self.config_path.write_text(render_config(targets, self.scrape_interval), encoding="utf-8")

    def reload(self, targets: Sequence[ScrapeTarget], timeout: float = 10.0) -> None:
        """Replace the scrape targets (POST /-/reload) and wait until Prometheus has them."""
        self.targets = list(targets)
        self._write_config(self.targets)
        req = urllib.request.Request(f"{self.url}/-/reload", method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                resp.read()
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"reload failed: {exc.code} {exc.read()!r}\n{self.log_tail()}") from exc
        want = {(t.job, t.metrics_path) for t in self.targets}
        deadline = time.monotonic() + timeout
        while True:
            active = self.api_get("/api/v1/targets", {"state": "active"})["activeTargets"]
            have = {(t["labels"].get("job"), t["discoveredLabels"].get("__metrics_path__")) for t in active}
            if have == want:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"targets after reload: {sorted(have)}, want {sorted(want)}")
            time.sleep(0.05)

    # ------------------------------------------------------------------ API

    def api_get(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        url = f"{self.url}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = json.load(resp)
        if body.get("status") != "success":
            raise RuntimeError(f"{path}: {body}")
        return body["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """Raw instant query; returns `data.result`."""
        return list(self.api_get("/api/v1/query", {"query": promql})["result"])

    def wait_for_series(
        self,
        promql: str,
        predicate: Callable[[list[dict[str, Any]]], bool] = bool,
        timeout: float = 15.0,
        interval: float = 0.2,
    ) -> list[dict[str, Any]]:
        """Poll `promql` until `predicate(result)` holds; returns that result."""
        deadline = time.monotonic() + timeout
        result: list[dict[str, Any]] = []
        while True:
            result = self.query(promql)
            if predicate(result):
                return result
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout}s waiting for {promql!r}; last result: {result}\n"
                    f"prometheus log:\n{self.log_tail()}"
                )
            time.sleep(interval)

    def self_metric(self, name: str, labels: Mapping[str, str]) -> float:
        """A sample of Prometheus' own /metrics (e.g. prometheus_http_requests_total)."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        want = [f'{k}="{v}"' for k, v in labels.items()]
        total = 0.0  # summed over the other labels (e.g. code="200" and code="400")
        for line in text.splitlines():
            if line.startswith(name + "{") and all(w in line for w in want):
                total += float(line.rsplit(" ", 1)[1])
        return total
