"""structlog set-up: one JSON object per line, secrets redacted by a small processor."""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

SECRET_KEYS = ("token", "authorization", "password", "secret", "bearer")
REDACTED = "[redacted]"


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
    return isinstance(key, str) and any(word in key.lower() for word in SECRET_KEYS)


def configure_logging(stream: TextIO | None = None, level: int = logging.INFO) -> None:
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
        logger_factory=structlog.PrintLoggerFactory(file=stream or sys.stdout),
        cache_logger_on_first_use=False,
    )
