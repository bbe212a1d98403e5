"""Shared fixtures: the Kubernetes-API test server and a real Prometheus with a vLLM exporter."""

from collections.abc import Iterator

import pytest
import structlog

from tests.conftest_kube import kube_api_client, kube_client, kube_server, kube_sleeps, kubeconfig_path  # noqa: F401
from tests.conftest_prometheus import (  # noqa: F401
    prometheus_binary,
    prometheus_factory,
    prometheus_server,
    vllm_exporter,
)


@pytest.fixture(autouse=True)
def _no_terminal_size_from_the_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI wraps at `COLUMNS` when it is set (and never when piped without it); a test runner
    may set it (pytest-xdist's workers get COLUMNS=80), so every test starts without it and the
    tests about widths set it themselves."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


_STRUCTLOG_AT_START = {**structlog.get_config(), "processors": list(structlog.get_config()["processors"])}


@pytest.fixture(autouse=True)
def _structlog_as_at_start() -> Iterator[None]:
    """Every command configures structlog process-wide (its level and stream: docs/cli.md); a
    command run in this process by click's test runner (in a test or a module's fixture) must
    not leave its level to the next test (`capture_logs` swaps the processors, not the level
    filter). Each test starts from the configuration the session started with."""
    structlog.configure(**{**_STRUCTLOG_AT_START, "processors": list(_STRUCTLOG_AT_START["processors"])})
    yield
