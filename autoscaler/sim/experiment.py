"""Scenarios (trace x profile x scale x knobs), one run per policy, and the cost-at-99 % sweep."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from autoscaler.baselines.interface import Policy
from autoscaler.sim.oracle import (
    BIN_S,
    OraclePolicy,
    need_replicas,
    schedule_cost,
    work_per_bin,
)
from autoscaler.sim.policies import (
    POLICIES,
    PolicySpec,
    make_policy,
    queue_lead_spec,
)
from autoscaler.sim.profile import Profile, load_profile
from autoscaler.sim.runner import RunConfig, RunResult, run
from autoscaler.sim.stats import Slo
from autoscaler.sim.traces import MAX_SPAN_S, MaterializedTrace, Trace, open_trace

from autoscaler.config.bounded import finite_in, load_yaml_mapping  # noqa: I001
from autoscaler.policy import PolicyParams
from pydantic import ValidationError

REPO = Path(__file__).resolve().parents[2]
ORACLE_DEFAULT_U = POLICIES["oracle"].default  # 0.85: the utilisation the initial fleet is sized at


@dataclass(frozen=True)
class Scenario:
    name: str
    trace: str
    profile: str = "qwen3-8b-h100"
    # single profile fields changed for this scenario, e.g. {scheduler: {max_num_batched_tokens: 2048}}
    # (the vLLM flag an operator sets for the workload; unknown keys are rejected: profile.apply_overrides)
    profile_overrides: dict[str, Any] = field(default_factory=dict)
    start: float = 0.0
    duration: float | None = None
    rate_scale: float | None = None
    peak_replicas: int | None = None
    dt: float = 1.0
    min_replicas: int = 1
    max_replicas: int = 100
    max_nodes: int = 1000
    seed: int = 0
    slo_ttft_s: float = 2.0
    slo_tpot_s: float = 0.1
    queue_lead: dict[str, Any] = field(default_factory=dict)  # PolicyParams overrides
    queue_lead_knob: str | None = None  # the PolicyParams field queue-lead's sweep varies (None: KV target)
    policies: tuple[str, ...] = tuple(POLICIES)
    # --sweep grids for this scenario, per policy ({static-peak: [1, 1.5, 2]}); a policy not named
    # keeps its default grid (policies.POLICIES), and `--knobs` on the command line wins over both
    knobs: dict[str, tuple[float, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Every field's type and range, checked once whether the scenario comes from a file or from
        the command line (`dataclasses.replace` runs this too); the error names key, value, range
        (docs/limits.md)."""
        _check_types(self)
        span = f"<= {MAX_SPAN_S:,.0f} s (31 days)"
        checks: list[tuple[str, object, bool, str]] = [
            ("start", self.start, _finite(self.start) and self.start >= 0.0, ">= 0 s"),
            ("start", self.start, self.start <= MAX_SPAN_S, span),
            ("duration", self.duration, self.duration is None or (_finite(self.duration) and self.duration > 0.0), "> 0 s"),
            ("duration", self.duration, self.duration is None or self.duration <= MAX_SPAN_S, span),
            ("rate_scale", self.rate_scale, self.rate_scale is None or (_finite(self.rate_scale) and self.rate_scale > 0.0), "> 0"),
            ("peak_replicas", self.peak_replicas, self.peak_replicas is None or self.peak_replicas >= 1, ">= 1"),
            ("peak_replicas", self.peak_replicas, self.peak_replicas is None or self.peak_replicas <= 10_000, "<= 10000"),
            ("dt", self.dt, _finite(self.dt) and 0.0 < self.dt <= 15.0, "0 < dt <= 15 s (the scrape interval)"),
            ("dt", self.dt, self.dt >= MIN_DT_S, f">= {MIN_DT_S} s"),
            ("max_replicas", self.max_replicas, 1 <= self.max_replicas <= 10_000, "1 .. 10000"),
            ("min_replicas", self.min_replicas, 1 <= self.min_replicas <= self.max_replicas, "1 .. max_replicas"),
            ("max_nodes", self.max_nodes, self.max_nodes >= 1, ">= 1"),
            ("max_nodes", self.max_nodes, self.max_nodes <= 100_000, "<= 100000"),
            ("seed", self.seed, 0 <= self.seed < 2**63, "0 .. 2^63 - 1"),
            ("slo_ttft_s", self.slo_ttft_s, self.slo_ttft_s > 0.0, "> 0 s"),
            ("slo_ttft_s", self.slo_ttft_s, self.slo_ttft_s <= 3600.0, "<= 3600 s"),
            ("slo_tpot_s", self.slo_tpot_s, self.slo_tpot_s > 0.0, "> 0 s"),
            ("slo_tpot_s", self.slo_tpot_s, self.slo_tpot_s <= 3600.0, "<= 3600 s"),
        ]
        for key, value, ok, allowed in checks:
            if not ok:
                raise ValueError(f"scenario {self.name}: {key} = {value!r} is out of range (allowed: {allowed})")
        for name in self.policies:
            if name not in POLICIES:
                raise ValueError(f"scenario {self.name}: policies: unknown policy {name!r} (known: {', '.join(POLICIES)})")
        try:
            queue_lead_spec(self.queue_lead_knob)
        except KeyError:
            raise ValueError(f"scenario {self.name}: queue_lead_knob = {self.queue_lead_knob!r} is not a knob of "
                             "queue-lead (known: target_kv_cache_usage_ratio, target_running_per_replica)") from None
        _check_params(self, {}, "queue_lead")
        for name, values in self.knobs.items():
            for value in values:
                check_knob(self, name, value, f"knobs.{name}")

    @staticmethod
    def load(path: str | Path) -> Scenario:
        """Read a scenario file (at most 1 MiB of YAML, bounded: `autoscaler.config.bounded`)."""
        raw = load_yaml_mapping(path, "scenario file")
        known = {f.name for f in fields(Scenario)}
        unknown = sorted(map(str, set(raw) - known))
        if unknown:
            raise ValueError(f"{path}: unknown scenario key(s) {', '.join(unknown)} "
                             f"(known: {', '.join(sorted(known))})")
        raw.setdefault("name", Path(path).stem)
        if not isinstance(raw.get("trace"), str):
            raise ValueError(f"{path}: trace = {_short(raw.get('trace'))}: must be the path of a trace CSV or ServeGen prefix")
        if isinstance(raw.get("policies"), list):
            raw["policies"] = tuple(raw["policies"])
        trace = str(raw["trace"])
        if not Path(trace).is_absolute():
            raw["trace"] = str((REPO / trace).resolve())
        if "knobs" in raw:
            raw["knobs"] = _knob_grids(raw["knobs"], str(path))
        sc = Scenario(**raw)
        load_profile(sc.profile, sc.profile_overrides)  # fail at load time on a bad override
        return sc


MIN_DT_S: Final = 0.01
MAX_KNOB: Final = 10_000.0
"""A policy knob (each is a positive target, threshold or multiplier) is > 0 and at most this."""
MAX_REQUESTS: Final = 200_000_000
"""Requests of one prepared slice (16 bytes each in memory, MaterializedTrace)."""

_TYPES: Final[dict[str, tuple[type, ...]]] = {
    "name": (str,), "trace": (str,), "profile": (str,), "profile_overrides": (dict,),
    "start": (int, float), "duration": (int, float, type(None)), "rate_scale": (int, float, type(None)),
    "peak_replicas": (int, type(None)), "dt": (int, float), "min_replicas": (int,), "max_replicas": (int,),
    "max_nodes": (int,), "seed": (int,), "slo_ttft_s": (int, float), "slo_tpot_s": (int, float),
    "queue_lead": (dict,), "queue_lead_knob": (str, type(None)), "policies": (tuple,), "knobs": (dict,),
}


def _check_types(sc: Scenario) -> None:
    for key, types in _TYPES.items():
        value = getattr(sc, key)
        if isinstance(value, bool) or not isinstance(value, types):
            words = {str: "a string", int: "an integer", float: "a number", dict: "a mapping", tuple: "a list",
                     type(None): "null"}
            want = " or ".join(dict.fromkeys(words[t] for t in types))
            raise ValueError(f"scenario {_short(sc.name)}: {key} = {_short(value)}: must be {want}")
    if not all(isinstance(p, str) for p in sc.policies) or not sc.policies:
        raise ValueError(f"scenario {sc.name}: policies = {_short(list(sc.policies))}: must be a non-empty list of "
                         "policy names")


def _finite(x: float) -> bool:
    """`math.isfinite`, also for an integer beyond float range (math.isfinite raised OverflowError)."""
    return isinstance(x, int) or math.isfinite(x)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_params(sc: Scenario, extra: dict[str, Any], where: str) -> None:
    """queue-lead's PolicyParams (the scenario's min/max replicas and `queue_lead` overrides, plus
    `extra`) must validate, with a one-line error naming the key."""
    try:
        PolicyParams(**{"min_replicas": sc.min_replicas, "max_replicas": sc.max_replicas, **sc.queue_lead, **extra})
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(x) for x in err["loc"]) or "?"
        raise ValueError(f"scenario {sc.name}: {where}.{key} = {_short(err.get('input'))}: {err['msg']}") from None
    except TypeError as exc:  # a key that is not a string
        raise ValueError(f"scenario {sc.name}: {where}: {exc}") from None


def check_knob(sc: Scenario, name: str, value: float, where: str) -> None:
    """A knob value of policy `name`: finite, > 0 and <= MAX_KNOB; for queue-lead also a valid
    value of the PolicyParams field it sets. ValueError (one line) otherwise."""
    if name not in POLICIES:
        raise ValueError(f"{where}: unknown policy {name!r} (known: {', '.join(POLICIES)})")
    if not (finite_in(value, 0.0, MAX_KNOB) and value > 0.0):
        raise ValueError(f"scenario {sc.name}: {where} = {value!r} is out of range (allowed: > 0, <= {MAX_KNOB:g})")
    if name == "queue-lead":
        _check_params(sc, {queue_lead_spec(sc.queue_lead_knob).knob: value}, where)


def _knob_grids(raw: Any, where: str) -> dict[str, tuple[float, ...]]:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: knobs: expected a mapping POLICY: [values], got {_short(raw)}")
    out: dict[str, tuple[float, ...]] = {}
    for name, vals in raw.items():
        if name not in POLICIES:
            raise ValueError(f"{where}: knobs: unknown policy {_short(name)} (known: {', '.join(POLICIES)})")
        if not isinstance(vals, list) or not vals or not all(finite_in(v, -1e300, 1e300) for v in vals):
            raise ValueError(f"{where}: knobs.{name}: expected a non-empty list of numbers, got {_short(vals)}")
        out[name] = tuple(float(v) for v in vals)
    return out


@dataclass
class Prepared:
    scenario: Scenario
    trace: Trace
    profile: Profile
    capacity_rps: float
    peak_need: int
    work: npt.NDArray[np.float64]
    cfg: RunConfig

    def initial_need(self, u: float) -> int:
        """The fleet a controller that had been running before the slice would have at t = 0:
        the oracle's need (at utilisation u) over the first lead time, i.e. what it must already
        have asked for, because a replica asked for at t = 0 serves only after a new node
        (`node_provision_s`) and the model load (`model_load_s`, container start included)."""
        sc = self.scenario
        if self.work.size == 0:
            return sc.min_replicas
        lead_bins = max(1, int(math.ceil((self.profile.node_provision_s + self.profile.model_load_s) / BIN_S)))
        need = need_replicas(self.work, u, sc.min_replicas)  # neighbour bins count, as for the oracle
        return min(max(int(need[:lead_bins].max()), sc.min_replicas), sc.max_replicas)

    def oracle(self, u: float) -> OraclePolicy:
        need = need_replicas(self.work, u, self.scenario.min_replicas)
        return OraclePolicy(need, self.profile, self.scenario.max_replicas)

    def oracle_bound_gpu_hours(self, u: float) -> float:
        need = need_replicas(self.work, u, self.scenario.min_replicas)
        return schedule_cost(need, self.profile.model_load_s) * self.profile.gpus_per_replica / 3600.0


def prepare(sc: Scenario) -> Prepared:
    profile = load_profile(sc.profile, sc.profile_overrides)
    trace = open_trace(sc.trace, sc.start, sc.duration, 1.0, sc.seed)
    mean_in, mean_out = trace.mean_lengths()
    mu = profile.capacity_rps(mean_in, mean_out)
    if not mu > 0.0:  # the peak need divided by it
        raise ValueError(f"{sc.trace}: requests of {mean_in:.0f} + {mean_out:.0f} tokens on average do not fit one "
                         f"replica of {profile.name} (KV cache {profile.kv_cache_tokens} tokens, TPOT budget 50 ms)")
    scale = sc.rate_scale or 1.0
    if sc.peak_replicas is not None:
        scale = sc.peak_replicas * mu / max(trace.peak_rate(), 1e-9)
    expected = trace.expected_requests() * scale
    if not expected <= MAX_REQUESTS:  # refused before generating them (16 bytes each)
        raise ValueError(f"{sc.trace}: the slice at rate scale {scale:.3g} has ~{expected:.3g} requests (allowed: at "
                         f"most {MAX_REQUESTS:,}; lower rate_scale, peak_replicas or duration)")
    trace = MaterializedTrace(open_trace(sc.trace, sc.start, sc.duration, scale, sc.seed))
    peak_need = max(1, math.ceil(trace.peak_rate() / mu - 1e-9))
    work = work_per_bin(trace, profile)
    cfg = RunConfig(dt=sc.dt, min_replicas=sc.min_replicas, max_replicas=sc.max_replicas, initial_replicas=1,
                    max_nodes=sc.max_nodes, slo=Slo(sc.slo_ttft_s, sc.slo_tpot_s))
    prep = Prepared(sc, trace, profile, mu, peak_need, work, cfg)
    # Every policy starts from the fleet a controller running before the slice would have: the
    # oracle's need at its default utilisation over the first lead time (node provisioning +
    # model load, 390 s for Qwen3-8B/H100), not over the first 3 minutes - a quiet start followed
    # by a ramp inside the lead time otherwise builds a backlog no reactive policy can avoid.
    # The oracle starts from this same fleet at every knob (it is the lower bound of the same
    # problem, not of an easier one: sized at its own u it was handed up to 37 ready replicas at
    # t = 0 on azure-code, where every other autoscaler had 9); static-peak keeps its own size.
    prep.cfg = replace(cfg, initial_replicas=prep.initial_need(ORACLE_DEFAULT_U))
    return prep


def build(prep: Prepared, name: str, knob: float | None) -> tuple[Policy, RunConfig]:
    sc = prep.scenario
    pol = make_policy(name, knob, sc.min_replicas, sc.max_replicas, sc.queue_lead, prep.peak_need,
                      oracle_factory=lambda u: prep.oracle(u), queue_lead_knob=sc.queue_lead_knob)
    cfg = prep.cfg
    if name == "static-peak":
        n = getattr(pol, "replicas", cfg.initial_replicas)
        cfg = replace(cfg, initial_replicas=n, min_nodes=n)
    return pol, cfg


def default_knob(sc: Scenario, name: str) -> float:
    """The knob a policy runs at when none is given: queue-lead's scenario setting, else the default."""
    spec = spec_of(name, sc.queue_lead_knob)
    return float(sc.queue_lead.get(spec.knob, spec.default)) if name == "queue-lead" else spec.default


def run_one(prep: Prepared, name: str, knob: float | None = None,
            progress: Callable[[float], None] | None = None) -> RunResult:
    pol, cfg = build(prep, name, knob)
    k = knob if knob is not None else default_knob(prep.scenario, name)
    return run(prep.trace, prep.profile, pol, cfg, knob=k, progress=progress)


def cost_at(results: list[RunResult], target: float = 0.99) -> RunResult | None:
    """The cheapest run that reaches the attainment target, or None."""
    ok = [r for r in results if r.slo_attainment >= target]
    return min(ok, key=lambda r: r.gpu_hours) if ok else None


_PREP: Prepared | None = None


def _work(job: tuple[str, float | None]) -> RunResult:
    assert _PREP is not None
    return run_one(_PREP, job[0], job[1])


def run_many(prep: Prepared, jobs: list[tuple[str, float | None]], workers: int = 1,
             on_done: Callable[[RunResult], None] | None = None) -> list[RunResult]:
    """Run (policy, knob) jobs, in `workers` forked processes when > 1; results in job order."""
    global _PREP
    if workers <= 1 or len(jobs) <= 1:
        out = []
        for j in jobs:
            r = run_one(prep, j[0], j[1])
            if on_done:
                on_done(r)
            out.append(r)
        return out
    import multiprocessing as mp

    _PREP = prep
    try:
        with mp.get_context("fork").Pool(workers) as pool:
            res: list[RunResult] = []
            for r in pool.imap(_work, jobs):
                if on_done:
                    on_done(r)
                res.append(r)
            return res
    finally:
        _PREP = None


def spec_of(name: str, queue_lead_knob: str | None = None) -> PolicySpec:
    return queue_lead_spec(queue_lead_knob) if name == "queue-lead" else POLICIES[name]


def sweep_jobs(names: list[str], queue_lead_knob: str | None = None,
               grids: dict[str, tuple[float, ...]] | None = None) -> list[tuple[str, float | None]]:
    """(policy, knob) runs of a sweep: each policy over `grids[policy]` or else its default grid."""
    g = grids or {}
    return [(n, k) for n in names for k in g.get(n, spec_of(n, queue_lead_knob).grid)]
