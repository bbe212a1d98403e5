"""Scenario files: per-scenario sweep grids (`knobs`), validated when the file is loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.sim.experiment import Scenario, sweep_jobs
from autoscaler.sim.policies import POLICIES

TRACE = "simulations/data/azure2023-conv-20min.csv"


def _write(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(f"name: s\ntrace: {TRACE}\n{body}")
    return p


def test_scenario_knob_grids_replace_the_default_grid_of_the_named_policies(tmp_path: Path) -> None:
    sc = Scenario.load(_write(tmp_path, "knobs:\n  static-peak: [1, 3.5]\n  oracle: [0.22]\n"))
    assert sc.knobs == {"static-peak": (1.0, 3.5), "oracle": (0.22,)}
    jobs = sweep_jobs(["static-peak", "oracle", "kpa"], None, sc.knobs)
    assert jobs == [("static-peak", 1.0), ("static-peak", 3.5), ("oracle", 0.22)] + [
        ("kpa", k) for k in POLICIES["kpa"].grid]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("knobs:\n  static-peek: [1]\n", "unknown policy 'static-peek'"),
        ("knobs:\n  oracle: []\n", "knobs.oracle: expected a non-empty list of numbers"),
        ("knobs:\n  oracle: [0.5, fast]\n", "knobs.oracle: expected a non-empty list of numbers"),
        ("knobs: [1, 2]\n", "knobs: expected a mapping"),
        ("knob:\n  oracle: [1]\n", "unknown scenario key(s) knob"),
    ],
)
def test_bad_knob_grids_are_rejected_naming_the_key(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Scenario.load(_write(tmp_path, body))


def test_sweep_cli_runs_each_grid_point_once_and_reports_cost_at_99(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from autoscaler.cli import main

    out = tmp_path / "sweep.json"
    res = CliRunner().invoke(main, [
        "simulate", "--scenario", "simulations/scenarios/demo.yaml", "--duration", "240",
        "--policy", "static-peak", "--policy", "hpa-queue", "--sweep", "--jobs", "1",
        "--knobs", "static-peak=1,2", "--knobs", "hpa-queue=5,1", "--json", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    # the default runs (static-peak 1, hpa-queue 5) are the sweep's own runs at those knobs
    assert [r["knob"] for r in doc["sweeps"]["static-peak"]] == [1.0, 2.0]
    assert [r["knob"] for r in doc["sweeps"]["hpa-queue"]] == [5.0, 1.0]
    assert doc["policies"]["static-peak"] == doc["sweeps"]["static-peak"][0]
    assert doc["policies"]["hpa-queue"]["knob"] == 5.0
    ok = [r for r in doc["sweeps"]["static-peak"] if r["slo_attainment"] >= 0.99]
    if ok:
        assert doc["cost_at_99"]["static-peak"] == min(r["gpu_hours"] for r in ok)
    else:
        assert doc["cost_at_99"].get("static-peak") is None
    assert doc["meta"]["initial_replicas"] >= 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--duration", "-5"], "duration = -5.0 is out of range (allowed: > 0 s)"),
        (["--dt", "0"], "dt = 0.0 is out of range (allowed: 0 < dt <= 15 s"),
        (["--max-replicas", "0"], "max_replicas = 0 is out of range (allowed: 1 .. 10000)"),
        (["--start", "99999"], "slice start 99999 s is past the trace's end (1200 s)"),
        (["--start", "10", "--duration", "0.001"], "no request in the slice [10 s, 10.001 s)"),
        (["--jobs", "0", "--sweep"], "--jobs 0: must be >= 1"),
        (["--trace", "{bad}"], "expected 3 columns arrival_s,input_tokens,output_tokens"),
        (["--trace", "/nonexistent/trace.csv"], "/nonexistent/trace.csv not found"),
        (["--policy", "hpa"], "--policy: unknown policy hpa; known: queue-lead"),
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
    res = CliRunner().invoke(main, ["simulate", "--trace", TRACE, "--policy", "static-peak", *args,
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
