"""autoscaler.adapters.prometheus: parser tables, error handling against a fake HTTP server, and
integration with a real Prometheus scraping the fake vLLM exporter (marked `integration`)."""

from __future__ import annotations

import json
import math
import os
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
import structlog
import structlog.testing
import yaml
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.controller.observe import _ready_pod
from autoscaler.policy import PolicyParams, decide
from autoscaler.policy.slo_series import sum_slo_series
from autoscaler.policy.types import MetricSample, Observation, PolicyState, SampleHealth
from autoscaler.adapters.prometheus import (
    FIELD_LABEL,
    HISTOGRAMS,
    KV_METRIC,
    KV_METRIC_LEGACY,
    QUERIES_PER_FETCH,
    SIGNALS,
    PodMetrics,
    PrometheusBadResponse,
    PrometheusError,
    PrometheusQueryError,
    PrometheusSource,
    PrometheusUnavailable,
    build_queries,
    decode_response,
    parse_vector,
)
from tests.conftest_prometheus import (  # noqa: F401 - fixtures
    prometheus_binary,
    prometheus_factory,
    prometheus_server,
    vllm_exporter,
)
from tests.prometheus_server import PrometheusServer, ScrapeTarget, render_config
from tests.vllm_exporter import (
    GENERATION_TOKENS_PER_REQUEST,
    HISTOGRAM_SPECS,
    PROMPT_TOKENS_PER_REQUEST,
    TPOT_NEW,
    TPOT_OLD,
    TTFT,
    VllmExporter,
)

FIXTURES = Path(__file__).parent / "fixtures" / "prometheus_api"
N_QUERIES = QUERIES_PER_FETCH  # HTTP requests per fetch()


def load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def vector(*items: tuple[dict[str, str], str], ts: float = 1700000000.0) -> dict[str, Any]:
    return {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": m, "value": [ts, v]} for m, v in items]},
    }


# ============================================================================ parse_vector


def test_parse_official_vector_example() -> None:
    assert parse_vector(load("prometheus_api_query_vector_example.json")) == [
        ({"__name__": "up", "job": "prometheus", "instance": "localhost:9090"}, 1.0, 1435781451.781),
        ({"__name__": "up", "job": "node", "instance": "localhost:9100"}, 0.0, 1435781451.781),
    ]


def test_parse_production_stack_answer_without_result_type() -> None:
    body = load("prometheus_api_query_vllm_num_requests_waiting_production-stack.json")
    assert "resultType" not in body["data"]
    assert parse_vector(body) == [
        ({"__name__": "vllm:num_requests_waiting", "pod": "vllm-llama3-deployment-vllm-xxxxx"}, 0.0, 1749077215.034)
    ]


def test_parse_rejects_matrix_answer() -> None:
    with pytest.raises(PrometheusBadResponse, match="resultType='matrix'"):
        parse_vector(load("prometheus_api_query_range_matrix_example.json"))


def test_parse_matrix_without_result_type_still_rejected() -> None:
    body = load("prometheus_api_query_range_matrix_example.json")
    del body["data"]["resultType"]
    with pytest.raises(PrometheusBadResponse, match="'value'"):
        parse_vector(body)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("0", 0.0),
        ("1", 1.0),
        ("-0", -0.0),
        ("0.75", 0.75),
        ("1e3", 1000.0),
        ("1.5E-7", 1.5e-7),
        ("12345678901234567890", 12345678901234567890.0),
        ("+Inf", math.inf),
        ("-Inf", -math.inf),
    ],
)
def test_parse_values(raw: str, expected: float) -> None:
    [(_, value, _)] = parse_vector(vector(({}, raw)))
    assert value == expected


def test_parse_nan_stays_nan() -> None:
    [(_, value, _)] = parse_vector(vector(({}, "NaN")))
    assert math.isnan(value)


@pytest.mark.parametrize("raw", ["abc", "", " 1", "1 ", "1_000", "0x10", "nan", "inf", "Infinity", "1,5", "--1"])
def test_parse_rejects_non_numeric_values(raw: str) -> None:
    with pytest.raises(PrometheusBadResponse, match="not a number"):
        parse_vector(vector(({}, raw)))


@pytest.mark.parametrize("raw", [1, 1.5, None, True, ["1"]])
def test_parse_rejects_values_that_are_not_strings(raw: Any) -> None:
    body = vector(({}, "1"))
    body["data"]["result"][0]["value"][1] = raw
    with pytest.raises(PrometheusBadResponse, match="must be a string"):
        parse_vector(body)


@pytest.mark.parametrize("ts", ["1700000000", None, True, float("nan"), float("inf")])
def test_parse_rejects_bad_timestamps(ts: Any) -> None:
    body = vector(({}, "1"))
    body["data"]["result"][0]["value"][0] = ts
    with pytest.raises(PrometheusBadResponse, match="timestamp"):
        parse_vector(body)


def test_parse_multi_series_keeps_order_and_labels() -> None:
    body = vector(
        ({"namespace": "a", "pod": "p1"}, "3"),
        ({"namespace": "a", "pod": "p2"}, "NaN"),
        ({"namespace": "b", "pod": "p1", "engine": "1"}, "+Inf"),
        ts=1.5,
    )
    out = parse_vector(body)
    assert [labels for labels, _, _ in out] == [
        {"namespace": "a", "pod": "p1"},
        {"namespace": "a", "pod": "p2"},
        {"namespace": "b", "pod": "p1", "engine": "1"},
    ]
    assert out[0][1:] == (3.0, 1.5)
    assert math.isnan(out[1][1]) and out[2][1] == math.inf


def test_parse_empty_result() -> None:
    assert parse_vector(vector()) == []


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        "success",
        {},
        {"status": "success"},
        {"status": "success", "data": []},
        {"status": "success", "data": {"resultType": "vector"}},
        {"status": "success", "data": {"resultType": "vector", "result": {}}},
        {"status": "success", "data": {"resultType": "scalar", "result": [1, "1"]}},
        {"status": "success", "data": {"resultType": "string", "result": [1, "x"]}},
        {"status": "success", "data": {"resultType": "vector", "result": [1]}},
        {"status": "success", "data": {"resultType": "vector", "result": [{"value": [1, "1"]}]}},
        {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {"a": 1}, "value": [1, "1"]}]}},
        {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1]}]}},
        {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "1", 2]}]}},
        {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "histogram": [1, {}]}]}},
    ],
)
def test_parse_rejects_malformed_answers(body: Any) -> None:
    with pytest.raises(PrometheusBadResponse):
        parse_vector(body)


def test_parse_error_status_carries_error_type() -> None:
    body = {"status": "error", "errorType": "bad_data", "error": "parse error at char 5"}
    with pytest.raises(PrometheusBadResponse) as info:
        parse_vector(body)
    assert info.value.error_type == "bad_data"
    assert info.value.error == "parse error at char 5"
    assert "parse error at char 5" in str(info.value)


# ============================================================================ decode_response


@pytest.mark.parametrize(
    ("status", "cls", "retryable"),
    [
        (400, PrometheusQueryError, False),
        (422, PrometheusQueryError, False),
        (401, PrometheusBadResponse, False),
        (404, PrometheusBadResponse, False),
        (429, PrometheusBadResponse, False),
        (500, PrometheusBadResponse, True),
        (503, PrometheusBadResponse, True),
    ],
)
def test_decode_error_statuses(status: int, cls: type[PrometheusBadResponse], retryable: bool) -> None:
    body = json.dumps({"status": "error", "errorType": "execution", "error": "boom"}).encode()
    with pytest.raises(cls) as info:
        decode_response(status, body)
    assert type(info.value) is cls
    assert info.value.status_code == status
    assert (info.value.error_type, info.value.error) == ("execution", "boom")
    assert info.value.retryable is retryable
    assert f"HTTP {status}: execution: boom" in str(info.value)


def test_decode_non_json_error_body_is_quoted() -> None:
    with pytest.raises(PrometheusBadResponse, match="HTTP 502: body b'<html>bad gateway") as info:
        decode_response(502, b"<html>bad gateway</html>")
    assert info.value.error_type is None and info.value.retryable


def test_decode_garbage_200() -> None:
    with pytest.raises(PrometheusBadResponse, match="not JSON") as info:
        decode_response(200, b"\xff\xfe garbage")
    assert not info.value.retryable


# ============================================================================ queries


def test_build_queries_exact_text() -> None:
    q = build_queries(["b", "a", "a"])
    sel_w = 'vllm:num_requests_waiting{namespace=~"^(?:a|b)$"}'
    assert q["waiting"] == (
        f'label_replace(sum by (namespace, pod) (max by (namespace, pod, engine, model_name) ({sel_w})), "vqa_field", "value", "", "")'
        f' or label_replace(min by (namespace, pod) (max by (namespace, pod, engine, model_name) (timestamp({sel_w}))),'
        f' "vqa_field", "timestamp", "", "")'
    )
    sel_kv = 'vllm:kv_cache_usage_perc{namespace=~"^(?:a|b)$"}'
    e = f"max by (namespace, pod, engine, model_name) ({sel_kv})"
    assert q["kv"] == (
        f"label_replace((max by (namespace, pod) ({e}) unless on (namespace, pod) ({e} != {e}))"
        f' or sum by (namespace, pod) ({e} != {e}), "vqa_field", "value", "", "")'
        f" or label_replace(min by (namespace, pod) (max by (namespace, pod, engine, model_name) (timestamp({sel_kv}))),"
        f' "vqa_field", "timestamp", "", "")'
    )
    sel_c = 'vllm:request_success_total{namespace=~"^(?:a|b)$"}'
    by = "namespace, pod, engine, model_name, finished_reason"
    assert q["completed"] == (
        f"label_replace(sum by (namespace, pod) (max by ({by}) (rate({sel_c}[60s]))),"
        f' "vqa_field", "value", "", "")'
        f" or label_replace(min by (namespace, pod) (max by ({by}) (timestamp({sel_c}))),"
        f' "vqa_field", "timestamp", "", "")'
    )
    assert set(q) == {"waiting", "running", "kv", "kv_legacy", "completed", "prompt_tokens", "generation_tokens",
                      "ttft", "tpot", "queue_time"}
    assert "vllm:num_requests_running{" in q["running"] and "vllm:gpu_cache_usage_perc{" in q["kv_legacy"]
    assert "[5s]" in build_queries(["a"], rate_window_seconds=5)["completed"]


@pytest.mark.parametrize("window", [0, -1, 1.5, True])
def test_invalid_rate_window(window: Any) -> None:
    with pytest.raises(ValueError):
        build_queries(["a"], rate_window_seconds=window)
    with pytest.raises(ValueError):
        PrometheusSource("http://127.0.0.1:9090", rate_window_seconds=window)


def test_build_queries_escapes_hostile_namespaces() -> None:
    q = build_queries(['x"} or vector(1) or {a="', "a.*"])
    assert 'namespace=~"^(?:a\\\\.\\\\*|x\\"\\\\} or vector\\\\(1\\\\) or \\\\{a=\\")$"' in q["waiting"]


@pytest.mark.parametrize("bad", [[], [""], ["ok", ""]])
def test_build_queries_rejects_empty(bad: list[str]) -> None:
    with pytest.raises(ValueError):
        build_queries(bad)


def test_build_queries_rejects_plain_string() -> None:
    with pytest.raises(TypeError):
        build_queries("default")


# ============================================================================ fake Prometheus

Reply = tuple[int, bytes] | tuple[int, bytes, float]  # status, body[, delay seconds]


@dataclass
class Seen:
    path: str
    params: dict[str, str]
    headers: dict[str, str]


@dataclass
class FakePrometheus:
    """A tiny HTTP server answering /api/v1/query from a script or a function of the query."""

    script: list[Reply] = field(default_factory=list)
    responder: Callable[[str], Reply] | None = None
    seen: list[Seen] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None
    tls: ssl.SSLContext | None = None

    def start(self) -> FakePrometheus:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                parts = urlsplit(self.path)
                params = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
                fake.seen.append(Seen(parts.path, params, dict(self.headers.items())))
                if fake.script:
                    reply = fake.script.pop(0)
                elif fake.responder is not None:
                    reply = fake.responder(params.get("query", ""))
                else:
                    reply = (200, json.dumps(vector()).encode())
                if len(reply) == 3:
                    time.sleep(reply[2])
                status, body = reply[0], reply[1]
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # client gave up (timeout test)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if self.tls is not None:
            self.server.socket = self.tls.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    @property
    def url(self) -> str:
        assert self.server is not None
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.server.server_address[1]}"

    @property
    def queries(self) -> list[Seen]:
        return [s for s in self.seen if s.path == "/api/v1/query"]


@pytest.fixture
def fake() -> Iterator[FakePrometheus]:
    server = FakePrometheus().start()
    try:
        yield server
    finally:
        server.stop()


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def source_for(fake: FakePrometheus, **kwargs: Any) -> tuple[PrometheusSource, Sleeps]:
    sleeps = Sleeps()
    kwargs.setdefault("timeout_seconds", 2.0)
    return PrometheusSource(fake.url, sleep=sleeps, **kwargs), sleeps


def err(status: int, error_type: str, error: str) -> Reply:
    return status, json.dumps({"status": "error", "errorType": error_type, "error": error}).encode()


OK: Reply = (200, json.dumps(vector(({"a": "b"}, "1"))).encode())


def test_query_sends_query_time_and_timeout(fake: FakePrometheus) -> None:
    source, _ = source_for(fake)
    assert source.query("up", now=1700000000.25) == []
    [seen] = fake.queries
    assert seen.params == {"query": "up", "time": "1700000000.250", "timeout": "2"}
    assert "Authorization" not in seen.headers


def test_query_without_now_sends_no_time(fake: FakePrometheus) -> None:
    source, _ = source_for(fake, timeout_seconds=0.5)
    source.query("up")
    assert fake.queries[0].params == {"query": "up", "timeout": "0.5"}


def test_422_is_a_query_error_and_not_retried(fake: FakePrometheus) -> None:
    fake.script = [err(422, "execution", "query processing would load too many samples")]
    source, sleeps = source_for(fake)
    with pytest.raises(PrometheusQueryError) as info:
        source.query("up")
    assert info.value.status_code == 422 and info.value.error_type == "execution"
    assert "too many samples" in str(info.value)
    assert len(fake.queries) == 1 and sleeps == []


def test_400_is_a_query_error_and_not_retried(fake: FakePrometheus) -> None:
    fake.script = [err(400, "bad_data", 'invalid parameter "query": 1:5: parse error')]
    source, sleeps = source_for(fake)
    with pytest.raises(PrometheusQueryError, match="bad_data"):
        source.query("up{")
    assert len(fake.queries) == 1 and sleeps == []


def test_503_is_retried_then_raised(fake: FakePrometheus) -> None:
    fake.script = [err(503, "timeout", "query timed out in expression evaluation")] * 3
    source, sleeps = source_for(fake)
    with pytest.raises(PrometheusBadResponse) as info:
        source.query("up")
    assert type(info.value) is PrometheusBadResponse
    assert info.value.status_code == 503 and info.value.error_type == "timeout"
    assert len(fake.queries) == 3
    assert sleeps == [0.5, 1.0]  # exponential, injected: no real sleeping


def test_500_then_success_is_retried(fake: FakePrometheus) -> None:
    fake.script = [(500, b"internal error"), OK]
    source, sleeps = source_for(fake)
    with structlog.testing.capture_logs() as logs:
        assert source.query("up") == [({"a": "b"}, 1.0, 1700000000.0)]
    assert len(fake.queries) == 2 and sleeps == [0.5]
    # a retry that then succeeds still leaves its trace: one JSON event per retry
    retries = [e for e in logs if e["event"] == "prometheus_retry"]
    assert len(retries) == 1 and retries[0]["log_level"] == "warning"
    assert (retries[0]["attempt"], retries[0]["max_attempts"], retries[0]["wait_seconds"]) == (1, 3, 0.5)
    assert "500" in retries[0]["error"]


def test_backoff_is_capped(fake: FakePrometheus) -> None:
    fake.script = [(502, b"<html>bad gateway</html>")] * 6
    source, sleeps = source_for(fake, retry_attempts=6)
    with pytest.raises(PrometheusBadResponse, match="502"):
        source.query("up")
    assert sleeps == [0.5, 1.0, 2.0, 4.0, 4.0]


def test_retry_attempts_1_means_no_retry(fake: FakePrometheus) -> None:
    fake.script = [(503, b"")]
    source, sleeps = source_for(fake, retry_attempts=1)
    with pytest.raises(PrometheusBadResponse):
        source.query("up")
    assert len(fake.queries) == 1 and sleeps == []


def test_garbage_body_is_bad_response_not_retried(fake: FakePrometheus) -> None:
    fake.script = [(200, b"<html>this is not prometheus</html>")]
    source, sleeps = source_for(fake)
    with pytest.raises(PrometheusBadResponse, match="not JSON"):
        source.query("up")
    assert len(fake.queries) == 1 and sleeps == []


def test_status_error_on_200_is_bad_response(fake: FakePrometheus) -> None:
    fake.script = [err(200, "internal", "weird proxy")]
    source, _ = source_for(fake)
    with pytest.raises(PrometheusBadResponse, match="weird proxy"):
        source.query("up")


def test_non_numeric_value_raises(fake: FakePrometheus) -> None:
    fake.script = [(200, json.dumps(vector(({}, "twelve"))).encode())]
    source, _ = source_for(fake)
    with pytest.raises(PrometheusBadResponse, match="not a number"):
        source.query("up")


def test_401_not_retried(fake: FakePrometheus) -> None:
    fake.script = [(401, b"Unauthorized")]
    source, sleeps = source_for(fake, bearer_token="wrong")
    with pytest.raises(PrometheusBadResponse, match="401"):
        source.query("up")
    assert sleeps == []


def test_connection_refused_is_unavailable_and_retried() -> None:
    server = FakePrometheus().start()
    url = server.url
    server.stop()  # nothing listens on that port any more
    sleeps = Sleeps()
    source = PrometheusSource(url, sleep=sleeps, timeout_seconds=1.0)
    with pytest.raises(PrometheusUnavailable, match="unreachable") as info:
        source.query("up")
    assert info.value.retryable and sleeps == [0.5, 1.0]


def test_a_fetch_starts_no_query_past_its_budget(fake: FakePrometheus) -> None:
    """Every query answered after 0.3 s (slow, never failing): with a 0.5 s budget (the
    controller gives its tick) the fetch stops after the query that crossed it, instead of
    holding the tick for all ten (a review's slow Prometheus: 165 s a tick, past liveness)."""
    fake.script = [(200, json.dumps(vector()).encode(), 0.3)] * QUERIES_PER_FETCH
    source, _ = source_for(fake)
    with pytest.raises(PrometheusUnavailable, match=r"longer than its budget of 0.5 s \(2 of 10 queries answered\)"):
        source.fetch(["ns"], budget_seconds=0.5)
    assert len(fake.seen) == 2
    fake.script = []
    assert source.fetch(["ns"], budget_seconds=0.5) == {}  # quick answers: all ten, within it


def test_read_timeout_is_unavailable(fake: FakePrometheus) -> None:
    fake.script = [(200, b"{}", 1.0), OK]
    source, sleeps = source_for(fake, timeout_seconds=0.2)
    assert source.query("up") == [({"a": "b"}, 1.0, 1700000000.0)]  # retried after the timeout
    assert sleeps == [0.5]
    fake.script = [(200, b"{}", 1.0)]
    source, _ = source_for(fake, timeout_seconds=0.2, retry_attempts=1)
    with pytest.raises(PrometheusUnavailable, match="Timeout"):
        source.query("up")


def test_bearer_token_sent_and_never_shown(fake: FakePrometheus) -> None:
    token = "s3cr3t-t0ken"
    fake.script = [(503, b"unavailable")] * 3
    source, _ = source_for(fake, bearer_token=token)
    assert token not in repr(source) and "<redacted>" in repr(source)
    with pytest.raises(PrometheusError) as info:
        source.query("up")
    assert token not in str(info.value) and token not in repr(info.value)
    assert all(s.headers.get("Authorization") == f"Bearer {token}" for s in fake.queries)


def test_bearer_token_wins_over_netrc(fake: FakePrometheus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login user password pass\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    source, _ = source_for(fake)
    source.query("up")
    assert fake.queries[-1].headers["Authorization"].startswith("Basic ")  # netrc applies without token
    source, _ = source_for(fake, bearer_token="tok")
    source.query("up")
    assert fake.queries[-1].headers["Authorization"] == "Bearer tok"


@pytest.mark.parametrize("token", ["", "  ", "a b", "tok\nen", "tok\r\nX-Injected: 1"])
def test_invalid_bearer_token_rejected_without_echo(token: str) -> None:
    with pytest.raises(ValueError) as info:
        PrometheusSource("http://127.0.0.1:9", bearer_token=token)
    if token.strip():
        assert token.strip() not in str(info.value)


def test_repr_redacts_url_credentials() -> None:
    source = PrometheusSource("https://user:pa55@prom.example:9090/prefix/")
    assert "pa55" not in repr(source) and "user" not in repr(source)
    assert "prom.example:9090/prefix" in repr(source)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"timeout_seconds": 0},
        {"timeout_seconds": float("nan")},
        {"retry_attempts": 0},
        {"ca_file": "/x.pem", "insecure_skip_tls_verify": True},
    ],
)
def test_invalid_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        PrometheusSource("http://127.0.0.1:9090", **kwargs)


@pytest.mark.parametrize("url", ["127.0.0.1:9090", "ftp://x", "http://"])
def test_invalid_url(url: str) -> None:
    with pytest.raises(ValueError):
        PrometheusSource(url)


def test_tls_verification_defaults() -> None:
    assert "verify=True" in repr(PrometheusSource("https://127.0.0.1:1"))
    assert "verify=False" in repr(PrometheusSource("https://127.0.0.1:1", insecure_skip_tls_verify=True))
    assert "verify='/etc/ca.pem'" in repr(PrometheusSource("https://127.0.0.1:1", ca_file="/etc/ca.pem"))


@pytest.fixture
def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_tls_verified_by_default_and_opt_outs(self_signed: tuple[Path, Path]) -> None:
    cert, key = self_signed
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server = FakePrometheus(responder=lambda q: OK, tls=ctx).start()
    try:
        sleeps = Sleeps()
        with pytest.raises(PrometheusUnavailable, match="TLS") as info:
            PrometheusSource(server.url, sleep=sleeps).query("up")
        assert not info.value.retryable and sleeps == []  # a bad certificate does not heal
        assert PrometheusSource(server.url, ca_file=str(cert)).query("up")
        assert PrometheusSource(server.url, insecure_skip_tls_verify=True).query("up")
    finally:
        server.stop()


# ---------------------------------------------------------------------------- fetch() on fake


def tagged(ns: str, pod: str, value: str, ts: float) -> list[tuple[dict[str, str], str]]:
    return [
        ({"namespace": ns, "pod": pod, FIELD_LABEL: "value"}, value),
        ({"namespace": ns, "pod": pod, FIELD_LABEL: "timestamp"}, repr(ts)),
    ]


def responder_for(answers: dict[str, list[tuple[dict[str, str], str]]]) -> Callable[[str], Reply]:
    """Answer each signal query by the metric name it contains."""
    metrics = {metric + "{": key for key, (metric, _) in SIGNALS.items()}
    metrics.update({families[0] + "_bucket{": key for key, families in HISTOGRAMS.items()})

    def respond(query: str) -> Reply:
        for metric, key in metrics.items():
            if metric in query:
                return 200, json.dumps(vector(*answers.get(key, []), ts=1700000099.0)).encode()
        return err(400, "bad_data", f"unexpected query {query}")

    return respond


def test_fetch_combines_signals_and_falls_back_per_pod(fake: FakePrometheus) -> None:
    fake.responder = responder_for(
        {
            "waiting": tagged("a", "p1", "7", 1700000090.5) + tagged("a", "p2", "NaN", 1700000091.0),
            "running": tagged("a", "p1", "5", 1700000090.5),
            "kv": tagged("a", "p1", "0.75", 1700000090.5) + tagged("b", "p3", "+Inf", 1700000080.0),
            "kv_legacy": tagged("a", "p1", "0.1", 1700000090.5) + tagged("a", "p2", "0.25", 1700000091.0),
            "completed": tagged("a", "p1", "4.5", 1700000090.0),
        }
    )
    source, _ = source_for(fake)
    out = source.fetch(["a", "b"], now=1700000100.0)
    assert set(out) == {("a", "p1"), ("a", "p2"), ("b", "p3")}
    assert out[("a", "p1")] == PodMetrics(
        waiting=MetricSample(7.0, 1700000090.5),
        running=MetricSample(5.0, 1700000090.5),
        kv_cache_usage=MetricSample(0.75, 1700000090.5),
        kv_metric_name=KV_METRIC,  # both names present: the new one wins
        completed_per_second=MetricSample(4.5, 1700000090.0),
    )
    p2 = out[("a", "p2")]
    assert p2.waiting is not None and math.isnan(p2.waiting.value) and p2.waiting.timestamp == 1700000091.0
    assert p2.running is None  # absent, never 0
    assert p2.kv_cache_usage == MetricSample(0.25, 1700000091.0) and p2.kv_metric_name == KV_METRIC_LEGACY
    p3 = out[("b", "p3")]
    assert p3.waiting is None and p3.running is None and p3.completed_per_second is None
    assert p3.kv_cache_usage == MetricSample(math.inf, 1700000080.0)
    assert len(fake.queries) == N_QUERIES
    assert {s.params["time"] for s in fake.queries} == {"1700000100.000"}


def test_fetch_empty_results_mean_absent(fake: FakePrometheus) -> None:
    fake.responder = responder_for({})
    source, _ = source_for(fake)
    assert source.fetch(["a"]) == {}


def test_fetch_without_namespaces_sends_nothing(fake: FakePrometheus) -> None:
    source, _ = source_for(fake)
    assert source.fetch([]) == {}
    assert fake.seen == []


def test_fetch_duplicate_series_raise(fake: FakePrometheus) -> None:
    fake.responder = responder_for({"waiting": tagged("a", "p1", "1", 5.0) + tagged("a", "p1", "2", 6.0)})
    source, _ = source_for(fake)
    with pytest.raises(PrometheusBadResponse, match="two value series for pod a/p1"):
        source.fetch(["a"])


def test_fetch_value_without_timestamp_is_absent(fake: FakePrometheus) -> None:
    # rate() of a pod that just went away: the range selector still has samples in the window,
    # the instant selector under timestamp() honours the staleness marker
    fake.responder = responder_for({"completed": tagged("a", "p1", "1", 5.0)[:1], "waiting": tagged("a", "p2", "2", 5.0)})
    source, _ = source_for(fake)
    assert source.fetch(["a"]) == {("a", "p2"): PodMetrics(MetricSample(2.0, 5.0), None, None, None)}


def test_fetch_timestamp_without_value_is_absent(fake: FakePrometheus) -> None:
    # rate() of a counter with one sample in the window: timestamp() has a result, rate() none
    fake.responder = responder_for({"completed": tagged("a", "p1", "1", 5.0)[1:], "waiting": tagged("a", "p1", "2", 5.0)})
    source, _ = source_for(fake)
    out = source.fetch(["a"])
    assert out[("a", "p1")].completed_per_second is None
    assert out[("a", "p1")].waiting == MetricSample(2.0, 5.0)


def test_fetch_untagged_series_raise(fake: FakePrometheus) -> None:
    fake.responder = responder_for({"running": [({"namespace": "a", "pod": "p1"}, "1")]})
    source, _ = source_for(fake)
    with pytest.raises(PrometheusBadResponse, match=FIELD_LABEL):
        source.fetch(["a"])


def test_fetch_skips_series_without_pod_label(fake: FakePrometheus) -> None:
    fake.responder = responder_for(
        {"waiting": [({"namespace": "a", FIELD_LABEL: "value"}, "1"), ({"namespace": "a", FIELD_LABEL: "timestamp"}, "5")]}
    )
    source, _ = source_for(fake)
    assert source.fetch(["a"]) == {}


def test_fetch_query_count_independent_of_namespaces_and_pods(fake: FakePrometheus) -> None:
    many = {"waiting": [s for i in range(200) for s in tagged(f"ns{i % 7}", f"p{i}", "1", 5.0)]}
    fake.responder = responder_for(many)
    source, _ = source_for(fake)
    assert len(source.fetch(["ns0"])) == 200
    assert len(fake.queries) == N_QUERIES
    fake.seen.clear()
    assert len(source.fetch([f"ns{i}" for i in range(50)])) == 200
    assert len(fake.queries) == N_QUERIES


def test_fetch_failure_of_one_query_raises_typed_error(fake: FakePrometheus) -> None:
    answers = responder_for({})

    def respond(query: str) -> Reply:
        if KV_METRIC_LEGACY in query:
            return err(422, "execution", "many-to-many matching not allowed")
        return answers(query)

    fake.responder = respond
    source, _ = source_for(fake)
    with pytest.raises(PrometheusQueryError, match="many-to-many"):
        source.fetch(["a"])


# ============================================================================ exporter text


def test_exporter_text_is_valid_exposition_format(vllm_exporter: VllmExporter) -> None:
    vllm_exporter.set("ns", "new", waiting=[3, 4], running=5, kv=[0.5, 0.75])
    vllm_exporter.set("ns", "old", version="0.7.3", waiting=2, kv=0.25)
    vllm_exporter.set("ns", "both", version="0.10.1", nan=True)
    families = {
        pod: {f.name: f for f in text_string_to_metric_families(vllm_exporter.render("ns", pod))}
        for pod in ("new", "old", "both")
    }
    new = families["new"]
    waiting = new["vllm:num_requests_waiting"]
    assert waiting.type == "gauge" and waiting.documentation == "Number of requests waiting to be processed."
    assert {(s.labels["engine"], s.value) for s in waiting.samples} == {("0", 3.0), ("1", 4.0)}
    assert sum(s.value for s in new["vllm:num_requests_running"].samples) == 5.0
    assert "vllm:gpu_cache_usage_perc" not in new and "vllm:kv_cache_usage_perc" in new
    assert new["vllm:request_success"].type == "counter"
    assert {s.labels["finished_reason"] for s in new["vllm:request_success"].samples} == {"stop", "length", "abort"}
    assert new["vllm:time_to_first_token_seconds"].type == "histogram"
    old = families["old"]
    assert "vllm:kv_cache_usage_perc" not in old
    assert [s.labels for s in old["vllm:gpu_cache_usage_perc"].samples] == [
        {"model_name": "meta-llama/Llama-3.1-8B-Instruct"}
    ]
    both = families["both"]
    assert "DEPRECATED" in both["vllm:gpu_cache_usage_perc"].documentation
    assert all(math.isnan(s.value) for s in both["vllm:kv_cache_usage_perc"].samples)


def test_exporter_http_paths_statuses_and_removal(vllm_exporter: VllmExporter) -> None:
    vllm_exporter.set("ns", "p", waiting=1)
    vllm_exporter.set('we"ird\nns', "p/x", waiting=1)
    url = vllm_exporter.base_url
    r = requests.get(url + "/pods/ns/p/metrics", timeout=5)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert "vllm:num_requests_waiting{" in r.text
    path = vllm_exporter.metrics_path('we"ird\nns', "p/x")
    assert path == "/pods/we_22ird_0ans/p_2fx/metrics"
    assert requests.get(url + path, timeout=5).status_code == 200
    vllm_exporter.set("ns", "p", status=500)
    assert requests.get(url + "/pods/ns/p/metrics", timeout=5).status_code == 500
    vllm_exporter.remove("ns", "p")
    assert requests.get(url + "/pods/ns/p/metrics", timeout=5).status_code == 404
    assert vllm_exporter.scrape_count('we"ird\nns', "p/x") == 1


# ============================================================================ real Prometheus

HOSTILE_NS = 'evil"ns\\x\n}|'
REGEX_NS = "ns.*"
DECOY_NS = "ns-decoy"  # would match an unescaped "ns.*"
COUNT_NS = "count"
COUNT_SLOTS = [(COUNT_NS, f"slot-{i}") for i in range(8)]
SLO_NS = "slo"


@dataclass
class Stack:
    exporter: VllmExporter
    prometheus: PrometheusServer
    started_at: float
    frozen_at: float


def wait_for_pods(prom: PrometheusServer, namespace_matcher: str, n: int, timeout: float = 20.0) -> None:
    prom.wait_for_series(
        f"count(count by (namespace, pod) (vllm:num_requests_waiting{{{namespace_matcher}}}))",
        lambda r: bool(r) and r[0]["value"][1] == str(n),
        timeout=timeout,
        interval=0.1,
    )


@pytest.fixture(scope="module")
def stack(prometheus_binary: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One Prometheus for the module (a new target takes ~5 s to be scraped the first time)."""
    exporter = VllmExporter().start()
    prom: PrometheusServer | None = None
    try:
        started_at = time.time()
        # 2 engines
        exporter.set("team-a", "llama-0", waiting=[3, 4], running=[2, 3], kv=[0.5, 0.75], completed=6)
        # old KV name, no engine label
        exporter.set("team-a", "llama-1", version="0.7.3", waiting=2, running=1, kv=0.25, completed=2)
        exporter.set("team-b", "qwen-0", nan=True)
        exporter.set("team-b", "mistral-0", version="0.10.1", waiting=1, kv=0.4)  # both KV names
        exporter.set("other", "llama-9", waiting=100)  # not watched
        exporter.set("churn", "gone", waiting=1)
        exporter.set("churn", "broken", waiting=1)
        frozen_at = started_at - 60
        exporter.set("frozen", "stuck", waiting=9, timestamp=frozen_at)
        exporter.set(HOSTILE_NS, "evil-0", waiting=11)
        exporter.set(REGEX_NS, "regex-0", waiting=12)
        exporter.set(DECOY_NS, "decoy-0", waiting=13)
        # the SLO signals: vLLM 0.11 (both TPOT histograms; bounds written "1.000000e+00"), and a
        # pod without token counters and histograms
        exporter.set(SLO_NS, "v11-0", version="0.11.0", waiting=1, completed=4, le_format="exp")
        exporter.set(SLO_NS, "bare-0", waiting=2, completed=1, slo_metrics=False)
        targets = (
            exporter.targets()
            # the same pod scraped by a second job: duplicated series must not double the sum
            + exporter.targets(job="vllm-dup", pods=[("team-a", "llama-0")])
            # pods that do not exist yet (404 -> no series) for the query-count test
            + exporter.targets(pods=COUNT_SLOTS)
        )
        prom = PrometheusServer(tmp_path_factory.mktemp("prometheus"), targets, binary=prometheus_binary)
        prom.start()
        wait_for_pods(prom, 'namespace!=""', len(exporter.pods()))  # (RE2's "." does not match \n)
        prom.wait_for_series('count(vllm:num_requests_waiting{job="vllm-dup"}) == 2')
        yield Stack(exporter, prom, started_at, frozen_at)
    finally:
        try:
            if prom is not None:
                prom.stop()
        finally:
            exporter.stop()


@pytest.mark.integration
def test_fetch_from_real_prometheus(stack: Stack) -> None:
    source = PrometheusSource(stack.prometheus.url)
    before = time.time()
    out = source.fetch(["team-a", "team-b"])
    now = time.time()
    assert set(out) == {("team-a", "llama-0"), ("team-a", "llama-1"), ("team-b", "qwen-0"), ("team-b", "mistral-0")}

    def value(pod: PodMetrics, name: str) -> float:
        sample = getattr(pod, name)
        assert isinstance(sample, MetricSample), (name, pod)
        assert before - 5.0 <= sample.timestamp <= now, (name, sample, now)  # scraped every 1 s
        assert sample.health(now, stale_after_seconds=10) in (SampleHealth.FRESH, SampleHealth.NAN)
        return sample.value

    llama0 = out[("team-a", "llama-0")]
    assert (value(llama0, "waiting"), value(llama0, "running")) == (7.0, 5.0)  # engines summed, dup ignored
    assert value(llama0, "kv_cache_usage") == 0.75 and llama0.kv_metric_name == KV_METRIC  # max of engines
    llama1 = out[("team-a", "llama-1")]
    assert (value(llama1, "waiting"), value(llama1, "running")) == (2.0, 1.0)  # no engine label
    assert value(llama1, "kv_cache_usage") == 0.25 and llama1.kv_metric_name == KV_METRIC_LEGACY
    qwen = out[("team-b", "qwen-0")]
    for name in ("waiting", "running", "kv_cache_usage"):
        assert math.isnan(value(qwen, name))
        assert getattr(qwen, name).health(now, 10) is SampleHealth.NAN
    assert qwen.kv_metric_name == KV_METRIC
    mistral = out[("team-b", "mistral-0")]
    assert value(mistral, "kv_cache_usage") == 0.4 and mistral.kv_metric_name == KV_METRIC


@pytest.mark.integration
def test_completed_per_second_from_the_counter(stack: Stack) -> None:
    window = 3  # s; 60 in production. rate() under-reports a counter younger than its window
    stack.prometheus.wait_for_series(
        f'sum by (pod) (rate(vllm:request_success_total{{job="vllm",pod=~"llama-0|llama-1"}}[{window}s]))',
        lambda r: len(r) == 2 and all(float(x["value"][1]) > 0.9 * {"llama-0": 6, "llama-1": 2}[x["metric"]["pod"]] for x in r),
        timeout=15,
    )
    source = PrometheusSource(stack.prometheus.url, rate_window_seconds=window)
    out = source.fetch(["team-a"])
    now = time.time()  # after: a scrape may land while the queries run
    c0, c1 = out[("team-a", "llama-0")].completed_per_second, out[("team-a", "llama-1")].completed_per_second
    assert c0 is not None and c0.value == pytest.approx(6.0, rel=0.1)  # 2 engines summed, dup job ignored
    assert c1 is not None and c1.value == pytest.approx(2.0, rel=0.1)  # no engine label
    assert now - 5 <= c0.timestamp <= now and c0.health(now, 10) is SampleHealth.FRESH


@pytest.mark.integration
def test_slo_signals_from_real_prometheus(stack: Stack) -> None:
    """Token rates and latency histograms per pod through a real Prometheus: engines summed,
    duplicated jobs ignored, each version's TPOT family and bucket bounds, none for a pod
    without them."""
    window = 3
    expected = {"llama-0": 6.0, "llama-1": 2.0, "v11-0": 4.0}
    stack.prometheus.wait_for_series(
        f'sum by (pod) (rate(vllm:time_to_first_token_seconds_count{{job="vllm"}}[{window}s]))',
        lambda r: all(any(x["metric"].get("pod") == p and float(x["value"][1]) > 0.9 * v for x in r)
                      for p, v in expected.items()),
        timeout=15,
    )
    out = PrometheusSource(stack.prometheus.url, rate_window_seconds=window).fetch(["team-a", SLO_NS])
    now = time.time()
    for pod, rate in expected.items():
        m = out[(SLO_NS if pod == "v11-0" else "team-a", pod)]
        assert m.prompt_tokens_per_second is not None and m.generation_tokens_per_second is not None, pod
        assert m.prompt_tokens_per_second.value == pytest.approx(PROMPT_TOKENS_PER_REQUEST * rate, rel=0.1)
        assert m.generation_tokens_per_second.value == pytest.approx(GENERATION_TOKENS_PER_REQUEST * rate, rel=0.1)
        assert m.prompt_tokens_per_second.health(now, 10) is SampleHealth.FRESH
        for hist in (m.ttft, m.tpot, m.queue_time):
            assert hist is not None and hist.health(now, 10) is SampleHealth.FRESH, (pod, hist)
        assert m.ttft is not None and m.ttft.count_per_second == pytest.approx(rate, rel=0.1)
        assert m.ttft.fraction_within(0.04) == pytest.approx(0.5)  # TTFT 0.03 s and 0.07 s, equal shares
        assert m.queue_time is not None and m.queue_time.fraction_within(1.0) == pytest.approx(0.75)
    llama0, llama1, v11 = out[("team-a", "llama-0")], out[("team-a", "llama-1")], out[(SLO_NS, "v11-0")]
    assert llama0.ttft is not None and llama0.ttft.upper_bounds == (*HISTOGRAM_SPECS[TTFT][2], math.inf)
    assert v11.ttft is not None and v11.ttft.upper_bounds == llama0.ttft.upper_bounds  # "4.000000e-02" read
    # per-request TPOT where vLLM has it (0.11 exports both: the per-request one wins)...
    for m, rate in ((llama0, 6.0), (v11, 4.0)):
        assert m.tpot is not None and m.tpot.count_per_second == pytest.approx(rate, rel=0.1)
        assert m.tpot.fraction_within(0.05) == 1.0
    # ...else the per-token histogram of vLLM < 0.11 (0.7.3: its own bucket bounds), weighted by
    # the pod's finished requests (2/s, not its GENERATION_TOKENS_PER_REQUEST x 2 tokens/s): summed
    # with per-request pods in a rolling upgrade, it would otherwise outweigh them ~1000 to 1
    assert llama1.tpot is not None and llama1.tpot.upper_bounds == (*HISTOGRAM_SPECS[TPOT_OLD][1], math.inf)
    assert llama1.tpot.count_per_second == pytest.approx(2.0, rel=0.1)
    assert llama1.tpot.fraction_within(0.05) == pytest.approx(0.5)
    assert llama1.ttft is not None and len(llama1.ttft.upper_bounds) == 17
    bare = out[(SLO_NS, "bare-0")]
    assert bare.waiting is not None and bare.completed_per_second is not None
    assert (bare.prompt_tokens_per_second, bare.generation_tokens_per_second, bare.ttft, bare.tpot,
            bare.queue_time) == (None,) * 5  # absent, never zero


@pytest.mark.integration
def test_nan_in_one_engine_is_not_hidden(stack: Stack) -> None:
    # A new target would need a reload (~5 s): use a pre-registered slot the count test leaves free.
    stack.exporter.set(COUNT_NS, "slot-7", waiting=[1, math.nan], running=[1, 2], kv=[0.3, math.nan])
    try:
        stack.prometheus.wait_for_series(
            f'vllm:kv_cache_usage_perc{{namespace="{COUNT_NS}",pod="slot-7",engine="1"}}', timeout=10
        )
        out = PrometheusSource(stack.prometheus.url).fetch([COUNT_NS])
        pod = out[(COUNT_NS, "slot-7")]
        assert pod.waiting is not None and math.isnan(pod.waiting.value)
        assert pod.running is not None and pod.running.value == 3.0
        assert pod.kv_cache_usage is not None and math.isnan(pod.kv_cache_usage.value)
    finally:
        stack.exporter.remove(COUNT_NS, "slot-7")


@pytest.mark.integration
def test_fetch_at_a_past_time_uses_the_time_parameter(stack: Stack) -> None:
    source = PrometheusSource(stack.prometheus.url)
    assert source.fetch(["team-a"], now=stack.started_at - 3600) == {}
    assert source.fetch(["team-a"], now=time.time())


@pytest.mark.integration
def test_frozen_sample_timestamp_is_reported(stack: Stack) -> None:
    out = PrometheusSource(stack.prometheus.url).fetch(["frozen"])
    sample = out[("frozen", "stuck")].waiting
    assert sample is not None and sample.value == 9.0
    assert sample.timestamp == pytest.approx(stack.frozen_at, abs=0.001)  # the sample's time, not "now"
    assert sample.health(time.time(), stale_after_seconds=30) is SampleHealth.STALE


@pytest.mark.integration
def test_removed_or_failing_pod_becomes_absent(stack: Stack) -> None:
    source = PrometheusSource(stack.prometheus.url)
    assert set(source.fetch(["churn"])) == {("churn", "gone"), ("churn", "broken")}
    stack.exporter.remove("churn", "gone")  # 404: scrape fails, Prometheus writes stale markers
    stack.exporter.set("churn", "broken", status=500)
    # (rate() still sees the old counter samples for a window: completed_per_second must not
    # keep a gone pod alive, and does not, because timestamp() of the instant selector is gone)
    deadline = time.monotonic() + 15
    while (out := source.fetch(["churn"])) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert out == {}


@pytest.mark.integration
def test_hostile_namespace_names_are_matched_literally(stack: Stack) -> None:
    source = PrometheusSource(stack.prometheus.url)
    out = source.fetch([HOSTILE_NS, REGEX_NS])
    assert set(out) == {(HOSTILE_NS, "evil-0"), (REGEX_NS, "regex-0")}  # not the decoy
    evil = out[(HOSTILE_NS, "evil-0")].waiting
    assert evil is not None and evil.value == 11.0
    assert source.fetch([".*"]) == {}
    assert source.fetch(["team-a|other"]) == {}


@pytest.mark.integration
def test_query_count_is_constant(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[str] = []
    real_send = requests.Session.send

    def counting_send(self: requests.Session, request: requests.PreparedRequest, **kwargs: Any) -> Any:
        sent.append(str(request.url))
        return real_send(self, request, **kwargs)

    monkeypatch.setattr(requests.Session, "send", counting_send)
    source = PrometheusSource(stack.prometheus.url)
    handler = {"handler": "/api/v1/query"}

    def server_count() -> float:
        return stack.prometheus.self_metric("prometheus_http_requests_total", handler)

    try:
        # 1 target (namespace) with 1 pod, then 50 targets, 7 pods with every SLO signal
        for n_pods, others in ((1, []), (len(COUNT_SLOTS) - 1, ["team-a", "team-b", SLO_NS] + [f"t{i}" for i in range(46)])):
            for ns, pod in COUNT_SLOTS[:n_pods]:
                stack.exporter.set(ns, pod, waiting=1, running=1, kv=0.1, completed=1)
            wait_for_pods(stack.prometheus, f'namespace="{COUNT_NS}",pod!="slot-7"', n_pods, timeout=10)
            sent.clear()
            before = server_count()
            out = source.fetch([COUNT_NS, *others])
            assert len({COUNT_NS, *others}) == 1 + len(others) in (1, 50)
            # slot-7 is the NaN test's: removed from the exporter, its rate series can still answer
            # for a rate window, so a worker that ran that test first saw 2 pods here (a flake)
            assert sum(1 for ns, pod in out if ns == COUNT_NS and pod != "slot-7") == n_pods
            assert len(sent) == N_QUERIES, sent
            deadline = time.monotonic() + 5  # the server counts after answering
            while server_count() < before + N_QUERIES and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server_count() == before + N_QUERIES
    finally:
        for ns, pod in COUNT_SLOTS:
            stack.exporter.remove(ns, pod)


@pytest.mark.integration
def test_prometheus_helper_reload_and_stop(
    vllm_exporter: VllmExporter, prometheus_server: PrometheusServer
) -> None:
    assert prometheus_server.running
    vllm_exporter.set("r", "p0", waiting=4)
    prometheus_server.reload(vllm_exporter.targets())
    prometheus_server.wait_for_series('vllm:num_requests_waiting{namespace="r",pod="p0"} == 4')
    assert PrometheusSource(prometheus_server.url).fetch(["r"])[("r", "p0")].waiting is not None
    pid = prometheus_server.pid
    prometheus_server.stop()
    assert not prometheus_server.running and pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_missing_prometheus_binary_message(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import prometheus_server as ps

    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("PROMETHEUS_BIN", raising=False)
    with pytest.raises(ps.PrometheusNotInstalled, match="make prometheus"):
        ps.find_prometheus()


def test_render_config_labels_targets() -> None:
    cfg = yaml.safe_load(
        render_config([ScrapeTarget("127.0.0.1:1", "/pods/a/b/metrics", {"namespace": 'x"\n', "pod": "b"})])
    )
    [job] = cfg["scrape_configs"]
    assert job["job_name"] == "vllm"
    assert job["static_configs"] == [
        {"targets": ["127.0.0.1:1"], "labels": {"__metrics_path__": "/pods/a/b/metrics", "namespace": 'x"\n', "pod": "b"}}
    ]
    assert cfg["global"]["scrape_interval"] == "1s"


@pytest.mark.integration
def test_a_rolling_upgrade_mixing_per_token_and_per_request_tpot_reads_requests(
        vllm_exporter: VllmExporter, prometheus_factory: Any) -> None:
    """vLLM <= 0.10 counts TPOT once per output token, >= 0.11 once per request, on the same
    bucket bounds from 0.8.5 on. In a rolling upgrade the two were summed as they came: the old
    pod's ~1,000 tokens/s outweighed the new pod's 2 requests/s, so half the requests breaking
    the bound read as 99.9 % within it and the fleet held at 2 instead of scaling up. The per-token
    histogram is now weighted by the pod's finished requests (found by a review)."""
    def fleet(old_version: str, old_family: str) -> tuple[int, str, float | None]:
        vllm_exporter.set("ns", "old-0", version=old_version, waiting=0, running=4, kv=0.3, completed=2,
                          latencies={old_family: (0.04,)})
        vllm_exporter.set("ns", "new-0", version="0.12.0", waiting=0, running=4, kv=0.3, completed=2,
                          latencies={TPOT_NEW: (0.5,)})
        prom = prometheus_factory(vllm_exporter.targets())
        prom.wait_for_series("count(vllm:num_requests_waiting) == 2", timeout=30)
        prom.wait_for_series(f'count({old_family}_bucket{{le="+Inf"}}) >= 1', timeout=30)
        time.sleep(5)  # two scrapes in the rate window
        out = PrometheusSource(prom.url, rate_window_seconds=3).fetch(["ns"])
        pods = tuple(_ready_pod(p, None, out[("ns", p)]) for p in ("new-0", "old-0"))
        d, _ = decide(PolicyParams(), Observation(spec_replicas=2, ready_pods=pods, rollout_in_progress=True,
                                                  slo_series=sum_slo_series(pods)), PolicyState(), time.time())
        prom.stop()
        return d.desired_replicas, str(d.reason), d.values.tpot_attainment

    mixed = fleet("0.10.1", TPOT_OLD)
    upgraded = fleet("0.12.0", TPOT_NEW)  # the control: both pods count requests
    assert mixed[2] == pytest.approx(0.5, abs=0.05) and upgraded[2] == pytest.approx(0.5, abs=0.05)
    assert mixed[:2] == upgraded[:2] and mixed[0] > 2, (mixed, upgraded)


@pytest.mark.integration
def test_two_servers_in_one_pod_are_added_not_collapsed(vllm_exporter: VllmExporter, prometheus_factory: Any) -> None:
    """Two vLLM servers in one pod (two models, both engine "0"): the max that collapses one
    series scraped twice took one server's numbers for the pod's (waiting 20 of 30, running the
    other model's 8 of 12). Their series differ in `model_name`: added (found by a review)."""
    vllm_exporter.set("ns", "duo-0#big", waiting=10, running=8, kv=0.9, completed=2, model_name="llama-70b")
    vllm_exporter.set("ns", "duo-0#small", waiting=20, running=4, kv=0.3, completed=5, model_name="llama-8b")
    targets = [ScrapeTarget(vllm_exporter.address, vllm_exporter.metrics_path("ns", p), {"namespace": "ns", "pod": "duo-0"},
                            job="vllm") for p in ("duo-0#big", "duo-0#small")]
    prom = prometheus_factory(targets)
    prom.wait_for_series('count(vllm:num_requests_waiting{pod="duo-0"}) == 2', timeout=30)
    time.sleep(4)  # two scrapes in the rate window
    m = PrometheusSource(prom.url, rate_window_seconds=3).fetch(["ns"])[("ns", "duo-0")]
    assert m.waiting is not None and m.running is not None and m.kv_cache_usage is not None
    assert (m.waiting.value, m.running.value, m.kv_cache_usage.value) == (30.0, 12.0, 0.9)
    assert m.completed_per_second is not None and m.completed_per_second.value == pytest.approx(7.0, rel=0.15)
    assert m.ttft is not None and m.ttft.count_per_second == pytest.approx(7.0, rel=0.15)
