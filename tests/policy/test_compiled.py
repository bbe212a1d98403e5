"""The compiled build of the decision core (`make compiled`, mypyc; setup.py): when it is in
place, the compiled modules are the ones imported, they are not older than their sources, and
they give the same decisions and states as the pure-Python modules, to the last bit, over a
few closed-loop runs (queue, SLO series summed or read pod by pod, stale and NaN samples,
pods in flight, a GPU budget). Skipped without a compiled build (the default checkout)."""

from __future__ import annotations

import ast
import importlib
import math
import shutil
import sys
import types
from collections.abc import Iterator
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

import pytest

import autoscaler.policy as policy

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "autoscaler" / "policy"

pytestmark = pytest.mark.skipif(
    not policy.COMPILED_MODULES,
    reason="no compiled build of autoscaler.policy in place (pure Python): `make compiled` builds one",
)


def setup_compiled() -> list[str]:
    """The modules setup.py compiles, as module names."""
    text = (ROOT / "setup.py").read_text()
    start = text.index("COMPILED = [")
    listed: list[str] = ast.literal_eval(text[start + len("COMPILED = "):text.index("]", start) + 1])
    return [p.removesuffix(".py").replace("/", ".") for p in listed]


def test_the_compiled_modules_are_the_ones_imported() -> None:
    listed = setup_compiled()
    assert sorted(m for m in listed if m.startswith("autoscaler.policy.")) == list(policy.COMPILED_MODULES)
    for name in listed:  # the policy's, and the reader's fast path (autoscaler.replay.fast_decode)
        module = importlib.import_module(name)
        assert str(module.__file__).endswith(tuple(EXTENSION_SUFFIXES)), name
    assert not isinstance(policy.decide, types.FunctionType)  # a compiled function, not Python's


def test_the_reader_uses_the_compiled_fast_path() -> None:
    from autoscaler.replay import fast_decode, reader

    assert reader.fast_decoder is fast_decode.fast_decoder
    assert not isinstance(fast_decode.fast_decoder, types.FunctionType)


def test_the_compiled_modules_are_not_older_than_their_sources() -> None:
    stale = [name for name in setup_compiled()
             if Path(str(importlib.import_module(name).__file__)).stat().st_mtime
             < (ROOT / (name.replace(".", "/") + ".py")).stat().st_mtime]
    assert not stale, f"sources edited after the build: run `make compiled` again ({', '.join(stale)})"


@pytest.fixture(scope="module")
def pure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The same `.py` files as the package `pure_policy`: pure Python, whatever sits beside them."""
    workdir = tmp_path_factory.mktemp("pure")
    package = workdir / "pure_policy"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"))
    for path in package.glob("*.py"):
        text = path.read_text().replace("autoscaler.policy.", "pure_policy.")
        path.write_text(text.replace("from autoscaler.policy import", "from pure_policy import"))
    sys.path.insert(0, str(workdir))
    try:
        module = importlib.import_module("pure_policy")
        assert module.COMPILED_MODULES == ()
        yield module
    finally:
        sys.path.remove(str(workdir))
        for name in [n for n in sys.modules if n == "pure_policy" or n.startswith("pure_policy.")]:
            del sys.modules[name]


TTFT = (0.02, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, math.inf)
TPOT = (0.01, 0.025, 0.05, 0.1, 0.2, 0.5, math.inf)


def observation(p: Any, k: int, now: float, spec: int, ready: int, fault: str, summed: bool) -> Any:
    """Tick `k` of a burst: the fleet's load rises for 20 ticks, falls for 20, then stays low;
    one pod's samples may be stale or NaN (`fault`), and the pods beyond `ready` are loading."""
    load = (3.0 + 30.0 * math.sin(math.pi * min(k, 40) / 40)) / ready  # requests/s per ready pod
    waiting = max(0.0, load - 3.0) * 2.0
    pods = []
    for j in range(ready):
        at = now - 2.0 - j
        if fault == "stale" and j == 0 and k % 5 == 3:
            at = now - 120.0
        value = math.nan if fault == "nan" and j == ready - 1 and k % 7 == 4 else waiting * (1.0 + j / 10.0)

        def hist(bounds: tuple[float, ...], knee: float, done: float = load, t: float = at) -> Any:
            return p.LatencyHistogram(bounds, tuple(done * min(1.0, (i + 1) / knee) for i in range(len(bounds))), t)

        knee = 2.0 + waiting / 2.0
        pods.append(p.ReadyPod(
            f"pod-{j}", p.MetricSample(value, at), p.MetricSample(min(8.0, 2.0 * load), at),
            p.MetricSample(min(0.95, 0.2 + load / 10.0), at),
            p.PodStartup(created_at=now - 3_000.0, scheduled_at=now - 2_990.0, ready_at=now - 2_700.0 + j),
            completed_per_second=p.MetricSample(load, at),
            prompt_tokens_per_second=p.MetricSample(load * 700.0, at),
            generation_tokens_per_second=p.MetricSample(load * 180.0, at),
            ttft=hist(TTFT, knee), tpot=hist(TPOT, knee / 2),
        ))
    flying = tuple(p.PodInFlight(f"new-{i}", p.PodStage.LOADING, p.PodStartup(created_at=now - 60.0, scheduled_at=now - 50.0))
                   for i in range(spec - ready))
    ready_pods = tuple(pods)
    series = importlib.import_module(p.__name__ + ".slo_series").sum_slo_series(ready_pods) if summed else None
    return p.Observation(spec, ready_pods, flying, free_gpus=6, slo_series=series)


def run(p: Any, params: dict[str, Any], fault: str, summed: bool) -> list[str]:
    """80 ticks 15 s apart, closed loop (the pods follow the decisions one tick late)."""
    policy_params, state = p.PolicyParams(**params), p.PolicyState()
    spec = ready = 2
    out = []
    for k in range(80):
        now = 1_700_000_000.0 + 15.0 * k
        decision, state = p.decide(policy_params, observation(p, k, now, spec, ready, fault, summed), state, now)
        out.append(repr((decision, state)).replace(p.__name__, "P"))
        ready, spec = spec, decision.desired_replicas
    return out


@pytest.mark.parametrize(
    ("params", "fault", "summed"),
    [
        ({"max_replicas": 12}, "none", True),
        ({"max_replicas": 12}, "none", False),
        ({"max_replicas": 12}, "stale", True),
        ({"max_replicas": 12}, "nan", True),
        ({"max_replicas": 20, "max_gpus": 8}, "none", True),
    ],
)
def test_compiled_and_pure_decide_alike(pure: Any, params: dict[str, Any], fault: str, summed: bool) -> None:
    compiled = run(policy, params, fault, summed)
    assert compiled == run(pure, params, fault, summed)
    assert len(set(compiled)) > 10  # the runs do move: decisions and states change tick by tick
