"""A controller process killed in the middle of a tick (SIGKILL: no clean-up at all), then
started again: the rate limits still hold across the restart."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.faults.harness import NAME, NS, Stack, replicas, seed_cluster, write_config
from tests.kube_api_server import KubeApiServer

pytestmark = pytest.mark.integration

SCALE = rf"/namespaces/{NS}/deployments/{NAME}/scale$"
STATE = ("configmaps", "autoscaler", "vllm-queue-autoscaler-state")


def run_args(config: Path, kubeconfig: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "autoscaler.cli", "run", "--config", str(config), "--kubeconfig", str(kubeconfig),
            "--metrics-host", "127.0.0.1", "--metrics-port", "0", *extra]


def decisions(stdout: str) -> list[dict[str, Any]]:
    return [x for x in (json.loads(line) for line in stdout.splitlines() if line.startswith("{"))
            if x.get("event") == "decision"]


def test_sigkill_right_after_the_patch_and_a_restart_keep_the_step_limit(
    stack: Stack, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    """The idle fleet scales 4 -> 3 (one pod per 120 s). The process is killed the moment the
    API server has applied its patch, before the answer reaches it: it never learns that the
    patch went through, nor writes anything after it. Started again at once, it must hold at 3
    for the rest of the period, not remove a second pod (it used to: the scale events lived in
    memory only)."""
    seed_cluster(kube_server, replicas=4)
    config = write_config(tmp_path / "autoscaler.yaml", stack.proxy.url)  # step period 120 s
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    first = subprocess.Popen(run_args(config, kubeconfig_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
    kube_server.inject_fault("PATCH", SCALE, status=None, after=lambda: os.kill(first.pid, signal.SIGKILL))
    try:
        out, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == -signal.SIGKILL, err
    assert [r.status for r in kube_server.requests_matching("PATCH", SCALE)] == [200]  # applied, never answered
    assert replicas(kube_server) == 3
    assert not any(d.get("action") == "patched" for d in decisions(out))  # it died before knowing
    state = kube_server.get(*STATE)
    assert state is not None
    assert [n for _, n in json.loads(state["data"][f"{NS}.{NAME}"])["scale_down_events"]] == [1]

    kube_server.clear_faults()
    kube_server.clear_requests()
    second = subprocess.run(run_args(config, kubeconfig_path, "--once"), capture_output=True, text=True, env=env,
                            timeout=60)
    assert second.returncode == 0, second.stderr
    [decision] = decisions(second.stderr)  # --once: the log on stderr
    assert (decision["action"], decision["current"], decision["desired"], decision["reason"]) == (
        "hold", 3, 3, "hold_scale_down_rate")
    assert kube_server.requests_matching("PATCH") == [] and replicas(kube_server) == 3
    assert time.time() - kube_server.requests[0].at < 120  # the restart came well inside the period
