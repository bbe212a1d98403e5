"""Fixtures for tests against the in-process Kubernetes API test server.

Import them into a conftest (or a test module) to use them:

    from tests.conftest_kube import kube_api_client, kube_client, kube_server, kube_sleeps, kubeconfig_path  # noqa: F401
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes import config as _k8s_config

from autoscaler.adapters.kubernetes import KubeClient
from tests.kube_api_server import KubeApiServer

k8s_config: Any = _k8s_config  # untyped module


@pytest.fixture
def kube_server() -> Iterator[KubeApiServer]:
    """A started KubeApiServer on 127.0.0.1 (ephemeral port), stopped after the test."""
    with KubeApiServer() as server:
        yield server


@pytest.fixture
def kubeconfig_path(kube_server: KubeApiServer, tmp_path: Path) -> Path:
    """A kubeconfig file pointing at `kube_server` (plain http, no auth, namespace default)."""
    return kube_server.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def kube_api_client(kubeconfig_path: Path) -> Iterator[Any]:
    """The official client's ApiClient configured for `kube_server` (urllib3 retries off)."""
    configuration = k8s_client.Configuration()
    k8s_config.load_kube_config(config_file=str(kubeconfig_path), client_configuration=configuration,
                                persist_config=False)
    configuration.retries = False
    api_client: Any = k8s_client.ApiClient(configuration)
    yield api_client
    api_client.close()


@pytest.fixture
def kube_sleeps() -> list[float]:
    """The waits `kube_client` asked for, in order (it never really sleeps)."""
    return []


@pytest.fixture
def kube_client(kubeconfig_path: Path, kube_sleeps: list[float]) -> Iterator[KubeClient]:
    """autoscaler.adapters.kubernetes.KubeClient for `kube_server`; its retry sleeps append to `kube_sleeps`."""
    client = KubeClient.from_environment(kubeconfig=str(kubeconfig_path), sleep=kube_sleeps.append,
                                         request_timeout_seconds=5.0, reporting_instance="test-instance")
    yield client
    client.close()
