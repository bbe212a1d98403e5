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


def test_token_rates_are_numbers_not_secrets() -> None:
    """The decision's `prompt_tokens_per_second` and learned capacities were redacted, because
    "token" matched by substring: the log hid the very numbers the docs tell an SRE to read."""
    event = {"prompt_tokens_per_second": 4000.0, "capacity_generation_tokens_per_second": 1500.0,
             "tokenizer": "qwen", "accessToken": "a", "hf_token": "b", "X-Auth-Token": "c", "token_file": "/t",
             "client_secret": "d", "password_hash": "e"}
    out = redact_secrets(None, "info", dict(event))
    assert {k for k, v in out.items() if v == REDACTED} == {
        "accessToken", "hf_token", "X-Auth-Token", "token_file", "client_secret", "password_hash"}


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
