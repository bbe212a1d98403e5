"""structlog set-up: one JSON object per line, secrets redacted by a small processor."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO, cast

import structlog

SECRET_KEYS = ("token", "authorization", "password", "secret", "bearer")
REDACTED = "[redacted]"
_SECRET = re.compile("|".join(f"{word}(?![a-z])" if word == "token" else word for word in SECRET_KEYS))
"""A key naming a secret: any of SECRET_KEYS in it, "token" only when no letter follows (a
`bearer_token`, an `accessToken`; not `prompt_tokens_per_second` nor a `tokenizer`)."""


def redact_secrets(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Replace the value of any key that names a secret, at any depth of dicts."""

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: (REDACTED if _is_secret(k) else clean(v)) for k, v in value.items()}
        return value

    for key in list(event_dict):
        event_dict[key] = REDACTED if _is_secret(key) else clean(event_dict[key])
    return event_dict


def _is_secret(key: object) -> bool:
    return isinstance(key, str) and _SECRET.search(key.lower()) is not None


class CurrentStderr:
    """Whatever `sys.stderr` is when a line is written (a stream bound at set-up would outlive a
    redirection, e.g. click's test runner)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(stream: TextIO | CurrentStderr | None = None, level: int = logging.INFO) -> None:
    """Log lines at `level` and above to `stream`: stdout by default, the controller's output;
    `run --once` passes stderr, its stdout holding the decisions (docs/cli.md)."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact_secrets,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(sort_keys=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=cast(TextIO, stream or sys.stdout)),  # write + flush
        cache_logger_on_first_use=False,
    )
