"""The Kubernetes adapter's error tree: every `ApiException` and urllib3 error becomes a
`KubeError` kind (not found, conflict, throttled, ...), transient ones marked for retry."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

# --------------------------------------------------------------------------- errors


class KubeError(Exception):
    """A failed API call. `verb` (get, list, create, update, patch), `resource` (e.g.
    "deployments/scale"), `namespace`/`name` say what was attempted; `status` is the HTTP status
    (None for transport errors), `reason` the Status reason (NotFound, Conflict...).
    `maybe_written` (writes only): an earlier try of the same write got no clear answer (a
    timeout, a 5xx, a dropped connection), so the write may have been applied all the same."""

    def __init__(self, message: str, *, verb: str = "", resource: str = "", namespace: str | None = None,
                 name: str | None = None, status: int | None = None, reason: str = "",
                 maybe_written: bool = False) -> None:
        super().__init__(message)
        self.message, self.verb, self.resource = message, verb, resource
        self.namespace, self.name, self.status, self.reason = namespace, name, status, reason
        self.maybe_written = maybe_written


class KubeNotFound(KubeError):
    """404."""


class KubeConflict(KubeError):
    """409: stale resourceVersion (reason Conflict) or the object exists (AlreadyExists)."""


class KubeForbidden(KubeError):
    """403: RBAC denies the verb on the resource; the message names both."""


class KubeInvalid(KubeError):
    """400 / 422: the request itself is wrong."""


class KubeExpired(KubeError):
    """410 with reason Expired: the snapshot a paginated list's continue token refers to is gone
    (compacted), and the list has to start again. (Any other 410 is a plain KubeError.)"""


class KubeThrottled(KubeError):
    """429: API priority and fairness or a rate limit; `retry_after` in seconds if the server said."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class KubeServerError(KubeError):
    """5xx."""


class KubeTimeout(KubeError):
    """No answer within the request timeout."""


class KubeFenced(KubeError):
    """This replica may not write (it lost its Lease, or too little of it is left for one more
    try): nothing more was sent."""


class KubeUnavailable(KubeError):
    """The API server could not be reached (connection refused/reset, DNS, TLS)."""


RETRYABLE_ERRORS: tuple[type[KubeError], ...] = (KubeThrottled, KubeServerError, KubeTimeout, KubeUnavailable)
# A write that failed with one of these may have been applied: the server took the request and
# the answer was lost or late. (429 is refused before any processing: never applied.)
AMBIGUOUS_ERRORS: tuple[type[KubeError], ...] = (KubeServerError, KubeTimeout, KubeUnavailable)


@dataclass(frozen=True)
class _Op:
    """What a call attempts, for error messages."""

    verb: str
    resource: str
    namespace: str | None = None
    name: str | None = None

    def describe(self) -> str:
        """e.g. "patch deployments/scale in namespace llm" (the server's message names the object)."""
        where = f"in namespace {self.namespace}" if self.namespace else "at cluster scope"
        return f"{self.verb} {self.resource} {where}"


def _retry_after(exc: ApiException, body: Mapping[str, Any]) -> float | None:
    headers = exc.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    if value:
        try:
            return max(0.0, float(value))
        except ValueError:
            pass
        try:  # the HTTP-date form
            return max(0.0, email.utils.parsedate_to_datetime(str(value)).timestamp() - time.time())
        except (TypeError, ValueError):
            pass
    seconds = (body.get("details") or {}).get("retryAfterSeconds")
    return float(seconds) if isinstance(seconds, (int, float)) else None


def translate_error(exc: BaseException, op: _Op) -> KubeError:
    """Map a client/transport exception to the KubeError tree."""
    ctx: dict[str, Any] = {"verb": op.verb, "resource": op.resource, "namespace": op.namespace, "name": op.name}
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        try:
            body = json.loads(exc.body) if exc.body else {}
        except (TypeError, ValueError):
            body = {}
        body = body if isinstance(body, dict) else {}
        server_message = str(body.get("message") or exc.reason or "")
        reason = str(body.get("reason") or exc.reason or "")
        ctx.update(status=status or None, reason=reason)
        if status == 0:
            return KubeUnavailable(f"cannot {op.describe()}: {server_message}", **ctx)
        if status == 403:
            return KubeForbidden(f"forbidden: {op.describe()}: {server_message}", **ctx)
        if status == 404:
            return KubeNotFound(f"not found: {op.describe()}: {server_message}", **ctx)
        if status == 409:
            return KubeConflict(f"conflict: {op.describe()}: {server_message}", **ctx)
        if status in (400, 422):
            return KubeInvalid(f"invalid: {op.describe()}: {server_message}", **ctx)
        if status == 410 and reason == "Expired":  # client-go's errors.IsResourceExpired
            return KubeExpired(f"expired: {op.describe()}: {server_message}", **ctx)
        if status == 429:
            return KubeThrottled(f"throttled: {op.describe()}: {server_message}",
                                 retry_after=_retry_after(exc, body), **ctx)
        if status == 504 or reason == "Timeout":
            return KubeServerError(f"server timeout: {op.describe()}: {server_message}", **ctx)
        if status >= 500:
            return KubeServerError(f"server error {status}: {op.describe()}: {server_message}", **ctx)
        return KubeError(f"HTTP {status}: {op.describe()}: {server_message}", **ctx)
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        exc = exc.reason  # urllib3 retries were enabled on the client: look at the last error
    # NewConnectionError subclasses ConnectTimeoutError for history's sake: it is a refusal.
    if isinstance(exc, (urllib3.exceptions.TimeoutError, TimeoutError)) and not isinstance(
        exc, urllib3.exceptions.NewConnectionError
    ):
        return KubeTimeout(f"timeout: {op.describe()}: {exc}", **ctx)
    return KubeUnavailable(f"unavailable: {op.describe()}: {exc}", **ctx)
