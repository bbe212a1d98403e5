"""Credentials that change under a running controller: the projected ServiceAccount token the
kubelet rotates, the token of an authenticating proxy in front of Prometheus. The API test
server and the fault proxy both check a bearer token; the controller reads both from files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from tests.faults.harness import (
    Stack,
    log_events,
    make_harness,
    replicas,
    seed_cluster,
    write_config,
)
from tests.kube_api_server import KubeApiServer

pytestmark = pytest.mark.integration


def test_rotated_tokens_are_used_without_a_restart(
    stack: Stack, kube_server: KubeApiServer, tmp_path: Path
) -> None:
    """Both tokens rotate between two ticks and the old ones are revoked at once (the worst
    case: a kubelet keeps the old token valid a while). The next tick gets a 401 from each,
    re-reads each file, and goes on with the new tokens: no restart, no tick lost. (The tokens
    used to be read once: every tick then got 401 and the controller held for ever.)"""
    seed_cluster(kube_server, replicas=4)
    kube_token, prom_token = tmp_path / "kube-token", tmp_path / "prom-token"
    kube_token.write_text("kube-token-1\n")
    prom_token.write_text("prom-token-1\n")
    kubeconfig = kube_server.write_kubeconfig(tmp_path / "kubeconfig")
    doc = json.loads(kubeconfig.read_text())
    doc["users"][0]["user"] = {"tokenFile": str(kube_token)}  # as the in-cluster service account
    kubeconfig.write_text(json.dumps(doc))
    kube_server.bearer_tokens = {"kube-token-1"}
    stack.proxy.bearer_tokens = {"prom-token-1"}
    config = write_config(tmp_path / "autoscaler.yaml", stack.proxy.url,
                          controller={"prometheus": {"url": stack.proxy.url, "timeout_seconds": 1,
                                                     "rate_window_seconds": 4,
                                                     "bearer_token_file": str(prom_token)}})
    h = make_harness(config, kubeconfig)
    try:
        first = h.tick()
        assert first.action == "patched" and replicas(kube_server) == 3

        kube_token.write_text("kube-token-2\n")
        prom_token.write_text("prom-token-2\n")
        kube_server.bearer_tokens = {"kube-token-2"}
        stack.proxy.bearer_tokens = {"prom-token-2"}
        kube_server.clear_requests()
        with capture_logs() as logs:
            second = h.tick()
        assert second.decision is not None and second.action == "hold"  # the step period: a healthy hold
        assert second.decision.values.unhealthy_pods == {}  # Prometheus was read
        names = log_events(logs)
        assert "cluster_unreadable" not in names and "metrics_unreadable" not in names
        assert names.count("kube_token_reloaded") == 1 and names.count("prometheus_token_reloaded") == 1
        assert [r.status for r in kube_server.requests][:2] == [401, 200]  # one 401, then the new token
        assert h.errors("kubernetes") == 0 and h.errors("prometheus") == 0
        # no token in any log line
        assert not any("token-" in str(v) for line in logs for v in line.values())
    finally:
        h.close()
