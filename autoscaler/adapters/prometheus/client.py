"""The HTTP client of Prometheus: `PrometheusSource` (instant and range queries, TLS, bearer
token, retries with tenacity). A bearer token file is re-read while running, as client-go does
with a projected ServiceAccount token: when the copy is a minute old, and at once after a 401
(the query is then tried once more if the file holds another token)."""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import requests
import requests.auth
import structlog
import tenacity
from prometheus_api_client.prometheus_connect import PrometheusConnect
from urllib3.util.retry import Retry

from autoscaler.adapters.prometheus.errors import (
    PrometheusError,
    PrometheusUnavailable,
    _is_retryable,
)
from autoscaler.adapters.prometheus.parsing import (
    _BODY_EXCERPT,
    MAX_POINTS_PER_SERIES,
    PodMetrics,
    Sample,
    Series,
    decode_response,
    parse_matrix,
    parse_vector,
    split_range,
)
from autoscaler.adapters.prometheus.queries import (
    HISTOGRAMS,
    KV_METRIC,
    KV_METRIC_LEGACY,
    QUERIES_PER_FETCH,
    _check_rate_window,
    _per_pod,
    _per_pod_histograms,
    per_request,
    per_token_pods,
    build_queries,
)
from autoscaler.policy.types import LatencyHistogram, MetricSample

_LOG = logging.getLogger(__name__)
_SLOG = structlog.get_logger("autoscaler.prometheus")  # one JSON line per retry, like the loop's
_BACKOFF_INITIAL_SECONDS: Final = 0.5
_BACKOFF_MAX_SECONDS: Final = 4.0
_TOKEN_MAX_AGE_SECONDS: Final = 60.0  # client-go's cachingTokenSource period
_TOKEN_ERROR: Final = "bearer_token is empty or contains whitespace/control characters"

# --------------------------------------------------------------------------- client


def _checked_token(token: str) -> str:
    """The token stripped; ValueError (without the token) if it cannot be a header value."""
    token = token.strip()
    # requests would put an invalid header value into its exception message: refuse it here
    # with a message that does not contain the token.
    if not token or any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in token):
        raise ValueError(_TOKEN_ERROR)
    return token


class _BearerAuth(requests.auth.AuthBase):
    """Adds `Authorization: Bearer <token>`; its repr does not show the token. The token is a
    fixed string, or the content of `token_file`, re-read when the copy is older than
    `_TOKEN_MAX_AGE_SECONDS` and after a 401 (`invalidate`); a re-read that fails keeps the
    last good token. `seen` holds every token sent, for scrubbing answers."""

    def __init__(self, token: str | None = None, token_file: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._file = token_file
        self._clock = clock
        self._lock = threading.Lock()
        self._read_at = 0.0
        self.seen: list[str] = []
        self._token = _checked_token(token) if token is not None else self._read()
        self.seen.append(self._token)

    def _read(self) -> str:
        assert self._file is not None
        try:
            with open(self._file, encoding="utf-8") as fh:
                token = _checked_token(fh.read())
        except OSError as exc:
            raise ValueError(f"bearer_token_file {self._file}: {type(exc).__name__}: {exc.strerror or ''}") from None
        except UnicodeDecodeError:
            raise ValueError(f"bearer_token_file {self._file}: not UTF-8 text") from None
        except ValueError:
            raise ValueError(f"bearer_token_file {self._file}: {_TOKEN_ERROR}") from None
        self._read_at = self._clock()
        return token

    def _refresh(self) -> str:
        try:
            token = self._read()
        except ValueError as exc:
            _SLOG.warning("prometheus_token_unreadable", error=str(exc))
            self._read_at = self._clock()
            return self._token
        if token not in self.seen:
            self.seen = [*self.seen[-3:], token]
        self._token = token
        return token

    def token(self) -> str:
        with self._lock:
            if self._file is not None and self._clock() - self._read_at >= _TOKEN_MAX_AGE_SECONDS:
                return self._refresh()
            return self._token

    def invalidate(self) -> bool:
        """After a 401: re-read the file now; True when it holds another token."""
        if self._file is None:
            return False
        with self._lock:
            before = self._token
            return self._refresh() != before

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self.token()}"
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


def _pod_metrics(
    per_signal: dict[str, dict[tuple[str, str], MetricSample]],
    per_histogram: dict[str, dict[tuple[str, str], LatencyHistogram]],
    per_token_tpot: set[tuple[str, str]],
) -> dict[tuple[str, str], PodMetrics]:
    """Join the per-pod answers of one fetch: every pod any query has, sorted; the KV usage
    from `vllm:kv_cache_usage_perc`, else (per pod) `vllm:gpu_cache_usage_perc`; a TPOT
    histogram that counts tokens (`per_token_tpot`) weighted by the pod's finished requests
    (`per_request`)."""
    kv_new, kv_old = per_signal["kv"], per_signal["kv_legacy"]
    pods = sorted(set().union(*per_signal.values(), *per_histogram.values()))
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
            waiting=per_signal["waiting"].get(pod),
            running=per_signal["running"].get(pod),
            kv_cache_usage=kv,
            kv_metric_name=kv_name,
            completed_per_second=per_signal["completed"].get(pod),
            prompt_tokens_per_second=per_signal["prompt_tokens"].get(pod),
            generation_tokens_per_second=per_signal["generation_tokens"].get(pod),
            ttft=per_histogram["ttft"].get(pod),
            tpot=(per_request(per_histogram["tpot"].get(pod), per_signal["completed"].get(pod))
                  if pod in per_token_tpot else per_histogram["tpot"].get(pod)),
            queue_time=per_histogram["queue_time"].get(pod),
        )
    return out


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
        bearer_token_file: str | None = None,
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
        if bearer_token is not None and bearer_token_file is not None:
            raise ValueError("bearer_token and bearer_token_file are mutually exclusive")
        auth: _BearerAuth | None = None
        if bearer_token is not None or bearer_token_file is not None:
            auth = _BearerAuth(bearer_token, bearer_token_file)

        self._url = url.rstrip("/")
        self._safe_url = _redact_url(self._url)
        self._timeout = float(timeout_seconds)
        self._has_token = auth is not None
        self._auth = auth
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
        self, namespaces: Sequence[str], now: float | None = None, budget_seconds: float | None = None
    ) -> dict[tuple[str, str], PodMetrics]:
        """The signals of every vLLM pod in `namespaces`, keyed by (namespace, pod).

        Sends exactly `QUERIES_PER_FETCH` instant queries (evaluated at `now` if given), or none
        if `namespaces` is empty. A pod appears if it has at least one of the metrics.

        `budget_seconds` (the controller gives its tick): no query is started once the fetch has
        taken that long; `PrometheusUnavailable` instead. Each query is retried on its own, so a
        Prometheus that answers every query after two timeouts would otherwise hold one tick for
        ten queries x three tries (165 s at the 5 s timeout), past the liveness probe's patience.
        At most the budget plus one query's tries.
        """
        if isinstance(namespaces, str):
            raise TypeError("namespaces must be a sequence of names, not a string")
        if not namespaces:
            return {}
        per_signal: dict[str, dict[tuple[str, str], MetricSample]] = {}
        per_histogram: dict[str, dict[tuple[str, str], LatencyHistogram]] = {}
        per_token: set[tuple[str, str]] = set()
        started = time.monotonic()
        for answered, (key, promql) in enumerate(build_queries(namespaces, self._rate_window_seconds).items()):
            if budget_seconds is not None and time.monotonic() - started >= budget_seconds:
                raise PrometheusUnavailable(f"Prometheus at {self._safe_url}: the fetch took longer than its budget of "
                                            f"{budget_seconds:g} s ({answered} of {QUERIES_PER_FETCH} queries answered)")
            if key in HISTOGRAMS:
                samples = self.query(promql, now=now)
                per_histogram[key] = _per_pod_histograms(samples, key)
                if key == "tpot":
                    per_token = per_token_pods(samples)
            else:
                per_signal[key] = _per_pod(self.query(promql, now=now), key)
        return _pod_metrics(per_signal, per_histogram, per_token)

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
        """Run one client call with the same error classification as `_query_once`; a 401 is
        sent once more when the token file now holds another token (a rotation)."""
        status, body = self._send_once(call)
        if status == 401 and self._auth is not None and self._auth.invalidate():
            _SLOG.info("prometheus_token_reloaded")
            status, body = self._send_once(call)
        return decode_response(status, body)

    def _send_once(self, call: Callable[[], Any]) -> tuple[int, bytes]:
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
        return response.status_code, self._without_token(response.content)

    def _without_token(self, body: bytes) -> bytes:
        """The answer with our bearer tokens (every one sent) blanked out, before anything of
        it can reach an error message (and so a log line): some proxies echo the request headers."""
        for token in self._auth.seen if self._auth is not None else ():
            for form in (token.encode(), json.dumps(token)[1:-1].encode()):
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
