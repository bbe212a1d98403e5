"""PromQL escaping end to end: namespace strings with quotes, backslashes, newlines, braces
and regex metacharacters go through `build_queries` into a REAL Prometheus. Kubernetes
namespaces cannot hold most of these (the config accepts DNS labels only), but the escaping
must hold anyway: every query is accepted (no HTTP 400), and a namespace matches itself
literally, never another one (`l.m` or `llm|x` must not read the pods of `llm`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from autoscaler.adapters.prometheus import PrometheusSource, build_queries
from tests.prometheus_server import PrometheusServer
from tests.vllm_exporter import VllmExporter

pytestmark = pytest.mark.integration

# namespaces that have a vLLM pod (scraped with these exact label values)
POPULATED = ["llm", 'q"uote', "back\\slash", "new\nline", "br}ace{", "x|y", "tab\there", "dollar$", "ünï"]
# namespaces without pods, each built to match one of the above if it were not escaped
EMPTY = [
    "l.m", "ll.", "llm|x", "x", ".*", ".+", "llm.*", "(llm)", "llm)|(.*", "[l]lm", "^llm$", "llm$", "l+m", r"\w+",
    "llm\\", '"', '"}', '"} or vllm:num_requests_waiting{namespace=~".*', "}", "{", "\n", "\\", "q\\\"uote",
    "back\\\\slash", "new\\nline", "br}ace", "x|", "|y", "dollar", "ünï.", "\x7f", "\t",
]


@pytest.fixture(scope="module")
def hostile_prometheus(
    prometheus_binary: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, VllmExporter]]:
    exporter = VllmExporter().start()
    for i, ns in enumerate(POPULATED):
        exporter.set(ns, f"pod-{i}", waiting=i, running=1, kv=0.5, completed=1.0)
    server = PrometheusServer(tmp_path_factory.mktemp("hostile-prometheus"), exporter.targets(),
                              binary=prometheus_binary)
    try:
        server.start()
        server.wait_for_series("count(vllm:num_requests_waiting)",
                               lambda r: bool(r) and int(float(r[0]["value"][1])) == len(POPULATED), timeout=30)
        yield server.url, exporter
    finally:
        server.stop()
        exporter.stop()


@pytest.fixture
def source(hostile_prometheus: tuple[str, VllmExporter]) -> PrometheusSource:
    return PrometheusSource(hostile_prometheus[0], retry_attempts=1)


def test_the_label_values_reached_prometheus_verbatim(hostile_prometheus: tuple[str, VllmExporter]) -> None:
    server_url = hostile_prometheus[0]
    with PrometheusSource(server_url) as source:
        samples = source.query("count by (namespace) (vllm:num_requests_waiting)")
    assert sorted(labels["namespace"] for labels, _, _ in samples) == sorted(POPULATED)


@pytest.mark.parametrize("namespace", POPULATED, ids=repr)
def test_a_hostile_namespace_matches_exactly_itself(source: PrometheusSource, namespace: str) -> None:
    with source:
        pods = source.fetch([namespace])  # raises PrometheusQueryError on a 400: the test fails
    i = POPULATED.index(namespace)
    assert list(pods) == [(namespace, f"pod-{i}")]
    metrics = pods[(namespace, f"pod-{i}")]
    assert metrics.waiting is not None and metrics.waiting.value == i


@pytest.mark.parametrize("namespace", EMPTY, ids=repr)
def test_a_metacharacter_namespace_matches_nothing_else(source: PrometheusSource, namespace: str) -> None:
    with source:
        assert source.fetch([namespace]) == {}


def test_all_at_once_in_one_alternation(source: PrometheusSource) -> None:
    with source:
        pods = source.fetch(POPULATED + EMPTY)
    assert sorted(pods) == sorted((ns, f"pod-{i}") for i, ns in enumerate(POPULATED))


def test_the_queries_stay_printable_one_liners() -> None:
    for promql in build_queries(POPULATED + EMPTY).values():
        assert "\n" not in promql and "\t" not in promql and "\x7f" not in promql
