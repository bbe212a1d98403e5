"""Fakes of the two adapters, checked at teardown: a test fails on any unscripted call (even
one the loop swallowed) and on any scripted answer left unused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.controller.fakes import FakeKube, FakePrometheus


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    fake = FakeKube()
    yield fake
    fake.verify()


@pytest.fixture
def prometheus() -> Iterator[FakePrometheus]:
    fake = FakePrometheus()
    yield fake
    fake.verify()
