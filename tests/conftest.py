"""Shared fixtures: the Kubernetes-API test server and a real Prometheus with a vLLM exporter."""

from tests.conftest_kube import kube_api_client, kube_client, kube_server, kube_sleeps, kubeconfig_path  # noqa: F401
from tests.conftest_prometheus import (  # noqa: F401
    prometheus_binary,
    prometheus_factory,
    prometheus_server,
    vllm_exporter,
)
