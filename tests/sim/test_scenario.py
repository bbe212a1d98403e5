"""Scenario files and the simulate command line: bad values are refused in one line, naming them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoscaler.sim.experiment import Scenario

TRACE = "simulations/data/azure2023-conv-20min.csv"


def _write(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(f"name: s\ntrace: {TRACE}\n{body}")
    return p


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--duration", "-5"], "duration = -5.0 is out of range (allowed: > 0 s)"),
        (["--dt", "0"], "dt = 0.0 is out of range (allowed: 0 < dt <= 15 s"),
        (["--max-replicas", "0"], "max_replicas = 0 is out of range (allowed: 1 .. 10000)"),
        (["--start", "99999"], "slice start 99999 s is past the trace's end (1200 s)"),
        (["--start", "10", "--duration", "0.001"], "no request in the slice [10 s, 10.001 s)"),
        (["--jobs", "0", "--sweep"], "--jobs 0: must be >= 1"),
        (["--seeds", "0", "--sweep"], "--seeds 0: must be >= 1"),
        (["--seeds", "2"], "--seeds and --knobs go with --sweep"),
        (["--sweep", "--executor", "nowhere", "--knobs", "static=1"], "--executor 'nowhere': unknown"),
        (["--sweep", "--knobs", "kpa=1"], "--knobs kpa: not a policy of this sweep"),
        (["--sweep", "--policy", "oracle"], "--policy oracle: the protocol has no grid for it"),
        (["--trace", "{bad}"], "header 'a,b': expected arrival_s,input_tokens,output_tokens"),
        (["--trace", "/nonexistent/trace.csv"], "/nonexistent/trace.csv not found"),
        (["--policy", "hpa-bogus"], "--policy: unknown policy hpa-bogus; known: queue-lead"),
        (["--sweep", "--knobs", "kpa=1,x"], "--knobs 'kpa=1,x': values must be numbers"),
        (["--sweep", "--knobs", "nope=1"], "--knobs 'nope=1': expected POLICY=V1,V2,... with a known policy"),
    ],
)
def test_simulate_rejects_bad_input_in_one_line_and_writes_nothing(tmp_path: Path, args: list[str],
                                                                   message: str) -> None:
    from click.testing import CliRunner

    from autoscaler.cli import main

    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    out = tmp_path / "out.json"
    args = [a.replace("{bad}", str(bad)) for a in args]
    res = CliRunner().invoke(main, ["simulate", "--trace", TRACE, "--duration", "120", "--policy", "static", *args,
                                    "--json", str(out)])
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert not out.exists()


def test_a_scenario_file_with_an_out_of_range_value_is_rejected_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"scenario s: peak_replicas = 0 is out of range \(allowed: >= 1\)"):
        Scenario.load(_write(tmp_path, "peak_replicas: 0\n"))
    with pytest.raises(ValueError, match=r"min_replicas = 5 is out of range \(allowed: 1 .. max_replicas\)"):
        Scenario.load(_write(tmp_path, "min_replicas: 5\nmax_replicas: 4\n"))


def test_a_refused_run_makes_no_output_folder(tmp_path: Path) -> None:
    """Output folders are made once every other input is known good (then before the run): a
    bad --policy leaves nothing behind, not even an empty folder."""
    from click.testing import CliRunner

    from autoscaler.cli import main

    out = tmp_path / "new" / "deeper" / "out.json"
    res = CliRunner().invoke(main, ["simulate", "--trace", TRACE, "--duration", "120", "--policy", "hpa-bogus",
                                    "--output-file", str(out)])
    assert res.exit_code == 2 and "unknown policy hpa-bogus" in res.output
    assert not (tmp_path / "new").exists()


def test_plot_and_outputs_go_into_folders_that_do_not_exist_yet(tmp_path: Path) -> None:
    """`make demo` on a fresh clone writes build/demo/demo.png before build/ exists: the plot's
    early check looks at its name only (a regression: it refused the missing folder)."""
    from click.testing import CliRunner

    from autoscaler.cli import main

    plot, out = tmp_path / "build" / "demo" / "demo.png", tmp_path / "other" / "demo.json"
    res = CliRunner().invoke(main, ["simulate", "--trace", TRACE, "--duration", "120", "--policy", "static",
                                    "--plot", str(plot), "--output-file", str(out), "--no-progress"])
    assert res.exit_code == 0, res.output
    assert plot.stat().st_size > 0 and json.loads(out.read_text())
    res = CliRunner().invoke(main, ["simulate", "--trace", TRACE, "--duration", "120", "--plot", str(tmp_path / "x.jpg")])
    assert res.exit_code == 2 and "--plot" in res.output and "must end in .png" in res.output
