"""Scenarios (trace x profile x scale x SLO), the preregistered protocol, and the seeded sweep.

A sweep runs every policy of the protocol (`simulations/preregistered.yaml`) at every point of
its grid with every seed. Each run is a `Job` (plain data) executed by `run_job`, a module-level
function, in whatever executor `autoscaler.sim.executor.make_executor` gives: a worker prepares
the scenario's slice for the job's seed itself (and keeps the last one it prepared), so the
same job runs the same way in a local process pool or on a cluster. Each seed's lower bound
(`autoscaler.sim.bound`) is a job of its own (`bound_job`).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final, cast, get_args

import numpy as np
import numpy.typing as npt

from autoscaler.baselines.interface import Policy
from autoscaler.sim import policies as registry
from autoscaler.sim import lead_bound, start_ceiling
from autoscaler.sim.bound import attainment_grid, deadlines, seed_bound
from autoscaler.sim.startup import least_load_s, least_provision_s
from autoscaler.sim.executor import make_executor
from autoscaler.sim.oracle import BIN_S, OraclePolicy, need_replicas, work_per_bin
from autoscaler.policy.capacity_table import CAPACITY_TABLE
from autoscaler.sim.policies import POLICIES, canonical, make_policy, queue_lead_spec
from autoscaler.sim.profile import Profile, load_profile
from autoscaler.sim.cluster import Routing
from autoscaler.sim.runner import RunConfig, RunResult, run
from autoscaler.sim.stats import Slo
from autoscaler.sim.traces import MAX_SPAN_S, MaterializedTrace, Trace, open_trace

from autoscaler.config.bounded import finite_in, load_yaml_mapping  # noqa: I001
from autoscaler.policy import PolicyParams
from autoscaler.policy.params import SloParams
from pydantic import ValidationError

REPO = Path(__file__).resolve().parents[2]
PROTOCOL_PATH: Final = REPO / "simulations" / "preregistered.yaml"
INITIAL_FLEET_U: Final = 0.85
"""The utilisation the fleet every policy starts from is sized at (`Prepared.initial_need`)."""
QUEUE_LEAD_KNOB: Final = "target_running_per_replica"
"""The PolicyParams field queue-lead's protocol grid sets."""

SCOREBOARD: Final[tuple[str, ...]] = registry.SCOREBOARD


def registry_name(name: str) -> str:
    """The registry's name of a policy (old names such as `static-peak` are aliases)."""
    return canonical(name)


def known_policy(name: str) -> bool:
    return registry_name(name) in POLICIES


def known_policies() -> list[str]:
    return list(dict.fromkeys([*SCOREBOARD, *POLICIES]))


# --------------------------------------------------------------------------- the protocol


@dataclass(frozen=True)
class Protocol:
    """simulations/preregistered.yaml, read and checked."""

    path: str
    sha256: str
    grid_points: int
    seeds: tuple[int, ...]
    targets: tuple[float, ...]
    evaluation: tuple[str, ...]
    tuning: tuple[dict[str, Any], ...]
    knobs: dict[str, str]
    grids: dict[str, tuple[float, ...]]
    refine_static: bool = False
    """`static_refinement: every_integer_fleet` (protocol 3): the static fleet also runs every
    integer fleet between the two grid points around each attainment target (`static_refinement`)."""
    tuning_seeds: tuple[int, ...] = ()
    """The seeds of runs on the tuning slices, none of them an evaluation seed (`tuning.yaml` beside
    the protocol file, outside it: they define no evaluation, so changing them leaves the published
    sweeps' protocol as it was): a seed draws the same start-up times in every scenario, so defaults
    tuned on seeds 0-2 could fit those draws; () = the evaluation seeds (no tuning.yaml)."""

    def seeds_for(self, scenario: str) -> tuple[int, ...]:
        """The seeds a sweep of `scenario` runs: the tuning seeds for a tuning slice (a scenario
        named `tuning-*`, as `simulations/scenarios` names them), the evaluation seeds otherwise.

        Worked example: seeds (0, 1, 2), tuning_seeds (100, 101, 102): "azure-conv" -> (0, 1, 2),
        "tuning-servegen-m-mid-d9" -> (100, 101, 102); tuning_seeds () -> (0, 1, 2) for both."""
        return self.tuning_seeds if scenario.startswith("tuning-") and self.tuning_seeds else self.seeds

    def provenance(self, seeds: Sequence[int], grid_points: int) -> dict[str, Any]:
        """The protocol file a sweep read, with the seeds and grid points it actually ran (the
        protocol's own when the document says `preregistered: true`)."""
        return {"path": self.path, "sha256": self.sha256, "seeds": list(seeds), "grid_points": grid_points}


TUNING_FILE: Final = "tuning.yaml"


def _tuning_seeds(path: Path) -> tuple[int, ...]:
    """`tuning_seeds` of the tuning file beside the protocol (simulations/tuning.yaml); () without one."""
    if not path.exists():
        return ()
    raw = load_yaml_mapping(path, "tuning file")
    return tuple(int(x) for x in raw.get("tuning_seeds") or ())


def load_protocol(path: str | Path = PROTOCOL_PATH) -> Protocol:
    p = Path(path)
    raw = load_yaml_mapping(p, "protocol file")
    digest = hashlib.sha256(p.read_bytes()).hexdigest()
    try:
        n = int(raw["grid_points"])
        pols = raw["policies"]
        grids = {str(k): tuple(float(x) for x in v["grid"]) for k, v in pols.items()}
        knobs = {str(k): str(v["knob"]) for k, v in pols.items()}
        out = Protocol(path=_relative(p), sha256=digest, grid_points=n, seeds=tuple(int(s) for s in raw["seeds"]),
                       targets=tuple(float(t) for t in raw["attainment_targets"]),
                       evaluation=tuple(str(e) for e in raw["evaluation"]),
                       tuning=tuple(dict(t) for t in raw.get("tuning", [])), knobs=knobs, grids=grids,
                       refine_static=_refinement(raw.get("static_refinement")),
                       tuning_seeds=_tuning_seeds(p.with_name(TUNING_FILE)))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{path}: not a protocol file ({type(exc).__name__}: {exc})") from None
    bad = [k for k, g in out.grids.items() if len(g) != n]
    if bad:
        raise ValueError(f"{path}: policies {', '.join(bad)} do not have grid_points = {n} grid values")
    if len(set(out.seeds)) != len(out.seeds) or not out.seeds:
        # a seed twice would be one run counted twice: intervals too narrow, envelopes merged
        raise ValueError(f"{path}: seeds = {list(out.seeds)}: must be distinct, at least one")
    if len(set(out.tuning_seeds)) != len(out.tuning_seeds) or set(out.tuning_seeds) & set(out.seeds):
        raise ValueError(f"{p.with_name(TUNING_FILE)}: tuning_seeds = {list(out.tuning_seeds)}: must be distinct and "
                         f"none of the evaluation seeds {list(out.seeds)} ({path})")
    return out


def _refinement(value: Any) -> bool:
    if value is None:
        return False
    if value != "every_integer_fleet":
        raise ValueError(f"static_refinement = {value!r} (allowed: every_integer_fleet, or absent)")
    return True


def _relative(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(REPO))
    except ValueError:
        return str(p)


# --------------------------------------------------------------------------- the SLO


@dataclass(frozen=True)
class SloSpec:
    """A scenario's SLO: a request meets it when TTFT <= its TTFT bound and TPOT <= tpot_s. The
    TTFT bound is ttft_s, or with `ttft_idle_factor` set max(ttft_s, factor x the prompt's TTFT
    on an idle replica, `Profile.idle_ttft_s`): a length-aware target for long prompts."""

    ttft_s: float = 2.0
    tpot_s: float = 0.1
    ttft_idle_factor: float | None = None

    def __post_init__(self) -> None:
        for key, value, hi in (("ttft_s", self.ttft_s, 3600.0), ("tpot_s", self.tpot_s, 3600.0),
                               ("ttft_idle_factor", self.ttft_idle_factor, 1000.0)):
            if value is None and key == "ttft_idle_factor":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"slo.{key} = {_short(value)}: must be a number")
            if not (finite_in(value, 0.0, hi) and value > 0.0):
                raise ValueError(f"slo.{key} = {value!r} is out of range (allowed: > 0, <= {hi:g})")

    def as_dict(self) -> dict[str, Any]:
        return {"ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "ttft_idle_factor": self.ttft_idle_factor}

    def policy_slo(self, profile: Profile | None) -> SloParams:
        """queue-lead's input, `PolicyParams.slo`, for this SLO: TTFT and TPOT as they are, the
        attainment target at its default (0.99, the protocol's strictest target).

        A length-aware SLO (`ttft_idle_factor` f) bounds each request's TTFT by max(ttft_s, f x
        its idle-replica TTFT); `SloParams` has a linear form instead, ttft_seconds +
        ttft_seconds_per_1k_prompt_tokens x (the window's mean prompt / 1,000). The approximation:
        per 1k = f x the idle prefill time of 1,000 prompt tokens on `profile` (idle TTFT of 1,000
        tokens minus that of an empty prompt: `Profile.idle_ttft_s`), the slope of f x idle TTFT.
        It keeps the slope of the long prompts' bound, not its knee: below the knee (f x idle TTFT
        = ttft_s) the true bound is flat, so the linear one is looser there, by the slope times
        the prompt. Worked example, azure-code-long (Qwen3-8B/H100 at 2,048 batched tokens, f = 3):
        per 1k = 3 x 0.0222 s = 0.0665 s; at its mean prompt (~8,200 tokens) 2.55 s for a true
        2.0 s; knee at ~16,700 tokens (2.0 s vs 3.11 s); at 29,748 tokens 3.18 s vs 3.98 s. Without
        a factor the bound is flat (per 1k = 0). `profile` may be None only without a factor."""
        per_1k = 0.0
        if self.ttft_idle_factor is not None:
            if profile is None:
                raise ValueError("slo: a length-aware TTFT (ttft_idle_factor) needs the replica profile")
            idle = profile.idle_ttft_s(np.array([0, 1000], dtype=np.int64))
            per_1k = self.ttft_idle_factor * float(idle[1] - idle[0])
        return SloParams(ttft_seconds=self.ttft_s, tpot_seconds=self.tpot_s,
                         ttft_seconds_per_1k_prompt_tokens=per_1k)

    def simulator_slo(self) -> Slo:
        """The runner's `Slo`: the one definition of a request's TTFT bound (`Slo.ttft_bound_s`),
        which the lower bound uses too."""
        return Slo(ttft_s=self.ttft_s, tpot_s=self.tpot_s, ttft_idle_factor=self.ttft_idle_factor)

    @staticmethod
    def parse(raw: Any, where: str) -> SloSpec:
        if not isinstance(raw, dict):
            raise ValueError(f"{where}: slo = {_short(raw)}: must be a mapping (ttft_s, tpot_s, ttft_idle_factor)")
        known = {f.name for f in fields(SloSpec)}
        unknown = sorted(map(str, set(raw) - known))
        if unknown:
            raise ValueError(f"{where}: unknown slo key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        return SloSpec(**raw)


# --------------------------------------------------------------------------- scenarios


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
    input_scale: float = 1.0  # every prompt this many times as long (a synthetic stress)
    dt: float = 1.0
    min_replicas: int = 1
    max_replicas: int = 100
    max_nodes: int = 1000
    seed: int = 0  # a sweep replaces it by each seed of the protocol
    slo: SloSpec = SloSpec()
    queue_lead: dict[str, Any] = field(default_factory=dict)  # PolicyParams overrides (exploration only)
    # how the Service in front of the pods picks one (autoscaler.sim.cluster): "least_outstanding" (the
    # published runs) or "random" (kube-proxy's pick per connection; the routing-sensitivity runs)
    routing: str = "least_outstanding"
    policies: tuple[str, ...] = SCOREBOARD  # what a run without --sweep runs; a sweep runs the protocol's

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
            ("input_scale", self.input_scale, finite_in(self.input_scale, 0.0, 1000.0) and self.input_scale > 0.0,
             "> 0, <= 1000"),
            ("dt", self.dt, _finite(self.dt) and 0.0 < self.dt <= 15.0, "0 < dt <= 15 s (the scrape interval)"),
            ("dt", self.dt, self.dt >= MIN_DT_S, f">= {MIN_DT_S} s"),
            ("max_replicas", self.max_replicas, 1 <= self.max_replicas <= 10_000, "1 .. 10000"),
            ("min_replicas", self.min_replicas, 1 <= self.min_replicas <= self.max_replicas, "1 .. max_replicas"),
            ("max_nodes", self.max_nodes, self.max_nodes >= 1, ">= 1"),
            ("max_nodes", self.max_nodes, self.max_nodes <= 100_000, "<= 100000"),
            ("seed", self.seed, 0 <= self.seed < 2**63, "0 .. 2^63 - 1"),
            ("routing", self.routing, self.routing in ROUTINGS, " or ".join(ROUTINGS)),
        ]
        for key, value, ok, allowed in checks:
            if not ok:
                raise ValueError(f"scenario {self.name}: {key} = {value!r} is out of range (allowed: {allowed})")
        for name in self.policies:
            if not known_policy(name):
                raise ValueError(f"scenario {self.name}: policies: unknown policy {name!r} "
                                 f"(known: {', '.join(known_policies())})")
        _check_params(self, {}, "queue_lead")

    @staticmethod
    def load(path: str | Path) -> Scenario:
        """Read a scenario file (at most 1 MiB of YAML, bounded: `autoscaler.config.bounded`)."""
        raw = load_yaml_mapping(path, "scenario file")
        if "knobs" in raw:
            raise ValueError(f"{path}: knobs: a scenario holds no knob grid; the grids are the protocol's "
                             "(simulations/preregistered.yaml; --knobs explores, unpublished)")
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
        if "slo" in raw:
            raw["slo"] = SloSpec.parse(raw["slo"], f"{path}")
        trace = str(raw["trace"])
        if not Path(trace).is_absolute():
            raw["trace"] = str((REPO / trace).resolve())
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
    "peak_replicas": (int, type(None)), "input_scale": (int, float), "dt": (int, float), "min_replicas": (int,),
    "max_replicas": (int,), "max_nodes": (int,), "seed": (int,), "slo": (SloSpec,),
    "queue_lead": (dict,), "policies": (tuple,), "routing": (str,),
}
ROUTINGS: Final = get_args(Routing)


def _check_types(sc: Scenario) -> None:
    for key, types in _TYPES.items():
        value = getattr(sc, key)
        if isinstance(value, bool) or not isinstance(value, types):
            words = {str: "a string", int: "an integer", float: "a number", dict: "a mapping", tuple: "a list",
                     type(None): "null", SloSpec: "a mapping (ttft_s, tpot_s, ttft_idle_factor)"}
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
    """queue-lead's PolicyParams (the scenario's min/max replicas and SLO (its TTFT and TPOT; the
    length-aware slope needs the profile: `build`), the `queue_lead` overrides, plus `extra`) must
    validate, with a one-line error naming the key."""
    slo = {"ttft_seconds": sc.slo.ttft_s, "tpot_seconds": sc.slo.tpot_s}
    try:
        PolicyParams(**{"min_replicas": sc.min_replicas, "max_replicas": sc.max_replicas, "slo": slo,
                        **sc.queue_lead, **extra})
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(x) for x in err["loc"]) or "?"
        raise ValueError(f"scenario {sc.name}: {where}.{key} = {_short(err.get('input'))}: {err['msg']}") from None
    except TypeError as exc:  # a key that is not a string
        raise ValueError(f"scenario {sc.name}: {where}: {exc}") from None


def check_knob(sc: Scenario, name: str, value: float, where: str) -> None:
    """A knob value of policy `name`: finite, > 0 and <= MAX_KNOB; for queue-lead also a valid
    value of the PolicyParams field it sets. ValueError (one line) otherwise."""
    if not known_policy(name):
        raise ValueError(f"{where}: unknown policy {name!r} (known: {', '.join(known_policies())})")
    if not (finite_in(value, 0.0, MAX_KNOB) and value > 0.0):
        raise ValueError(f"scenario {sc.name}: {where} = {value!r} is out of range (allowed: > 0, <= {MAX_KNOB:g})")
    if name == "queue-lead":
        _check_params(sc, {QUEUE_LEAD_KNOB: value}, where)


# --------------------------------------------------------------------------- one run


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
        the per-minute work heuristic's need (at utilisation u) over the first lead time, i.e.
        what it must already have asked for, because a replica asked for at t = 0 serves only
        after a new node (`node_provision_s`) and the model load (`model_load_s`)."""
        sc = self.scenario
        if self.work.size == 0:
            return sc.min_replicas
        lead_bins = max(1, int(math.ceil((self.profile.node_provision_s + self.profile.model_load_s) / BIN_S)))
        need = need_replicas(self.work, u, sc.min_replicas)
        return min(max(int(need[:lead_bins].max()), sc.min_replicas), sc.max_replicas)

    def clairvoyant(self, u: float) -> OraclePolicy:
        need = need_replicas(self.work, u, self.scenario.min_replicas)
        return OraclePolicy(need, self.profile, self.scenario.max_replicas)


def prepare(sc: Scenario) -> Prepared:
    """The scenario's slice for its `seed` (arrivals: rate-scaling copies and ServeGen draws)."""
    profile = load_profile(sc.profile, sc.profile_overrides)
    trace = open_trace(sc.trace, sc.start, sc.duration, 1.0, sc.seed, sc.input_scale)
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
    trace = MaterializedTrace(open_trace(sc.trace, sc.start, sc.duration, scale, sc.seed, sc.input_scale))
    peak_need = max(1, math.ceil(trace.peak_rate() / mu - 1e-9))
    work = work_per_bin(trace, profile)
    cfg = RunConfig(dt=sc.dt, min_replicas=sc.min_replicas, max_replicas=sc.max_replicas, initial_replicas=1,
                    max_nodes=sc.max_nodes, slo=sc.slo.simulator_slo(), seed=sc.seed,
                    routing=cast(Routing, sc.routing))
    prep = Prepared(sc, trace, profile, mu, peak_need, work, cfg)
    # Every policy starts from the fleet a controller running before the slice would have: the
    # work heuristic's need at u = 0.85 over the first lead time (node provisioning + model load,
    # 390 s for Qwen3-8B/H100), not over the first 3 minutes - a quiet start followed by a ramp
    # inside the lead time otherwise builds a backlog no reactive policy can avoid. A static
    # fleet keeps its own size.
    prep.cfg = replace(cfg, initial_replicas=prep.initial_need(INITIAL_FLEET_U))
    return prep


def static_replicas(knob: float, peak_need: int) -> int:
    return max(1, math.ceil(knob * peak_need - 1e-9))


def capacity_profile_of(profile_name: str) -> str | None:
    """The row of the policy's capacity table (`policy/capacity_table.py`) for a simulator
    profile, as a user names their model and GPU: `qwen3-8b-h100` -> `qwen3-8b/h100`,
    `llama-3-8b-a100-80gb` -> `llama-3-8b/a100-80gb`; None
    (the generic row) when the table has no such row."""
    parts = profile_name.split("-")
    rows = ("-".join(parts[:i]) + "/" + "-".join(parts[i:]) for i in range(1, len(parts)))
    return next((row for row in rows if row in CAPACITY_TABLE), None)


def queue_lead_params(sc: Scenario, profile: Profile) -> dict[str, Any]:
    """queue-lead's PolicyParams overrides in a scenario: its SLO (`SloSpec.policy_slo`, the
    policy's input) and the capacity table's row for the model and GPU simulated (what a user
    names, not a tuned value), then the scenario's `queue_lead` overrides (a `slo` there
    replaces it)."""
    return {"slo": sc.slo.policy_slo(profile), "capacity_profile": capacity_profile_of(sc.profile),
            **sc.queue_lead}


def build(prep: Prepared, name: str, knob: float | None) -> tuple[Policy, RunConfig]:
    """The policy `name` at `knob` and its run's configuration. queue-lead gets the scenario's SLO
    (`queue_lead_params`); the baselines keep their own knobs."""
    sc = prep.scenario
    reg = registry_name(name)
    params = queue_lead_params(sc, prep.profile) if reg == "queue-lead" else sc.queue_lead
    pol = make_policy(reg, knob, sc.min_replicas, sc.max_replicas, params, prep.peak_need,
                      oracle_factory=prep.clairvoyant, queue_lead_knob=QUEUE_LEAD_KNOB)
    cfg = prep.cfg
    if reg == "static":
        cfg = static_config(cfg, getattr(pol, "replicas", cfg.initial_replicas))
    return pol, cfg


def static_config(cfg: RunConfig, replicas: int) -> RunConfig:
    """A static fleet's run: it starts with its `replicas` ready, on as many nodes."""
    return replace(cfg, initial_replicas=replicas, min_nodes=replicas)


def build_shipped(prep: Prepared) -> tuple[Policy, RunConfig]:
    """queue-lead with the controller's shipped defaults: `PolicyParams()` as the ConfigMap gives
    them (the batch guard `target_running_per_replica` included, null as shipped; the sweep's
    knob grid is not used), plus the scenario's SLO and the capacity row of the model and GPU it
    simulates (`build`)."""
    pol, cfg = build(prep, "queue-lead", None)
    shipped = PolicyParams().target_running_per_replica
    pol.params = pol.params.model_copy(update={"target_running_per_replica": shipped})  # type: ignore[attr-defined]
    return pol, cfg


def default_knob(sc: Scenario, name: str) -> float:
    """The knob a policy runs at when none is given: queue-lead's scenario setting, else the default."""
    if name == "queue-lead":
        spec = queue_lead_spec(QUEUE_LEAD_KNOB)
        return float(sc.queue_lead.get(QUEUE_LEAD_KNOB, spec.default))
    return POLICIES[registry_name(name)].default


def run_one(prep: Prepared, name: str, knob: float | None = None,
            progress: Callable[[float], None] | None = None) -> RunResult:
    pol, cfg = build(prep, name, knob)
    k = knob if knob is not None else default_knob(prep.scenario, name)
    return run(prep.trace, prep.profile, pol, cfg, knob=k, progress=progress)


# --------------------------------------------------------------------------- the sweep


@dataclass(frozen=True)
class Job:
    """One run of a sweep: plain data, picklable."""

    scenario: Scenario
    policy: str
    knob: float
    seed: int


@dataclass(frozen=True)
class Outcome:
    """What a sweep keeps of a run."""

    policy: str
    knob: float
    seed: int
    slo_attainment: float
    gpu_hours_nodes: float
    gpu_hours_pods: float
    scale_actions: int
    requests: int
    wall_s: float


def outcome_of(r: RunResult, job: Job) -> Outcome:
    pods = float(r.gpu_hours_pods if r.gpu_hours_pods is not None else r.gpu_hours)
    nodes = float(r.gpu_hours_nodes if r.gpu_hours_nodes is not None else pods)
    return Outcome(job.policy, job.knob, job.seed, r.slo_attainment, nodes, pods, r.scale_actions, r.requests, r.wall_s)


_CACHE: dict[str, Prepared] = {}


def prepared_for(sc: Scenario, seed: int) -> Prepared:
    """The slice of `sc` for `seed`, prepared once per process (the last one is kept)."""
    one = replace(sc, seed=seed)
    key = repr(one)
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = prepare(one)
    return _CACHE[key]


def run_job(job: Job) -> Outcome:
    """A sweep's run, executed in a worker."""
    prep = prepared_for(job.scenario, job.seed)
    return outcome_of(run_one(prep, job.policy, job.knob), job)


def bound_job(sc: Scenario, seed: int) -> list[float]:
    """One seed's lower bound, GPU-hours on `bound.attainment_grid()`, executed in a worker."""
    prep = prepared_for(sc, seed)
    return [float(x) for x in bound_of(prep)]


def ceiling_job(sc: Scenario, seed: int) -> dict[str, float]:
    """One seed's ceiling from the protocol's start (`start_ceiling.ceiling`), in a worker:
    seal_s, due, misses, requests and attainment."""
    prep = prepared_for(sc, seed)
    c = start_ceiling.ceiling(prep.trace, prep.profile, prep.cfg)
    return {"seal_s": c.seal_s, "due": c.due, "misses": c.misses, "requests": c.requests, "attainment": c.attainment}


def bound_of(prep: Prepared, lead_time: bool = True) -> npt.NDArray[np.float64]:
    """One seed's lower bound on node GPU-hours at every attainment of `bound.attainment_grid()`:
    the larger of the fluid window bound (`bound.seed_bound`) and the lead-time bound
    (`lead_bound`; `lead_time=False` leaves it out, for comparison)."""
    arrival, n_in, n_out = prep.trace.arrays()
    p = prep.profile
    ttft = prep.scenario.slo.simulator_slo().ttft_bound_s(n_in, p.idle_ttft_s)
    work = p.work_lower_bound_s(n_in, n_out)
    fluid = seed_bound(arrival, n_out, work, ttft, prep.scenario.slo.tpot_s, prep.trace.duration,
                       prep.scenario.min_replicas, p.gpus_per_replica, tick_s=prep.scenario.dt)
    if arrival.size == 0 or not lead_time:
        return fluid
    windows = lead_bound.Windows.of(prep.trace.duration, prep.scenario.dt)
    groups = lead_bound.request_groups(arrival, arrival + ttft, deadlines(arrival, n_out, ttft, prep.scenario.slo.tpot_s),
                                       p.prefill_s(n_in.astype(np.float64)), work, windows, prep.trace.duration)
    prog = lead_bound.program(groups, windows, lifecycle_of(prep))
    out: npt.NDArray[np.float64] = np.maximum(fluid, lead_bound.curve(prog, arrival.size, attainment_grid()))
    return out


def lifecycle_of(prep: Prepared) -> lead_bound.Lifecycle:
    """What a new pod and node cost before serving in this scenario's cluster (the lead-time
    bound's facts 3-5)."""
    p, mode = prep.profile, prep.cfg.startup
    return lead_bound.Lifecycle(load_min_s=least_load_s(p, mode), provision_min_s=least_provision_s(p, mode),
                                idle_remove_s=p.node_idle_remove_s, pods_per_node=p.gpus_per_node // p.gpus_per_replica,
                                gpus_per_node=p.gpus_per_node, min_replicas=prep.scenario.min_replicas)


def sweep_jobs(sc: Scenario, grids: dict[str, tuple[float, ...]], seeds: Sequence[int]) -> list[Job]:
    """Every policy x grid point x seed, seed-major (a worker keeps one seed's slice)."""
    return [Job(sc, name, k, s) for s in seeds for name, grid in grids.items() for k in grid]


def static_refinement(outcomes: Sequence[Outcome], grid: Sequence[float], peak_need: int,
                      targets: Sequence[float]) -> tuple[float, ...]:
    """The static fleet's extra knobs: for each attainment target, every integer fleet strictly
    between the fleets of the two neighbouring grid points (by fleet size) whose mean attainment
    lies below and at or above it, as knob = replicas / peak need (`static_replicas` gives the
    fleet back). With 8 log-spaced multipliers a peak need of 5 runs fleets 3, 4, 5, 7, 9, ...:
    6 would never run, and the frontier would interpolate over it. The extra points make the
    static fleet's frontier more accurate (usually cheaper; a fleet just below a target can also
    show it dearer than the interpolation said): it is a reference, not a competitor tuned by its
    grid. The knob uses the scenario's seed's peak need; every seed has the same (the peak rate
    and mean lengths come from the trace, not the seed's draws).

    Worked example: need 5, grid fleets 5 -> 97 %, 7 -> 99.5 %, 9 -> 100 %; targets 0.95, 0.99:
    0.95 is reached at the first fleet (nothing below it), 0.99 between 5 and 7 -> (6 / 5,) = (1.2,).
    """
    fleets: dict[int, list[float]] = {}
    for o in outcomes:
        if o.policy == "static" and o.knob in grid:
            fleets.setdefault(static_replicas(o.knob, peak_need), []).append(o.slo_attainment)
    sizes = sorted(fleets)
    mean = {n: sum(v) / len(v) for n, v in fleets.items()}
    extra: set[int] = set()
    for t in targets:
        for lo, hi in zip(sizes, sizes[1:]):
            if mean[lo] < t <= mean[hi]:
                extra.update(range(lo + 1, hi))
                break
    return tuple(r / peak_need for r in sorted(extra))


@dataclass
class SweepOutput:
    outcomes: list[Outcome]
    bounds: list[list[float]]  # per seed, on bound.attainment_grid()
    grid: list[float] = field(default_factory=lambda: attainment_grid().tolist())
    refined: dict[str, tuple[float, ...]] = field(default_factory=dict)  # policy -> knobs run beyond its grid


def run_sweep(sc: Scenario, grids: dict[str, tuple[float, ...]], seeds: Sequence[int], executor: str = "local",
              jobs: int = 1, on_done: Callable[[], None] | None = None,
              refine_targets: Sequence[float] = (), peak_need: int = 0,
              on_more: Callable[[int], None] | None = None) -> SweepOutput:
    """Every job of `sweep_jobs` and every seed's bound, through `make_executor(executor, jobs)`;
    then, given the attainment targets to refine at (`refine_targets`) and the peak need of the
    scenario's seed (`peak_need`), and with the static fleet swept, its `static_refinement` runs
    with every seed (`on_more` is told how many runs that adds, before they start)."""
    job_list = sweep_jobs(sc, grids, seeds)
    with make_executor(executor, jobs) as ex:
        # each seed's bound just before its runs: a worker mostly keeps the slice it prepared
        bound_futs: list[Future[list[float]]] = []
        futs: list[Future[Outcome]] = []
        for s in seeds:
            bound_futs.append(ex.submit(bound_job, sc, s))
            futs += [ex.submit(run_job, j) for j in job_list if j.seed == s]
        outcomes = _collect(futs, on_done)
        refined: dict[str, tuple[float, ...]] = {}
        if refine_targets and peak_need > 0 and "static" in grids:
            extra = static_refinement(outcomes, grids["static"], peak_need, refine_targets)
            if extra:
                refined["static"] = extra
                if on_more is not None:
                    on_more(len(extra) * len(seeds))
                outcomes += _collect([ex.submit(run_job, Job(sc, "static", k, s)) for s in seeds for k in extra],
                                     on_done)
        bounds = [f.result() for f in bound_futs]
    return SweepOutput(outcomes, bounds, refined=refined)


def _collect(futs: Sequence[Future[Outcome]], on_done: Callable[[], None] | None) -> list[Outcome]:
    outcomes: list[Outcome] = []
    for f in futs:
        outcomes.append(f.result())
        if on_done is not None:
            on_done()
    return outcomes
