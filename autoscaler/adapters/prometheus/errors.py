"""The Prometheus adapter's error tree: `PrometheusError` and its kinds (unavailable, bad response,
rejected query), with whether each is worth a retry."""

from __future__ import annotations

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
