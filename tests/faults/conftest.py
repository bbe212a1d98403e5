"""Fixtures of the fault matrix: one Prometheus (with its exporter and fault proxy) for the
whole directory, since target discovery takes ~5 s per start; each test resets it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.faults.harness import Stack, start_stack


@pytest.fixture(scope="session")
def fault_stack(prometheus_binary: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from start_stack(prometheus_binary, tmp_path_factory.mktemp("fault-prometheus"))


@pytest.fixture
def stack(fault_stack: Stack) -> Iterator[Stack]:
    """The shared stack, idle and passing through; reset again after the test."""
    fault_stack.reset()
    yield fault_stack
    fault_stack.proxy.set_mode("pass")
    fault_stack.proxy.bearer_tokens = None
