"""simulations/tools: the cost-at-99 % table and the merge of a sweep run in parts, on small
hand-made results (the published tables are built by these two)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "simulations" / "tools"
META = {"scenario": "s", "trace": "t [0s +60s] x1", "rate_scale": 1.0, "profile": "p",
        "capacity_rps_per_replica": 10.0, "peak_need": 4, "slo": {"ttft_s": 2.0, "tpot_s": 0.1}, "dt_s": 1.0,
        "queue_lead_params": {}, "queue_lead_knob": "target_running_per_replica", "initial_replicas": 2}


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(policy: str, knob: float, slo: float, gpu_h: float) -> dict[str, Any]:
    return {"policy": policy, "knob": knob, "requests": 100, "slo_attainment": slo, "failed": 0,
            "ttft_p50_s": 0.1, "ttft_p99_s": 1.0, "tpot_p50_s": 0.02, "tpot_p99_s": 0.05, "queue_wait_p99_s": 0.5,
            "gpu_hours": gpu_h, "short_lived_gpu_hours": 0.0, "scale_actions": 1, "direction_flips_10min": 0,
            "peak_replicas": 4, "preemptions": 0, "wall_s": 1.0, "series": {}}


def _doc(sweeps: dict[str, list[dict[str, Any]]], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"meta": meta or META, "policies": {p: runs[0] if runs else _run(p, 1.0, 0.02, 1.0) for p, runs in sweeps.items()},
            "sweeps": sweeps}


def test_cost_table_takes_the_cheapest_run_at_99_and_the_ratio_to_the_oracle(tmp_path: Path) -> None:
    # oracle: 99.2 % at 10 GPU-h is the cheapest >= 99 %; ours: 98.9 % at 11 does not count,
    # 99.5 % at 12 does -> 12 / 10 = 1.2x; hpa-cpu has no knob (no sweep): its one run, 2 %, never
    # reaches 99 % but still shows its attainment
    f = tmp_path / "r.json"
    f.write_text(json.dumps(_doc({
        "queue-lead": [_run("queue-lead", 128, 0.989, 11.0), _run("queue-lead", 96, 0.995, 12.0),
                       _run("queue-lead", 64, 1.0, 15.0)],
        "oracle": [_run("oracle", 0.9, 0.992, 10.0), _run("oracle", 0.8, 0.999, 13.0)],
        "hpa-cpu": [],
    })))
    meta, rows = _tool("cost_table").rows(f, 0.99)
    by = {r["policy"]: r for r in rows}
    assert meta["scenario"] == "s"
    assert (by["queue-lead"]["gpu_hours_at_99"], by["queue-lead"]["knob_at_99"]) == (12.0, 96)
    assert by["queue-lead"]["x_oracle"] == pytest.approx(1.2)
    assert by["oracle"]["gpu_hours_at_99"] == 10.0
    assert by["hpa-cpu"]["gpu_hours_at_99"] is None and by["hpa-cpu"]["best_attainment"] == 0.02
    assert by["hpa-cpu"]["runs"] == 1
    assert [r["policy"] for r in rows] == ["oracle", "queue-lead", "hpa-cpu"]  # cheapest first, misses last


def test_merge_joins_parts_and_refuses_other_scenarios_or_a_policy_twice() -> None:
    merge = _tool("merge_results").merge
    a = _doc({"queue-lead": [_run("queue-lead", 96, 0.995, 12.0)], "oracle": [_run("oracle", 0.9, 0.992, 10.0)]})
    b = _doc({"kpa": [_run("kpa", 100, 0.5, 20.0)]})
    merged, md = merge([("a", a), ("b", b)])
    assert set(merged["policies"]) == {"queue-lead", "oracle", "kpa"}
    assert merged["cost_at_99"]["queue-lead"] == 12.0 and merged["cost_at_99"]["kpa"] is None
    assert merged["meta"]["merged_from"] == ["a", "b"] and "| kpa |" in md
    again, _ = merge([("ab", merged), ("c", _doc({"wva": [_run("wva", 0.8, 0.3, 5.0)]}))])
    assert again["meta"]["merged_from"] == ["a", "b", "c"] and set(again["policies"]) >= {"kpa", "wva"}
    # more grid points for a policy already merged: united by knob, cost at 99 % recomputed
    more = _doc({"queue-lead": [_run("queue-lead", 96, 0.995, 12.0), _run("queue-lead", 112, 0.991, 11.5)]})
    grown, _ = merge([("a", a), ("b", b), ("d", more)])
    assert sorted(r["knob"] for r in grown["sweeps"]["queue-lead"]) == [96, 112]
    assert grown["cost_at_99"]["queue-lead"] == 11.5 and grown["knob_at_99"]["queue-lead"] == 112
    # ...but the same run must not disagree between parts
    clash = _doc({"kpa": [_run("kpa", 100, 0.6, 20.0)]})
    with pytest.raises(ValueError, match="policy kpa at knob 100 differs from an earlier part in slo_attainment"):
        merge([("a", a), ("b", b), ("c", clash)])
    with pytest.raises(ValueError, match="meta.rate_scale"):
        merge([("a", a), ("b", _doc({"kpa": []}, {**META, "rate_scale": 2.0}))])


def test_misses_by_time_sums_the_minutes_into_windows() -> None:
    from autoscaler.sim.runner import RunResult

    tool = _tool("misses_by_time")
    fields = {k: v for k, v in _run("queue-lead", 32.0, 0.9, 1.0).items() if k != "series"}
    # docstring example: window 120 s over three minutes
    r = RunResult(**fields, series={"t_s": [0.0, 60.0, 120.0], "arrivals_per_s": [1.0, 1.0, 2.0],
                                    "slo_missed": [0.0, 3.0, 6.0], "ready": [2.0, 2.0, 4.0]})
    assert tool.windows([r], 120.0) == [{"t0_s": 0.0, "arrivals": 120, "misses": [3], "ready": [2]},
                                        {"t0_s": 120.0, "arrivals": 120, "misses": [6], "ready": [4]}]
    md = tool.markdown("t", [r, r], tool.windows([r, r], 60.0))
    assert "| 2- | 120 | 6 (4) | 6 (4) |" in md
    assert "| **all** | 240 | 9 (90.00 % met, 1.00 GPU-h) |" in md
    with pytest.raises(ValueError, match="multiple of 60"):
        tool.windows([r], 90.0)
    with pytest.raises(ValueError, match="expected POLICY=KNOB"):
        tool.parse_run("queue-lead")
    with pytest.raises(ValueError, match="unknown policy 'hpa'"):
        tool.parse_run("hpa=5")
    with pytest.raises(ValueError, match="not a number"):
        tool.parse_run("oracle=low")
    assert tool.parse_run("oracle=0.22") == ("oracle", 0.22)
