"""No secret in logs or Events: the Prometheus bearer token (even when a proxy echoes the
request's Authorization header back in its error page) and a Hugging Face token found by
`autoscaler lint`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from structlog.testing import capture_logs

from autoscaler.cli import main
from autoscaler.config import ConfigWatcher
from autoscaler.adapters.kubernetes import KubeClient
from autoscaler.controller.loop import Controller
from tests.kube_api_server import KubeApiServer, deployment, node, pod
from tests.security.stub_prometheus import StubPrometheus

TOKEN = "s3cr3t-Prometheus-t0ken-0123456789abcdef"
HF_TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
NS, NAME = "llm", "qwen"


def echo_authorization(status: int, shape: str) -> Any:
    """A proxy that answers `status` and repeats the request's Authorization header."""

    def respond(path: str, headers: dict[str, str]) -> tuple[int, bytes]:
        auth = headers.get("Authorization", "")
        if shape == "prometheus-json":
            body = json.dumps({"status": "error", "errorType": "unauthorized", "error": f"rejected {auth!s} for {path}"})
        elif shape == "success-json-error":
            return 200, json.dumps({"status": "error", "errorType": "bad_data", "error": f"echo {auth}"}).encode()
        elif shape == "bad-value":
            body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
                {"metric": {"vqa_field": "value", "namespace": NS, "pod": f"{NAME}-0"}, "value": [1, auth]}]}})
            return 200, body.encode()
        else:
            body = f"<html><pre>Authorization: {auth}\nGET {path}\n</pre></html>"
        return status, body.encode()

    return respond


def write_config(path: Path, prometheus_url: str, token_file: Path) -> Path:
    doc = {
        "controller": {
            "prometheus": {"url": prometheus_url, "timeout_seconds": 2, "bearer_token_file": str(token_file)},
            "namespace": "autoscaler",
        },
        "targets": [{"namespace": NS, "deployment": NAME, "max_replicas": 8}],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def cluster(kube_server: KubeApiServer) -> KubeApiServer:
    now = time.time()
    kube_server.seed(node("gpu-node-1", gpus=8), deployment(NAME, NS, replicas=2, labels={"app": NAME}))
    for i in range(2):
        kube_server.put(pod(f"{NAME}-{i}", NS, labels={"app": NAME}, created_at=now - 900))
    return kube_server


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


def _everything_recorded(server: KubeApiServer) -> str:
    events = server.list("events")
    bodies = [r.body for r in server.requests]
    return json.dumps(events) + json.dumps(bodies, default=str)


CASES = [(401, "html"), (403, "prometheus-json"), (502, "html"), (400, "prometheus-json"),
         (200, "success-json-error"), (200, "bad-value")]


@pytest.mark.parametrize(("status", "shape"), CASES)
def test_a_tick_logs_no_token_even_when_the_proxy_echoes_it(
    cluster: KubeApiServer, kubeconfig_path: Path, token_file: Path, tmp_path: Path, status: int, shape: str
) -> None:
    with StubPrometheus(echo_authorization(status, shape)) as stub:
        config = write_config(tmp_path / "autoscaler.yaml", stub.url, token_file)
        kube = KubeClient.from_environment(kubeconfig=str(kubeconfig_path), sleep=lambda s: None)
        controller = Controller(watcher=ConfigWatcher(config), kube=kube, clock=time.time)
        try:
            with capture_logs() as logs:
                outcomes = controller.tick()
        finally:
            controller.close()
            kube.close()
    # the token was really sent, and really echoed
    assert stub.requests and stub.requests[0][1]["Authorization"] == f"Bearer {TOKEN}"
    assert any(entry["event"] == "metrics_unreadable" for entry in logs), logs
    assert TOKEN not in repr(logs)
    assert TOKEN not in repr(outcomes)
    assert TOKEN not in _everything_recorded(cluster)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    return subprocess.run([sys.executable, "-m", "autoscaler.cli", *args], capture_output=True, text=True,
                          timeout=60, env=env)


@pytest.fixture
def echoing_prometheus() -> Iterator[StubPrometheus]:
    with StubPrometheus(echo_authorization(401, "html")) as stub:  # the token in the first 300 characters
        yield stub


def test_run_once_prints_no_token(
    cluster: KubeApiServer, kubeconfig_path: Path, token_file: Path, tmp_path: Path,
    echoing_prometheus: StubPrometheus,
) -> None:
    config = write_config(tmp_path / "autoscaler.yaml", echoing_prometheus.url, token_file)
    result = run_cli("run", "--once", "--config", str(config), "--kubeconfig", str(kubeconfig_path))
    assert echoing_prometheus.requests, result.stderr
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]  # --once: log on stderr
    assert any(line["event"] == "metrics_unreadable" for line in lines), result.stderr
    assert TOKEN not in result.stdout and TOKEN not in result.stderr
    assert TOKEN not in _everything_recorded(cluster)
    # check-config shows the settings without reading the token file's content
    shown = run_cli("check-config", str(config))
    assert TOKEN not in shown.stdout + shown.stderr


def test_a_token_file_that_is_unusable_is_reported_without_its_content(
    cluster: KubeApiServer, kubeconfig_path: Path, tmp_path: Path, echoing_prometheus: StubPrometheus
) -> None:
    bad = tmp_path / "token"
    bad.write_text(f"{TOKEN} {TOKEN}\n")  # a space inside: not a valid header value
    config = write_config(tmp_path / "autoscaler.yaml", echoing_prometheus.url, bad)
    kube = KubeClient.from_environment(kubeconfig=str(kubeconfig_path), sleep=lambda s: None)
    controller = Controller(watcher=ConfigWatcher(config), kube=kube, clock=time.time)
    try:
        with capture_logs() as logs:
            controller.tick()
    finally:
        controller.close()
        kube.close()
    assert any(entry["event"] == "metrics_unreadable" for entry in logs), logs
    assert TOKEN not in repr(logs)


MANIFEST = f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: qwen, namespace: llm}}
spec:
  selector: {{matchLabels: {{app: qwen}}}}
  template:
    metadata: {{labels: {{app: qwen}}}}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.10.1
          args: ["serve", "Qwen/Qwen3-8B", "--hf-token={HF_TOKEN}"]
          env:
            - name: HF_TOKEN
              value: {HF_TOKEN}
            - name: OTHER
              value: "token {HF_TOKEN} inline"
"""


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_lint_shows_a_literal_hf_token_redacted(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "deploy.yaml"
    path.write_text(MANIFEST)
    result = CliRunner().invoke(main, ["lint", "--format", fmt, str(path)])
    assert "VQA010" in result.output
    assert HF_TOKEN not in result.output
    assert HF_TOKEN[:5] + "..." in result.output
