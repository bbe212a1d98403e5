"""What each simulated vLLM replica exports for the SLO policy (issue 15): vLLM's token counters
and latency histograms (`Engine.counters()`), their rates over the rate window in the view
(`Cluster._window`, what `sum by (pod, le) (rate(x_bucket[1m]))` returns), the ReadyPod fields
they fill, queue-lead's SLO from the scenario, and the results they must not change."""

from __future__ import annotations

import math
from collections import deque
from itertools import pairwise
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from autoscaler.baselines.view import ClusterView, view_observation
from autoscaler.policy.slo_capacity import read_slo
from autoscaler.policy.params import SloParams
from autoscaler.policy.types import SampleHealth
from autoscaler.sim.cluster import Cluster
from autoscaler.sim.engine import COUNTER_COLUMNS as C
from autoscaler.sim.engine import QUEUE_BOUNDS, TPOT_BOUNDS, TTFT_BOUNDS, Engine, Finished
from autoscaler.sim.experiment import REPO, Scenario, SloSpec, build, prepare
from autoscaler.sim.profile import load_profile
from autoscaler.sim.runner import RunResult, policy_hooks, run

I64 = np.int64
P = load_profile("qwen3-8b-h100")


def _enqueue(e: Engine, n_in: list[int], n_out: list[int], t: float = 0.0, slot: int = 0) -> None:
    n = len(n_in)
    e.enqueue(np.full(n, slot, dtype=I64), np.full(n, t), np.array(n_in, dtype=I64), np.array(n_out, dtype=I64))


def _run_engine(e: Engine, until: float, dt: float = 0.01) -> list[Finished]:
    out, t = [], 0.0
    while t < until - 1e-9:
        out.append(e.step(t, dt))
        t += dt
    return out


def _cumulative(values: npt.NDArray[np.float64], bounds: tuple[float, ...]) -> list[float]:
    """Prometheus's `le` buckets of these observations: count <= each bound, then all (+Inf)."""
    return [float(np.sum(values <= b)) for b in bounds] + [float(values.size)]


def _cat(fins: list[Finished], key: str) -> npt.NDArray[Any]:
    return np.concatenate([getattr(f, key) for f in fins])


# ----------------------------------------------------------------------------- the counters


def test_counters_match_the_requests_served() -> None:
    """Twelve requests of known lengths on one replica: once all are done, prompt and generation
    tokens are the sums of their prompts and outputs, and each histogram holds every request in
    the bucket of its own TTFT, TPOT and queue time (the values the run reports per request)."""
    e = Engine(P, 2)
    n_in = [100, 2000, 50, 8000, 300, 1, 700, 4000, 120, 64, 900, 3000]
    n_out = [10, 1, 200, 30, 5, 80, 2, 40, 300, 1, 25, 60]
    _enqueue(e, n_in, n_out)
    fins = _run_engine(e, 30.0)
    assert e.in_system() == 0
    row = e.counters()[0]
    assert row[C.prompt] == sum(n_in) and row[C.generation] == sum(n_out)
    assert row[C.ttft].tolist() == _cumulative(_cat(fins, "ttft"), TTFT_BOUNDS)
    assert row[C.tpot].tolist() == _cumulative(_cat(fins, "tpot"), TPOT_BOUNDS)
    assert row[C.queue].tolist() == _cumulative(_cat(fins, "wait"), QUEUE_BOUNDS)
    assert _cat(fins, "ttft").max() > 0.1 and _cat(fins, "ttft").min() < 0.1  # several TTFT buckets used
    assert not e.counters()[1].any()  # the other replica served nothing


def test_ttft_and_the_prompt_count_when_the_first_token_comes_out() -> None:
    """vLLM counts a request's whole prompt and observes its TTFT in the iteration that emits its
    first token (not at admission, not per prefill chunk); generated tokens count as they come."""
    e = Engine(P, 1)
    _enqueue(e, [8000], [100])  # idle-replica TTFT ~0.24 s
    first = float(P.idle_ttft_s(np.array([8000]))[0])
    e.step(0.0, 0.1)
    row = e.counters()[0]
    assert row[C.prompt] == 0 and row[C.ttft][-1] == 0 and row[C.generation] == 0
    _run_engine_from(e, 0.1, first + 0.05)
    row = e.counters()[0]
    assert row[C.prompt] == 8000 and row[C.ttft][-1] == 1 and 1 <= row[C.generation] < 100
    assert row[C.tpot][-1] == 0 and row[C.queue][-1] == 0  # observed at finish


def _run_engine_from(e: Engine, t0: float, t1: float, dt: float = 0.01) -> list[Finished]:
    out, t = [], t0
    while t < t1 - 1e-9:
        out.append(e.step(t, dt))
        t += dt
    return out


def test_generation_tokens_grow_with_decoding_and_never_go_back() -> None:
    e = Engine(P, 1)
    _enqueue(e, [200] * 20, [400] * 20)
    seen = []
    t = 0.0
    while e.in_system():
        e.step(t, 0.05)
        t += 0.05
        seen.append(e.counters()[0][C.generation])
    assert all(b >= a for a, b in pairwise(seen))
    assert seen[-1] == 20 * 400
    assert any(0 < s < 20 * 400 for s in seen)  # counted while decoding (all 20 finish together)


def test_a_preempted_request_counts_its_prompt_and_ttft_once() -> None:
    """KV cache for 12 blocks: two 80-token prompts decoding 100 tokens (12 blocks each at the end); the newer one is preempted
    (RECOMPUTE) and prefilled again, which vLLM does not count as prompt tokens again."""
    e = Engine(replace(P, kv_cache_tokens=192), 1)
    _enqueue(e, [80, 80], [100, 100])
    fins = _run_engine(e, 60.0)
    assert e.preemptions >= 1 and e.in_system() == 0
    row = e.counters()[0]
    assert row[C.prompt] == 160 and row[C.generation] == 200
    assert row[C.ttft][-1] == row[C.tpot][-1] == row[C.queue][-1] == 2
    assert row[C.queue].tolist() == _cumulative(_cat(fins, "wait"), QUEUE_BOUNDS)


def test_a_new_pod_on_a_reused_slot_starts_from_zero() -> None:
    e = Engine(P, 1)
    _enqueue(e, [100, 100], [5, 5])
    _run_engine(e, 2.0)
    assert e.counters()[0][C.prompt] == 200
    e.reset_slot(0)
    assert not e.counters()[0].any()


def test_observations_are_counted_without_scrapes_too() -> None:
    """A caller that never asks for the counters (calibration) keeps a bounded backlog of them."""
    e = Engine(P, 1)
    t = 0.0
    for _ in range(600):
        _enqueue(e, [50], [2], t=t)
        e.step(t, 0.05)
        t += 0.05
    assert len(e._fin_pending) + len(e._first_pending) <= 257


# ----------------------------------------------------------------------------- rates in the view


def test_window_rates_are_prometheus_rate_over_the_samples_in_the_window() -> None:
    """Samples every 15 s, window 60 s: at 75 s the window (15, 75] holds the samples of 30..75 s,
    rate = (c(75) - c(30)) / 45 s, what Prometheus's rate() gives (its extrapolation to the
    window's edges cancels out with regular scrapes); a histogram bucket likewise."""
    cl = Cluster(P, 1, 4, rate_window_s=60.0)
    pod = cl.pods[0]
    width = C.width
    for k, t in enumerate((0.0, 15.0, 30.0, 45.0, 60.0, 75.0)):
        row = np.zeros(width)
        row[C.prompt] = 1000.0 * k * k
        row[C.generation] = 90.0 * k
        row[C.ttft] = np.minimum(np.arange(len(TTFT_BOUNDS) + 1), 5) * k  # cumulative: rises then flat
        pod.counters.append((t, row))
    sig = cl._window(pod)
    assert sig.prompt_tokens_per_second == pytest.approx((25_000.0 - 4_000.0) / 45.0)
    assert sig.generation_tokens_per_second == pytest.approx(90.0 * 3 / 45.0)
    assert sig.ttft is not None and sig.ttft.timestamp == 75.0
    assert sig.ttft.upper_bounds == (*TTFT_BOUNDS, math.inf)
    assert sig.ttft.cumulative_per_second[:7] == pytest.approx([0.0, 1 / 15, 2 / 15, 3 / 15, 4 / 15, 5 / 15, 5 / 15])
    assert sig.ttft.count_per_second == pytest.approx(5 / 15)


def test_no_rate_before_two_samples_in_the_window() -> None:
    cl = Cluster(P, 1, 4)
    pod = cl.pods[0]
    assert cl._window(pod).ttft is None
    pod.counters.append((0.0, np.zeros(C.width)))
    assert cl._window(pod).prompt_tokens_per_second is None
    pod.counters.append((15.0, np.ones(C.width)))
    assert cl._window(pod).prompt_tokens_per_second == pytest.approx(1 / 15)


class _Watch:
    """Holds 2 replicas and keeps every view it is shown."""

    name = "watch"
    interval_s = 15.0

    def __init__(self) -> None:
        self.views: list[tuple[float, ClusterView]] = []

    def decide(self, view: ClusterView, now: float) -> int:
        self.views.append((now, view))
        return 2


@pytest.fixture(scope="module")
def watched() -> tuple[_Watch, RunResult]:
    sc = Scenario(name="watch", trace=str(REPO / "simulations/data/azure2023-conv-20min.csv"), peak_replicas=2,
                  max_replicas=4, duration=600.0)
    prep = prepare(sc)
    w = _Watch()
    r = run(prep.trace, prep.profile, w, replace(prep.cfg, initial_replicas=2, startup="fixed"))
    return w, r


def test_every_ready_pod_gets_fresh_slo_signals_in_its_observation(watched: tuple[_Watch, RunResult]) -> None:
    w, _ = watched
    now, view = w.views[-1]
    obs = view_observation(view)
    assert len(obs.ready_pods) == 2
    # read once where the observation is built, as the live loop does: `read_slo`'s very reading
    assert obs.slo_series is not None and obs.slo_series.pods is obs.ready_pods
    assert obs.slo_series.reading == read_slo(obs.ready_pods, 2, now, 60.0)
    for pod in obs.ready_pods:
        assert pod.prompt_tokens_per_second is not None and pod.generation_tokens_per_second is not None
        assert pod.prompt_tokens_per_second.health(now, 60.0) is SampleHealth.FRESH
        assert pod.generation_tokens_per_second.health(now, 60.0) is SampleHealth.FRESH
        for h in (pod.ttft, pod.tpot, pod.queue_time):
            assert h is not None and h.health(now, 60.0) is SampleHealth.FRESH
            assert h.count_per_second > 0
        assert pod.ttft is not None and pod.tpot is not None and pod.completed_per_second is not None
        assert pod.prompt_tokens_per_second.value > pod.generation_tokens_per_second.value > 0  # conv: long prompts
        # TPOT and queue time are observed at finish, like request_success_total
        assert pod.tpot.count_per_second == pytest.approx(pod.completed_per_second.value)


# ----------------------------------------------------------------------------- queue-lead's SLO


def _scenario(**kw: Any) -> Scenario:
    base: dict[str, Any] = {"name": "slo", "trace": str(REPO / "simulations/data/azure2023-conv-20min.csv"),
                            "peak_replicas": 2, "max_replicas": 6, "duration": 300.0}
    return Scenario(**{**base, **kw})


def test_queue_lead_gets_the_scenario_slo() -> None:
    prep = prepare(_scenario(slo=SloSpec(ttft_s=1.5, tpot_s=0.05)))
    pol, _ = build(prep, "queue-lead", None)
    assert pol.params.slo == SloParams(ttft_seconds=1.5, tpot_seconds=0.05)  # type: ignore[attr-defined]
    assert pol.params.slo.attainment_target == 0.99  # type: ignore[attr-defined]


def test_a_length_aware_slo_becomes_a_slope_per_1k_prompt_tokens() -> None:
    """factor 3 on Qwen3-8B/H100 (8,192 batched tokens): 3 x (idle TTFT of 1,000 tokens - of 0) =
    3 x 0.0195 s = 0.0586 s per 1k prompt tokens."""
    prep = prepare(_scenario(slo=SloSpec(ttft_s=2.0, tpot_s=0.1, ttft_idle_factor=3.0)))
    pol, _ = build(prep, "queue-lead", None)
    idle = P.idle_ttft_s(np.array([0, 1000]))
    slo = pol.params.slo  # type: ignore[attr-defined]
    assert (slo.ttft_seconds, slo.tpot_seconds) == (2.0, 0.1)
    assert slo.ttft_seconds_per_1k_prompt_tokens == pytest.approx(3.0 * float(idle[1] - idle[0]))
    assert slo.ttft_seconds_per_1k_prompt_tokens == pytest.approx(0.0586, abs=5e-4)
    with pytest.raises(ValueError, match="needs the replica profile"):
        SloSpec(ttft_idle_factor=3.0).policy_slo(None)


def test_the_scenario_queue_lead_slo_overrides_and_baselines_keep_their_knobs() -> None:
    prep = prepare(_scenario(slo=SloSpec(ttft_s=1.5, tpot_s=0.05),
                             queue_lead={"slo": {"ttft_seconds": 3.0, "attainment_target": 0.95}}))
    pol, _ = build(prep, "queue-lead", None)
    assert pol.params.slo == SloParams(ttft_seconds=3.0, attainment_target=0.95)  # type: ignore[attr-defined]
    keda, _ = build(prep, "keda", None)
    assert type(keda).__name__ == "Keda" and keda.name == "keda"


def test_a_scenario_slo_out_of_the_policy_range_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"queue_lead\.slo\.tpot_seconds"):
        _scenario(slo=SloSpec(ttft_s=2.0, tpot_s=100.0))


# ----------------------------------------------------------------------------- no result changes


# Pinned before the SLO signals existed (commit f4785f1): the 20-minute Azure conversation slice at
# a peak of 8 replicas, seed 0, fixed start-up times. The signals are extra data: the baselines
# never read them, so their rows must not change. queue-lead's row was (0.99946, 3.1039, 2.8069)
# before its decide() read them; re-pinned when the SLO step landed: on a cold start it sizes
# for the table's capacity with the cold-start headroom (1.42 at 0.99), so on this 20-minute
# slice it reached 100 % for about 1.7x the node GPU-hours (5.36, docs/slo-policy.md); re-pinned
# when a load carried within the SLO with no queue became the capacity at once ("the jump"):
# 100 % for 3.87 (1.2x); re-pinned when the cold-start floor of the headroom's sd went (the
# headroom is 1 until the first growth sample): 99.992 % for 3.2246, HPA's and KEDA's row within 0.01 %;
# re-pinned when the probe got its slow start (the step doubles with each probe until the first
# breach or tick without slack): 99.78 % for 2.7664 (not used to choose it: the tuning slices did);
# the floor came back, waiting while the latency has slack, which it has here throughout: unchanged;
# re-pinned when the headroom came to cover the next replica's lead time (a node's included) with
# growth measured on the recent mean: the same 99.78 % for 2.9081 (+5 %: one replica held longer).
PINNED = {
    "keda": (0.9999244022104794, 3.224719444447222, 3.058333333333333, 132279),
    "hpa": (0.9999244022104794, 3.224719444447222, 3.058333333333333, 132279),
    "queue-lead": (0.9978076641039016, 2.908052777780555, 2.7416666666666667, 132279),
}


@pytest.fixture(scope="module")
def regress() -> Any:
    return prepare(Scenario(name="regress", trace=str(REPO / "simulations/data/azure2023-conv-20min.csv"),
                            peak_replicas=8, max_replicas=20, seed=0))


def _result(prep: Any, name: str) -> RunResult:
    pol, cfg = build(prep, name, None)
    return run(prep.trace, prep.profile, pol, replace(cfg, startup="fixed"))


@pytest.mark.parametrize("name", sorted(PINNED))
def test_results_are_pinned(regress: Any, name: str) -> None:
    r = _result(regress, name)
    att, nodes, pods, requests = PINNED[name]
    assert r.requests == requests
    assert (r.slo_attainment, r.gpu_hours_nodes, r.gpu_hours_pods) == pytest.approx((att, nodes, pods), rel=1e-9, abs=0)


@pytest.mark.parametrize("name", ["keda", "hpa"])
def test_baselines_decide_the_same_with_the_slo_signals(regress: Any, name: str) -> None:
    """The registry's baselines declare they never read the signals (the fleet then records none);
    forced to get them, they decide exactly the same."""
    pol, cfg = build(regress, name, None)
    assert policy_hooks(pol).reads_slo_signals is False
    without = run(regress.trace, regress.profile, pol, replace(cfg, startup="fixed"))
    pol, cfg = build(regress, name, None)
    pol.reads_slo_signals = True  # type: ignore[attr-defined]
    seen: list[ClusterView] = []
    decide = pol.decide

    def spy(view: ClusterView, now: float) -> int:
        seen.append(view)
        return decide(view, now)

    pol.decide = spy  # type: ignore[method-assign]
    with_signals = run(regress.trace, regress.profile, pol, replace(cfg, startup="fixed"))
    assert any(p.ttft is not None for v in seen for p in v.ready)
    assert (with_signals.slo_attainment, with_signals.gpu_hours_nodes, with_signals.series) == (
        without.slo_attainment, without.gpu_hours_nodes, without.series)


def test_queue_lead_and_unregistered_policies_get_the_signals_baselines_do_not(regress: Any) -> None:
    ql, _ = build(regress, "queue-lead", None)
    assert policy_hooks(ql).reads_slo_signals and policy_hooks(_Watch()).reads_slo_signals
    for name in ("keda", "static", "oracle", "hpa-queue"):
        assert policy_hooks(build(regress, name, None)[0]).reads_slo_signals is False
    with pytest.raises(TypeError, match="reads_slo_signals"):
        policy_hooks(type("Bad", (_Watch,), {"reads_slo_signals": 1})())


def test_without_slo_signals_the_fleet_records_none() -> None:
    cl = Cluster(P, 1, 4)
    cl.set_slo_signals(False)
    cl.route(np.arange(20, dtype=np.float64) * 0.1, np.full(20, 100, dtype=I64), np.full(20, 5, dtype=I64))
    for k in range(5):
        cl.engine.step(float(k), 1.0)
        cl.scrape(float(k))
    assert not cl.pods[0].counters and not cl.engine.counters().any()
    assert cl.view(5.0).ready[0].ttft is None and cl.view(5.0).ready[0].completed_per_second is not None


def test_pod_counter_samples_are_bounded() -> None:
    cl = Cluster(P, 1, 4)
    assert isinstance(cl.pods[0].counters, deque) and cl.pods[0].counters.maxlen == 64


@pytest.mark.parametrize("n", [10, 5000])
def test_buckets_are_prometheus_le_buckets_on_and_between_the_bounds(n: int) -> None:
    """An observation equal to a bound falls in that bound's bucket (`le`), above the last finite
    bound in +Inf; the branch-free count used for big batches agrees with the binary search."""
    from autoscaler.sim.engine import _bucket

    b = np.array(TTFT_BOUNDS)
    rng = np.random.default_rng(1)
    x = np.concatenate((b, [0.0, np.inf, 1e4], rng.lognormal(0.0, 3.0, n)))
    got = _bucket(b, x)
    assert got.tolist() == np.searchsorted(b, x, side="left").tolist()
    assert got[: b.size].tolist() == list(range(b.size)) and got[b.size: b.size + 3].tolist() == [0, b.size, b.size]


@pytest.mark.parametrize(("profile", "row"), [
    ("qwen3-8b-h100", "qwen3-8b/h100"),  # the shipped profile: the table's row of that model and GPU
    ("llama-3-8b-a100-80gb", "llama-3-8b/a100-80gb"),  # a GPU name with a '-'
    ("mistral-7b-l4", None),  # no row: the generic one
    ("simulations/profiles/custom.yaml", None),  # a path: the generic row
])
def test_the_capacity_row_is_the_simulated_model_and_gpu(profile: str, row: str | None) -> None:
    from autoscaler.sim.experiment import capacity_profile_of

    assert capacity_profile_of(profile) == row
