"""Pytest fixtures for the fake vLLM exporter and a real Prometheus (a plain module).

Import them into tests/conftest.py:

    from tests.conftest_prometheus import (  # noqa: F401
        prometheus_binary, prometheus_factory, prometheus_server, vllm_exporter,
    )

* `prometheus_binary` (session): path of `prometheus`; fails the test with an install hint
  when it is missing (never skips).
* `vllm_exporter`: a started `VllmExporter` without pods; stopped at teardown.
* `prometheus_factory`: `factory(targets=(), **kwargs) -> PrometheusServer`, started, under
  tmp_path; every server it made is stopped at teardown, also when the test failed.
* `prometheus_server`: a started Prometheus with no targets yet; call
  `prometheus_server.reload(vllm_exporter.targets())` after adding pods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.prometheus_server import PrometheusNotInstalled, PrometheusServer, ScrapeTarget, find_prometheus
from tests.vllm_exporter import VllmExporter

__all__ = ["prometheus_binary", "prometheus_factory", "prometheus_server", "vllm_exporter"]

PrometheusFactory = Callable[..., PrometheusServer]


@pytest.fixture(scope="session")
def prometheus_binary() -> str:
    try:
        return find_prometheus()
    except PrometheusNotInstalled as exc:
        message = str(exc)
    pytest.fail(message, pytrace=False)  # outside `except`: no chained traceback noise


@pytest.fixture
def vllm_exporter() -> Iterator[VllmExporter]:
    exporter = VllmExporter().start()
    try:
        yield exporter
    finally:
        exporter.stop()


@pytest.fixture
def prometheus_factory(prometheus_binary: str, tmp_path: Path) -> Iterator[PrometheusFactory]:
    servers: list[PrometheusServer] = []

    def make(targets: Sequence[ScrapeTarget] = (), **kwargs: Any) -> PrometheusServer:
        server = PrometheusServer(
            tmp_path / f"prometheus-{len(servers)}", targets, binary=prometheus_binary, **kwargs
        )
        servers.append(server)  # before start(): a half-started server is stopped too
        return server.start()

    try:
        yield make
    finally:
        errors = []
        for server in reversed(servers):
            try:
                server.stop()
            except Exception as exc:  # noqa: BLE001 - stop the others, then report
                errors.append(exc)
        if errors:
            raise errors[0]


@pytest.fixture
def prometheus_server(prometheus_factory: PrometheusFactory) -> PrometheusServer:
    return prometheus_factory()
