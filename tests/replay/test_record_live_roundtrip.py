"""Round trip against a real Prometheus: a few live ticks of the controller while the load
changes, `autoscaler record` over that window (at the tick times), and an open-loop replay
that must rebuild the same observations and make the same decisions, tick by tick.

The live ticks are put on a grid (t0 + k * 3 s) and each tick runs just after its instant
(so every sample up to it is ingested) with the controller's clock set to the instant; the
recording uses --start t0 --step 3s, so each recorded step is evaluated at a tick's `now`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from autoscaler.adapters.kubernetes import KubeClient
from autoscaler.adapters.prometheus import PrometheusSource, split_range
from autoscaler.cli import main
from autoscaler.config import ConfigWatcher
from autoscaler.controller.loop import Controller
from autoscaler.policy import Decision, Observation
from autoscaler.replay.open_loop import load_policy, observation_of, replay
from autoscaler.replay.reader import read_recording
from tests.kube_api_server import KubeApiServer, deployment, pod
from tests.prometheus_server import PrometheusServer
from tests.replay.ksm_exporter import KsmExporter
from tests.vllm_exporter import VllmExporter

pytestmark = pytest.mark.integration

NS, NAME, STEP = "llm", "qwen", 3.0
PODS = [f"{NAME}-0", f"{NAME}-1"]
# per tick: the gauges of both pods (requests finish at 1.6/s throughout)
PLAN: list[dict[str, float]] = [
    {"waiting": 15, "running": 8, "kv": 0.95},
    {"waiting": 40, "running": 8, "kv": 1.0},
    {"waiting": 3, "running": 6, "kv": 0.5},
    {"waiting": 0, "running": 1, "kv": 0.1},
    {"waiting": 0, "running": 0, "kv": 0.05},
]


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def ksm() -> Iterator[KsmExporter]:
    exporter = KsmExporter().start()
    try:
        yield exporter
    finally:
        exporter.stop()


def _config(path: Path, url: str) -> Path:
    doc: dict[str, Any] = {
        "controller": {"tick_seconds": 15, "namespace": "autoscaler",
                       "prometheus": {"url": url, "timeout_seconds": 5, "rate_window_seconds": 4}},
        "defaults": {"scale_down_window_seconds": 6, "scale_down_window_lead_times": 0, "scale_down_period_seconds": 3},
        "targets": [{"namespace": NS, "deployment": NAME, "max_replicas": 8}],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def _mirror(kube: KubeApiServer, ksm: KsmExporter) -> int:
    dep = kube.get("deployments", NS, NAME)
    assert dep is not None
    spec = int(dep["spec"]["replicas"])
    ksm.set_deployment(NS, NAME, dep.get("status") or {}, spec, int(dep["metadata"].get("generation", 1)))
    return spec


def _decisions(decisions: list[Decision]) -> list[tuple[int, int, str, str | None]]:
    return [(d.current_replicas, d.desired_replicas, d.reason.value, d.clamp.value if d.clamp else None)
            for d in decisions]


def test_recording_of_a_live_run_replays_to_the_live_decisions(
    vllm_exporter: VllmExporter, prometheus_server: PrometheusServer, kube_server: KubeApiServer,
    kubeconfig_path: Path, ksm: KsmExporter, tmp_path: Path,
) -> None:
    base = float(int(time.time()))
    kube_server.seed(deployment(NAME, NS, replicas=2, labels={"app": NAME}))  # no node: free GPUs unknown
    for name in PODS:
        kube_server.put(pod(name, NS, labels={"app": NAME}, state="ready", created_at=base - 900,
                            scheduled_at=base - 898, started_at=base - 880, ready_at=base - 700))
        ksm.set_pod(NS, name, created=base - 900, scheduled=base - 898, ready_at=base - 700, ready=True, running=True)
        vllm_exporter.set(NS, name, completed=1.6, engines=1, waiting=PLAN[0]["waiting"],
                          running=PLAN[0]["running"], kv=PLAN[0]["kv"])
    spec = _mirror(kube_server, ksm)
    prometheus_server.reload([*vllm_exporter.targets(), ksm.target()])
    prometheus_server.wait_for_series(
        'sum by (pod) (rate(vllm:request_success_total{namespace="llm"}[4s]))',
        lambda r: len(r) == 2 and all(abs(float(x["value"][1]) - 1.6) < 0.1 for x in r), timeout=30)
    prometheus_server.wait_for_series("kube_deployment_spec_replicas", timeout=30)

    config = _config(tmp_path / "autoscaler.yaml", prometheus_server.url)
    clock = Clock(0.0)
    kube = KubeClient.from_environment(kubeconfig=str(kubeconfig_path), sleep=lambda s: None)
    controller = Controller(watcher=ConfigWatcher(config), kube=kube, clock=clock)
    t0 = math.ceil(time.time()) + 1.0  # after the setup, so a busy machine does not eat tick 0's slack
    clock.now = t0
    live: list[Decision] = []
    observations: list[Observation] = []
    try:
        for k, values in enumerate(PLAN):
            t = t0 + k * STEP
            if k:
                for name in PODS:
                    vllm_exporter.set(NS, name, waiting=values["waiting"], running=values["running"], kv=values["kv"])
                want = values["waiting"]

                def scraped(r: list[dict[str, Any]], want: float = want) -> bool:
                    return bool(r) and float(r[0]["value"][1]) == want

                prometheus_server.wait_for_series('max(vllm:num_requests_waiting{namespace="llm"})', scraped)
                prometheus_server.wait_for_series(
                    f'kube_deployment_spec_replicas{{namespace="{NS}"}} == {spec}', timeout=10)
            assert time.time() < t, f"tick {k}: the setup took longer than the {STEP} s step"
            time.sleep(t + 0.3 - time.time())  # every sample up to t is ingested
            clock.now = t
            [outcome] = controller.tick()
            assert outcome.decision is not None and outcome.observation is not None, outcome
            live.append(outcome.decision)
            observations.append(outcome.observation)
            spec = _mirror(kube_server, ksm)
    finally:
        controller.close()
        kube.close()
    assert len({d.desired_replicas for d in live}) > 1, _decisions(live)  # the run did scale

    out = tmp_path / "rec.jsonl.gz"
    t_end = t0 + (len(PLAN) - 1) * STEP
    result = CliRunner().invoke(main, [
        "record", "--prometheus", prometheus_server.url, "--target", f"{NS}/{NAME}", "--start", f"{t0}",
        "--end", f"{t_end}", "--step", "3s", "--pod-regex", f"{NAME}-[0-9]+", "--rate-window", "4s",
        "--out", str(out), "--quiet",
    ])
    assert result.exit_code == 0, result.output
    rec = read_recording(out)
    assert [s.t for s in rec.steps] == [t0 + k * STEP for k in range(len(PLAN))]
    assert rec.header.metadata["readiness_source"] == "kube_pod_status_ready"
    assert rec.header.metadata["spec_source"] == "kube_deployment_spec_replicas"
    # the same observations as the live loop built...
    for k, (step, obs) in enumerate(zip(rec.steps, observations)):
        assert observation_of(step) == obs, f"tick {k}"
    # (with the SLO signals of format version 2: token rates and the three latency histograms)
    last = observations[-1].ready_pods
    assert last and all(None not in (p.prompt_tokens_per_second, p.generation_tokens_per_second, p.ttft, p.tpot,
                                     p.queue_time) for p in last), last
    # ...and the same decisions through the same decide()
    replayed = replay(rec, load_policy(str(config), NS, NAME))
    got = [(t.current, t.desired, t.reason, t.clamp) for t in replayed.ticks]
    assert got == _decisions(live)
    # the recorded spec of the next step is what the live loop patched
    assert [t.recorded_next for t in replayed.ticks[:-1]] == [d.desired_replicas for d in live[:-1]]

    # a chunked range query returns the same series as one query
    with PrometheusSource(prometheus_server.url) as source:
        whole = source.query_range("vllm:num_requests_waiting", t0, t_end, STEP)
        chunked = source.query_range("vllm:num_requests_waiting", t0, t_end, STEP, max_points=2)
    assert len(split_range(t0, t_end, STEP, 2)) == 3
    assert sorted(map(repr, whole)) == sorted(map(repr, chunked)) and whole
