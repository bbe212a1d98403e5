"""Read vLLM's per-pod load signals from Prometheus. The only module that talks to Prometheus.

One `fetch()` sends a fixed number of instant queries (`len(SIGNALS)` = 5), whatever the
number of namespaces, Deployments or pods: one per metric name, each returning, per
(namespace, pod), the aggregated value *and* the timestamp of the underlying samples. The
value/timestamp pair comes from one query (tagged with the `vqa_field` label via
`label_replace` and joined with `or`), so both are evaluated at the same instant.

Aggregation, per metric `M` and selector `S = M{namespace=~"^(?:ns1|ns2)$"}`:

* `E = max by (namespace, pod, engine) (S)`: one series per data-parallel engine. The `max`
  collapses duplicated series of the same engine (two scrape jobs, or a ServiceMonitor plus
  a PodMonitor, differ only in `job`/`instance`/`endpoint`...). vLLM before 0.8 has no
  `engine` label: grouping by a missing label groups by its empty value, so this still works.
  PromQL's `max` ignores a NaN if another duplicate has a number.
* waiting / running: `sum by (namespace, pod) (E)`: the engines of one pod add up. A NaN
  engine makes the sum NaN (as it should: the decision core classifies it).
* KV-cache usage: the max over engines, except that a pod with any NaN engine yields NaN
  (PromQL's `max` would hide it): `(max by (namespace, pod) (E) unless on (namespace, pod)
  (E != E)) or sum by (namespace, pod) (E != E)`. `vllm:kv_cache_usage_perc` (vLLM >=
  0.9.2) is preferred per pod; a pod without it falls back to `vllm:gpu_cache_usage_perc`
  (removed in 0.12). The choice is by *presence*, not by health: a pod exporting both
  names (0.9.2-0.10) always gets the new one, even if its value is NaN.
* completed requests per second: `sum by (namespace, pod) (max by (namespace, pod, engine,
  finished_reason) (rate(vllm:request_success_total{...}[60s])))`, all finished reasons
  (stop, length, abort, ...) since each one frees a batch slot. The window is
  `rate_window_seconds`. Caveat (Prometheus' extrapolation): for a counter younger than the
  window, `rate()` divides the increase by the whole window, so a pod that started less
  than a window ago is under-reported; a counter with a single sample in the window has no
  rate at all (the pod gets None).
* sample timestamp: `min by (namespace, pod) (max by (namespace, pod, engine)
  (timestamp(S)))` (also by `finished_reason` for the counter): the freshest duplicate of
  each engine, then the oldest engine of the pod. An instant query's own result timestamp
  is the evaluation time, useless to detect stale data, hence `timestamp()` on the raw
  selector.

Result semantics: a pod without any series of a metric has `None` for that signal (never 0);
so does a pod with only a value or only a timestamp (see `_per_pod`).
NaN/+Inf/-Inf are returned as float NaN/inf. Series without a `namespace` or `pod` label are
skipped (they cannot be attributed to a pod). Two result series for the same (namespace, pod,
field) cannot come from a real Prometheus (the query aggregates by exactly these labels); if
a proxy returns that, `fetch` raises `PrometheusBadResponse` rather than pick one.

HTTP: `prometheus_api_client.PrometheusConnect` does the requests. Its built-in urllib3
retries (3, with real 1 s+ sleeps, on 500/502/503/504) are disabled; tenacity retries with
an injectable `sleep`, and wraps only the HTTP call (not the parsing). Retried: connection
errors, timeouts, HTTP 5xx. Not retried: 4xx (400/422 mean the query is wrong), TLS
errors, non-JSON 200 answers, parse errors.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import requests
import requests.auth
import structlog
import tenacity
from prometheus_api_client.prometheus_connect import PrometheusConnect
from urllib3.util.retry import Retry

from autoscaler.policy.types import MetricSample
from autoscaler.promql import quote_string, regex_matcher

__all__ = [
    "WAITING_METRIC",
    "RUNNING_METRIC",
    "KV_METRIC",
    "KV_METRIC_LEGACY",
    "COMPLETED_METRIC",
    "FIELD_LABEL",
    "SIGNALS",
    "PodMetrics",
    "PrometheusError",
    "PrometheusUnavailable",
    "PrometheusBadResponse",
    "PrometheusQueryError",
    "Sample",
    "parse_vector",
    "decode_response",
    "build_queries",
    "PrometheusSource",
    "MAX_POINTS_PER_SERIES",
    "Series",
    "parse_matrix",
    "split_range",
    "build_target_queries",
]

_LOG = logging.getLogger(__name__)
_SLOG = structlog.get_logger("autoscaler.prometheus")  # one JSON line per retry, like the loop's

WAITING_METRIC: Final = "vllm:num_requests_waiting"
COMPLETED_METRIC: Final = "vllm:request_success_total"  # counter, label finished_reason
RUNNING_METRIC: Final = "vllm:num_requests_running"
KV_METRIC: Final = "vllm:kv_cache_usage_perc"  # vLLM >= 0.9.2
KV_METRIC_LEGACY: Final = "vllm:gpu_cache_usage_perc"  # deprecated 0.9.2, removed 0.12.0

FIELD_LABEL: Final = "vqa_field"  # tags each result series as "value" or "timestamp"
_VALUE: Final = "value"
_TIMESTAMP: Final = "timestamp"

# signal key -> (metric name, aggregation over engines)
SIGNALS: Final[Mapping[str, tuple[str, str]]] = {
    "waiting": (WAITING_METRIC, "sum"),
    "running": (RUNNING_METRIC, "sum"),
    "kv": (KV_METRIC, "max"),
    "kv_legacy": (KV_METRIC_LEGACY, "max"),
    "completed": (COMPLETED_METRIC, "rate"),
}

_BACKOFF_INITIAL_SECONDS: Final = 0.5
_BACKOFF_MAX_SECONDS: Final = 4.0
_BODY_EXCERPT: Final = 300

Sample = tuple[dict[str, str], float, float]
"""(labels, value, timestamp) of one instant-vector element, as Prometheus answered it."""

Series = tuple[dict[str, str], list[tuple[float, float]]]
"""(labels, [(timestamp, value), ...]) of one range-vector (matrix) element."""

MAX_POINTS_PER_SERIES: Final = 11_000  # Prometheus refuses a query_range with more points per series


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class PodMetrics:
    """The three signals of one pod; `None` = no series for the pod."""

    waiting: MetricSample | None
    running: MetricSample | None
    kv_cache_usage: MetricSample | None
    kv_metric_name: str | None  # KV_METRIC, KV_METRIC_LEGACY, or None when kv_cache_usage is None
    # requests/s the pod finishes: rate(vllm:request_success_total[window]) summed over engines
    # and finished reasons; timestamp = its latest counter sample
    completed_per_second: MetricSample | None = None


# --------------------------------------------------------------------------- errors


class PrometheusError(Exception):
    """Base class of everything `PrometheusSource` raises about Prometheus."""


class PrometheusUnavailable(PrometheusError):
    """No HTTP answer: connection refused/reset, DNS, timeout, TLS failure."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


class PrometheusBadResponse(PrometheusError):
    """An answer we cannot use: HTTP error status, non-JSON body, status != success,
    unexpected shape or value. `status_code` is None when the HTTP status was fine."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        error_type: str | None = None,
        error: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.error_type = error_type
        self.error = error

    @property
    def retryable(self) -> bool:
        return self.status_code is not None and 500 <= self.status_code <= 599


class PrometheusQueryError(PrometheusBadResponse):
    """Prometheus rejected the query itself (HTTP 400 bad_data / 422 execution): a bug in the
    query or in an input that made it into the query. Never retried."""


def _is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, PrometheusUnavailable | PrometheusBadResponse):
        return exc.retryable
    return False


# --------------------------------------------------------------------------- pure parsing

# What Go's strconv.FormatFloat(v, 'f' | 'e' | 'g', -1, 64) and Prometheus produce.
_FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_SPECIAL_VALUES: Final[Mapping[str, float]] = {
    "NaN": math.nan,
    "+Inf": math.inf,
    "Inf": math.inf,
    "-Inf": -math.inf,
}


def _parse_value(raw: Any, where: str) -> float:
    if not isinstance(raw, str):
        raise PrometheusBadResponse(f"{where}: sample value must be a string, got {raw!r}")
    special = _SPECIAL_VALUES.get(raw)
    if special is not None:
        return special
    if not _FLOAT_RE.match(raw):
        raise PrometheusBadResponse(f"{where}: sample value {raw!r} is not a number")
    return float(raw)


def _parse_timestamp(raw: Any, where: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise PrometheusBadResponse(f"{where}: sample timestamp must be a number, got {raw!r}")
    ts = float(raw)
    if not math.isfinite(ts):
        raise PrometheusBadResponse(f"{where}: sample timestamp {raw!r} is not finite")
    return ts


def _result_items(body: Any, result_type: str, what: str) -> list[tuple[str, dict[str, Any], dict[str, str]]]:
    """The common envelope of `/api/v1/query` and `/api/v1/query_range` answers: status,
    data, resultType (a missing one is taken as `result_type`), result list, each element an
    object with a string-to-string `metric`. Returns (where, element, metric) per element."""
    if not isinstance(body, dict):
        raise PrometheusBadResponse(f"answer is not a JSON object: {type(body).__name__}")
    status = body.get("status")
    if status != "success":
        error_type = body.get("errorType")
        error = body.get("error")
        raise PrometheusBadResponse(
            f"Prometheus answered status={status!r}: {error_type}: {error}",
            error_type=error_type if isinstance(error_type, str) else None,
            error=error if isinstance(error, str) else None,
        )
    data = body.get("data")
    if not isinstance(data, dict):
        raise PrometheusBadResponse("answer has no 'data' object")
    got = data.get("resultType", result_type)
    if got != result_type:
        raise PrometheusBadResponse(f"expected {what}, got resultType={got!r}")
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusBadResponse("answer has no 'data.result' list")
    items = []
    for i, item in enumerate(result):
        where = f"result[{i}]"
        if not isinstance(item, dict):
            raise PrometheusBadResponse(f"{where} is not an object")
        metric = item.get("metric")
        if not isinstance(metric, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metric.items()
        ):
            raise PrometheusBadResponse(f"{where}: 'metric' must map strings to strings")
        items.append((where, item, metric))
    return items


def parse_vector(body: Any) -> list[Sample]:
    """Parse a decoded `/api/v1/query` answer that must be an instant vector.

    Returns `(labels, value, timestamp)` per element, in the server's order; `timestamp` is
    whatever the server put next to the value (for an instant query: the evaluation time).
    Strict: raises `PrometheusBadResponse` on status != "success" (with the server's
    errorType/error), a non-vector result, a missing/ill-typed field, or a value that is
    not a number (NaN, +Inf, -Inf are numbers). A missing `resultType` is accepted when the
    elements are vector-shaped (some proxies and docs trim it). Pure; never does I/O.
    """
    out: list[Sample] = []
    for where, item, metric in _result_items(body, "vector", "an instant vector"):
        pair = item.get("value")
        if not isinstance(pair, list) or len(pair) != 2:
            raise PrometheusBadResponse(f"{where}: 'value' must be a [timestamp, \"value\"] pair")
        ts = _parse_timestamp(pair[0], where)
        value = _parse_value(pair[1], where)
        out.append((dict(metric), value, ts))
    return out


def parse_matrix(body: Any) -> list[Series]:
    """Parse a decoded `/api/v1/query_range` answer that must be a range vector (matrix).

    Returns `(labels, [(timestamp, value), ...])` per series, in the server's order. Strict
    like `parse_vector`: status != "success", another resultType, a missing or ill-typed field,
    or a value that is not a number raise `PrometheusBadResponse`. Pure.
    """
    out: list[Series] = []
    for where, item, metric in _result_items(body, "matrix", "a range vector"):
        values = item.get("values")
        if not isinstance(values, list):
            raise PrometheusBadResponse(f"{where}: 'values' must be a list of [timestamp, \"value\"] pairs")
        points: list[tuple[float, float]] = []
        for j, pair in enumerate(values):
            if not isinstance(pair, list) or len(pair) != 2:
                raise PrometheusBadResponse(f"{where}.values[{j}]: must be a [timestamp, \"value\"] pair")
            points.append((_parse_timestamp(pair[0], where), _parse_value(pair[1], where)))
        out.append((dict(metric), points))
    return out


def split_range(
    start: float, end: float, step_seconds: float, max_points: int = MAX_POINTS_PER_SERIES
) -> list[tuple[float, float]]:
    """Split [start, end] into sub-ranges of at most `max_points` evaluation steps each.

    Every sub-range starts and ends on the grid `start + k * step_seconds`, and consecutive
    sub-ranges do not share a step, so the concatenated answers hold each step exactly once.
    Pure; raises ValueError on a non-positive step, end < start or max_points < 1.
    """
    if not (math.isfinite(start) and math.isfinite(end) and math.isfinite(step_seconds)):
        raise ValueError("start, end and step must be finite")
    if step_seconds <= 0:
        raise ValueError(f"step must be > 0, got {step_seconds!r}")
    if end < start:
        raise ValueError(f"end {end!r} is before start {start!r}")
    if max_points < 1:
        raise ValueError(f"max_points must be >= 1, got {max_points!r}")
    n_steps = int(math.floor((end - start) / step_seconds + 1e-9)) + 1
    chunks: list[tuple[float, float]] = []
    first = 0
    while first < n_steps:
        last = min(first + max_points, n_steps) - 1
        chunks.append((start + first * step_seconds, start + last * step_seconds))
        first = last + 1
    return chunks


def decode_response(status_code: int, body: bytes) -> Any:
    """Turn an HTTP answer of `/api/v1/query` into decoded JSON, or raise a typed error.

    Non-200: `PrometheusQueryError` for 400/422, else `PrometheusBadResponse`; both carry the
    status code and the server's errorType/error when the body is Prometheus' JSON. 200 with
    a body that is not JSON: `PrometheusBadResponse`. Pure.
    """
    doc: Any
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: "[[[[..." nested too deep
        doc = None
    if status_code != 200:
        error_type = error = None
        if isinstance(doc, dict):
            et, er = doc.get("errorType"), doc.get("error")
            error_type = et if isinstance(et, str) else None
            error = er if isinstance(er, str) else None
        if error_type is not None or error is not None:
            detail = f"{error_type}: {error}"
        else:
            detail = f"body {body[:_BODY_EXCERPT]!r}"
        cls = PrometheusQueryError if status_code in (400, 422) else PrometheusBadResponse
        raise cls(
            f"Prometheus answered HTTP {status_code}: {detail}",
            status_code=status_code,
            error_type=error_type,
            error=error,
        )
    if doc is None:
        raise PrometheusBadResponse(
            f"Prometheus answered HTTP 200 with a body that is not JSON: {body[:_BODY_EXCERPT]!r}"
        )
    return doc


# --------------------------------------------------------------------------- queries


def _tag(expr: str, field: str) -> str:
    # label_replace with an empty source label and an empty regex always matches: sets the tag.
    return f'label_replace({expr}, "{FIELD_LABEL}", "{field}", "", "")'


def _signal_query(metric: str, aggregation: str, namespace_matcher: str, rate_window: str) -> str:
    selector = f"{metric}{{{namespace_matcher}}}"
    series = "namespace, pod, engine"
    per_engine = f"max by ({series}) ({selector})"
    if aggregation == "rate":
        series = "namespace, pod, engine, finished_reason"
        value = f"sum by (namespace, pod) (max by ({series}) (rate({selector}[{rate_window}])))"
    elif aggregation == "sum":
        value = f"sum by (namespace, pod) ({per_engine})"
    elif aggregation == "max":
        nan_engines = f"({per_engine} != {per_engine})"
        value = (
            f"(max by (namespace, pod) ({per_engine}) unless on (namespace, pod) {nan_engines})"
            f" or sum by (namespace, pod) {nan_engines}"
        )
    else:  # pragma: no cover - SIGNALS is a constant
        raise ValueError(aggregation)
    timestamp = f"min by (namespace, pod) (max by ({series}) (timestamp({selector})))"
    return f"{_tag(value, _VALUE)} or {_tag(timestamp, _TIMESTAMP)}"


def _check_rate_window(seconds: int) -> None:
    if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 1:
        raise ValueError(f"rate_window_seconds must be a positive integer, got {seconds!r}")


def build_queries(namespaces: Sequence[str], rate_window_seconds: int = 60) -> dict[str, str]:
    """The PromQL of one fetch, keyed like `SIGNALS`. Pure; raises ValueError on no/empty namespace."""
    _check_rate_window(rate_window_seconds)
    if isinstance(namespaces, str):
        raise TypeError("namespaces must be a sequence of names, not a string")
    if not namespaces:
        raise ValueError("no namespace to query")
    for ns in namespaces:
        if not isinstance(ns, str) or not ns:
            raise ValueError(f"invalid namespace {ns!r}")
    matcher = regex_matcher("namespace", namespaces)
    window = f"{rate_window_seconds}s"
    return {key: _signal_query(metric, agg, matcher, window) for key, (metric, agg) in SIGNALS.items()}


def build_target_queries(namespace: str, pod_regex: str, rate_window_seconds: int = 60) -> dict[str, str]:
    """The PromQL of `build_queries`, restricted to the pods of one namespace whose name matches
    the RE2 regex `pod_regex` (anchored by Prometheus): what `autoscaler record` evaluates
    over a range, so that each step holds exactly what a live `fetch()` at that instant reads.
    Pure; raises ValueError on an empty namespace or regex."""
    _check_rate_window(rate_window_seconds)
    if not isinstance(namespace, str) or not namespace:
        raise ValueError(f"invalid namespace {namespace!r}")
    if not isinstance(pod_regex, str) or not pod_regex:
        raise ValueError(f"invalid pod regex {pod_regex!r}")
    matcher = f"{regex_matcher('namespace', [namespace])}, pod=~{quote_string(pod_regex)}"
    window = f"{rate_window_seconds}s"
    return {key: _signal_query(metric, agg, matcher, window) for key, (metric, agg) in SIGNALS.items()}


def _per_pod(samples: list[Sample], what: str) -> dict[tuple[str, str], MetricSample]:
    """Join the tagged value/timestamp series of one signal query into samples per pod."""
    values: dict[tuple[str, str], float] = {}
    stamps: dict[tuple[str, str], float] = {}
    skipped = 0
    for labels, value, _eval_time in samples:
        field = labels.get(FIELD_LABEL)
        if field == _VALUE:
            target = values
        elif field == _TIMESTAMP:
            target = stamps
        else:
            raise PrometheusBadResponse(f"{what}: series without a valid {FIELD_LABEL} label: {labels}")
        ns, pod = labels.get("namespace", ""), labels.get("pod", "")
        if not ns or not pod:
            skipped += 1
            continue
        key = (ns, pod)
        if key in target:
            raise PrometheusBadResponse(f"{what}: two {field} series for pod {ns}/{pod}")
        target[key] = value
    if skipped:
        _LOG.debug("%s: %d series without namespace/pod label skipped", what, skipped)
    # A pod needs both halves, else it is absent for this signal. For gauges both come from
    # the same instant selector and always pair up; rate() legitimately has only one half:
    # a timestamp without a rate when the window holds a single sample, and a rate without
    # a timestamp for up to a window after the pod went away (range selectors keep the
    # samples before a staleness marker, instant selectors drop the series at once).
    unpaired = values.keys() ^ stamps.keys()
    if unpaired:
        _LOG.debug("%s: %d pods with only a value or only a timestamp: absent", what, len(unpaired))
    out: dict[tuple[str, str], MetricSample] = {}
    for key, value in values.items():
        if key not in stamps:
            continue
        ts = stamps[key]
        if not math.isfinite(ts):
            raise PrometheusBadResponse(f"{what}: sample timestamp {ts!r} of {key[0]}/{key[1]} is not finite")
        out[key] = MetricSample(value=value, timestamp=ts)
    return out


# --------------------------------------------------------------------------- client


class _BearerAuth(requests.auth.AuthBase):
    """Adds `Authorization: Bearer <token>`; its repr does not show the token."""

    def __init__(self, token: str) -> None:
        self._token = token

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self._token}"
        return request

    def __repr__(self) -> str:
        return "_BearerAuth(<redacted>)"


def _shorten(text: str, limit: int = _BODY_EXCERPT) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _cause(exc: Exception) -> str:
    """The reason of a requests error without the request URL urllib3 puts first (the URL
    carries the whole query and would push the reason out of a shortened message)."""
    text = str(exc)
    at = text.find("(Caused by ")
    return text[at + len("(Caused by "):].removesuffix(")") if at >= 0 else text


def _redact_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"<redacted>@{host}", parts.path, parts.query, parts.fragment))


class PrometheusSource:
    """Instant queries against one Prometheus-compatible HTTP API.

    TLS certificates are verified by default (against `ca_file` if given, else the system /
    certifi bundle); `insecure_skip_tls_verify=True` is the explicit opt-out. The bearer
    token goes only into the Authorization header; it is not in `repr()` nor in messages.
    Calls from several threads are safe: the per-call response capture is thread-local and
    requests.Session is shared (as requests allows for plain GETs).
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_seconds: float = 5.0,
        bearer_token: str | None = None,
        ca_file: str | None = None,
        insecure_skip_tls_verify: bool = False,
        retry_attempts: int = 3,
        sleep: Callable[[float], None] = time.sleep,
        rate_window_seconds: int = 60,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"Prometheus URL must be http(s)://host[:port][/prefix], got {_redact_url(url)!r}")
        if not (timeout_seconds > 0 and math.isfinite(timeout_seconds)):
            raise ValueError(f"timeout_seconds must be > 0, got {timeout_seconds!r}")
        if retry_attempts < 1:
            raise ValueError(f"retry_attempts must be >= 1, got {retry_attempts!r}")
        _check_rate_window(rate_window_seconds)
        if ca_file is not None and insecure_skip_tls_verify:
            raise ValueError("ca_file and insecure_skip_tls_verify are mutually exclusive")
        auth: _BearerAuth | None = None
        if bearer_token is not None:
            token = bearer_token.strip()
            # requests would put an invalid header value into its exception message: refuse
            # it here with a message that does not contain the token.
            if not token or any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in token):
                raise ValueError("bearer_token is empty or contains whitespace/control characters")
            auth = _BearerAuth(token)

        self._url = url.rstrip("/")
        self._safe_url = _redact_url(self._url)
        self._timeout = float(timeout_seconds)
        self._has_token = auth is not None
        # what the server may echo back (a proxy's error page with the request headers)
        self._token_forms: tuple[bytes, ...] = (
            (auth._token.encode(), json.dumps(auth._token)[1:-1].encode()) if auth is not None else ()
        )
        self._ca_file = ca_file
        self._insecure = insecure_skip_tls_verify
        self._retry_attempts = retry_attempts
        self._sleep = sleep
        self._rate_window_seconds = rate_window_seconds
        self._local = threading.local()

        if insecure_skip_tls_verify:
            _LOG.warning("TLS certificate verification of Prometheus at %s is disabled", self._safe_url)
        session = requests.Session()
        session.verify = ca_file if ca_file is not None else not insecure_skip_tls_verify
        session.hooks["response"].append(self._capture_response)
        self._session = session
        # prometheus_api_client ships py.typed but annotates `auth: tuple = None` and
        # `timeout: int` (both go straight to requests, which takes an AuthBase and a float).
        connect_kwargs: dict[str, Any] = {
            "url": self._url,
            # The token as a requests auth object rather than a static header: an explicit
            # auth also stops requests from replacing it with ~/.netrc credentials.
            "auth": auth,
            # Disable the client's own urllib3 retries (3 retries, real sleeps of 1 s and
            # more, also on 503): tenacity does it, with an injectable sleep.
            "retry": Retry(total=0, raise_on_status=False),
            "session": session,
            "timeout": self._timeout,
        }
        self._prom = PrometheusConnect(**connect_kwargs)

    def __repr__(self) -> str:
        verify = self._ca_file if self._ca_file is not None else (not self._insecure)
        token = "<redacted>" if self._has_token else None
        return (
            f"PrometheusSource(url={self._safe_url!r}, timeout_seconds={self._timeout!r}, "
            f"bearer_token={token}, verify={verify!r}, retry_attempts={self._retry_attempts!r})"
        )

    def close(self) -> None:
        self._prom.close()

    def __enter__(self) -> PrometheusSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ public

    def fetch(
        self, namespaces: Sequence[str], now: float | None = None
    ) -> dict[tuple[str, str], PodMetrics]:
        """The signals of every vLLM pod in `namespaces`, keyed by (namespace, pod).

        Sends exactly `len(SIGNALS)` instant queries (evaluated at `now` if given), or none
        if `namespaces` is empty. A pod appears if it has at least one of the metrics.
        """
        if isinstance(namespaces, str):
            raise TypeError("namespaces must be a sequence of names, not a string")
        if not namespaces:
            return {}
        per_signal: dict[str, dict[tuple[str, str], MetricSample]] = {}
        for key, promql in build_queries(namespaces, self._rate_window_seconds).items():
            per_signal[key] = _per_pod(self.query(promql, now=now), key)

        waiting, running = per_signal["waiting"], per_signal["running"]
        kv_new, kv_old = per_signal["kv"], per_signal["kv_legacy"]
        completed = per_signal["completed"]
        pods = sorted(waiting.keys() | running.keys() | kv_new.keys() | kv_old.keys() | completed.keys())
        out: dict[tuple[str, str], PodMetrics] = {}
        for pod in pods:
            kv: MetricSample | None
            kv_name: str | None
            if pod in kv_new:
                kv, kv_name = kv_new[pod], KV_METRIC
            elif pod in kv_old:
                kv, kv_name = kv_old[pod], KV_METRIC_LEGACY
            else:
                kv, kv_name = None, None
            out[pod] = PodMetrics(
                waiting=waiting.get(pod),
                running=running.get(pod),
                kv_cache_usage=kv,
                kv_metric_name=kv_name,
                completed_per_second=completed.get(pod),
            )
        return out

    def query(self, promql: str, now: float | None = None) -> list[Sample]:
        """One instant query (retried per the policy above), parsed with `parse_vector`."""
        # Server-side evaluation timeout, float seconds ("0.5s" would be rejected: Prometheus'
        # durations take integer units, but a bare float is read as seconds).
        params: dict[str, str] = {"timeout": f"{self._timeout:g}"}
        if now is not None:
            if not math.isfinite(now):
                raise ValueError(f"now must be finite, got {now!r}")
            params["time"] = f"{now:.3f}"
        body = self._retrying()(self._query_once, promql, params)
        return parse_vector(body)

    def _retrying(self) -> tenacity.Retrying:
        """The retry policy of every request: retryable errors only, exponential backoff,
        the injectable sleep, one `prometheus_retry` warning per retry, the last error raised."""
        return tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self._retry_attempts),
            wait=tenacity.wait_exponential(multiplier=_BACKOFF_INITIAL_SECONDS, max=_BACKOFF_MAX_SECONDS),
            retry=tenacity.retry_if_exception(_is_retryable),
            sleep=self._sleep,
            before_sleep=self._log_retry,
            reraise=True,
        )

    def query_range(
        self,
        promql: str,
        start: float,
        end: float,
        step_seconds: float,
        max_points: int = MAX_POINTS_PER_SERIES,
    ) -> list[Series]:
        """One range query over [start, end] every `step_seconds`, sent in chunks of at most
        `max_points` steps (`split_range`), each chunk retried like `query`, parsed with
        `parse_matrix`. Series of all chunks are merged by their label set; points are in
        time order."""
        merged: dict[tuple[tuple[str, str], ...], Series] = {}
        for chunk_start, chunk_end in split_range(start, end, step_seconds, max_points):
            params: dict[str, str] = {
                "timeout": f"{self._timeout:g}",
                "start": f"{chunk_start:.3f}",
                "end": f"{chunk_end:.3f}",
                "step": f"{step_seconds:g}",
            }
            body = self._retrying()(self._query_range_once, promql, params)
            for labels, points in parse_matrix(body):
                key = tuple(sorted(labels.items()))
                if key in merged:
                    merged[key][1].extend(points)
                else:
                    merged[key] = (labels, list(points))
        for _, points in merged.values():
            points.sort(key=lambda p: p[0])
        return list(merged.values())

    # ------------------------------------------------------------------ HTTP

    def _query_range_once(self, promql: str, params: dict[str, str]) -> Any:
        # custom_query_range rounds start/end to whole seconds; our params override them
        # (the client merges `params` last), keeping millisecond-aligned steps.
        epoch = datetime.fromtimestamp(0, tz=timezone.utc)
        return self._send(
            lambda: self._prom.custom_query_range(promql, epoch, epoch, params["step"], params=params)
        )

    def _send(self, call: Callable[[], Any]) -> Any:
        """Run one client call with the same error classification as `_query_once`."""
        self._local.response = None
        failure: Exception | None = None
        try:
            call()
        except requests.exceptions.SSLError as exc:
            raise PrometheusUnavailable(
                f"TLS error talking to Prometheus at {self._safe_url}: {_shorten(_cause(exc))}",
                retryable=False,
            ) from exc
        except (
            requests.exceptions.ConnectionError,
            requests.exceptions.Timeout,
            requests.exceptions.ChunkedEncodingError,
        ) as exc:
            raise PrometheusUnavailable(
                f"Prometheus at {self._safe_url} unreachable: {type(exc).__name__}: {_shorten(_cause(exc))}"
            ) from exc
        except Exception as exc:  # noqa: BLE001 - reclassified from the raw response below
            failure = exc
        response: requests.Response | None = getattr(self._local, "response", None)
        self._local.response = None
        if response is None:
            raise PrometheusError(
                f"query to {self._safe_url} failed without an answer: {_shorten(repr(failure))}"
            ) from failure
        return decode_response(response.status_code, self._without_token(response.content))

    def _without_token(self, body: bytes) -> bytes:
        """The answer with our bearer token blanked out, before anything of it can reach an
        error message (and so a log line): some proxies echo the request headers."""
        for form in self._token_forms:
            body = body.replace(form, b"<redacted>")
        return body

    def _capture_response(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        # Session response hook: keep the raw answer so that we classify it ourselves
        # (PrometheusConnect.custom_query only gives "HTTP Status Code N (b'...')" strings,
        # and drops status/warnings/resultType from successful answers).
        self._local.response = response

    def _query_once(self, promql: str, params: dict[str, str]) -> Any:
        # PrometheusApiClientException on non-200, JSONDecodeError/KeyError/TypeError on an odd
        # 200 body: `_send` reclassifies them from the captured raw response.
        return self._send(lambda: self._prom.custom_query(promql, params=params))

    def _log_retry(self, state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        _SLOG.warning(
            "prometheus_retry",
            attempt=state.attempt_number,
            max_attempts=self._retry_attempts,
            wait_seconds=round(float(wait), 3),
            error=str(exc),  # already scrubbed of the bearer token (`_send`)
        )
