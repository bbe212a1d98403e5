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
