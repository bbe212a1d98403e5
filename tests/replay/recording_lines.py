"""Recording files written and read line by line, for the format tests of every version."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any


def read_lines(path: Path) -> list[Any]:
    """Every JSON line of a gzip recording, the header and the end line included."""
    return [json.loads(x) for x in gzip.decompress(path.read_bytes()).decode().splitlines()]


def write_lines(path: Path, version: int, lines: list[Any]) -> Path:
    """A recording of format `version` with these step lines, between a header and an end line."""
    header = {"format": "vqa-recording", "version": version, "target": {"namespace": "llm", "deployment": "qwen"},
              "step_seconds": 15.0, "start": 100.0, "end": 100.0 + 15 * (len(lines) - 1), "metadata": {}}
    text = "\n".join(json.dumps(x) for x in [header, *lines, {"end": True, "steps": len(lines)}]) + "\n"
    path.write_bytes(gzip.compress(text.encode()))
    return path
