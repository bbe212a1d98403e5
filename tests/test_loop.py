"""The live loop end to end: a vLLM-format exporter scraped by a real Prometheus, the
Kubernetes-API test server spoken to by the official client, and `autoscaler run`.

Nothing of ours is mocked: the CLI runs as a subprocess, the Controller in-process with an
explicit clock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from structlog.testing import capture_logs

from autoscaler.config import ConfigWatcher
from autoscaler.adapters.kubernetes import KubeClient
from autoscaler.controller.loop import Controller
from autoscaler.controller.telemetry import ControllerMetrics, HealthServer
from tests.kube_api_server import KubeApiServer, deployment, hpa, node, pod
from tests.prometheus_server import PrometheusServer
from tests.vllm_exporter import VllmExporter

pytestmark = pytest.mark.integration

NS = "llm"
NAME = "qwen"


def write_config(path: Path, prometheus_url: str, **target: Any) -> Path:
    doc = {
        "controller": {
            "tick_seconds": 15,
            # the exporter's counters are seconds old: a short rate window reads them right
            "prometheus": {"url": prometheus_url, "timeout_seconds": 5, "rate_window_seconds": 4},
            "metrics_port": 9102,
            "state_configmap": "vllm-queue-autoscaler-state",
            "namespace": "autoscaler",
        },
        "defaults": {"scale_down_window_seconds": 600},
        "targets": [{"namespace": NS, "deployment": NAME, "max_replicas": 8, **target}],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def seed_cluster(server: KubeApiServer, replicas: int = 2, ready_at: float | None = None) -> None:
    now = time.time()
    server.seed(node("gpu-node-1", gpus=8), deployment(NAME, NS, replicas=replicas, labels={"app": NAME}))
    for i in range(replicas):
        server.put(pod(f"{NAME}-{i}", NS, labels={"app": NAME}, state="ready", created_at=now - 900,
                       scheduled_at=now - 898, started_at=now - 880, ready_at=ready_at or now - 700))


@pytest.fixture
def busy_fleet(vllm_exporter: VllmExporter, prometheus_server: PrometheusServer) -> PrometheusServer:
    """Two vLLM pods with a queue and a nearly full KV cache, scraped by a real Prometheus."""
    for i in range(2):
        vllm_exporter.set(NS, f"{NAME}-{i}", waiting=15, running=8, kv=0.95, completed=1.6, engines=1)
    scrape(prometheus_server, vllm_exporter)
    return prometheus_server


def scrape(prometheus: PrometheusServer, exporter: VllmExporter) -> None:
    """Point Prometheus at the exporter's pods and wait until their throughput reads 1.6/s."""
    prometheus.reload(exporter.targets())
    prometheus.wait_for_series(
        'sum by (pod) (rate(vllm:request_success_total{namespace="llm"}[4s]))',
        lambda r: len(r) == 2 and all(abs(float(x["value"][1]) - 1.6) < 0.1 for x in r), timeout=30
    )


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    return subprocess.run(
        [sys.executable, "-m", "autoscaler.cli", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def decision_lines(stdout: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("event") == "decision"]


def test_run_once_patches_the_scale_and_records_an_event(
    busy_fleet: PrometheusServer, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    seed_cluster(kube_server)
    config = write_config(tmp_path / "autoscaler.yaml", busy_fleet.url)
    result = run_cli("run", "--once", "--config", str(config), "--kubeconfig", str(kubeconfig_path))
    assert result.returncode == 0, result.stderr

    # 2 pods x (15 waiting, 8 running, KV 0.95, 1.6 done/s). One reading gives no arrival
    # rate yet, so the batch model: (30 + 16) / (8 + 3) = 4.18, at most 2 + 2 queued pods = 4;
    # KV 1.9 / 0.8 = 2.375. -> 4
    dep = kube_server.get("deployments", NS, NAME)
    assert dep is not None and dep["spec"]["replicas"] == 4
    [line] = decision_lines(result.stderr)
    assert line["reason"] == "scale_up_queue" and line["action"] == "patched"
    assert line["queue_model"] == "batch" and line["waiting_total"] == pytest.approx(30)
    assert line["lead_time_seconds"] == 300.0  # 6 free GPUs: no node to wait for
    assert line["free_gpus"] == 6
    events = kube_server.list("events", NS)
    assert [e["reason"] for e in events] == ["ScaledUp"]
    assert events[0]["involvedObject"]["name"] == NAME and "2 -> 4" in events[0]["message"]
    assert "scale_up_queue" in result.stdout  # the CLI prints the reason (the log is on stderr)


def test_dry_run_never_patches(
    busy_fleet: PrometheusServer, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    seed_cluster(kube_server)
    config = write_config(tmp_path / "autoscaler.yaml", busy_fleet.url)
    result = run_cli("run", "--once", "--dry-run", "--config", str(config), "--kubeconfig", str(kubeconfig_path))
    assert result.returncode == 0, result.stderr
    [line] = decision_lines(result.stderr)
    assert (line["desired"], line["action"], line["dry_run"]) == (4, "dry_run", True)
    assert kube_server.requests_matching(method="PATCH") == []
    assert kube_server.requests_matching(method="PUT", path_regex="/scale$") == []
    assert kube_server.get("deployments", NS, NAME)["spec"]["replicas"] == 2  # type: ignore[index]
    assert kube_server.list("events", NS) == []


def test_refuses_a_deployment_an_hpa_scales_but_shadows_it_in_dry_run(
    busy_fleet: PrometheusServer, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    seed_cluster(kube_server)
    kube_server.put(hpa("qwen-cpu", NS, target_name=NAME))
    config = write_config(tmp_path / "autoscaler.yaml", busy_fleet.url)

    result = run_cli("run", "--once", "--config", str(config), "--kubeconfig", str(kubeconfig_path))
    assert result.returncode == 0, result.stderr
    [line] = decision_lines(result.stderr)
    assert (line["action"], line["hpa"]) == ("skipped_hpa", "qwen-cpu")
    assert kube_server.requests_matching(method="PATCH") == []
    warnings = [e for e in kube_server.list("events", NS) if e["type"] == "Warning"]
    assert [e["reason"] for e in warnings] == ["HPAConflict"] and "qwen-cpu" in warnings[0]["message"]

    shadow = run_cli("run", "--once", "--dry-run", "--config", str(config), "--kubeconfig", str(kubeconfig_path))
    [line] = decision_lines(shadow.stderr)
    assert (line["action"], line["hpa"], line["desired"]) == ("dry_run", "qwen-cpu", 4)


def test_prometheus_down_holds_and_says_so(
    kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    seed_cluster(kube_server, replicas=4)
    # nothing listens on port 9 of loopback (discard): connection refused
    config = write_config(tmp_path / "autoscaler.yaml", "http://127.0.0.1:9")
    result = run_cli("run", "--once", "--config", str(config), "--kubeconfig", str(kubeconfig_path))
    assert result.returncode == 1, result.stderr  # --once: Prometheus not read is a failed tick
    lines = [json.loads(x) for x in result.stderr.splitlines() if x.startswith("{")]
    assert any(x["event"] == "metrics_unreadable" for x in lines)
    [line] = decision_lines(result.stderr)
    assert (line["desired"], line["reason"]) == (4, "hold_metrics_unhealthy")
    assert line["unhealthy_pods"] == {f"{NAME}-{i}": "absent" for i in range(4)}
    assert kube_server.requests_matching(method="PATCH") == []


def test_invalid_config_exits_2_naming_the_key(tmp_path: Path) -> None:
    config = write_config(tmp_path / "autoscaler.yaml", "http://127.0.0.1:9", scale_down_window_seconds=-5)
    result = run_cli("run", "--once", "--config", str(config))
    assert result.returncode == 2
    assert "targets[0].scale_down_window_seconds = -5, must be >= 0" in result.stderr


# ---- in-process: several ticks with an explicit clock -------------------------------------


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def make_controller(config: Path, kubeconfig: Path, clock: Clock, **kw: Any) -> Controller:
    kube = KubeClient.from_environment(kubeconfig=str(kubeconfig), sleep=lambda s: None)
    return Controller(watcher=ConfigWatcher(config), kube=kube, clock=clock, **kw)


def test_burst_through_the_loop_counts_pods_in_flight_and_does_not_cascade(
    vllm_exporter: VllmExporter,
    prometheus_server: PrometheusServer,
    kube_server: KubeApiServer,
    kubeconfig_path: Path,
    tmp_path: Path,
) -> None:
    """Two ticks 6 s apart (real time: Prometheus' rate() needs real samples). Tick 1 reads a long queue on 2 full pods and scales
    up, with lead time and reason logged. The deployment controller creates the pods; they
    load. Tick 2: the queue on the 2 ready pods keeps growing, as it must until the new pods
    serve; the pods in flight are counted and no second step is taken."""
    seed_cluster(kube_server)
    for i in range(2):
        vllm_exporter.set(NS, f"{NAME}-{i}", waiting=100, running=32, kv=1.0, completed=1.6, engines=1)
    scrape(prometheus_server, vllm_exporter)
    config = write_config(tmp_path / "autoscaler.yaml", prometheus_server.url)
    t0 = time.time()
    clock = Clock(t0)
    controller = make_controller(config, kubeconfig_path, clock)
    try:
        with capture_logs() as logs:
            [first] = controller.tick()
        # first reading, no arrival rate yet: batch model (200 + 64) / (32 + 3) = 7.5, at most
        # 2 + 2 queued pods = 4
        assert first.action == "patched" and first.decision is not None
        assert (first.decision.desired_replicas, first.decision.reason.value) == (4, "scale_up_queue")
        assert first.decision.values.lead_time_seconds == 300.0
        line = next(x for x in logs if x["event"] == "decision")
        for key in ("waiting_total", "queue_replicas", "arrivals_per_second", "lead_time_seconds",
                    "pods_in_flight", "reason", "clamp"):
            assert key in line

        # the deployment controller creates the new pods: they are loading
        for i in range(2, 4):
            kube_server.put(pod(f"{NAME}-{i}", NS, labels={"app": NAME}, state="loading",
                                created_at=clock.now + 1, scheduled_at=clock.now + 2, started_at=clock.now + 5))
        for i in range(2):  # the queue keeps growing on the 2 ready pods meanwhile
            vllm_exporter.set(NS, f"{NAME}-{i}", waiting=104)
        prometheus_server.wait_for_series('sum(vllm:num_requests_waiting{namespace="llm"})',
                                          lambda r: bool(r) and float(r[0]["value"][1]) >= 208)
        time.sleep(max(0.0, t0 + 6 - time.time()))
        clock.now = t0 + 6
        [second] = controller.tick()
        assert second.decision is not None
        assert second.decision.values.pods_in_flight == 2
        assert second.decision.values.pods_in_flight_by_stage == {"loading": 2}
        # load 264 -> 272 in 6 s: arrivals 3.2 + 1.33 = 4.53/s, keep up 2.83, drain help
        # 2 x 101 / 192 = 1.05: 3.88 -> 4. The backlog on the ready pods grew, yet the
        # replicas do not (HPA on waiting would now ask for 208 / 5 = 42)
        assert second.decision.values.arrivals_per_second == pytest.approx(3.2 + 8 / 6, abs=0.15)
        assert second.decision.desired_replicas == 4, second.decision
        assert second.decision.reason.value in ("hold_steady", "hold_capacity_in_flight")
        assert kube_server.get("deployments", NS, NAME)["spec"]["replicas"] == 4  # type: ignore[index]
    finally:
        controller.close()
        controller.kube.close()


def test_one_failing_target_does_not_stop_the_others_and_state_survives_restart(
    busy_fleet: PrometheusServer, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    now = time.time()
    seed_cluster(kube_server, ready_at=now - 900 + 2 + 150)  # scheduled -> ready: 150 s
    config = write_config(tmp_path / "autoscaler.yaml", busy_fleet.url, lead_time_min_samples=2)
    doc = yaml.safe_load(config.read_text())
    doc["targets"].insert(0, {"namespace": NS, "deployment": "missing"})
    config.write_text(yaml.safe_dump(doc))

    clock = Clock(now)
    controller = make_controller(config, kubeconfig_path, clock)
    try:
        outcomes = controller.tick()
    finally:
        controller.close()
        controller.kube.close()
    assert [o.action for o in outcomes] == ["error", "patched"]
    assert "not found" in (outcomes[0].error or "")
    # the two ready pods taught the load time (scheduled -> ready = 150 s), kept in the cluster
    assert outcomes[1].decision is not None and outcomes[1].decision.values.model_load_seconds == 150.0
    state = kube_server.get("configmaps", "autoscaler", "vllm-queue-autoscaler-state")
    assert state is not None and "llm.qwen" in state["data"]

    # a new controller process (restart) starts with what was learned, even before any pod
    # becomes ready again: drop the pods' startup times from its view by making them old
    kube_server.delete("pods", NS, f"{NAME}-0")
    kube_server.delete("pods", NS, f"{NAME}-1")
    for i in range(3):
        kube_server.put(pod(f"{NAME}-{i}", NS, labels={"app": NAME}, state="ready", created_at=now - 9000,
                            scheduled_at=now - 8990, ready_at=now - 8000))
    restarted = make_controller(config, kubeconfig_path, Clock(now + 15))
    try:
        [_, outcome] = restarted.tick()
    finally:
        restarted.close()
        restarted.kube.close()
    assert outcome.decision is not None
    assert outcome.decision.values.lead_time_learned
    assert 150.0 <= outcome.decision.values.model_load_seconds < 990.0


def test_invalid_config_while_running_keeps_the_last_good(
    busy_fleet: PrometheusServer, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    seed_cluster(kube_server)
    config = write_config(tmp_path / "autoscaler.yaml", busy_fleet.url, max_replicas=2)
    clock = Clock(time.time())
    metrics = ControllerMetrics()
    controller = make_controller(config, kubeconfig_path, clock, metrics=metrics)
    try:
        [o1] = controller.tick()
        assert o1.decision is not None and o1.decision.desired_replicas == 2  # pinned by max 2
        config.write_text(config.read_text().replace("max_replicas: 2", "max_replicas: -1"))
        clock.now += 15
        with capture_logs() as logs:
            [o2] = controller.tick()
        assert any(x["event"] == "config_rejected" for x in logs)
        assert o2.decision is not None and o2.decision.desired_replicas == 2  # last good config in force
        assert b'vllm_autoscaler_config_reloads_total{result="rejected"} 1.0' in metrics.render()
    finally:
        controller.close()
        controller.kube.close()


def test_health_and_metrics_endpoints(
    busy_fleet: PrometheusServer, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    seed_cluster(kube_server)
    config = write_config(tmp_path / "autoscaler.yaml", busy_fleet.url)
    clock = Clock(time.time())
    metrics = ControllerMetrics()
    # one injected clock for the tick's wall time and for liveness' elapsed time
    controller = make_controller(config, kubeconfig_path, clock, metrics=metrics, monotonic=clock)
    server = HealthServer(metrics, controller.healthy, controller.ready, host="127.0.0.1", port=0).start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        with pytest.raises(urllib.error.HTTPError) as not_ready:
            urllib.request.urlopen(f"{base}/readyz", timeout=5)
        assert not_ready.value.code == 503
        controller.tick()
        assert urllib.request.urlopen(f"{base}/readyz", timeout=5).status == 200
        assert urllib.request.urlopen(f"{base}/healthz", timeout=5).status == 200
        body = urllib.request.urlopen(f"{base}/metrics", timeout=5).read().decode()
        assert 'vllm_autoscaler_decision_reason{deployment="qwen",namespace="llm",reason="scale_up_queue"} 1.0' in body
        assert 'vllm_autoscaler_desired_replicas{deployment="qwen",namespace="llm"} 4.0' in body
        assert "vllm_autoscaler_tick_duration_seconds_count 1.0" in body
        clock.now += 3 * 15 + 31  # no tick for too long: the loop is stalled
        with pytest.raises(urllib.error.HTTPError) as stalled:
            urllib.request.urlopen(f"{base}/healthz", timeout=5)
        assert stalled.value.code == 503
    finally:
        server.stop()
        controller.close()
        controller.kube.close()


def test_a_follower_decides_but_never_writes(
    busy_fleet: PrometheusServer, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    seed_cluster(kube_server)
    config = write_config(tmp_path / "autoscaler.yaml", busy_fleet.url)
    controller = make_controller(config, kubeconfig_path, Clock(time.time()), fence=Follower())
    try:
        [outcome] = controller.tick()
    finally:
        controller.close()
        controller.kube.close()
    assert outcome.action == "standby" and outcome.decision is not None and outcome.decision.desired_replicas == 4
    assert kube_server.requests_matching(method="PATCH") == []
    assert kube_server.requests_matching(method="POST") == []  # no Event, no state ConfigMap
    assert kube_server.requests_matching(method="PUT") == []


class Follower:
    def time_left(self) -> float:
        return 0.0


def test_run_once_with_leader_election_is_refused(tmp_path: Path) -> None:
    """One tick cannot wait out a Lease, and acting without one could race the leader."""
    result = run_cli("run", "--once", "--leader-elect", "--config", str(tmp_path / "none.yaml"), timeout=30)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: --once cannot be used with --leader-elect: run one tick without election (only where no other "
        "replica runs), or run without --once"]
    assert result.stdout == ""


@pytest.mark.parametrize("args, says", [
    (("--lease-duration", "99999999999999999999"), "--lease-duration 1e+20: must be at most 3600 seconds"),
    (("--lease-duration", "5", "--renew-deadline", "10"), "leader election needs 0 < retry_period_seconds"),
])
def test_bad_lease_settings_are_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...], says: str) -> None:
    config = write_config(tmp_path / "autoscaler.yaml", "http://127.0.0.1:9")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
                          "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
                          "users: [{name: u, user: {}}]\n")
    result = run_cli("run", "--leader-elect", "--config", str(config), "--kubeconfig", str(kubeconfig), *args, timeout=30)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and says in line


def test_a_malformed_kubeconfig_is_one_line_and_exit_2(tmp_path: Path) -> None:
    config = write_config(tmp_path / "autoscaler.yaml", "http://127.0.0.1:9")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nclusters: [{name: c\n")
    result = run_cli("run", "--once", "--config", str(config), "--kubeconfig", str(kubeconfig), timeout=30)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: cannot configure the Kubernetes client: ")


def test_run_with_leader_election_stops_cleanly_on_sigterm(
    busy_fleet: PrometheusServer, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    seed_cluster(kube_server)
    config = write_config(tmp_path / "autoscaler.yaml", busy_fleet.url)
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    env["POD_NAME"] = "controller-0"
    proc = subprocess.Popen(
        [sys.executable, "-m", "autoscaler.cli", "run", "--config", str(config), "--kubeconfig",
         str(kubeconfig_path), "--leader-elect", "--metrics-host", "127.0.0.1", "--metrics-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            dep = kube_server.get("deployments", NS, NAME)
            if dep is not None and dep["spec"]["replicas"] == 4:
                break
            time.sleep(0.2)
        lease = kube_server.get("leases", "autoscaler", "vllm-queue-autoscaler")
        assert lease is not None and lease["spec"]["holderIdentity"] == "controller-0"
        assert kube_server.get("deployments", NS, NAME)["spec"]["replicas"] == 4  # type: ignore[index]
        proc.send_signal(15)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    events = [json.loads(x)["event"] for x in out.splitlines() if x.startswith("{")]
    assert "stopping" in events
    # the lease was handed back: a follower takes over at once
    lease = kube_server.get("leases", "autoscaler", "vllm-queue-autoscaler")
    assert lease is not None and lease["spec"]["holderIdentity"] in ("", None)
