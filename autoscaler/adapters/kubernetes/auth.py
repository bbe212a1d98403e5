"""A bearer token read from a file that something else rotates, re-read as client-go does.

A projected ServiceAccount token (`/var/run/secrets/kubernetes.io/serviceaccount/token`) is
renewed by the kubelet before it expires; a process that read it once gets 401 on every call
once the old one is gone. client-go's `cachingTokenSource` re-reads the file when its copy is a
minute old, and its bearer round tripper drops the copy after a 401. `TokenFile` does both; the
Kubernetes client asks it for the token before every request (`install`), and `KubeClient`
retries a 401 once when the file holds another token than the one refused.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog
import yaml

# client-go: cachingTokenSource's default period (transport/token_source.go)
TOKEN_MAX_AGE_SECONDS = 60.0

_LOG = structlog.get_logger("autoscaler.kube")


class TokenFileError(ValueError):
    """The token file cannot be read, is empty or holds whitespace/control characters."""


def _check(token: str, path: str) -> str:
    token = token.strip()
    if not token or any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in token):
        raise TokenFileError(f"bearer token file {path}: empty or contains whitespace/control characters")
    return token


class TokenFile:
    """The token in `path`, at most `max_age_seconds` old. Reading fails loudly the first time
    (`TokenFileError`); later, a failed re-read (the file mid-rotation) keeps the last good
    token and logs a warning. Thread-safe."""

    def __init__(self, path: str, *, max_age_seconds: float = TOKEN_MAX_AGE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.max_age_seconds = max_age_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._token: str | None = None
        self._read_at = 0.0
        self.token()  # fail at start, not at the first request

    def _read(self) -> str:
        try:
            text = Path(self.path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TokenFileError(f"bearer token file {self.path}: {exc}") from exc
        return _check(text, self.path)

    def _refresh(self) -> str:
        """Re-read under the lock; the last good token if the file cannot be read now."""
        try:
            token = self._read()
        except TokenFileError as exc:
            if self._token is None:
                raise
            _LOG.warning("token_file_unreadable", path=self.path, error=str(exc))
            token = self._token
        self._token, self._read_at = token, self._clock()
        return token

    def token(self) -> str:
        with self._lock:
            if self._token is None or self._clock() - self._read_at >= self.max_age_seconds:
                return self._refresh()
            return self._token

    def invalidate(self, refused: str | None = None) -> bool:
        """After a 401: re-read the file now. True when it now holds another token than
        `refused` (the one the server turned down; default: the one in use), so that one more
        try may pass."""
        with self._lock:
            before = refused if refused is not None else self._token
            return self._refresh() != before


def install(configuration: Any, token_file: TokenFile) -> None:
    """Make a `kubernetes.client.Configuration` ask `token_file` before every request (the
    client calls `refresh_api_key_hook` whenever it builds the Authorization header). It
    replaces the in-cluster loader's own hook, which re-reads every minute but never after a
    401, and the kubeconfig loader's, which never re-reads a `tokenFile`."""

    def refresh(cfg: Any) -> None:
        cfg.api_key.pop("authorization", None)
        cfg.api_key["BearerToken"] = f"Bearer {token_file.token()}"
        cfg.api_key_prefix.pop("BearerToken", None)

    configuration.refresh_api_key_hook = refresh
    refresh(configuration)


def kubeconfig_token_file(kubeconfig: str | None, context: str | None) -> str | None:
    """The `tokenFile` of the user of the context in use (`context`, else current-context) in
    the kubeconfig (`kubeconfig`, else $KUBECONFIG, else ~/.kube/config), resolved against the
    file that names it; None when that user has none (a client certificate, a static token,
    an exec plugin...)."""
    if kubeconfig:
        paths: Sequence[str] = [kubeconfig]
    else:
        paths = [p for p in (os.environ.get("KUBECONFIG") or "~/.kube/config").split(os.pathsep) if p]
    docs: list[tuple[Path, dict[str, Any]]] = []
    for raw in paths:
        path = Path(raw).expanduser()
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        if isinstance(doc, dict):
            docs.append((path, doc))
    current = context or next((str(d["current-context"]) for _, d in docs if d.get("current-context")), None)
    if current is None:
        return None
    user = next((str((c.get("context") or {}).get("user", "")) for _, d in docs for c in d.get("contexts") or []
                 if isinstance(c, dict) and c.get("name") == current), None)
    for path, doc in docs:
        for entry in doc.get("users") or []:
            if isinstance(entry, dict) and entry.get("name") == user:
                token_file = (entry.get("user") or {}).get("tokenFile")
                if not token_file:
                    return None
                resolved = Path(str(token_file)).expanduser()
                return str(resolved if resolved.is_absolute() else path.parent / resolved)
    return None
