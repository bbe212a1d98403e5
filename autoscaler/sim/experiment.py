"""Scenarios (trace x profile x scale x knobs), one run per policy, and the cost-at-99 % sweep."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import yaml

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
from autoscaler.sim.traces import MaterializedTrace, Trace, open_trace

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
        """Every field's range, checked once whether the scenario comes from a file or from the
        command line (`dataclasses.replace` runs this too); the error names key, value, range."""
        checks: list[tuple[str, object, bool, str]] = [
            ("start", self.start, math.isfinite(self.start) and self.start >= 0.0, ">= 0 s"),
            ("duration", self.duration, self.duration is None or (math.isfinite(self.duration) and self.duration > 0.0), "> 0 s"),
            ("rate_scale", self.rate_scale, self.rate_scale is None or (math.isfinite(self.rate_scale) and self.rate_scale > 0.0), "> 0"),
            ("peak_replicas", self.peak_replicas, self.peak_replicas is None or self.peak_replicas >= 1, ">= 1"),
            ("dt", self.dt, math.isfinite(self.dt) and 0.0 < self.dt <= 15.0, "0 < dt <= 15 s (the scrape interval)"),
            ("max_replicas", self.max_replicas, 1 <= self.max_replicas <= 10_000, "1 .. 10000"),
            ("min_replicas", self.min_replicas, 1 <= self.min_replicas <= self.max_replicas, "1 .. max_replicas"),
            ("max_nodes", self.max_nodes, self.max_nodes >= 1, ">= 1"),
            ("slo_ttft_s", self.slo_ttft_s, self.slo_ttft_s > 0.0, "> 0 s"),
            ("slo_tpot_s", self.slo_tpot_s, self.slo_tpot_s > 0.0, "> 0 s"),
        ]
        for key, value, ok, allowed in checks:
            if not ok:
                raise ValueError(f"scenario {self.name}: {key} = {value!r} is out of range (allowed: {allowed})")

    @staticmethod
    def load(path: str | Path) -> Scenario:
        raw = yaml.safe_load(Path(path).read_text())
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: expected a mapping")
        raw.setdefault("name", Path(path).stem)
        if "policies" in raw:
            raw["policies"] = tuple(raw["policies"])
        trace = str(raw["trace"])
        if not Path(trace).is_absolute():
            raw["trace"] = str((REPO / trace).resolve())
        known = {f.name for f in fields(Scenario)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"{path}: unknown scenario key(s) {', '.join(unknown)} "
                             f"(known: {', '.join(sorted(known))})")
        if "knobs" in raw:
            raw["knobs"] = _knob_grids(raw["knobs"], str(path))
        sc = Scenario(**raw)
        load_profile(sc.profile, sc.profile_overrides)  # fail at load time on a bad override
        return sc


def _knob_grids(raw: Any, where: str) -> dict[str, tuple[float, ...]]:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: knobs: expected a mapping POLICY: [values], got {raw!r}")
    out: dict[str, tuple[float, ...]] = {}
    for name, vals in raw.items():
        if name not in POLICIES:
            raise ValueError(f"{where}: knobs: unknown policy {name!r} (known: {', '.join(POLICIES)})")
        if not isinstance(vals, list) or not vals or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in vals):
            raise ValueError(f"{where}: knobs.{name}: expected a non-empty list of numbers, got {vals!r}")
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
    scale = sc.rate_scale or 1.0
    if sc.peak_replicas is not None:
        scale = sc.peak_replicas * mu / max(trace.peak_rate(), 1e-9)
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
