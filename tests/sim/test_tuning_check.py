"""simulations/tools/tuning_check.py: the tuning rule of simulations/tuning.yaml (each docstring's
worked example is a row here), its documents, and its refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sim.tool_loader import load_tool

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "simulations" / "tools" / "tuning_check.py"


T = load_tool("tuning_check")


@pytest.mark.parametrize(
    ("runs", "acceptable", "worst", "total"),
    [
        ({("a", 1): (0.995, 10.0), ("b", 1): (0.9922, 20.0)}, True, 0.9922, 30.0),  # docstring
        ({("a", 1): (0.995, 10.0), ("b", 1): (0.9859, 20.0)}, False, 0.9859, 30.0),  # docstring: one under
        ({("a", 1): (0.99, 5.0)}, True, 0.99, 5.0),  # at the bound is enough
    ],
)
def test_judge(runs: dict, acceptable: bool, worst: float, total: float) -> None:
    assert T.judge(runs, 0.99) == T.Verdict(acceptable, worst, total)


def test_judge_refuses_no_runs() -> None:
    with pytest.raises(ValueError, match="no runs"):
        T.judge({}, 0.99)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (T.Verdict(True, 0.9922, 1032.9), T.Verdict(True, 0.9947, 1077.4), "a"),  # docstring
        (T.Verdict(False, 0.9859, 1035.0), T.Verdict(True, 0.9922, 1077.4), "b"),  # docstring
        (T.Verdict(False, 0.98, 900.0), T.Verdict(False, 0.985, 1000.0), "neither"),  # docstring
        (T.Verdict(True, 0.995, 10.0), T.Verdict(True, 0.999, 10.0), "tie"),
        (T.Verdict(True, 0.995, 11.0), T.Verdict(True, 0.991, 10.0), "b"),  # cheaper wins, not higher
    ],
)
def test_prefer(a: object, b: object, expected: str) -> None:
    assert T.prefer(a, b) == expected


def test_the_shipped_rule_and_slices() -> None:
    assert T.min_attainment() == 0.99
    slices = T.tuning_slices()
    assert len(slices) == 5 and all(s.startswith("tuning-") for s in slices)


def test_a_document_reads_back() -> None:
    runs = {("tuning-x", 100): (0.995, 10.5), ("tuning-x", 101): (0.9901, 11.0)}
    doc = json.loads(json.dumps(T.to_json(runs, T.judge(runs, 0.99), 0.99)))
    assert T.from_json(doc) == runs
    assert T.from_json(doc["runs"]) == runs  # the bare mapping too
    assert doc["verdict"] == {"acceptable": True, "worst": 0.9901, "total": 21.5}


@pytest.mark.parametrize("text", ["{}", "[1, 2]", '{"runs": {"x|1": [1]}}', '{"runs": {"x|a": [1, 2]}}', "not json",
                                  '{"runs": {"x|1": 5}}', '{"runs": {"x|1": [null, 2]}}', '{"runs": {"x|1": [NaN, 2]}}',
                                  '{"runs": {"x|1": [0.99, Infinity]}}', '{"runs": {"x|1": [1.5, 2]}}', '{"runs": {"|1": [1, 2]}}'])
def test_a_bad_against_file_is_one_line_and_exit_2(tmp_path: Path, text: str) -> None:
    bad = tmp_path / "before.json"
    bad.write_text(text)
    res = subprocess.run([sys.executable, str(TOOL), "--against", str(bad)], capture_output=True, text=True, cwd=REPO,
                         timeout=60)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and res.stderr.startswith("tuning_check: "), res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""


def _shipped_keys() -> set[tuple[str, int]]:
    return set(T.from_json(json.loads((REPO / "simulations" / "results" / "tuning" / "shipped.json").read_text())))


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--jobs", "0"], "--jobs 0: must be at least 1"),
        (["--json", "/nonexistent-dir/t.json"], "no folder /nonexistent-dir"),
        (["--against", "OTHER"], "are not this tool's slices x the rule's seeds"),
    ],
)
def test_arguments_that_cannot_give_a_verdict_are_refused_before_any_run(tmp_path: Path, argv: list[str],
                                                                         needle: str) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"runs": {"tuning-x|100": [0.995, 10.0]}}))
    argv = [str(other) if a == "OTHER" else a for a in argv]
    res = subprocess.run([sys.executable, str(TOOL), *argv], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and needle in res.stderr, res.stderr
    assert res.stdout == ""  # no run started


def test_the_shipped_document_compares_with_this_tool_s_runs() -> None:
    args = type("A", (), {"jobs": 2, "json": None, "against": "shipped.json"})()
    slices = T.tuning_slices()
    protocol = T.load_protocol()
    planned = {(s, seed) for s in slices for seed in T.rule_seeds(protocol.seeds, protocol.tuning_seeds)}
    assert _shipped_keys() == planned
    assert T.refusal(args, planned, dict.fromkeys(planned, (0.99, 1.0))) is None


def test_a_bad_rule_is_refused(tmp_path: Path) -> None:
    for text, match in (("tuning_seeds: [1]\n", "no tuning_rule"), ("tuning_rule: {min_attainment: 1.5}\n", "must be in")):
        f = tmp_path / "tuning.yaml"
        f.write_text(text)
        with pytest.raises(ValueError, match=match):
            T.min_attainment(f)


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("{min_attainment: 0.99, seeds: [100, 101, 102, 103]}", (100, 101, 102, 103)),  # docstring
        ("{min_attainment: 0.99}", (100, 101, 102)),  # docstring: no key, the protocol's tuning seeds
        ("{min_attainment: 0.99, seeds: [100, 2]}", "none of the evaluation seeds"),  # docstring: 2 is one
        ("{min_attainment: 0.99, seeds: [100, 100]}", "must be distinct"),
        ("{min_attainment: 0.99, seeds: []}", "must be distinct"),
        ("{min_attainment: 0.99, seeds: [100, 1.5]}", "must be distinct integers"),
        ("{min_attainment: 0.99, seeds: [true]}", "must be distinct integers"),
        ("{min_attainment: 0.99, seeds: 100}", "must be distinct integers"),
    ],
)
def test_rule_seeds(tmp_path: Path, rule: str, expected: object) -> None:
    f = tmp_path / "tuning.yaml"
    f.write_text(f"tuning_rule: {rule}\n")
    if isinstance(expected, tuple):
        assert T.rule_seeds((0, 1, 2), (100, 101, 102), f) == expected
    else:
        with pytest.raises(ValueError, match=str(expected)):
            T.rule_seeds((0, 1, 2), (100, 101, 102), f)


def test_the_shipped_rule_judges_on_ten_seeds_none_an_evaluation_seed() -> None:
    protocol = T.load_protocol()
    seeds = T.rule_seeds(protocol.seeds, protocol.tuning_seeds)
    assert seeds == tuple(range(100, 110)) and not set(seeds) & set(protocol.seeds)
