"""Issue 13, defect 8: `autoscaler record` wrote its output in place, so a SIGTERM (or a crash)
during the write left a truncated file and destroyed the previous good recording.

Now every output file of the CLIs (record's recording, simulate's and replay's --json,
--markdown, --plot) is written to a temporary file in the same folder, fsynced and renamed over
the target (`autoscaler.config.atomic`); `record` turns SIGTERM into a clean exit that removes the
temporary file."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from autoscaler.config.atomic import atomic_path, atomic_paths
from autoscaler.replay.format import Header, Step, write_recording
from autoscaler.replay.reader import read_recording

REPO = Path(__file__).resolve().parents[2]
T0 = 1764547200.0


def _good_recording(path: Path, steps: int = 3) -> None:
    header = Header("llm", "qwen", 15.0, T0, T0 + 15.0 * (steps - 1), {"note": "the previous good recording"})
    write_recording(path, header, [Step(t=T0 + 15.0 * i, spec=2) for i in range(steps)])


# A child that runs the real command line with the Prometheus part replaced by a recording of
# a million steps whose writing stops after 1,000 of them (a marker file says so) until killed.
CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import autoscaler.replay.recorder as recorder
    from autoscaler.replay.format import Header, Step, write_recording

    out, marker, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]

    def steps():
        for i in range(10**6):
            if i == 1000:
                marker.write_text("writing")
                time.sleep(120)
            yield Step(t=1764547200.0 + 15.0 * i, spec=1)

    header = Header("llm", "qwen", 15.0, 1764547200.0, 1764547200.0 + 15.0 * 10**6,
                    {"readiness_source": "x", "spec_source": "y"})
    if mode == "cli":
        recorder.record = lambda source, **kw: (header, steps())
        from autoscaler.cli import main
        main(["record", "--prometheus", "http://127.0.0.1:9", "--target", "llm/qwen", "--out", out, "--quiet",
              "--end", "1764547200", "--since", "1h"])
    else:
        write_recording(out, header, steps())
""")


def _kill_mid_write(tmp_path: Path, mode: str, sig: signal.Signals) -> subprocess.CompletedProcess[str]:
    out, marker = tmp_path / "rec.jsonl.gz", tmp_path / "marker"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(out), str(marker), mode], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the child never started writing"
        time.sleep(0.02)
    time.sleep(0.1)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def test_record_killed_by_sigterm_mid_write_keeps_the_previous_recording(tmp_path: Path) -> None:
    out = tmp_path / "rec.jsonl.gz"
    _good_recording(out)
    before = out.read_bytes()
    result = _kill_mid_write(tmp_path, "cli", signal.SIGTERM)
    assert result.returncode == 128 + signal.SIGTERM, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == ["error: terminated (SIGTERM): --out left as it was"]
    assert out.read_bytes() == before  # was truncated: the write had begun in place
    rec = read_recording(out)
    assert len(rec.steps) == 3 and rec.header.metadata == {"note": "the previous good recording"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["marker", "rec.jsonl.gz"]  # no temporary file left


def test_a_write_killed_outright_leaves_the_previous_recording_whole(tmp_path: Path) -> None:
    """SIGKILL: no handler runs; the rename never happened, so the old file is intact (a stray
    temporary file may stay beside it)."""
    out = tmp_path / "rec.jsonl.gz"
    _good_recording(out)
    before = out.read_bytes()
    result = _kill_mid_write(tmp_path, "unit", signal.SIGKILL)
    assert result.returncode == -signal.SIGKILL
    assert out.read_bytes() == before
    assert len(read_recording(out).steps) == 3


def test_atomic_path_replaces_whole_or_not_at_all(tmp_path: Path) -> None:
    target = tmp_path / "plot.png"
    target.write_text("old")
    target.chmod(0o640)
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        assert tmp.parent == tmp_path and tmp.name.endswith(".png")  # the format by extension stays
        tmp.write_text("half")
        raise RuntimeError("the writer failed")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["plot.png"]
    with atomic_path(target) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plot.png"]


def test_atomic_path_writes_a_device_in_place() -> None:
    with atomic_path("/dev/null") as tmp:
        assert str(tmp) == "/dev/null"
        tmp.write_text("discarded")


def test_several_outputs_are_all_written_or_none(tmp_path: Path) -> None:
    """A command's JSON and its plot: when the plot fails after the JSON was written, neither is
    renamed into place (found by a fuzzer: replay and simulate left the JSON of a run whose plot
    failed); the file already there keeps its content; no temporary file is left."""
    json_out, plot_out = tmp_path / "r.json", tmp_path / "r.png"
    json_out.write_text("old")
    with pytest.raises(ValueError, match="plot failed"):
        with atomic_paths([json_out, plot_out]) as (j, p):
            j.write_text("new")
            raise ValueError("plot failed")
    assert json_out.read_text() == "old" and not plot_out.exists()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["r.json"]
    with atomic_paths([json_out, plot_out]) as (j, p):
        j.write_text("new")
        p.write_bytes(b"png")
    assert (json_out.read_text(), plot_out.read_bytes()) == ("new", b"png")
    with atomic_paths([]) as none:
        assert none == []


def test_written_in_place_is_a_device_or_fifo_only(tmp_path: Path) -> None:
    """The one rule `atomic_path` and the CLI's output checks share (its docstring example)."""
    import os as _os

    from autoscaler.config.atomic import written_in_place

    fifo = tmp_path / "fifo"
    _os.mkfifo(fifo)
    regular = tmp_path / "f.json"
    regular.write_text("{}")
    assert written_in_place("/dev/null") and written_in_place(fifo)
    assert not written_in_place(regular) and not written_in_place(tmp_path) and not written_in_place(tmp_path / "no")
    assert not written_in_place("a\x00b")
