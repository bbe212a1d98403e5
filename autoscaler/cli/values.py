"""Command-line values shared by subcommands: durations, times, NAMESPACE/DEPLOYMENT targets.
Each parser raises `ValueError` with a one-line message naming what is allowed."""

from __future__ import annotations

import datetime as dt
import math
import re

_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)(ms|s|m|h|d|w))")


def parse_duration(text: str) -> float:
    """`15s`, `1m30s`, `24h`, `7d`, or plain seconds -> seconds (finite: `inf`, `1e400` are
    refused)."""
    total = _duration(text)
    if not math.isfinite(total):
        raise ValueError(f"not a finite duration: {text[:100]!r}")
    return total


def _duration(text: str) -> float:
    s = text.strip()
    try:
        return float(s)
    except ValueError:
        pass
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    pos, total = 0, 0.0
    for m in _DURATION.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * units[m.group(2)]
        pos = m.end()
    if pos != len(s) or not s:
        raise ValueError(f"not a duration: {text!r} (use e.g. 15s, 5m, 24h, 7d)")
    return total


def parse_time(text: str) -> float:
    """Unix seconds or an ISO-8601 time (UTC when no offset is given)."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"not a time: {text!r} (Unix seconds or ISO 8601)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.timestamp()


def parse_target(text: str) -> tuple[str, str]:
    ns, sep, name = text.partition("/")
    if not sep or not ns or not name or "/" in name:
        raise ValueError(f"--target must be NAMESPACE/DEPLOYMENT, got {text!r}")
    return ns, name
