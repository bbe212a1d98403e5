"""The fast recording reader and the inlined replay loop read and decide exactly as the
reference code (`decode_step` on `json.loads`, `observation_of`) does."""

from __future__ import annotations

import gc
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from autoscaler.baselines.hpa import HpaParams, HpaQueue
from autoscaler.baselines.queue_lead import QueueLead
from autoscaler.policy import Observation, PolicyParams
from autoscaler.replay import format as fmt
from autoscaler.replay.format import RecordingError, decode_step
from autoscaler.replay.open_loop import observation_of, replay
from autoscaler.replay.reader import read_recording
from autoscaler.replay.synthetic import generate

HEADER = {"format": "vqa-recording", "version": 1, "target": {"namespace": "llm", "deployment": "qwen"},
          "step_seconds": 5.0, "start": 100.0, "end": 180.0, "metadata": {}}
KV = "vllm:kv_cache_usage_perc"


def _pod(name: str, w: Any, r: Any = None, kv: Any = None, c: Any = None, *, ready: bool = True,
         stage: str | None = None, created: Any = 10.0, scheduled: Any = 11.0, ready_at: Any = 50.0) -> list[Any]:
    return [name, ready, stage, w, r, kv, KV, c, created, scheduled, ready_at]


# Lines as a writer (or a hand) may have written them: the usual float shapes, and every shape
# where the fast path must give up or take care (ints for floats, -0.0 next to 0.0 with the same
# timestamp, underflow to -0.0, NaN/Inf strings, timestamp 0, integers past 64 bits).
LINES = [
    '{"t":100.0,"spec":2,"ready":2,"rollout":false,"pods":['
    '["qwen-00001",true,null,[0.0,99.0],[4.5,99.0],[0.25,99.0],"vllm:kv_cache_usage_perc",[1.5,99.0],10.0,11.0,50.0],'
    '["qwen-00002",true,null,[0.0,99.0],[4.5,99.0],[0.25,99.0],"vllm:kv_cache_usage_perc",[1.5,99.0],12.0,13.0,null],'
    '["qwen-00003",false,"loading",null,null,null,null,null,90.0,91.0,null]],'
    '"demand":{"requests_per_second":2.5}}',
    '{"t":115.0,"spec":2,"ready":2,"rollout":true,"pods":['
    '["qwen-00001",true,null,[-0.0,114.0],[0,114.0],[-1e-400,114.0],"vllm:kv_cache_usage_perc",[0.0,114.0],10,11,50],'
    '["qwen-00002",true,null,[0.0,114.0],[-0.0,114.0],[0.0,114.0],null,["NaN",114.0],12.0,13.0,null]],'
    '"demand":{"requests_per_second":3,"prompt_tokens_buckets":{"128":1.5,"+Inf":2.5}}}',
    '{"t":120.0,"spec":1,"ready":1,"pods":['
    '["qwen-00001",true,null,[0.0,119.0],[0.0,119.0],[0.0,0.0],"vllm:kv_cache_usage_perc",[1.0,-0.0],10.0,11.0,50.0]],'
    '"demand":{"prompt_tokens_buckets":{"128":1.5,"+Inf":123456789012345678901234567890}}}',
    '{"t":130,"spec":null,"ready":null,"pods":['
    '["qwen-00001",true,"scheduled",[3,0.0],[3,-0.0],["+Inf",129.0],"vllm:kv_cache_usage_perc",["-Inf",129.0],10.0,11.0,50.0]],'
    '"demand":{"generation_tokens_per_second":"NaN"}}',
    '{"t":145.0,"spec":2147483647,"ready":1,"rollout":false,"pods":['
    '["qwen-00001",true,null,[2.0,144.0],[2.0,144.0],[0.5,144.0],"vllm:kv_cache_usage_perc",null,10.0,11.0,50.0]]}',
    '{"t":150.0,"spec":1,"ready":1,"pods":['
    '["qwen-00001",true,null,[-0.0,149.0],[0.0,0.0],[0.0,-0.0],"vllm:kv_cache_usage_perc",[1.0,0.0],10.0,11.0,50.0]]}',
    '{"t":160.0,"spec":1,"ready":1,"pods":[],"demand":null}',
    # blanks before a minus sign (JSON allows them): still a -0.0 after the 0.0 of the same time
    '{"t": 170.0, "spec": 1, "ready": 1, "pods": [["qwen-00001", true, null, [0.0, 169.0], [ -0.0, 169.0], '
    '[0.0,\t169.0], "vllm:kv_cache_usage_perc", [\t-0.0, 169.0], 10.0, 11.0, 50.0]], "demand": {"x":\t-1e-400}}',
    # the only -0.0 of the line an underflow, after the 0.0 of the same time
    '{"t":180.0,"spec":1,"ready":1,"pods":[["qwen-00001",true,null,[0.0,179.0],[-1e-400,179.0],[0.0,179.0],'
    '"vllm:kv_cache_usage_perc",[0.0,179.0],10.0,11.0,50.0]]}',
]


def _write(path: Path, lines: list[str], *, gz: bool = True, newline: str = "\n") -> Path:
    text = newline.join([json.dumps(HEADER), *lines, json.dumps({"end": True, "steps": len(lines)})]) + newline
    if gz:
        with gzip.open(path, "wb") as fh:
            fh.write(text.encode())
    else:
        path.write_bytes(text.encode())
    return path


def _reference(lines: list[str]) -> list[str]:
    return [repr(decode_step(json.loads(line), f"line {i}")) for i, line in enumerate(lines, start=2)]


@pytest.mark.parametrize("gz", [True, False])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_fast_reader_reads_exactly_what_the_reference_decoder_reads(tmp_path: Path, gz: bool, newline: str) -> None:
    rec = read_recording(_write(tmp_path / "r.jsonl.gz", LINES, gz=gz, newline=newline))
    # repr tells -0.0 from 0.0 and 1 from 1.0
    assert [repr(s) for s in rec.steps] == _reference(LINES)
    second = rec.steps[1]
    assert repr(second.pods[0].waiting) == "MetricSample(value=-0.0, timestamp=114.0)"
    assert repr(second.pods[1].waiting) == "MetricSample(value=0.0, timestamp=114.0)"
    assert repr(second.pods[0].kv) == "MetricSample(value=-0.0, timestamp=114.0)"  # -1e-400
    assert type(rec.steps[2].demand["prompt_tokens_buckets"]["+Inf"]) is int  # as json reads it
    assert rec.steps[4].spec == 2147483647  # the int32 maximum of a Deployment's replicas
    assert [repr(s.value) for s in (rec.steps[-2].pods[0].running, rec.steps[-2].pods[0].completed)] == ["-0.0"] * 2
    assert repr(rec.steps[-1].pods[0].running.value) == "-0.0"


def test_without_orjson_the_stdlib_path_reads_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / "r.jsonl.gz", LINES)
    fast = [repr(s) for s in read_recording(path).steps]
    monkeypatch.setattr(fmt, "_fast_loads", fmt._stdlib_loads)
    assert [repr(s) for s in read_recording(path).steps] == fast == _reference(LINES)
    monkeypatch.setattr(fmt, "_fast_loads", None)  # reference decoding only
    assert [repr(s) for s in read_recording(path).steps] == fast


def test_equal_samples_are_one_object(tmp_path: Path) -> None:
    a, b, _ = read_recording(_write(tmp_path / "r.jsonl.gz", LINES)).steps[0].pods
    assert a.waiting is b.waiting and a.running is b.running and a.kv is b.kv


@pytest.mark.parametrize(("line", "message"), [
    ('{"t":115.0,"spec":2,"pods":[["qwen-1",true,null,[1.0]]]}',
     "line 3 pods[0]: not a valid pod entry"),
    ('{"t":115.0,"spec":2,"pods":[' + json.dumps(_pod("qwen-1", ["lots", 99.0])) + "]}",
     "line 3: expected [value, timestamp] or null, got ['lots', 99.0]"),
    ('{"t":115.0,"spec":-1,"pods":[]}', "line 3.spec: expected a replica count (0 .. 2147483647), got -1"),
    ('{"t":115.0,"spec":2147483648,"pods":[]}', "line 3.spec: expected a replica count (0 .. 2147483647), got 2147483648"),
    ('{"t":115.0,"spec":2,"ready":1e300,"pods":[]}', "line 3.ready: expected a replica count (0 .. 2147483647), got 1e+300"),
    ('{"t":115.0,"spec":2,"pods":[' + json.dumps(_pod("qwen-1", [1.0, 99.0], stage="gone")) + "]}",
     "line 3 pods[0]: not a valid pod entry"),
    ('{"t":115.0,"spec":2,"pods":[], "demand":{"requests_per_second":true}}',
     "line 3.demand.requests_per_second: expected a number, got True"),
    ('{"t":100.0,"spec":2,"pods":[]}', "line 3: step t=100.0 is not after the previous one"),
    ('{"t":115.0,"spec":2,"pods":[]}\n{"end":true,"steps":2}\n{"t":130.0,"spec":2,"pods":[]}',
     "line 5: data after the end marker"),
    ('{"t":115.0,"spec":2,"pods":[', "line 3 is not JSON (corrupt or truncated)"),
])
def test_bad_lines_fail_with_the_reference_message(tmp_path: Path, line: str, message: str) -> None:
    path = _write(tmp_path / "r.jsonl.gz", [LINES[0], line])
    with pytest.raises(RecordingError) as err:
        read_recording(path)
    assert str(err.value) == f"{path}: {message}" or message in str(err.value)
    assert "\n" not in str(err.value)


def test_invalid_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl.gz"
    good = _write(tmp_path / "g.jsonl.gz", LINES[:1])
    data = gzip.decompress(good.read_bytes()).replace(b"qwen-00002", b"qwen-\xff0002")
    path.write_bytes(gzip.compress(data))
    with pytest.raises(RecordingError, match="not UTF-8 text"):
        read_recording(path)


def test_reading_leaves_the_collector_as_it_was(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.jsonl.gz", LINES)
    assert gc.isenabled()
    read_recording(path)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.disable()
    try:
        read_recording(path)
        assert not gc.isenabled()
    finally:
        gc.enable()


class _Recorder:
    """Wraps a policy and keeps every observation it was given."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.gpus_per_replica = inner.gpus_per_replica
        self.needs = inner.needs
        self.seen: list[Observation] = []

    def __call__(self, observation: Observation, now: float) -> tuple[int, str, str | None]:
        self.seen.append(observation)
        result: tuple[int, str, str | None] = self.inner(observation, now)
        return result


@pytest.mark.parametrize("free_gpus", [None, 3])
def test_replay_builds_the_observations_of_observation_of(tmp_path: Path, free_gpus: int | None) -> None:
    header, gen = generate(HpaQueue(HpaParams(max_replicas=6)), steps=600, service_rate=2.0)
    fmt.write_recording(tmp_path / "s.jsonl.gz", header, gen)
    rec = read_recording(tmp_path / "s.jsonl.gz")
    policy = _Recorder(QueueLead(PolicyParams(max_replicas=6), name="default"))
    result = replay(rec, policy, free_gpus=free_gpus)
    assert policy.seen == [observation_of(s, free_gpus) for s in rec.steps]
    assert any(o.pods_in_flight for o in policy.seen) and any(len(o.ready_pods) > 1 for o in policy.seen)
    for i, (tick, step) in enumerate(zip(result.ticks, rec.steps)):
        obs = policy.seen[i]
        assert tick.current == obs.spec_replicas and tick.ready == len(obs.ready_pods)
        assert tick.recorded_next == (rec.steps[i + 1].spec if i + 1 < len(rec.steps) else None)
        waiting = sum(p.waiting.value for p in step.pods if p.ready and p.waiting is not None)
        assert tick.waiting_total == waiting and type(tick.waiting_total) is type(waiting)


def test_a_last_step_without_its_newline_is_truncation(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl.gz"
    text = "\n".join([json.dumps(HEADER), LINES[0], LINES[1]])  # cut after a whole step, before "\n"
    path.write_bytes(gzip.compress(text.encode()))
    with pytest.raises(RecordingError, match=r"truncated at line 3 \(no end marker\)"):
        read_recording(path)


def test_the_replay_builds_ready_pods_as_the_dataclass_does() -> None:
    """`_ready_pod_fast` (the instance dict filled at once) is the one used here, and its pod is
    `ReadyPod(...)`'s: same type, same fields in the same order, equal, hashable alike, frozen."""
    import dataclasses
    import types

    from autoscaler.policy.types import LatencyHistogram, MetricSample, PodStartup, ReadyPod
    from autoscaler.replay import open_loop

    if not isinstance(ReadyPod.__init__, types.FunctionType):  # pragma: no cover - a compiled policy
        pytest.skip("ReadyPod is not a Python dataclass here: the replay builds it with its own constructor")
    assert open_loop._new_ready_pod is open_loop._ready_pod_fast
    s, h = MetricSample(1.0, 2.0), LatencyHistogram((1.0, float("inf")), (1.0, 2.0), 2.0)
    args = ("qwen-1", s, None, MetricSample(0.5, 2.0), PodStartup(1.0, 2.0), s, s, None, h, None, h)
    fast, slow = open_loop._ready_pod_fast(*args), ReadyPod(*args)
    assert type(fast) is ReadyPod and fast == slow and repr(fast) == repr(slow)
    assert list(vars(fast).items()) == list(vars(slow).items())
    assert dataclasses.astuple(fast) == dataclasses.astuple(slow)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.name = "other"  # type: ignore[misc]


def test_a_ready_pod_class_it_cannot_fill_is_built_by_its_constructor(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ReadyPod with other fields (or compiled to a class without an instance dict): the
    builder is the class itself."""
    from dataclasses import dataclass

    from autoscaler.replay import open_loop

    @dataclass(frozen=True, slots=True)
    class Slotted:
        name: str

    monkeypatch.setattr(open_loop, "ReadyPod", Slotted)
    builder: object = open_loop._ready_pod_builder()
    assert builder is Slotted


class _ReferenceRefusesSteps:
    """`json` as the reference path sees it, refusing a step line: a header and the end marker
    are always the reference path's, a step line only when the fast path gave up on it."""

    JSONDecodeError = json.JSONDecodeError

    @staticmethod
    def loads(text: str) -> Any:
        if '"format"' in text or '"end"' in text:
            return json.loads(text)
        raise AssertionError(f"the reference path decoded a well-formed step: {text[:80]}")

    dumps = staticmethod(json.dumps)


def test_the_fast_path_reads_every_line_the_writer_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every step of a recording as written (version 4 with the SLO series: a layout and rate
    vectors in full, then by number, bare timestamps, two layouts) is decoded by the fast path,
    in either build: under the compiled one a value mypyc does not expect raises TypeError and
    the line silently goes the slow way, which reads the same but is no longer fast."""
    from autoscaler.policy.types import LatencyHistogram, MetricSample
    from autoscaler.replay.format import Header, RecordedPod, Step, write_recording

    ttft_le, tpot_le = (0.1, 0.5, 1.0, 2.5, float("inf")), (0.01, 0.05, 0.1, float("inf"))

    def pod(name: str, k: int, ts: float) -> RecordedPod:
        s = MetricSample(float(k % 3), ts)
        ttft = LatencyHistogram(ttft_le, (1.0, 3.0 + k % 2, 4.0 + k % 2, 5.0 + k % 2, 5.0 + k % 2), ts)
        tpot = LatencyHistogram(tpot_le, (0.0, 2.0, 2.0, 2.0 + k % 3), ts)
        return RecordedPod(name, True, None, s, s, s, "vllm:kv_cache_usage_perc", s, 10.0, 11.0, 50.0, s,
                           MetricSample(100.0 * k, ts), ttft, tpot, tpot)

    steps = [Step(100.0 + 15 * k, 2, 2, False, (pod("qwen-0", k, 99.0 + 15 * k), pod("qwen-1", k + 1, 99.0 + 15 * k)))
             for k in range(12)]
    path = tmp_path / "r.jsonl.gz"
    write_recording(path, Header("llm", "qwen", 15.0, 100.0, 100.0 + 15 * 11), steps)
    reference = read_recording(path).steps
    monkeypatch.setattr(fmt, "json", _ReferenceRefusesSteps)
    assert read_recording(path).steps == reference == tuple(steps)
