"""The recording file format, its errors, and the `replay` CLI on synthetic recordings."""

from __future__ import annotations

import gzip
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from autoscaler.baselines.hpa import HpaParams, HpaQueue
from autoscaler.cli import main
from autoscaler.policy.types import MetricSample, PodStage
from autoscaler.replay.format import (
    Header,
    RecordedPod,
    RecordingError,
    Step,
    write_recording,
)
from autoscaler.replay.open_loop import Replay, Tick
from autoscaler.replay.reader import read_recording
from autoscaler.replay.synthetic import generate

CONFIG = """
targets:
  - namespace: llm
    deployment: qwen
    max_replicas: 10
"""
OTHER = """
defaults:
  target_waiting_per_replica: 8
  scale_down_window_seconds: 120
targets:
  - namespace: llm
    deployment: qwen
    max_replicas: 10
"""


def _steps() -> list[Step]:
    pod = RecordedPod(
        "qwen-0", True, None, MetricSample(3.0, 99.5), MetricSample(math.nan, 99.5),
        MetricSample(0.4, 99.5), "vllm:kv_cache_usage_perc", MetricSample(1.5, 99.0), 10.0, 11.0, 50.0,
    )
    loading = RecordedPod("qwen-1", False, PodStage.LOADING, created=90.0, scheduled=91.0)
    return [
        Step(t=100.0, spec=2, ready=1, pods=(pod, loading), demand={"requests_per_second": 2.5}),
        Step(t=115.0, spec=3, ready=1, rollout=True, pods=(pod,)),
    ]


def _write(path: Path) -> Path:
    write_recording(path, Header("llm", "qwen", 15.0, 100.0, 115.0, {"notes": ["x"]}), _steps())
    return path


def test_round_trip_keeps_every_field_including_nan(tmp_path: Path) -> None:
    rec = read_recording(_write(tmp_path / "r.jsonl.gz"))
    assert rec.header.target == "llm/qwen" and rec.header.step_seconds == 15.0
    a, b = rec.steps
    assert a.pods[0][:3] == ("qwen-0", True, None)
    assert a.pods[0].waiting == MetricSample(3.0, 99.5)
    assert a.pods[0].running is not None and math.isnan(a.pods[0].running.value)
    assert a.pods[1].stage is PodStage.LOADING and a.pods[1].waiting is None
    assert a.demand == {"requests_per_second": 2.5}
    assert b.rollout and b.spec == 3
    # strict JSON on disk: NaN is a string
    lines = gzip.open(tmp_path / "r.jsonl.gz", "rt").read().splitlines()
    assert json.loads(lines[0])["format"] == "vqa-recording" and '"NaN"' in lines[1]
    assert json.loads(lines[-1]) == {"end": True, "steps": 2}


def test_truncated_gzip_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.jsonl.gz")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 20])
    with pytest.raises(RecordingError, match="truncated"):
        read_recording(path)


def test_missing_end_marker_is_truncation(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.jsonl.gz")
    lines = gzip.open(path, "rt").read().splitlines()
    with gzip.open(path, "wt") as fh:
        fh.write("\n".join(lines[:-1]) + "\n")
    with pytest.raises(RecordingError, match="truncated: no end marker after 2 steps"):
        read_recording(path)


def test_other_version_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.jsonl.gz")
    lines = gzip.open(path, "rt").read().splitlines()
    header = json.loads(lines[0])
    header["version"] = 5
    with gzip.open(path, "wt") as fh:
        fh.write("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    with pytest.raises(RecordingError, match=r"version 5 is not supported \(this autoscaler reads versions 1, 2, 3, 4\)"):
        read_recording(path)


def _synthetic(path: Path, steps: int = 400) -> Path:
    header, gen = generate(HpaQueue(HpaParams(max_replicas=10)), steps=steps, service_rate=2.0)
    write_recording(path, header, gen)
    return path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autoscaler.cli", *args], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _synthetic(tmp_path_factory.mktemp("rec") / "hpa.jsonl.gz")


def _cli_error(args: list[str]) -> str:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_cli_errors_are_one_line_exit_2(tmp_path: Path, synthetic: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(CONFIG)
    # truncated
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(synthetic.read_bytes()[:5000])
    assert "truncated" in _cli_error(["replay", "--metrics", str(cut), "--config", str(cfg)])
    # garbage
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x01not a recording")
    assert "not JSON" in _cli_error(["replay", "--metrics", str(junk), "--config", str(cfg)])
    # missing file
    assert "cannot open" in _cli_error(["replay", "--metrics", str(tmp_path / "nope"), "--config", str(cfg)])
    # config without the target
    other = tmp_path / "other.yaml"
    other.write_text(CONFIG.replace("qwen", "llama"))
    assert "no target llm/qwen" in _cli_error(["replay", "--metrics", str(synthetic), "--config", str(other)])
    # a series the policy needs is missing: named
    rec = read_recording(synthetic)
    stripped = [Step(s.t, s.spec, s.ready, s.rollout, tuple(p._replace(kv=None, kv_metric=None) for p in s.pods))
                for s in rec.steps]
    nokv = tmp_path / "nokv.jsonl.gz"
    write_recording(nokv, rec.header, stripped)
    assert "vllm:kv_cache_usage_perc" in _cli_error(["replay", "--metrics", str(nokv), "--config", str(cfg)])
    # ...but the HPA baseline reads only the queue
    assert CliRunner().invoke(main, ["replay", "--metrics", str(nokv), "--config", "hpa-queue:max=10"]).exit_code == 0
    assert "unknown option" in _cli_error(["replay", "--metrics", str(synthetic), "--config", "hpa-queue:speed=3"])
    for spec, says in (("hpa-queue:min=1.5", "min='1.5' is not a whole number"),
                       ("hpa-queue:target=x", "target='x' is not a number"),
                       ("hpa-queue:target", "target needs a value"),
                       ("hpa-queue:target=5,target=6", "target is given twice")):
        assert says in _cli_error(["replay", "--metrics", str(synthetic), "--config", spec]), spec


def test_replay_two_configs_json_and_plot(tmp_path: Path, synthetic: Path) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(CONFIG)
    b.write_text(OTHER)
    out, png = tmp_path / "out.json", tmp_path / "out.png"
    result = _run("replay", "--metrics", str(synthetic), "--config", str(a), "--config", str(b),
                  "--json", str(out), "--plot", str(png))
    assert result.returncode == 0, result.stderr
    assert "Summary" in result.stdout and "Ticks where the configs differ" in result.stdout
    doc = json.loads(out.read_text())
    assert doc["mode"] == "open-loop" and len(doc["policies"]) == 2 and len(doc["ticks"]) == 400
    tick = doc["ticks"][10]
    assert set(tick) >= {"t", "recorded_replicas", "recorded_next", "waiting_total", "policies"}
    assert {"desired", "reason", "clamp"} <= set(tick["policies"][1])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_replay_closed_loop_prints_the_scoreboard_and_fidelity(tmp_path: Path, synthetic: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(CONFIG)
    out = tmp_path / "out.json"
    result = CliRunner().invoke(main, ["replay", "--metrics", str(synthetic), "--config", str(cfg), "--limit", "0",
                                       "--closed-loop", "hpa-queue:max=10", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "Closed-loop counterfactual" in result.stdout and "fidelity of the rebuilt run" in result.stdout
    doc = json.loads(out.read_text())["counterfactual"]
    assert [b["policy"] for b in doc["scoreboard"]] == ["hpa-queue:max=10", str(cfg)]
    assert doc["fidelity"]["minutes"] == 100


def test_record_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    out = str(tmp_path / "r.jsonl.gz")
    assert "NAMESPACE/DEPLOYMENT" in _cli_error(["record", "--prometheus", "http://127.0.0.1:9", "--target", "qwen",
                                                  "--out", out])
    assert "not a duration" in _cli_error(["record", "--prometheus", "http://127.0.0.1:9", "--target", "llm/qwen",
                                            "--step", "fast", "--out", out])
    # a step the reader refuses (at most a day) is refused before anything is queried (it wrote
    # a file replay then refused; found by a review)
    assert "--step 2d: must be at most 86400 s" in _cli_error(
        ["record", "--prometheus", "http://127.0.0.1:9", "--target", "llm/qwen", "--step", "2d", "--out", out])
    line = _cli_error(["record", "--prometheus", "http://127.0.0.1:9", "--target", "llm/qwen", "--since", "1m",
                       "--out", out, "--quiet"])
    assert "Prometheus" in line and "unreachable" in line
    assert not Path(out).exists()


def test_a_value_beyond_the_readers_range_is_written_as_nan(tmp_path: Path) -> None:
    """A rate of 2e15 (a counter glitch) was written as it was, and the reader then refused the
    whole file (found by a review): it is written "NaN", an unusable sample (a hold)."""
    glitch = RecordedPod("qwen-0", True, None, MetricSample(2e15, 99.5), MetricSample(-3e15, 99.5),
                         MetricSample(0.4, 99.5), "vllm:kv_cache_usage_perc", MetricSample(1.5, 99.0), 10.0, 11.0, 50.0)
    path = tmp_path / "r.jsonl.gz"
    write_recording(path, Header("llm", "qwen", 15.0, 100.0, 100.0, {}), [Step(t=100.0, spec=1, ready=1, pods=(glitch,))])
    [step] = read_recording(path).steps
    waiting, running = step.pods[0].waiting, step.pods[0].running
    assert waiting is not None and running is not None and math.isnan(waiting.value) and math.isnan(running.value)
    assert step.pods[0].kv is not None and step.pods[0].kv.value == 0.4


@pytest.mark.parametrize("value", ['"false"', "0", "null", '"true"'])
def test_a_rollout_that_is_not_a_boolean_is_refused(tmp_path: Path, value: str) -> None:
    """`"rollout": "false"` read as a rollout in progress (bool of a non-empty string), exit 0
    with other decisions (found by a review): one line naming the field."""
    lines = gzip.open(_write(tmp_path / "r.jsonl.gz"), "rt").read().splitlines()
    lines[1] = lines[1].replace('"rollout":false', f'"rollout":{value}')
    assert f'"rollout":{value}' in lines[1]
    bad = tmp_path / "bad.jsonl.gz"
    with gzip.open(bad, "wt") as fh:
        fh.write("\n".join(lines) + "\n")
    with pytest.raises(RecordingError, match=r"\.rollout = .*: not true or false"):
        read_recording(bad)


@pytest.mark.parametrize(("start", "end", "step", "message"), [
    (100.0, 130.0, 15.0, "header end = 130.0, but the last step is at t = 115.0"),
    (90.0, 115.0, 15.0, "header start = 90.0, but the first step is at t = 100.0"),
    (100.0, 115.0, 60.0, "step t = 115.0 is not on the header's grid"),
])
def test_a_header_that_disagrees_with_its_steps_is_refused(
        tmp_path: Path, start: float, end: float, step: float, message: str) -> None:
    """A header step of 60 s over 15 s steps gave 4x the GPU-hours, exit 0 (found by a review)."""
    path = tmp_path / "r.jsonl.gz"
    write_recording(path, Header("llm", "qwen", step, start, end, {}), _steps())
    with pytest.raises(RecordingError, match=re.escape(message)):
        read_recording(path)


def test_gpu_hours_hold_a_ticks_replicas_over_a_gap() -> None:
    # docstring of Replay._replica_hours: ticks at 0, 15, 60 with desired 2, 3, 4, step 15 s
    ticks = [Tick(t, 1, None, d, "hold_steady", None, 1, 0.0) for t, d in ((0.0, 2), (15.0, 3), (60.0, 4))]
    summary = Replay("x", ticks).summary(15.0, 1)
    assert summary["desired_gpu_hours"] == pytest.approx(0.0625) and summary["recorded_gpu_hours"] == pytest.approx(75 / 3600)
    no_gap = Replay("x", [Tick(t, 1, None, 2, "hold_steady", None, 1, 0.0) for t in (0.0, 15.0, 30.0)])
    assert no_gap.summary(15.0, 2)["desired_gpu_hours"] == 2 * 3 * 15 / 3600 * 2


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda s: s["pods"][0].__setitem__(3, [True, s["pods"][0][3][1]]), "expected [value, timestamp] or null"),
    (lambda s: s["pods"][0].__setitem__(3, [1.0, str(int(s["pods"][0][3][1]))]), "expected [value, timestamp] or null"),
    (lambda s: s["pods"][0].__setitem__(8, str(int(s["pods"][0][8]))), "not a valid pod entry"),
    (lambda s: s["pods"].append(list(s["pods"][0])), "is listed twice"),
])
def test_values_of_the_wrong_type_and_a_pod_twice_are_refused(tmp_path: Path, mutate: Any, message: str) -> None:
    """`true` read as 1.0, a time written as a string read as the time, a pod listed twice
    replayed as two (its load counted twice): exit 0 with other numbers before (found by a
    review). Refused by the fast path and the reference path alike, naming the line."""
    lines = gzip.open(Path(__file__).parents[1] / "fixtures" / "replay" / "hpa-6h.jsonl.gz", "rt").read().splitlines()
    step = json.loads(lines[4])
    mutate(step)
    lines[4] = json.dumps(step)
    bad = tmp_path / "bad.jsonl.gz"
    with gzip.open(bad, "wt") as fh:
        fh.write("\n".join(lines) + "\n")
    with pytest.raises(RecordingError, match=re.escape(message)):
        read_recording(bad)
