"""Reading what `autoscaler replay --metrics` accepts: a recording, or a plain Prometheus
query_range JSON export."""

from __future__ import annotations

from pathlib import Path

from autoscaler.replay.fast_decode import fast_decoder
from autoscaler.replay.format import ExportText, Recording, read_native
from autoscaler.replay.prom_export import recording_from_export


def read_recording(path: str | Path) -> Recording:
    """Read and validate a recording, or a plain Prometheus query_range JSON export (see
    `autoscaler.replay.prom_export`). Raises `RecordingError` with a one-line message."""
    native = read_native(path, fast_decoder)
    if isinstance(native, ExportText):
        return recording_from_export(native.text, native.source)
    return native
