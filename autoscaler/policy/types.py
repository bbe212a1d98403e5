"""Value types of the decision core: what it observes, what it remembers, what it decides.

All times are Unix seconds (float) taken from the caller's clock; the core never reads a clock.
Everything here is immutable so that `decide()` stays a pure function.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from bisect import bisect_right
from dataclasses import MISSING, dataclass, field, fields
from enum import StrEnum
from functools import cached_property
from itertools import pairwise
from operator import lt
from typing import Any, TypeVar

from autoscaler.policy.time_window import Entries, TimeWindow

_T = TypeVar("_T")

_NO_ENTRIES: TimeWindow[Any] = TimeWindow()  # the empty history every state starts with


class _Factory:
    """A default_factory field's default in `fast_init`'s signature: call the factory."""

    def __repr__(self) -> str:
        return "<factory>"  # as the dataclass's own signature shows it


_NO_VALUE = _Factory()


def fast_init(cls: type[_T]) -> type[_T]:
    """Give a frozen dataclass a cheaper `__init__` with the very same signature and result.

    A frozen dataclass's own `__init__` sets each field through `object.__setattr__`, about
    0.1 us a field: the 29 fields of `DecisionValues` cost more than some steps of `decide()`.
    This one writes the instance `__dict__` directly, in field order; everything else (frozen
    `__setattr__`, `__eq__`, `__hash__`, `__repr__`, `replace()`, pickling) is the dataclass's.
    Only for what it supports: frozen, not slotted, every field in `__init__`, positional, no
    `InitVar`, no `__post_init__`.

    The price: the instance then keeps a real `__dict__` instead of CPython's inline values, and
    each attribute read costs some 10-20 ns more. So this is for what `decide()` builds once and
    reads a few times (its results and state), not for what it reads in loops (the pods and
    their samples), which keep the dataclass's `__init__`.

    Worked example: `Decision(3, 2, Reason.SCALE_UP_QUEUE)` stores desired_replicas 3,
    current_replicas 2, the reason, clamp None and a new `DecisionValues()` from the field's
    factory, in that order, as the dataclass would; setting `.desired_replicas` still raises
    FrozenInstanceError.
    """
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    flds = fields(cls)  # type: ignore[arg-type]
    if (
        not params.frozen
        or "__slots__" in cls.__dict__
        or hasattr(cls, "__post_init__")
        or len(flds) != len(cls.__dataclass_fields__)  # type: ignore[attr-defined]  # InitVar
        or any(not f.init or f.kw_only for f in flds)
    ):
        raise TypeError(f"fast_init does not support {cls.__qualname__}")
    namespace: dict[str, Any] = {"_NO_VALUE": _NO_VALUE}
    args: list[str] = []
    body: list[str] = ["    _d = self.__dict__"]
    for f in flds:
        if f.default is not MISSING:
            namespace[f"_dflt_{f.name}"] = f.default
            args.append(f"{f.name}=_dflt_{f.name}")
            body.append(f"    _d[{f.name!r}] = {f.name}")
        elif f.default_factory is not MISSING:
            namespace[f"_fact_{f.name}"] = f.default_factory
            args.append(f"{f.name}=_NO_VALUE")
            body.append(f"    _d[{f.name!r}] = _fact_{f.name}() if {f.name} is _NO_VALUE else {f.name}")
        else:
            args.append(f.name)
            body.append(f"    _d[{f.name!r}] = {f.name}")
    source = f"def __init__(self, {', '.join(args)}):\n" + "\n".join(body) + "\n"
    exec(source, namespace)  # noqa: S102 - code built from the field names above, as dataclasses does
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = {**cls.__init__.__annotations__}
    setattr(cls, "__init__", init)  # noqa: B010 - mypy forbids assigning a method
    return cls


class SampleHealth(StrEnum):
    """Health of one metric sample of one ready pod."""

    FRESH = "fresh"
    STALE = "stale"  # older than stale_after_seconds
    ABSENT = "absent"  # no series for this pod
    NAN = "nan"  # NaN, +/-Inf or negative


@dataclass(frozen=True)
class MetricSample:
    """One gauge sample as Prometheus returned it: value and the sample's own timestamp."""

    value: float
    timestamp: float

    def health(self, now: float, stale_after_seconds: float) -> SampleHealth:
        if not math.isfinite(self.value) or self.value < 0:
            return SampleHealth.NAN
        if now - self.timestamp > stale_after_seconds:
            return SampleHealth.STALE
        return SampleHealth.FRESH


def within(bounds: tuple[float, ...], rates: tuple[float, ...], threshold: float) -> float:
    """Requests per second with a latency of at most `threshold` in a histogram of these bucket
    bounds and cumulative rates, interpolated linearly inside the bucket that holds it (from 0
    at the first bucket's lower edge 0), as `histogram_quantile` does. Beyond the last finite
    bound nothing is known: only that bound's rate counts as within.

    Worked example: bounds (1, 2.5, +Inf), rates (6, 9, 10): within 2 s, 6 + 3 x 1 / 1.5 = 8;
    within 3 s: 9; within 0.5 s: 3.
    """
    i = bisect_right(bounds, threshold)  # the first bound above the threshold
    if i == len(bounds):
        return rates[-1] if rates else 0.0
    lower_bound, lower_rate = (bounds[i - 1], rates[i - 1]) if i else (0.0, 0.0)
    bound = bounds[i]
    if bound == math.inf:
        return lower_rate
    return lower_rate + (rates[i] - lower_rate) * (threshold - lower_bound) / (bound - lower_bound)


@dataclass(frozen=True)
class LatencyHistogram:
    """One pod's latency histogram over the rate window, as Prometheus gives it:
    `rate(<family>_bucket[window])` summed by `le`. For each upper bound `le` (ascending, the last
    one `+Inf`), the requests per second whose latency was at most `le` (cumulative, so the
    rates never decrease and the last one is the count rate).

    Worked example: bounds (1.0, 2.5, +Inf) with rates (6.0, 9.0, 10.0): 10 requests/s in all;
    the fraction within 2 s interpolates linearly inside the (1.0, 2.5] bucket, as
    `histogram_quantile` does: (6 + 3 x (2 - 1) / 1.5) / 10 = 0.8.
    """

    upper_bounds: tuple[float, ...]
    cumulative_per_second: tuple[float, ...]
    timestamp: float

    @property
    def count_per_second(self) -> float:
        return self.cumulative_per_second[-1] if self.cumulative_per_second else 0.0

    def health(self, now: float, stale_after_seconds: float) -> SampleHealth:
        """NAN when malformed (lengths differ, bounds not ascending or not ending at +Inf, a rate
        non-finite, negative or decreasing), else STALE or FRESH like a `MetricSample`."""
        bounds, rates = self.upper_bounds, self.cumulative_per_second
        if len(bounds) != len(rates) or not bounds or bounds[-1] != math.inf:
            return SampleHealth.NAN
        # C-level checks (this runs for every pod of every target each tick): a NaN or an
        # infinity makes a sum non-finite; non-decreasing rates are their own sort, so the
        # smallest is the first; bounds strictly ascend pairwise (map over `lt`, no Python loop).
        if not math.isfinite(sum(rates)) or rates[0] < 0 or list(rates) != sorted(rates):
            return SampleHealth.NAN
        if not math.isfinite(sum(bounds[:-1])) or not all(map(lt, bounds, bounds[1:])):
            return SampleHealth.NAN
        if now - self.timestamp > stale_after_seconds:
            return SampleHealth.STALE
        return SampleHealth.FRESH

    def within(self, threshold: float) -> float:
        """Requests per second with a latency of at most `threshold` (`within`)."""
        return within(self.upper_bounds, self.cumulative_per_second, threshold)

    def fraction_within(self, threshold: float) -> float | None:
        """Share of the requests with a latency of at most `threshold`; None when none finished."""
        count = self.count_per_second
        return self.within(threshold) / count if count > 0 else None


@dataclass(frozen=True)
class PodStartup:
    """Lifecycle timestamps of a pod, read from its status (creation, PodScheduled, Ready)."""

    created_at: float
    scheduled_at: float | None = None
    ready_at: float | None = None


@dataclass(frozen=True)
class ReadyPod:
    """A ready pod of the target and its three samples (None = no series for this pod)."""

    name: str
    waiting: MetricSample | None
    running: MetricSample | None
    kv_cache_usage: MetricSample | None
    startup: PodStartup | None = None
    # rate(vllm:request_success_total[1m]): requests this pod finishes per second. Optional:
    # without it the queue demand falls back to the batch model (see policy/demand.py).
    completed_per_second: MetricSample | None = None
    # The SLO signals (all optional; without them the SLO capacity step holds and the other
    # signals decide). Token rates: rate(vllm:prompt_tokens_total[w]) and
    # rate(vllm:generation_tokens_total[w]). Latency histograms over the same window:
    # vllm:time_to_first_token_seconds; per-request TPOT (vllm:request_time_per_output_token_seconds,
    # vLLM >= 0.11) or else vllm:time_per_output_token_seconds; vllm:request_queue_time_seconds.
    prompt_tokens_per_second: MetricSample | None = None
    generation_tokens_per_second: MetricSample | None = None
    ttft: LatencyHistogram | None = None
    tpot: LatencyHistogram | None = None
    queue_time: LatencyHistogram | None = None


class PodStage(StrEnum):
    """Where a pod that is on its way, but not yet serving, is."""

    UNSCHEDULABLE = "unschedulable"  # waiting for a GPU node
    SCHEDULED = "scheduled"  # bound to a node: pulling the image, creating the container
    LOADING = "loading"  # container running, model loading, not ready yet


@dataclass(frozen=True)
class PodInFlight:
    """A pod of the target that exists but does not serve yet."""

    name: str
    stage: PodStage
    startup: PodStartup


@fast_init
@dataclass(frozen=True)
class HistogramSum:
    """Latency histograms of one bucket layout, one row of cumulative rates a pod, read as their
    sum: a share within a bound is linear in the bucket rates, so the summed buckets interpolated
    once (`within`) give the pods' requests within it, as the pods interpolated one by one and
    added up would, up to float rounding. Only the buckets a bound falls between are summed
    (the rows are not summed whole: that would read every bucket of every pod once more).

    Worked example: bounds (1, 2.5, +Inf), rows (6, 9, 10) and (1, 2, 4): summed (7, 11, 14),
    14 requests/s; within 2 s: 7 + 4 x (2 - 1) / 1.5 = 9.67 (8 + 1.67 pod by pod).
    """

    upper_bounds: tuple[float, ...]
    rows: tuple[tuple[float, ...], ...]  # each pod's cumulative rates, in pod order
    count_per_second: float  # the last bucket summed: the requests/s the rows count

    def within(self, threshold: float) -> float:
        """`within` of the summed rows: the two buckets around the threshold summed, then
        interpolated."""
        bounds = self.upper_bounds
        i = bisect_right(bounds, threshold)  # the first bound above the threshold
        if i == len(bounds):
            return self.count_per_second
        lower_rate = rate = 0.0
        if i:
            j = i - 1
            for r in self.rows:  # the two buckets summed in row order (a plain loop: no list made)
                lower_rate += r[j]
                rate += r[i]
        else:
            for r in self.rows:
                rate += r[i]
        bound = bounds[i]
        if bound == math.inf:
            return lower_rate
        lower_bound = bounds[i - 1] if i else 0.0
        return lower_rate + (rate - lower_rate) * (threshold - lower_bound) / (bound - lower_bound)


@fast_init
@dataclass(frozen=True)
class SloReading:
    """What the pods' SLO series say this tick (fleet rates over the served pods; None where
    unknown): `slo_capacity.read_slo`, or `slo_series.sum_slo_series` where the observation is built."""

    prompt_tokens_per_second: float | None
    generation_tokens_per_second: float | None
    ttft: tuple[HistogramSum, ...]  # the usable histograms, one sum a bucket layout (usually one)
    tpot: tuple[HistogramSum, ...]
    ttft_count: float  # requests/s the usable TTFT histograms count
    tpot_count: float
    served: int  # the pods the fleet rates stand for
    partial: bool  # some SLO series present but unusable, or token rates missing on some pods
    ttft_pods: int  # the pods whose TTFT histograms are usable


@fast_init
@dataclass(frozen=True)
class SloSeries:
    """The SLO series of one observation's ready pods, read once where the observation is built
    (`slo_series.sum_slo_series`): only when every ready pod has both token rates and TTFT and
    TPOT histograms, all well formed (finite, >= 0, buckets never decreasing, one bucket layout
    a family); else there is none and `decide()` reads the pods one by one.

    Freshness depends on the tick, so only the oldest sample time is kept: `decide()` takes the
    reading when every ready pod is healthy and the oldest is fresh, else reads the pods (where
    a stale or unusable series makes the data partial).

    Worked example: pods with prompt rates 1,000 and 2,000 tokens/s and TTFT buckets (1, 3, 4)
    and (2, 2, 2) on bounds (1, 2, +Inf), sampled at 990 and 995: 3,000 prompt tokens/s, TTFT
    rows ((1, 3, 4), (2, 2, 2)) counting 6 requests/s over 2 served pods, oldest 990.
    """

    pods: tuple[ReadyPod, ...] = field(repr=False, compare=False)  # the very tuple it reads
    reading: SloReading  # as `read_slo` reads these pods when all are healthy and fresh
    oldest: float  # the oldest sample time among the pods' token rates and histograms


@fast_init  # built once a tick (a month's replay: 172,800): six fields set at once
@dataclass(frozen=True)
class Observation:
    """Everything `decide()` knows about one target Deployment at one tick."""

    spec_replicas: int
    ready_pods: tuple[ReadyPod, ...] = ()
    pods_in_flight: tuple[PodInFlight, ...] = ()
    free_gpus: int | None = None  # free GPUs on nodes the pods can land on; None = unknown
    rollout_in_progress: bool = False
    # `ready_pods`' SLO series summed where the observation is built (`sum_slo_series`); used
    # only when it sums this very `ready_pods` tuple. None: `decide()` reads the pods.
    slo_series: SloSeries | None = None


class Reason(StrEnum):
    """Why the decision is what it is. Logged, exported as a metric label, printed by the CLI."""

    SCALE_UP_QUEUE = "scale_up_queue"
    SCALE_UP_KV_CACHE = "scale_up_kv_cache"
    SCALE_UP_BATCH = "scale_up_batch"
    SCALE_UP_FORECAST = "scale_up_forecast"
    SCALE_UP_SLO = "scale_up_slo"
    SCALE_UP_MIN_REPLICAS = "scale_up_min_replicas"
    SCALE_DOWN = "scale_down"
    SCALE_DOWN_MAX_REPLICAS = "scale_down_max_replicas"
    HOLD_STEADY = "hold_steady"
    HOLD_WITHIN_TOLERANCE = "hold_within_tolerance"
    HOLD_METRICS_UNHEALTHY = "hold_metrics_unhealthy"
    HOLD_SLO_BROKEN = "hold_slo_broken"
    HOLD_NO_READY_PODS = "hold_no_ready_pods"
    HOLD_CAPACITY_IN_FLIGHT = "hold_capacity_in_flight"
    HOLD_SCALE_DOWN_WINDOW = "hold_scale_down_window"
    HOLD_SCALE_DOWN_RATE = "hold_scale_down_rate"
    HOLD_SCALE_UP_LIMITED = "hold_scale_up_limited"  # more asked for, none added: the clamp says why
    HOLD_ROLLOUT = "hold_rollout"


class Clamp(StrEnum):
    """The limit that bound the decision, if any."""

    MIN_REPLICAS = "min_replicas"
    MAX_REPLICAS = "max_replicas"
    GPU_BUDGET = "gpu_budget"
    SCALE_UP_RATE = "scale_up_rate"
    SCALE_UP_WINDOW = "scale_up_window"
    SCALE_DOWN_WINDOW = "scale_down_window"
    SCALE_DOWN_RATE = "scale_down_rate"
    ROLLOUT = "rollout"
    UNHEALTHY_METRICS = "unhealthy_metrics"


@fast_init
@dataclass(frozen=True)
class DecisionValues:
    """The intermediate values of one decision, for logs, metrics and the CLI."""

    ready_replicas: int = 0
    healthy_pods: int = 0
    unhealthy_pods: dict[str, str] = field(default_factory=dict)  # pod -> SampleHealth of its worst sample
    waiting_total: float = 0.0
    running_total: float = 0.0
    kv_cache_usage_mean: float = 0.0
    saturated_pods: int = 0  # ready pods with a queue
    completed_per_second: float | None = None  # fleet throughput, when every healthy pod reports it
    arrivals_per_second: float | None = None  # throughput + d(load)/dt
    replica_throughput_per_second: float | None = None  # a saturated replica's throughput
    queue_model: str = "none"  # "rate", "batch" or "none" (no queue)
    queue_replicas: float = 0.0
    kv_replicas: float = 0.0
    batch_replicas: float = 0.0
    demand_replicas: float = 0.0
    load_now: float = 0.0
    load_slope_per_second: float = 0.0
    forecast_load: float = 0.0
    forecast_replicas: float = 0.0
    model_load_seconds: float = 0.0
    node_provision_seconds: float = 0.0
    lead_time_seconds: float = 0.0
    lead_time_learned: bool = False
    pods_in_flight: int = 0
    pods_in_flight_by_stage: dict[str, int] = field(default_factory=dict)
    in_flight_eta_seconds: float = 0.0  # latest ETA among pods in flight, from now
    planned_replicas: int | None = None
    recommendation: int = 0  # before stabilisation and limits
    stabilized: int = 0  # after the windows, before rate limits and bounds
    scale_down_window_seconds: float = 0.0  # the window in force: the configured one or the lead time
    # The SLO capacity step (see policy/slo_capacity.py); None / 0 / False when it had no data.
    slo_ttft_seconds: float = 0.0  # the TTFT bound in force (length-aware when configured)
    slo_tpot_seconds: float = 0.0
    slo_attainment_target: float = 0.0
    ttft_attainment: float | None = None  # share of the requests within the TTFT bound
    tpot_attainment: float | None = None
    prompt_tokens_per_second: float | None = None  # fleet, served
    generation_tokens_per_second: float | None = None
    capacity_prompt_tokens_per_second: float | None = None  # one replica's, learned or cold start
    capacity_generation_tokens_per_second: float | None = None
    capacity_learned: bool = False
    slo_utilisation: float | None = None  # p / Cp + g / Cg of one replica
    slo_infeasible_at_low_load: bool = False  # the SLO broke well below capacity: not learned from
    slo_slack: bool = False  # met within half the bounds: the headroom's cold-start floor waits
    headroom_ratio: float = 1.0
    headroom_horizon_seconds: float = 0.0  # the lead time the headroom covers: the next replica's
    slo_replicas: float = 0.0
    bound_signal: str = "none"  # which signal set the replicas asked for: queue, kv_cache, batch, slo, forecast, none

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_fields(cls, values: dict[str, Any]) -> DecisionValues:
        """`DecisionValues(**values)` for a dict of every field in field order, without matching
        ~50 keywords (about 2 us a call; `decide()` builds one a tick). The dict is taken over
        as the instance's own: the caller builds it for this and keeps no reference.

        Worked example: `from_fields(DecisionValues(ready_replicas=2).as_dict())` equals
        `DecisionValues(ready_replicas=2)`, field by field and in `__dict__` order.
        """
        obj = object.__new__(cls)
        object.__setattr__(obj, "__dict__", values)
        return obj


@fast_init
@dataclass(frozen=True)
class Decision:
    """The outcome of `decide()` for one target."""

    desired_replicas: int
    current_replicas: int
    reason: Reason
    clamp: Clamp | None = None
    values: DecisionValues = field(default_factory=DecisionValues)

    @property
    def direction(self) -> str:
        if self.desired_replicas > self.current_replicas:
            return "up"
        if self.desired_replicas < self.current_replicas:
            return "down"
        return "hold"


@dataclass(frozen=True)
class LeadTimeState:
    """Learned lead-time samples; serialisable so they survive a controller restart."""

    model_load_samples: Entries[float] = _NO_ENTRIES  # (observed_at, seconds), a TimeWindow
    node_provision_samples: Entries[float] = _NO_ENTRIES
    recorded_pods: tuple[str, ...] = ()  # pods whose load time was taken (bounded, newest last)
    recorded_node_pods: tuple[str, ...] = ()
    seen_unschedulable: tuple[str, ...] = ()  # pods seen waiting for a node (bounded)

    # Sets for membership tests, built once per state object (the state is immutable).
    @cached_property
    def recorded_set(self) -> frozenset[str]:
        return frozenset(self.recorded_pods)

    @cached_property
    def recorded_node_set(self) -> frozenset[str]:
        return frozenset(self.recorded_node_pods)

    @cached_property
    def seen_unschedulable_set(self) -> frozenset[str]:
        return frozenset(self.seen_unschedulable)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": 1,
            "model_load_samples": [list(s) for s in self.model_load_samples],
            "node_provision_samples": [list(s) for s in self.node_provision_samples],
            "recorded_pods": list(self.recorded_pods),
            "recorded_node_pods": list(self.recorded_node_pods),
            "seen_unschedulable": list(self.seen_unschedulable),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LeadTimeState:
        """Inverse of `to_dict`; raises ValueError on anything malformed (a list where a number
        belongs, an integer too large for a float: never another exception, which the
        controller would not take for a bad entry)."""
        return _read_state("lead-time state", cls._from_dict, data)

    @classmethod
    def _from_dict(cls, data: dict[str, Any]) -> LeadTimeState:
        if not isinstance(data, dict) or data.get("version") != 1:
            raise ValueError("lead-time state: expected a mapping with version 1")

        def samples(key: str) -> TimeWindow[float]:
            out = []
            for item in data.get(key, []):
                t, s = float(item[0]), float(item[1])
                if not (math.isfinite(t) and math.isfinite(s)) or s < 0:
                    raise ValueError(f"lead-time state: bad sample {item!r} in {key}")
                out.append((t, s))
            return TimeWindow(out)

        def names(key: str) -> tuple[str, ...]:
            return tuple(str(n) for n in data.get(key, []))

        return cls(
            model_load_samples=samples("model_load_samples"),
            node_provision_samples=samples("node_provision_samples"),
            recorded_pods=names("recorded_pods"),
            recorded_node_pods=names("recorded_node_pods"),
            seen_unschedulable=names("seen_unschedulable"),
        )


_S = TypeVar("_S")


def _read_state(what: str, read: Callable[[dict[str, Any]], _S], data: dict[str, Any]) -> _S:
    """`read(data)`, every exception malformed data can raise (a list where a number belongs,
    an integer too large for a float) turned into the one the caller handles: ValueError."""
    try:
        return read(data)
    except (TypeError, KeyError, IndexError, OverflowError, AttributeError) as exc:
        raise ValueError(f"{what}: malformed: {type(exc).__name__}: {str(exc)[:120]}") from None


def _finite(value: Any, what: str, *, positive: bool = False) -> float:
    """A number read back from persisted state: finite (and > 0 when `positive`), or ValueError."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"SLO state: {what} is not a number: {value!r}")  # noqa: TRY004 - one error for bad state
    number = float(value)
    if not math.isfinite(number) or (positive and number <= 0):
        raise ValueError(f"SLO state: bad {what}: {value!r}")
    return number


def _demand_history(raw: Any) -> list[tuple[float, float]]:
    """`SloState.demand_history` read back: [t, demand > 0] pairs in time order, or ValueError."""
    history = []
    for item in raw:
        if not isinstance(item, list | tuple) or len(item) != 2:
            raise ValueError(f"SLO state: bad demand entry {item!r}")
        history.append((_finite(item[0], "demand time"), _finite(item[1], "demand", positive=True)))
    if any(b[0] <= a[0] for a, b in pairwise(history)):
        raise ValueError("SLO state: demand history out of time order")
    return history


def _growth_moments(data: dict[str, Any]) -> tuple[float, float]:
    """(growth mean, growth variance) read back, within what demand can do, or ValueError."""
    variance = _finite(data.get("growth_variance", 0.0), "growth variance")
    mean = _finite(data.get("growth_mean", 0.0), "growth mean")
    if not 0.0 <= variance <= MAX_GROWTH_VARIANCE or abs(mean) > MAX_GROWTH_MEAN:
        raise ValueError(f"SLO state: growth mean {mean!r} or variance {variance!r} out of range (allowed: "
                         f"|mean| <= {MAX_GROWTH_MEAN:g}, variance 0 .. {MAX_GROWTH_VARIANCE:g})")
    return mean, variance


MAX_GROWTH_MEAN = 100.0
MAX_GROWTH_VARIANCE = 1e4
"""Persisted growth moments beyond these are no record of demand (a log-growth of 100 is a
factor e^100 within one lead time): refused, so the state starts cold."""
MAX_PROBE_DOUBLINGS = 16  # `SloState.probe_doublings` counts no further (the step is capped long before)


@fast_init
@dataclass(frozen=True)
class SloState:
    """What the SLO capacity step learns: serialisable so it survives a controller restart.

    The learned capacity of one replica (None until learned: the cold start is used), the cold
    start it was learned from (a changed profile or override starts over), the headroom's
    readings: fleet token demand in cold-start replicas, thinned to a few entries per lead time,
    and the exponentially weighted moments of its log-growth over one lead time; and the
    probe's slow start: the probes so far (the step doubles with each), None once it has ended.
    """

    cold_start: tuple[float, float] | None = None  # (Cp, Cg) in force when this was learned
    capacity_prompt_tokens_per_second: float | None = None
    capacity_generation_tokens_per_second: float | None = None
    demand_history: Entries[float] = _NO_ENTRIES  # (t, fleet demand / cold-start capacity)
    growth_mean: float = 0.0  # of ln(D(t) / base(t - lead time)), headroom.reference_base
    growth_variance: float = 0.0
    growth_samples: int = 0  # capped
    growth_updated_at: float | None = None
    probe_doublings: int | None = 0  # the probe's slow start: probes so far (capped); None: ended

    def learned(self, capacity: tuple[float, float]) -> SloState:
        """This state with a learned capacity (Cp, Cg)."""
        return SloState(self.cold_start, capacity[0], capacity[1], self.demand_history, self.growth_mean,
                        self.growth_variance, self.growth_samples, self.growth_updated_at, self.probe_doublings)

    def probing(self, probe_doublings: int | None) -> SloState:
        """This state with the probe's slow start at `probe_doublings`."""
        return SloState(self.cold_start, self.capacity_prompt_tokens_per_second,
                        self.capacity_generation_tokens_per_second, self.demand_history, self.growth_mean,
                        self.growth_variance, self.growth_samples, self.growth_updated_at, probe_doublings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": 1,
            "cold_start": list(self.cold_start) if self.cold_start is not None else None,
            "capacity_prompt_tokens_per_second": self.capacity_prompt_tokens_per_second,
            "capacity_generation_tokens_per_second": self.capacity_generation_tokens_per_second,
            "demand_history": [list(e) for e in self.demand_history],
            "growth_mean": self.growth_mean,
            "growth_variance": self.growth_variance,
            "growth_samples": self.growth_samples,
            "growth_updated_at": self.growth_updated_at,
            "probe_doublings": self.probe_doublings,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SloState:
        """`_from_dict`, with every other exception of malformed data (a list where a number
        belongs, an integer too large for a float) a ValueError."""
        return _read_state("SLO state", cls._from_dict, data)

    @classmethod
    def _from_dict(cls, data: dict[str, Any]) -> SloState:
        """Inverse of `to_dict`; raises ValueError on anything malformed (the caller then
        starts cold). Capacities must be positive, both set or both unset, with a cold start.
        A record without `probe_doublings` (written before the slow start) reads as 0 when it
        has learned nothing, as ended (None) when it has: its estimate is not a new one."""
        if not isinstance(data, dict) or data.get("version") != 1:
            raise ValueError("SLO state: expected a mapping with version 1")
        cold = data.get("cold_start")
        cp, cg = data.get("capacity_prompt_tokens_per_second"), data.get("capacity_generation_tokens_per_second")
        if (cp is None) != (cg is None) or (cp is not None and cold is None):
            raise ValueError("SLO state: learned capacities need each other and a cold start")
        if cold is not None and (not isinstance(cold, list | tuple) or len(cold) != 2):
            raise ValueError(f"SLO state: bad cold_start {cold!r}")
        history = _demand_history(data.get("demand_history", []))
        samples, updated = data.get("growth_samples", 0), data.get("growth_updated_at")
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
            raise ValueError(f"SLO state: bad growth_samples {samples!r}")
        # a record written before the slow start: a capacity it learned came from a controller
        # probing at the base step, which it keeps (a restart after an upgrade must not double
        # the probe on a converged estimate); nothing learned yet: the slow start begins
        doublings = data.get("probe_doublings", 0 if cp is None else None)
        if doublings is not None and (isinstance(doublings, bool) or not isinstance(doublings, int)
                                      or not 0 <= doublings <= MAX_PROBE_DOUBLINGS):
            raise ValueError(f"SLO state: bad probe_doublings {doublings!r}")
        mean, variance = _growth_moments(data)
        return cls(
            cold_start=None if cold is None else (_finite(cold[0], "cold start", positive=True),
                                                  _finite(cold[1], "cold start", positive=True)),
            capacity_prompt_tokens_per_second=None if cp is None else _finite(cp, "capacity", positive=True),
            capacity_generation_tokens_per_second=None if cg is None else _finite(cg, "capacity", positive=True),
            demand_history=TimeWindow(history),
            growth_mean=mean,
            growth_variance=variance,
            growth_samples=samples,
            growth_updated_at=None if updated is None else _finite(updated, "growth time"),
            probe_doublings=doublings,
        )


COLD_SLO_STATE = SloState()


@fast_init
@dataclass(frozen=True)
class PolicyState:
    """What `decide()` remembers between ticks for one target. Start with `PolicyState()`.

    Each history is a `TimeWindow` of (t, value) entries, oldest first; a plain tuple of pairs
    is accepted in its place (and is equal to the window with the same entries).
    """

    recommendations: Entries[int] = _NO_ENTRIES  # (t, recommendation) for the windows
    scale_up_events: Entries[int] = _NO_ENTRIES  # (t, pods added)
    scale_down_events: Entries[int] = _NO_ENTRIES  # (t, pods removed)
    load_history: Entries[float] = _NO_ENTRIES  # (t, waiting+running): trend and arrivals
    throughput_history: Entries[float] = _NO_ENTRIES  # (t, fleet requests finished per second)
    arrival_history: Entries[float] = _NO_ENTRIES  # (t, arrivals per second) for the forecast
    planned_replicas: int | None = None  # highest recommendation while pods are in flight
    lead: LeadTimeState = field(default_factory=LeadTimeState)
    slo: SloState = COLD_SLO_STATE  # the SLO capacity step's learning; persisted like `lead`
