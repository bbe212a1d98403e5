"""Open-loop replay: recorded observations, tick by tick, through a policy (an
`ObservationPolicy`, `autoscaler.baselines.interface`: the same adapter the simulator drives).

Each recorded step becomes the `Observation` the live loop would have built at that instant
(`observation_of`), and goes through the policy with the step's time as `now`. Open loop: the
recorded spec replicas are "current" every tick, whatever the policy decided before; the
policy's own state (windows, histories, learned lead times) carries over from tick to tick
as in the live loop. The replica count the recorded controller chose at step k is the spec
at step k + 1: that is what each decision is compared with.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final

from autoscaler.baselines.hpa import HpaQueue, parse_baseline
from autoscaler.baselines.interface import ObservationPolicy
from autoscaler.baselines.queue_lead import QueueLead
from autoscaler.config import AutoscalerConfig, load_config_file
from autoscaler.policy import Observation, PodInFlight, PodStartup, ReadyPod
from autoscaler.policy.slo_series import sum_slo_series
from autoscaler.policy.types import MetricSample, fast_init
from autoscaler.replay.format import Recording, RecordingError, Step, no_gc

_STARTUPS: dict[tuple[float, float | None, float | None], PodStartup] = {}  # immutable values, shared


def _new_startup(created: float, scheduled: float | None, ready_at: float | None) -> PodStartup:
    if len(_STARTUPS) > 100_000:
        _STARTUPS.clear()
    startup = _STARTUPS[created, scheduled, ready_at] = PodStartup(created, scheduled, ready_at)
    return startup


_READY_POD_FIELDS: Final = ("name", "waiting", "running", "kv_cache_usage", "startup", "completed_per_second",
                             "prompt_tokens_per_second", "generation_tokens_per_second", "ttft", "tpot", "queue_time")


def _ready_pod_fast(name: Any, waiting: Any, running: Any, kv: Any, startup: Any, completed: Any, prompt: Any,
                    generation: Any, ttft: Any, tpot: Any, queue_time: Any, _new: Any = object.__new__,
                    _cls: Any = ReadyPod) -> ReadyPod:
    """`ReadyPod(...)` of these fields, the same instance (type, fields, frozen), in about half the
    time: its instance dict filled at once instead of eleven `object.__setattr__` (~0.1 us each),
    790,000 pods a month of replay."""
    pod = _new(_cls)
    pod.__dict__.update(name=name, waiting=waiting, running=running, kv_cache_usage=kv, startup=startup,
                        completed_per_second=completed, prompt_tokens_per_second=prompt,
                        generation_tokens_per_second=generation, ttft=ttft, tpot=tpot, queue_time=queue_time)
    result: ReadyPod = pod
    return result


def _ready_pod_builder() -> Callable[..., ReadyPod]:
    """`_ready_pod_fast` where it builds what `ReadyPod` builds (a plain frozen dataclass of these
    fields in this order, no `__post_init__`, checked on a probe), else `ReadyPod` itself (e.g. a
    class compiled to a native one, which has no instance dict and a fast constructor anyway)."""
    probe = ("p", MetricSample(1.0, 2.0), None, MetricSample(0.5, 2.0), PodStartup(1.0), None, None, None, None,
             None, None)
    try:
        same = (
            tuple(f.name for f in fields(ReadyPod)) == _READY_POD_FIELDS
            and not hasattr(ReadyPod, "__post_init__")
            and "__slots__" not in ReadyPod.__dict__
            and vars(_ready_pod_fast(*probe)) == vars(ReadyPod(*probe))
            and type(_ready_pod_fast(*probe)) is ReadyPod
        )
    except (TypeError, AttributeError):
        same = False
    return _ready_pod_fast if same else ReadyPod


_new_ready_pod: Final = _ready_pod_builder()


def _observe(step: Step, free_gpus: int | None) -> tuple[Observation, float]:
    """The `Observation` of one recorded step and the waiting requests on its ready pods."""
    ready: list[ReadyPod] = []
    flight: list[PodInFlight] = []
    waiting = 0.0
    startups = _STARTUPS
    new_ready_pod = _new_ready_pod
    for name, pod_ready, stage, w, r, kv, _, c, created, scheduled, ready_at, pt, gt, ttft, tpot, qt in step.pods:
        startup: PodStartup | None = None
        if created is not None:  # a dict hit inline: ~5 pods a step, 172,800 steps a month
            startup = startups.get((created, scheduled, ready_at)) or _new_startup(created, scheduled, ready_at)
        if pod_ready:
            ready.append(new_ready_pod(name, w, r, kv, startup, c, pt, gt, ttft, tpot, qt))
            if w is not None:
                waiting += w.value
        elif stage is not None and startup is not None:
            flight.append(PodInFlight(name, stage, startup))
    spec = step.spec if step.spec is not None else len(ready)
    pods = tuple(ready)  # the recording keeps pods sorted by name, like the live loop
    observation = Observation(  # positional, in field order: ~0.3 us less a tick than keywords
        spec,  # spec_replicas
        pods,  # ready_pods
        tuple(flight),  # pods_in_flight
        free_gpus,
        step.rollout,  # rollout_in_progress
        sum_slo_series(pods),  # slo_series: summed once, as `build_observation` does
    )
    return observation, waiting


def observation_of(step: Step, free_gpus: int | None = None) -> Observation:
    """The `Observation` of one recorded step (what `observe.build_observation` builds live)."""
    return _observe(step, free_gpus)[0]


@fast_init
@dataclass(frozen=True)
class Tick:
    t: float
    current: int  # recorded spec replicas at this step
    recorded_next: int | None  # recorded spec at the next step: what actually ran next
    desired: int
    reason: str
    clamp: str | None
    ready: int
    waiting_total: float

    @property
    def differs(self) -> bool:
        return self.recorded_next is not None and self.desired != self.recorded_next


def load_policy(spec: str, namespace: str, deployment: str) -> ObservationPolicy:
    """A config file (its target NS/NAME's effective PolicyParams) or a baseline name
    (`hpa-queue[:target=5,min=1,max=10]`). Raises RecordingError with a one-line message."""
    try:
        baseline = parse_baseline(spec)
    except ValueError as exc:
        raise RecordingError(str(exc)) from None
    if baseline is not None:
        return HpaQueue(baseline, name=spec)
    from autoscaler.config import ConfigError

    try:
        config: AutoscalerConfig = load_config_file(spec)
    except ConfigError as exc:
        problems = "; ".join(exc.problems) if getattr(exc, "problems", None) else str(exc)
        raise RecordingError(f"{spec}: invalid config: {problems}") from None
    except OSError as exc:
        raise RecordingError(f"{spec}: cannot read config: {exc.strerror or exc}") from None
    target = config.find_target(namespace, deployment)
    if target is None:
        known = ", ".join(f"{t.namespace}/{t.deployment}" for t in config.targets) or "none"
        raise RecordingError(f"{spec}: no target {namespace}/{deployment} in this config (targets: {known})")
    return QueueLead(config.policy_for(target), name=spec)


@dataclass
class Replay:
    policy: str
    ticks: list[Tick] = field(default_factory=list)

    def summary(self, step_seconds: float, gpus_per_replica: int) -> dict[str, Any]:
        n = len(self.ticks)
        hours = step_seconds / 3600.0
        desired_hours, recorded_hours = self._replica_hours(step_seconds)
        return {
            "policy": self.policy,
            "ticks": n,
            "ticks_differing": sum(1 for t in self.ticks if t.differs),
            "scale_actions": sum(1 for t in self.ticks if t.desired != t.current),
            "scale_ups": sum(1 for t in self.ticks if t.desired > t.current),
            "scale_downs": sum(1 for t in self.ticks if t.desired < t.current),
            "recorded_scale_actions": sum(1 for t in self.ticks if t.recorded_next is not None and t.recorded_next != t.current),
            # open loop: the replicas asked for, held for one step (not what a closed loop would run)
            "desired_gpu_hours": desired_hours * gpus_per_replica,
            "recorded_gpu_hours": recorded_hours * gpus_per_replica,
            "max_desired": max((t.desired for t in self.ticks), default=0),
            "reasons": _count(t.reason for t in self.ticks),
        }


    def _replica_hours(self, step_seconds: float) -> tuple[float, float]:
        """(desired, recorded) replica-hours: each tick's replicas held until the next tick, the
        last for one step. A recording without gaps: the replicas summed times the step. One
        with gaps (a Prometheus export across a scrape outage) holds a tick's replicas over
        the gap after it, as a controller holds on missing data, instead of dropping the gap.

        Worked example: ticks at 0, 15, 60 (a gap) with desired 2, 3, 4, step 15 s: (2 x 15 +
        3 x 45 + 4 x 15) / 3600 = 0.0625 replica-hours, not (2 + 3 + 4) x 15 / 3600 = 0.0375.
        """
        ticks = self.ticks
        spans = [b.t - a.t for a, b in zip(ticks, ticks[1:])] + [step_seconds] if ticks else []
        if all(span == step_seconds for span in spans):
            hours = step_seconds / 3600.0
            return sum(t.desired for t in ticks) * hours, sum(t.current for t in ticks) * hours
        return (sum(t.desired * span for t, span in zip(ticks, spans)) / 3600.0,
                sum(t.current * span for t, span in zip(ticks, spans)) / 3600.0)


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def check_series(recording: Recording, policy: ObservationPolicy) -> None:
    """Refuse a recording that lacks a series the policy needs (named in the message)."""
    steps = recording.steps
    if not steps:
        raise RecordingError(f"{recording.header.target}: the recording has no steps")
    if all(not s.pods for s in steps):
        raise RecordingError("the recording has no pod at any step: series vllm:num_requests_waiting missing")
    names = {"waiting": "vllm:num_requests_waiting", "running": "vllm:num_requests_running",
             "kv": "vllm:kv_cache_usage_perc (or vllm:gpu_cache_usage_perc)"}
    for key in policy.needs:
        if not any(getattr(p, key) is not None for s in steps for p in s.pods):
            raise RecordingError(f"the recording has no series {names[key]}, which policy {policy.name} needs")


def replay(
    recording: Recording,
    policy: ObservationPolicy,
    *,
    free_gpus: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> Replay:
    """Run the policy over every recorded step (open loop)."""
    check_series(recording, policy)
    with no_gc():
        return _replay(recording, policy, free_gpus, progress)


def _replay(
    recording: Recording, policy: ObservationPolicy, free_gpus: int | None, progress: Callable[[int], None] | None
) -> Replay:
    out = Replay(policy=policy.name)
    append_tick = out.ticks.append
    steps: Sequence[Step] = recording.steps
    ran_next: list[int | None] = [s.spec for s in steps[1:]]
    ran_next.append(None)
    for i, (step, nxt) in enumerate(zip(steps, ran_next)):
        obs, waiting = _observe(step, free_gpus)
        desired, reason, clamp = policy(obs, step.t)
        append_tick(Tick(step.t, obs.spec_replicas, nxt, desired, reason, clamp, len(obs.ready_pods), waiting))
        if progress is not None and i % 1000 == 999:
            progress(1000)
    if progress is not None:
        progress(len(steps) % 1000)
    return out
