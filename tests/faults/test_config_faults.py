"""ConfigMap faults: invalid YAML, an unknown key, a value out of range, at start and while
running. At start the controller refuses to run (exit 2, one line naming the key, the value and
the range) and touches nothing; while running the bad version is logged, counted and ignored,
the last good one stays in force, and a fixed version is applied at the next tick.

No Event: the config is a mounted file, not an object the controller owns; the fault shows in
`config_rejected` log lines, `vllm_autoscaler_config_reloads_total{result="rejected"}` and
`vllm_autoscaler_config_generation` (which does not move).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from structlog.testing import capture_logs

from tests.faults.harness import Stack, events, log_events, make_harness, replicas, seed_cluster, write_config
from tests.kube_api_server import KubeApiServer

pytestmark = pytest.mark.integration

BAD: dict[str, tuple[Callable[[str], str], str]] = {
    "invalid-yaml": (lambda text: text + "\ntargets: [unclosed\n", "invalid YAML: while parsing"),
    "unknown-key": (lambda text: text.replace("min_replicas: 4", "min_replicas: 2\n  min_replica: 2"),
                    "defaults.min_replica"),
    "out-of-range": (lambda text: text.replace("min_replicas: 4", "min_replicas: 2\n  scale_down_window_seconds: -5")
                     .replace("  scale_down_window_seconds: 0\n", ""),
                     "defaults.scale_down_window_seconds = -5, must be >= 0"),
}


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    return subprocess.run([sys.executable, "-m", "autoscaler.cli", *args], capture_output=True, text=True,
                          timeout=60, env=env)


def good_config(path: Path, url: str) -> Path:
    write_config(path, url)
    doc = yaml.safe_load(path.read_text())
    doc["defaults"]["min_replicas"] = 4  # idle pods: held at 4 by the minimum
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.mark.parametrize("kind", list(BAD))
def test_bad_config_at_start_exits_2_naming_the_key_and_touches_nothing(
    kind: str, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    seed_cluster(kube_server, replicas=4)
    config = good_config(tmp_path / "autoscaler.yaml", "http://127.0.0.1:9")
    mutate, message = BAD[kind]
    config.write_text(mutate(config.read_text()))
    result = run_cli("run", "--once", "--config", str(config), "--kubeconfig", str(kubeconfig_path))
    assert result.returncode == 2, result
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 2  # a line per problem, no traceback
    assert "Traceback" not in result.stderr
    assert kube_server.requests == []  # never reached the cluster
    assert replicas(kube_server) == 4


@pytest.mark.parametrize("kind", list(BAD))
def test_config_turned_bad_while_running_keeps_the_last_good(
    kind: str, stack: Stack, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    seed_cluster(kube_server, replicas=4)
    config = good_config(tmp_path / "autoscaler.yaml", stack.proxy.url)
    good_text = config.read_text()
    h = make_harness(config, kubeconfig_path)
    try:
        first = h.tick()
        assert first.decision is not None and (first.action, first.decision.desired_replicas) == ("hold", 4)

        mutate, message = BAD[kind]
        config.write_text(mutate(good_text))  # the ConfigMap is edited: the bad version arrives
        for _ in range(2):  # rejected once, however many ticks it stays
            with capture_logs() as logs:
                during = h.tick()
            assert during.decision is not None
            # the bad version would lower min_replicas to 2 and scale the idle pods down: it must not
            assert (during.action, during.decision.desired_replicas) == ("hold", 4)
            assert replicas(kube_server) == 4
        assert h.metric("vllm_autoscaler_config_reloads_total", result="rejected") == 1
        assert h.metric("vllm_autoscaler_config_generation") == 1
        assert h.controller.watcher.last_error is not None
        assert any(message in p for p in h.controller.watcher.last_error.problems)
        assert kube_server.requests_matching("PATCH") == [] and events(kube_server) == []

        with capture_logs() as logs:
            config.write_text(mutate(good_text))  # same bad text: no second rejection
            h.tick()
        assert "config_rejected" not in log_events(logs)

        # fixed: min_replicas 2 is applied at the next tick, which scales down at once
        config.write_text(good_text.replace("min_replicas: 4", "min_replicas: 2"))
        with capture_logs() as logs:
            after = h.tick()
        assert "config_reloaded" in log_events(logs)
        assert after.decision is not None and (after.action, after.decision.desired_replicas) == ("patched", 3)
        assert h.metric("vllm_autoscaler_config_generation") == 2
        assert h.metric("vllm_autoscaler_config_reloads_total", result="applied") == 1
    finally:
        h.close()


def test_config_rejected_is_logged_with_the_problem(
    stack: Stack, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    seed_cluster(kube_server, replicas=4)
    config = good_config(tmp_path / "autoscaler.yaml", stack.proxy.url)
    h = make_harness(config, kubeconfig_path)
    try:
        h.tick()
        config.write_text(config.read_text().replace("max_replicas: 8", "max_replicas: 0"))
        with capture_logs() as logs:
            h.tick()
        [line] = [x for x in logs if x["event"] == "config_rejected"]
        assert line["log_level"] == "error" and line["generation_in_force"] == 1
        assert any("max_replicas = 0" in p for p in line["problems"]), line
    finally:
        h.close()


def test_a_metrics_address_that_cannot_be_served_is_one_line_and_exit_2(
    kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    """A port out of range, a port in use, a host name that does not resolve: one line, exit 2,
    no traceback, no write (found in review: an OverflowError or gaierror traceback, exit 1)."""
    import socket

    seed_cluster(kube_server, replicas=4)
    config = good_config(tmp_path / "autoscaler.yaml", "http://127.0.0.1:9")
    base = ("run", "--config", str(config), "--kubeconfig", str(kubeconfig_path))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        cases = {
            ("--metrics-port", "99999"): "99999 is not in the range 0<=x<=65535",
            ("--metrics-host", "127.0.0.1", "--metrics-port", port): "address already in use",
            ("--metrics-host", "no.such.host.invalid", "--metrics-port", port):
                "cannot serve /metrics on 'no.such.host.invalid'",
        }
        for extra, message in cases.items():
            result = run_cli(*base, *extra)
            assert result.returncode == 2, result
            assert message in result.stderr and "Traceback" not in result.stderr, result.stderr
            assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert [r.method for r in kube_server.requests if r.method not in ("GET", "HEAD")] == []
    assert replicas(kube_server) == 4
