"""`autoscaler check-config FILE --kubeconfig K`: the targets in the cluster (listed and found by
`target_selector`) with each effective value's source, against the Kubernetes-API test server
through the official client; the CLI runs as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.kube_api_server import KubeApiServer, deployment

pytestmark = pytest.mark.integration

P = "vllm-queue-autoscaler.io/"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"} | {"COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "autoscaler.cli", *args], capture_output=True, text=True,
                          timeout=60, env=env)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "autoscaler.yaml"
    path.write_text(yaml.safe_dump({
        "defaults": {"scale_down_window_seconds": 600},
        "targets": [{"namespace": "llm", "deployment": "qwen", "max_replicas": 8},
                    {"namespace": "llm", "deployment": "gone"}],
        "target_selector": {"namespaces": ["team-a"], "match_labels": {"team": "a"}},
    }))
    return path


def seed(server: KubeApiServer) -> None:
    server.seed(
        deployment("qwen", "llm", annotations={P + "max_replicas": "4", P + "slo.ttft_seconds": "1.5"}),
        deployment("llama", "team-a", labels={"team": "a"}, annotations={P + "paused": "true",
                                                                          P + "min_replicas": "0"}),
        deployment("other", "team-a", labels={"team": "b"}),
    )


def test_check_config_with_a_cluster_shows_every_target_and_where_each_value_came_from(
    config: Path, kube_server: KubeApiServer, kubeconfig_path: Path
) -> None:
    seed(kube_server)
    result = run_cli("check-config", str(config), "--kubeconfig", str(kubeconfig_path), "--json")
    assert result.returncode == 0, result.stderr
    cluster = {f"{e['namespace']}/{e['deployment']}": e for e in json.loads(result.stdout)["cluster"]}
    assert list(cluster) == ["llm/qwen", "llm/gone", "team-a/llama"]  # listed first, then selected
    qwen = cluster["llm/qwen"]
    assert qwen["listed"] and qwen["found"] and not qwen["paused"] and qwen["problems"] == []
    assert qwen["policy"]["max_replicas"] == {"value": 4, "source": "annotation"}
    assert qwen["policy"]["slo.ttft_seconds"] == {"value": 1.5, "source": "annotation"}
    assert qwen["policy"]["scale_down_window_seconds"] == {"value": 600.0, "source": "configmap-defaults"}
    assert qwen["policy"]["min_replicas"] == {"value": 1, "source": "builtin"}
    assert cluster["llm/gone"] == {"namespace": "llm", "deployment": "gone", "listed": True, "found": False}
    llama = cluster["team-a/llama"]
    assert not llama["listed"] and llama["paused"]
    assert llama["problems"] == ["vllm-queue-autoscaler.io/min_replicas = 0, must be >= 1"]
    assert llama["policy"]["min_replicas"] == {"value": 1, "source": "builtin"}  # the ConfigMap's, kept

    text = run_cli("check-config", str(config), "--kubeconfig", str(kubeconfig_path))
    assert text.returncode == 0, text.stderr
    out = text.stdout
    assert "llm/qwen: listed in targets" in out and "team-a/llama: found by target_selector, PAUSED" in out
    assert "llm/gone: listed in targets, Deployment not found" in out
    assert "ignored: vllm-queue-autoscaler.io/min_replicas = 0, must be >= 1" in out
    [row] = [line.split() for line in out.splitlines() if line.strip().startswith("slo.ttft_seconds")
             and "annotation" in line]
    assert row == ["slo.ttft_seconds", "1.5", "annotation"]


def test_without_cluster_options_the_cluster_is_not_read(config: Path) -> None:
    result = run_cli("check-config", str(config), "--json")
    assert result.returncode == 0 and "cluster" not in json.loads(result.stdout)


def test_an_unusable_kubeconfig_is_one_line_and_exit_2(config: Path, tmp_path: Path) -> None:
    """Bad input, as for `run`: exit 2 (a cluster that cannot be read is 1, below)."""
    result = run_cli("check-config", str(config), "--kubeconfig", str(tmp_path / "missing"))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: cannot configure the Kubernetes client:")
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_a_forbidden_list_is_one_line_and_exit_1(config: Path, kube_server: KubeApiServer,
                                                  kubeconfig_path: Path) -> None:
    seed(kube_server)
    kube_server.inject_fault(method="GET", path_regex=r"/deployments$", status=403, times=None)
    result = run_cli("check-config", str(config), "--kubeconfig", str(kubeconfig_path))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("error: cannot read the cluster:") and "deployments" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
