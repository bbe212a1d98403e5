"""Sweep executors: the same simulation jobs give the same results in a local process pool and on a
Dask cluster (a LocalCluster on 127.0.0.1, started and closed by the test); spec errors are one
line each (unknown form, missing extra, unreachable scheduler)."""

from __future__ import annotations

import importlib.util
import math
import os
import socket
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from autoscaler.sim.executor import ExecutorError, ExecutorSpecError, check_spec, make_executor
from autoscaler.sim.experiment import Scenario, prepare, run_one
from autoscaler.sim.runner import RunResult

TRACE = Path(__file__).resolve().parents[2] / "simulations" / "data" / "traces" / "azure2023-conv.csv"
# (policy, knob or None for its default, seed): five minutes of trace at a peak of 4 replicas each
JOBS: list[tuple[str, float | None, int]] = [
    ("queue-lead", None, 0), ("hpa-queue", None, 0), ("static-peak", None, 1),
    ("oracle", 0.7, 0), ("kpa", None, 2), ("queue-lead", None, 1),
]
HAS_DASK = importlib.util.find_spec("distributed") is not None
needs_dask = pytest.mark.skipif(not HAS_DASK, reason="dask distributed is not installed "
                                "(pip install 'vllm-queue-autoscaler[distributed]')")


def simulate(job: tuple[str, float | None, int]) -> RunResult:
    """One short simulation, self-contained (module-level, plain arguments): what a sweep submits."""
    policy, knob, seed = job
    sc = Scenario(name="executor-test", trace=str(TRACE), duration=300.0, peak_replicas=4, seed=seed)
    return run_one(prepare(sc), policy, knob)


def dask_worker_address() -> str:
    """Only answers inside a Dask worker: proof the job ran on the cluster."""
    from distributed import get_worker

    return str(get_worker().address)


def _comparable(r: RunResult) -> dict[str, Any]:
    """Every field but the wall-clock time, NaN made equal to NaN."""
    d = asdict(r)
    d.pop("wall_s")
    return {k: _nan_free(v) for k, v in d.items()}


def _nan_free(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    if isinstance(v, dict):
        return {k: _nan_free(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_nan_free(x) for x in v]
    return v


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@needs_dask
def test_a_sweep_gives_the_same_results_locally_and_on_a_dask_cluster() -> None:
    from distributed import LocalCluster

    with make_executor("local", 2) as ex:  # before the cluster: the pool forks this process
        local = list(ex.map(simulate, JOBS))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        address = str(cluster.scheduler_address)
        assert address.startswith("tcp://127.0.0.1:")
        with make_executor("dask://" + address.removeprefix("tcp://"), 2) as ex:
            assert ex.submit(dask_worker_address).result().startswith("tcp://127.0.0.1:")
            remote = list(ex.map(simulate, JOBS))
    assert [_comparable(r) for r in remote] == [_comparable(r) for r in local]
    assert len({(r.policy, r.gpu_hours, r.requests) for r in local}) >= 4  # the jobs differ
    assert all(r.requests > 1000 for r in local)


def test_the_local_spec_needs_no_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)
    assert check_spec("local") is None
    with make_executor("local", 1) as ex:
        assert ex.submit(os.getpid).result() != os.getpid()


@pytest.mark.parametrize(("spec", "where"), [
    ("dask://10.0.0.5:8786", "tcp://10.0.0.5:8786"),
    ("dask://scheduler.sim.svc", "tcp://scheduler.sim.svc:8786"),
    ("dask://[::1]:9000", "tcp://[::1]:9000"),
])
@needs_dask
def test_a_dask_spec_names_the_scheduler_address(spec: str, where: str) -> None:
    assert check_spec(spec) == where


@pytest.mark.parametrize(("spec", "message"), [
    ("ray://head:10001", "unknown (allowed: local, dask://HOST:PORT)"),
    ("threads", "unknown (allowed: local, dask://HOST:PORT)"),
    ("tcp://10.0.0.5:8786", "a Dask scheduler at tcp://10.0.0.5:8786 is spelled dask://10.0.0.5:8786"),
    ("dask://host:99999", "the port must be a number 0-65535"),
    ("dask://host:port", "the port must be a number 0-65535"),
    ("dask://:8786", "expected dask://HOST:PORT, nothing else"),
    ("dask://host:8786/path", "expected dask://HOST:PORT, nothing else"),
])
def test_an_unknown_spec_is_a_value_error_naming_the_allowed_forms(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match="^--executor ") as info:
        check_spec(spec)
    assert isinstance(info.value, ExecutorSpecError) and message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_missing_extra_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    with pytest.raises(ExecutorError) as info, make_executor("dask://127.0.0.1:8786"):
        pass
    assert str(info.value) == ("--executor dask://127.0.0.1:8786: needs the distributed extra "
                               "(pip install 'vllm-queue-autoscaler[distributed]')")
    assert isinstance(info.value, RuntimeError) and not isinstance(info.value, ValueError)


@needs_dask
def test_an_unreachable_scheduler_is_one_line_after_a_short_timeout() -> None:
    port = _free_port()  # nothing listens on it any more
    t0 = time.perf_counter()
    with pytest.raises(ExecutorError) as info, make_executor(f"dask://127.0.0.1:{port}", connect_timeout_s=1.0):
        pass
    assert time.perf_counter() - t0 < 15.0
    msg = str(info.value)
    assert msg.startswith(f"--executor dask://127.0.0.1:{port}: no Dask scheduler answered at "
                          f"tcp://127.0.0.1:{port} within 1 s") and "\n" not in msg
