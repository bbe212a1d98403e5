"""Fuzzing the Prometheus response parsers (hypothesis): whatever a Prometheus, a proxy or a
broken load balancer answers, `decode_response`, `parse_vector`, `parse_matrix` and the
whole `PrometheusSource.fetch` path either return well-typed results or raise one of the
module's typed errors (`PrometheusError` subclasses) with a clear, bounded message. Never
another exception: the loop only catches those (and OSError/ValueError/TypeError)."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from autoscaler.adapters.prometheus import (
    FIELD_LABEL,
    PodMetrics,
    PrometheusBadResponse,
    PrometheusError,
    PrometheusQueryError,
    PrometheusSource,
    decode_response,
    parse_matrix,
    parse_vector,
)

KEYS = ["status", "data", "resultType", "result", "metric", "value", "values", "errorType", "error",
        "warnings", "namespace", "pod", FIELD_LABEL]
NUMBER_STRINGS = st.one_of(
    st.sampled_from(["NaN", "+Inf", "-Inf", "Inf", "inf", "nan", "1e999", "-0", "0x10", "1_000", " 1", "", "1e", ".",
                     "٣"]),  # a non-ASCII digit: float() takes it, Prometheus never sends it
    st.floats().map(repr),
    st.integers().map(str),
    st.text(max_size=6),
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8), NUMBER_STRINGS)
jsonish = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=5)), inner, max_size=5),
    ),
    max_leaves=20,
)
labels = st.dictionaries(st.one_of(st.sampled_from(["namespace", "pod", FIELD_LABEL, "__name__"]), st.text(max_size=5)),
                         st.one_of(st.sampled_from(["value", "timestamp", "llm", "p-0"]), st.text(max_size=5)),
                         max_size=4)
timestamps = st.one_of(st.floats(), st.integers(), st.booleans(), st.text(max_size=4), st.none())
pairs = st.one_of(st.tuples(timestamps, NUMBER_STRINGS).map(list), jsonish)


@st.composite
def near_valid(draw: st.DrawFn, kind: str) -> Any:
    """Mostly the right shape, with a mistake here and there: reaches the accepting paths."""
    if kind == "vector":
        item = st.fixed_dictionaries({"metric": st.one_of(labels, jsonish), "value": pairs})
    else:
        item = st.fixed_dictionaries({"metric": st.one_of(labels, jsonish),
                                      "values": st.one_of(st.lists(pairs, max_size=4), jsonish)})
    data = st.fixed_dictionaries(
        {"result": st.one_of(st.lists(item, max_size=5), jsonish)},
        optional={"resultType": st.sampled_from(["vector", "matrix", "scalar", "string", "", None])},
    )
    body = st.fixed_dictionaries(
        {"status": st.sampled_from(["success", "success", "error", None, 1])},
        optional={"data": st.one_of(data, jsonish), "errorType": scalars, "error": scalars, "warnings": jsonish},
    )
    return draw(body)


# What Prometheus writes: Go's float text (its specials spelled its way), integer or float timestamps.
PROMETHEUS_VALUES = st.one_of(st.sampled_from(["NaN", "+Inf", "Inf", "-Inf"]),
                              st.floats(allow_nan=False, allow_infinity=False).map(repr), st.integers().map(str))


def well_formed(kind: str) -> st.SearchStrategy[Any]:
    """Answers the parsers must accept (near_valid's rarely are): every kind of value on the accepting path."""
    pair = st.tuples(st.one_of(st.integers(0, 2**34), st.floats(0, 2e9)), PROMETHEUS_VALUES).map(list)
    item = st.fixed_dictionaries({"metric": labels, **({"value": pair} if kind == "vector" else
                                                         {"values": st.lists(pair, max_size=4)})})
    return st.fixed_dictionaries({"status": st.just("success"),
                                  "data": st.fixed_dictionaries({"resultType": st.just(kind),
                                                                 "result": st.lists(item, max_size=5)})})


def _check_message(exc: PrometheusError) -> None:
    text = str(exc)
    assert text.strip(), f"empty message: {exc!r}"


def _check_float(value: Any) -> None:
    assert type(value) is float


def _check_read(value: float, ts: float, raw: list[Any]) -> None:
    """The pair as Prometheus wrote it: the timestamp's number and float() of the value's text
    (which reads "NaN", "+Inf", "Inf" and "-Inf" as Prometheus means them); NaN equals NaN."""
    _check_float(value)
    expected = float(raw[1])
    assert value == expected or (math.isnan(value) and math.isnan(expected)), (value, raw)
    assert type(ts) is float and ts == float(raw[0]), (ts, raw)


@settings(max_examples=600, deadline=None)  # about 400 (as before) on the error paths, 200 well-formed
@given(body=st.one_of(jsonish, near_valid("vector"), well_formed("vector")))
def test_parse_vector_accepts_or_raises_a_typed_error(body: Any) -> None:
    try:
        samples = parse_vector(body)
    except PrometheusError as exc:
        assert isinstance(exc, PrometheusBadResponse)
        _check_message(exc)
        return
    assert isinstance(samples, list)
    result = body["data"]["result"]  # accepted: one sample per element, in the server's order
    assert len(samples) == len(result)
    for (sample_labels, value, ts), item in zip(samples, result):
        assert isinstance(sample_labels, dict) and sample_labels == item["metric"]
        assert all(type(k) is str and type(v) is str for k, v in sample_labels.items())
        _check_read(value, ts, item["value"])
        assert math.isfinite(ts)


@settings(max_examples=600, deadline=None)  # about 400 (as before) on the error paths, 200 well-formed
@given(body=st.one_of(jsonish, near_valid("matrix"), well_formed("matrix")))
def test_parse_matrix_accepts_or_raises_a_typed_error(body: Any) -> None:
    try:
        series = parse_matrix(body)
    except PrometheusError as exc:
        assert isinstance(exc, PrometheusBadResponse)
        _check_message(exc)
        return
    result = body["data"]["result"]  # accepted: one series per element, in the server's order
    assert len(series) == len(result)
    for (series_labels, points), item in zip(series, result):
        assert all(type(k) is str and type(v) is str for k, v in series_labels.items())
        assert series_labels == item["metric"] and len(points) == len(item["values"])
        for (ts, value), raw in zip(points, item["values"]):
            assert type(ts) is float and math.isfinite(ts)
            _check_read(value, ts, raw)


bodies = st.one_of(
    st.binary(max_size=64),
    jsonish.map(lambda d: json.dumps(d).encode()),
    near_valid("vector").map(lambda d: json.dumps(d).encode()),
    st.sampled_from([b"", b"null", b"[" * 50_000, b'{"a":' * 50_000, b"\xff\xfe\x00", b"NaN", b"<html>502</html>",
                     "{\"status\":\"success\"}".encode("utf-16"), b'{"status": "error", "error": "' + b"x" * 5000 + b'"}']),
)


@settings(max_examples=400, deadline=None)
@given(status=st.one_of(st.integers(100, 599), st.sampled_from([200, 400, 422, 500, 503])), body=bodies)
def test_decode_response_returns_json_or_raises_a_typed_error(status: int, body: bytes) -> None:
    try:
        doc = decode_response(status, body)
    except PrometheusError as exc:
        _check_message(exc)
        assert len(str(exc)) < 12_000
        if status in (400, 422):
            assert isinstance(exc, PrometheusQueryError) and exc.status_code == status
        elif status != 200:
            assert isinstance(exc, PrometheusBadResponse) and exc.status_code == status
        else:
            assert isinstance(exc, PrometheusBadResponse) and exc.status_code is None
        assert exc.retryable == (500 <= status <= 599)
        return
    assert status == 200
    assert doc is not None  # a 200 whose body is not JSON (or is `null`) raises instead
    assert json.dumps(doc) == json.dumps(json.loads(body))  # the body's JSON as sent (dumps: NaN equals NaN)


def test_a_deeply_nested_body_is_a_bad_response_not_a_recursion_error() -> None:
    """Regression: json.loads raised RecursionError (not a ValueError) on "[[[[...", which
    escaped the loop's error handling and failed the whole tick."""
    for body in (b"[" * 100_000, b'{"a":' * 100_000):
        with pytest.raises(PrometheusBadResponse, match="not JSON"):
            decode_response(200, body)
        with pytest.raises(PrometheusBadResponse, match="HTTP 502"):
            decode_response(502, body)


# --------------------------------------------------------------------------- the whole fetch path


class _Answers:
    def __init__(self) -> None:
        self.status = 200
        self.body = b""
        self.content_type = "application/json"


@pytest.fixture(scope="module")
def scripted_prometheus() -> Iterator[tuple[str, _Answers]]:
    """A loopback HTTP server answering every request with whatever the test scripted."""
    answers = _Answers()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            self.send_response(answers.status)
            self.send_header("Content-Type", answers.content_type)
            self.send_header("Content-Length", str(len(answers.body)))
            self.end_headers()
            self.wfile.write(answers.body)

        do_GET = do_POST = _answer  # noqa: N815 - http.server API

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", answers
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@st.composite
def tagged_vectors(draw: st.DrawFn) -> Any:
    """Vectors shaped like the answers of build_queries, with hostile values and labels."""
    items = []
    for _ in range(draw(st.integers(0, 6))):
        metric = {FIELD_LABEL: draw(st.sampled_from(["value", "timestamp", "other", ""]))}
        if draw(st.integers(0, 5)):
            metric["namespace"] = draw(st.sampled_from(["llm", "", "l\"m"]))
        if draw(st.integers(0, 5)):
            metric["pod"] = draw(st.sampled_from(["p-0", "p-1", ""]))
        value = draw(st.one_of(NUMBER_STRINGS, st.sampled_from(["1e308", "-1e308", "1700000000.5"])))
        items.append({"metric": metric, "value": [draw(st.floats(0, 2e9)), value]})
    return {"status": "success", "data": {"resultType": "vector", "result": items}}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(status=st.sampled_from([200, 200, 200, 204, 301, 400, 404, 422, 429, 500, 502, 503]),
       body=st.one_of(tagged_vectors().map(lambda d: json.dumps(d).encode()), bodies),
       content_type=st.sampled_from(["application/json", "text/html", "application/octet-stream"]))
def test_fetch_returns_pod_metrics_or_raises_a_typed_error(
    scripted_prometheus: tuple[str, _Answers], status: int, body: bytes, content_type: str
) -> None:
    url, answers = scripted_prometheus
    assume(not (status == 204 and body))  # http.server would not send a 204 body anyway
    answers.status, answers.body, answers.content_type = status, body, content_type
    source = PrometheusSource(url, retry_attempts=1, timeout_seconds=5, sleep=lambda s: None)
    try:
        result = source.fetch(["llm"], now=1_700_000_000.0)
    except PrometheusError as exc:
        _check_message(exc)
        return
    finally:
        source.close()
    for key, pod in result.items():
        assert isinstance(key, tuple) and all(type(k) is str and k for k in key)
        assert isinstance(pod, PodMetrics)
        for sample in (pod.waiting, pod.running, pod.kv_cache_usage, pod.completed_per_second):
            if sample is not None:
                _check_float(sample.value)
                assert type(sample.timestamp) is float and math.isfinite(sample.timestamp)
