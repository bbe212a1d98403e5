"""Secrets never reach the logs."""

from __future__ import annotations

import io
import json

import structlog

from autoscaler.controller.logs import REDACTED, configure_logging, redact_secrets


def test_redact_secrets_at_any_depth() -> None:
    event = {"event": "x", "bearer_token": "abc", "nested": {"Authorization": "Bearer abc", "ok": 1}, "url": "u"}
    out = redact_secrets(None, "info", dict(event))
    assert out["bearer_token"] == REDACTED
    assert out["nested"] == {"Authorization": REDACTED, "ok": 1}
    assert out["url"] == "u"


def test_configured_logger_writes_one_json_object_per_line_without_secrets() -> None:
    stream = io.StringIO()
    configure_logging(stream)
    try:
        structlog.get_logger("t").info("decision", desired=3, hf_token="hf_secret")
    finally:
        structlog.reset_defaults()
    [line] = stream.getvalue().splitlines()
    record = json.loads(line)
    assert record["event"] == "decision" and record["desired"] == 3 and record["level"] == "info"
    assert "hf_secret" not in line
