"""The live control loop: read the world, `decide()`, act, log, repeat.

One tick reads the clock once, lists the cluster once (`KubeClient.snapshot`) and queries
Prometheus once (`PrometheusSource.fetch`), then, for every target in isolation (one failing
target never stops the others): observe (`observe.build_observation`) -> `decide()` -> plan ->
write -> settle (`actuation`) -> record. Per target and tick it writes one JSON log line with
the inputs, the intermediate values, the reason and the binding clamp, and where each policy
value not at its built-in default came from (`sources`: the ConfigMap's `defaults`, its target
entry, or an annotation on the Deployment).

The targets of a tick are the ConfigMap's `targets` plus the Deployments its `target_selector`
finds in the snapshot; each target's policy is the ConfigMap's with the Deployment's
annotations merged over it (`autoscaler.config.annotations`). A Deployment annotated
`vllm-queue-autoscaler.io/paused: "true"` gets no scale write from the tick that reads it
(action and reason `paused`); invalid annotations leave its ConfigMap policy in force and are
logged and reported as a Warning Event on the Deployment, once per distinct set of problems.

Missing data never scales down: if Prometheus cannot be read, every ready pod is absent and
the core holds; if the cluster cannot be listed, nothing is decided that tick. A Deployment an
operator scaled to 0 is left alone (autoscaling disabled, as HPA does) until scaled up again.

Every write is conditional on what this tick read (the Deployment's resourceVersion and UID,
the state ConfigMap's resourceVersion) and fenced by leader election before every try.

What the rate limits count (the last scale events) and the learned lead times survive a restart
and a failover: they are kept in the state ConfigMap (`controller/state.py`), read at start and
again whenever this replica starts leading, and a scale event is written there *before* the
scale write it stands for (a scale-down is not sent unless it was recorded), so that a crash
right after the patch cannot make the next leader forget it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from autoscaler.adapters.kubernetes import (
    Fence,
    KubeClient,
    KubeConflict,
    KubeError,
    KubeFenced,
    KubeNotFound,
    StoredState,
)
from autoscaler.adapters.kubernetes.objects import (
    ClusterSnapshot,
    DeploymentInfo,
    HPAInfo,
)
from autoscaler.adapters.prometheus import PodMetrics, PrometheusError, PrometheusSource
from autoscaler.config import AutoscalerConfig, ConfigWatcher, PrometheusSettings, TargetConfig
from autoscaler.config.annotations import MANAGED, PAUSED, TargetSettings, managed, resolve
from autoscaler.controller import deletion_cost
from autoscaler.controller.actuation import Outcome, Plan, Written, plan, settle, write
from autoscaler.controller.observe import build_observation
from autoscaler.controller.state import from_record, to_record
from autoscaler.controller.telemetry import ControllerMetrics
from autoscaler.policy import Decision, Observation, PolicyState, decide
from autoscaler.policy.limits import bounds

PrometheusFactory = Callable[[PrometheusSettings], PrometheusSource]


@dataclass(frozen=True)
class TargetOutcome:
    """What one tick did for one target."""

    namespace: str
    deployment: str
    action: str  # patched | hold | dry_run | standby | skipped_hpa | conflict | disabled | paused | error
    decision: Decision | None = None
    observation: Observation | None = None
    error: str | None = None
    sources: dict[str, str] = field(default_factory=dict)
    """The policy keys not at their built-in default -> where their value came from."""
    metrics_error: str | None = None
    """Why Prometheus could not be read this tick (the decision held on missing data), if it could not."""


def default_prometheus_factory(settings: PrometheusSettings) -> PrometheusSource:
    # the token file is re-read by the source while running (a rotated token is picked up)
    return PrometheusSource(
        settings.url,
        timeout_seconds=settings.timeout_seconds,
        bearer_token_file=settings.bearer_token_file,
        ca_file=settings.ca_file,
        insecure_skip_tls_verify=settings.insecure_skip_tls_verify,
        rate_window_seconds=settings.rate_window_seconds,
    )


START_ONLY_KEYS = ("controller.metrics_port", "controller.namespace")
"""Keys read once, when the process starts (the port it serves on; the namespace of its Lease
and state ConfigMap, unless POD_NAMESPACE names it): a live reload that changes them is
applied to everything else and says these wait for a restart."""


def _start_only(config: AutoscalerConfig) -> dict[str, object]:
    return {"controller.metrics_port": config.controller.metrics_port,
            "controller.namespace": config.controller.namespace}


def state_key(namespace: str, deployment: str) -> str:
    """The key of a target in the state ConfigMap (namespaces hold no dots, so it is unambiguous)."""
    return f"{namespace}.{deployment}"


class AlwaysLeading:
    """The fence of the only replica (no leader election): it may always write."""

    def time_left(self) -> float:
        return math.inf


class Controller:
    """Runs ticks. All I/O goes through `kube` and the Prometheus source; `clock` is read once
    per tick and that time is handed to `decide()`."""

    def __init__(
        self,
        *,
        watcher: ConfigWatcher,
        kube: KubeClient,
        metrics: ControllerMetrics | None = None,
        prometheus_factory: PrometheusFactory = default_prometheus_factory,
        dry_run: bool = False,
        clock: Callable[[], float] = lambda: time.time(),  # looked up per call (a frozen clock in tests)
        controller_namespace: str | None = None,
        fence: Fence | None = None,
        monotonic: Callable[[], float] = lambda: time.monotonic(),
    ) -> None:
        """`fence` is leader election (`LeaderElector`): a replica plans writes only while it
        has time left, and the adapter asks it again before every try of every write (patch,
        Event, state). None means this is the only replica. `clock` (wall time) is what a tick
        decides and stamps with; `monotonic` times liveness only, so that a step of the wall
        clock (an NTP correction) neither fails /healthz nor keeps a stuck loop alive."""
        self.watcher = watcher
        self._read_at_start = _start_only(watcher.current)
        self.kube = kube
        self.metrics = metrics or ControllerMetrics()
        self.dry_run = dry_run
        self._clock = clock
        self._monotonic = monotonic
        self._tick_started_mono: float | None = None
        self._prometheus_factory = prometheus_factory
        self._prometheus: PrometheusSource | None = None
        self._prometheus_settings: PrometheusSettings | None = None
        self._controller_namespace = controller_namespace
        self._fence: Fence = fence or AlwaysLeading()
        self.states: dict[tuple[str, str], PolicyState] = {}
        # The state ConfigMap as last read or written (None: to be read before any write), and
        # the entries it held when read, parsed.
        self._stored: StoredState | None = None
        self._stored_name: str | None = None  # the ConfigMap `_stored` was read from or written to
        self._records: dict[str, Any] = {}
        self._state_conflict: KubeConflict | None = None  # this tick's, if any: read again next tick
        self._led = False  # whether this replica led at the previous tick
        self._hpa_warned: set[tuple[str, str]] = set()
        self._rescale_failed: dict[tuple[str, str], str] = {}  # target -> error of the last failed patch
        # target -> the annotation problems last logged / last reported in an Event
        self._annotations_logged: dict[tuple[str, str], tuple[str, ...]] = {}
        self._annotations_reported: dict[tuple[str, str], tuple[str, ...]] = {}
        self._unlisted_warned: set[tuple[str, str]] = set()  # marked managed, not a target: warned
        self._targets: list[TargetConfig] = []  # the targets of the last tick that listed the cluster
        self._config_generation = watcher.generation
        self._config_rejected = watcher.rejected_total
        self.last_tick_started: float | None = None
        self.ticks_ok = 0
        self.log = structlog.get_logger("autoscaler")
        self.metrics.config_generation.set(watcher.generation)

    # ---- health

    def healthy(self) -> bool:
        """The loop is alive: a tick started within three tick periods (or none is due yet)."""
        if self._tick_started_mono is None:
            return True
        return self._monotonic() - self._tick_started_mono <= 3 * self.watcher.current.controller.tick_seconds + 30

    def ready(self) -> bool:
        return self.ticks_ok > 0

    @property
    def controller_namespace(self) -> str:
        return self._controller_namespace or self.watcher.current.controller.namespace

    def _leading(self) -> bool:
        return self._fence.time_left() > 0

    # ---- one tick

    def tick(self) -> list[TargetOutcome]:
        now = self._clock()  # the one clock read of this tick
        self.last_tick_started = now
        self._tick_started_mono = self._monotonic()
        self.metrics.last_tick.set(now)
        started = time.perf_counter()
        try:
            return self._tick(now)
        finally:
            self.metrics.tick_duration.observe(time.perf_counter() - started)

    def _tick(self, now: float) -> list[TargetOutcome]:
        self._reload_config()
        config = self.watcher.current
        if not config.targets and config.target_selector is None:
            # nothing is written while idle, so the state ConfigMap keeps every entry: so does
            # memory (a target put back resumes as a restarted replica would, from its entry)
            self.log.info("idle", message="no targets configured")
            self.ticks_ok += 1
            return []

        try:
            snapshot = self.kube.snapshot(config.namespaces_to_list())
        except KubeError as exc:
            self.log.error("cluster_unreadable", error=str(exc), error_type=type(exc).__name__)
            for t in config.targets:
                self.metrics.errors.labels(t.namespace, t.deployment, "kubernetes").inc()
            return [TargetOutcome(t.namespace, t.deployment, "error", error=str(exc)) for t in config.targets]

        targets = config.targets_with((d.namespace, d.name, d.labels) for d in snapshot.deployments)
        self._targets = targets
        self._forget_released({(t.namespace, t.deployment) for t in targets})
        self._warn_unlisted(snapshot, targets)
        if not targets:
            self.log.info("idle", message="no Deployment matches target_selector",
                          selector=config.target_selector.to_string() if config.target_selector else None)
            self.ticks_ok += 1
            return []
        metrics, metrics_error = self._fetch_metrics(config, targets, now)
        leading = self._leading()
        if leading and not self._led:
            self._stored = None  # just started leading: the previous leader may have written it
        self._led = leading
        self._state_conflict = None
        self._load_state()
        outcomes = []
        for target in targets:
            try:
                outcomes.append(self._target(config, target, snapshot, metrics, now))
            except Exception as exc:  # isolate targets: a surprise in one never stops the others
                log = self.log.bind(namespace=target.namespace, deployment=target.deployment)
                log.exception("target_crashed")
                outcomes.append(
                    self._failed(log, target.namespace, target.deployment, "internal", str(exc), type(exc).__name__)
                )
        self._persist_state()
        self.ticks_ok += 1
        if metrics_error is not None:  # every pod read as absent: say why where a decision read them
            outcomes = [dataclasses.replace(o, metrics_error=metrics_error) if o.decision is not None else o
                        for o in outcomes]
        return outcomes

    def _reload_config(self) -> None:
        changed = self.watcher.poll()
        if changed:
            self.metrics.config_reloads.labels("applied").inc()
            self.metrics.config_generation.set(self.watcher.generation)
            self.log.info("config_reloaded", generation=self.watcher.generation)
            changed_keys = sorted(k for k, v in _start_only(self.watcher.current).items() if v != self._read_at_start[k])
            if changed_keys:
                self.log.warning("config_restart_required", keys=changed_keys,
                                 message="read at start only: in force again after a restart")
        if self.watcher.rejected_total != self._config_rejected:
            self._config_rejected = self.watcher.rejected_total
            self.metrics.config_reloads.labels("rejected").inc()
            error = self.watcher.last_error
            self.log.error(
                "config_rejected",
                problems=list(error.problems) if error else [],
                generation_in_force=self.watcher.generation,
            )

    def _fetch_metrics(
        self, config: AutoscalerConfig, targets: list[TargetConfig], now: float
    ) -> tuple[Mapping[tuple[str, str], PodMetrics] | None, str | None]:
        """(the pods' metrics, None), or (None, why Prometheus could not be read): every target
        then decides on missing data, which holds."""
        try:
            source = self._source(config.controller.prometheus)
            return source.fetch(sorted({t.namespace for t in targets}), now=now,
                                budget_seconds=config.controller.tick_seconds), None
        except (PrometheusError, OSError, ValueError, TypeError) as exc:  # bad token file, TLS options...
            self.log.error("metrics_unreadable", error=str(exc), error_type=type(exc).__name__)
            for t in targets:
                self.metrics.errors.labels(t.namespace, t.deployment, "prometheus").inc()
            return None, f"Prometheus unreadable: {' '.join(str(exc).split())[:300]}"

    def _source(self, settings: PrometheusSettings) -> PrometheusSource:
        if self._prometheus is None or settings != self._prometheus_settings:
            if self._prometheus is not None:
                self._prometheus.close()
            self._prometheus = self._prometheus_factory(settings)
            self._prometheus_settings = settings
        return self._prometheus

    def _target(
        self,
        config: AutoscalerConfig,
        target: Any,
        snapshot: ClusterSnapshot,
        metrics: Mapping[tuple[str, str], PodMetrics] | None,
        now: float,
    ) -> TargetOutcome:
        ns, name = target.namespace, target.deployment
        key = (ns, name)
        log = self.log.bind(namespace=ns, deployment=name)
        deployment = snapshot.deployment(ns, name)
        if deployment is None:
            return self._failed(log, ns, name, "target", f"Deployment {ns}/{name} not found")
        settings = resolve(config, target, deployment.annotations)
        sources = settings.overridden()
        log = log.bind(sources=sources)
        self._report_annotations(log, deployment, settings)
        policy = settings.policy
        low, high, _ = bounds(policy)
        self.metrics.min_replicas.labels(ns, name).set(low)
        self.metrics.max_replicas.labels(ns, name).set(high)
        self.metrics.paused.labels(ns, name).set(1 if settings.paused else 0)
        if settings.paused:
            # the team's lever, honoured from the tick that reads it: nothing decided, nothing written
            self.metrics.current.labels(ns, name).set(deployment.spec_replicas)
            log.info("decision", action="paused", current=deployment.spec_replicas,
                     desired=deployment.spec_replicas, reason="paused",
                     message=f'{PAUSED} is "true": no scale write until it is removed or set to "false"')
            return TargetOutcome(ns, name, "paused", sources=sources)
        if deployment.spec_replicas == 0 and policy.min_replicas > 0:
            # HPA's rule: replicas 0 means autoscaling is disabled for this Deployment (an
            # operator parked it); it is left alone until someone scales it up again
            self.metrics.current.labels(ns, name).set(0)
            log.info("decision", action="disabled", current=0, desired=0, reason="scaled_to_zero",
                     message="replicas is 0: autoscaling disabled until the Deployment is scaled up")
            return TargetOutcome(ns, name, "disabled", sources=sources)
        observation = build_observation(snapshot, deployment, metrics)
        state = self.states.get(key) or self._initial_state(ns, name)
        decision, new_state = decide(policy, observation, state, now)

        hpa = snapshot.hpa_for(deployment)
        leading = self._leading()
        self.metrics.leader.set(1 if leading else 0)
        planned = plan(ns, name, current=observation.spec_replicas, desired=decision.desired_replicas,
                       dry_run=self.dry_run, leading=leading, hpa=hpa.name if hpa else None,
                       resource_version=deployment.resource_version, uid=deployment.uid,
                       marking=deletion_cost.choose(snapshot.pods_of(deployment), observation,
                                                    decision.desired_replicas, now, policy.stale_after_seconds)
                       if decision.desired_replicas < observation.spec_replicas else None)
        written = self._record_ahead(log, planned, key, new_state) or write(self.kube, planned, fence=self._fence)
        self.states[key] = settle(new_state, state, written.outcome)
        self.metrics.record_decision(ns, name, decision)
        outcome = self._record(log, planned, written, deployment, hpa, decision, observation)
        return dataclasses.replace(outcome, sources=sources)

    def _report_annotations(self, log: Any, deployment: DeploymentInfo, settings: TargetSettings) -> None:
        """Invalid annotations: logged, and a Warning Event on the Deployment, once per distinct
        set of problems (an Event is a write: only by the leader, never in a dry run)."""
        key = deployment.key
        problems = settings.problems
        if not problems:
            self._annotations_logged.pop(key, None)
            self._annotations_reported.pop(key, None)
            return
        if self._annotations_logged.get(key) != problems:
            self._annotations_logged[key] = problems
            log.warning("annotations_invalid", problems=list(problems),
                        message="ignored: the ConfigMap's values stay in force for this target")
        if self.dry_run or not self._leading() or self._annotations_reported.get(key) == problems:
            return
        self._annotations_reported[key] = problems
        self._event(deployment.namespace, deployment, "InvalidAnnotations", "Warning",
                    "ignored, the ConfigMap's values stay in force: " + "; ".join(problems))

    def _warn_unlisted(self, snapshot: ClusterSnapshot, targets: list[TargetConfig]) -> None:
        """A Deployment marked `vllm-queue-autoscaler.io/managed: "true"` that is no target
        (not listed, not selected) expects scaling it does not get: warned once per process (a
        log line, and a Warning Event when leading and not in a dry run)."""
        keys = {t.key for t in targets}
        for dep in snapshot.deployments:
            if dep.key in keys or dep.key in self._unlisted_warned or not managed(dep.annotations):
                continue
            self.log.warning("managed_not_a_target", namespace=dep.namespace, deployment=dep.name,
                             message=f"annotated {MANAGED}, but no targets entry lists it and no target_selector "
                             "finds it: it is not autoscaled")
            self._unlisted_warned.add(dep.key)
            if self.dry_run or not self._leading():
                continue
            self._event(dep.namespace, dep, "NotATarget", "Warning",
                        f"annotated {MANAGED}: \"true\", but vllm-queue-autoscaler's ConfigMap neither lists it "
                        "under targets nor selects it with target_selector: it is not autoscaled")

    def _record(
        self,
        log: Any,
        planned: Plan,
        written: Written,
        deployment: DeploymentInfo,
        hpa: HPAInfo | None,
        decision: Decision,
        observation: Observation,
    ) -> TargetOutcome:
        """Events, metrics and the decision log line of what `write` did."""
        ns, name = planned.namespace, planned.deployment
        key = (ns, name)
        outcome, exc = written.outcome, written.error
        if outcome is Outcome.FENCED:
            # fenced out of this write, not necessarily deposed (a Retry-After longer than the time
            # the fence has left fences a write out while the replica still leads): the gauge is
            # the tick's reading of the fence, set again at the next tick
            log.warning("decision", action=outcome.action, current=decision.current_replicas,
                        desired=decision.desired_replicas, reason=decision.reason.value, fenced=True)
            return TargetOutcome(ns, name, outcome.action, decision=decision, observation=observation)
        if outcome is Outcome.CONFLICT:
            # the Deployment changed since this tick read it (an operator, a rollout, a
            # re-creation): nothing written, nothing re-sent; the next tick reads and decides again
            self.metrics.errors.labels(ns, name, "conflict").inc()
            log.warning("decision", action=outcome.action, current=decision.current_replicas,
                        desired=decision.desired_replicas, reason=decision.reason.value,
                        error=str(exc), message="the Deployment changed since it was read: decided again next tick")
            return TargetOutcome(ns, name, outcome.action, decision=decision, observation=observation,
                                 error=str(exc))
        if exc is not None:
            # a Warning on the Deployment, once per distinct error (not every tick); none
            # when the Deployment is gone
            if not isinstance(exc, KubeNotFound) and self._rescale_failed.get(key) != str(exc):
                self._rescale_failed[key] = str(exc)
                self._event(
                    ns, deployment, "FailedRescale", "Warning",
                    f"{planned.current} -> {planned.desired} failed: {exc}",
                )
            return self._failed(log, ns, name, "kubernetes", str(exc), type(exc).__name__, decision)
        if outcome is Outcome.SKIPPED_HPA and hpa is not None and key not in self._hpa_warned:
            self._event(
                ns, deployment, "HPAConflict", "Warning",
                f"HorizontalPodAutoscaler {hpa.name} also scales this Deployment; "
                "vllm-queue-autoscaler will not act on it (remove the HPA, or run with --dry-run to compare)",
            )
            self._hpa_warned.add(key)
        if outcome is Outcome.PATCHED:
            self._rescale_failed.pop(key, None)
        if outcome is Outcome.PATCHED:
            self.metrics.scales.labels(ns, name, planned.direction).inc()
            self._event(
                ns, deployment, "ScaledUp" if planned.direction == "up" else "ScaledDown", "Normal",
                _event_message(decision),
            )
        log.info(
            "decision",
            action=outcome.action,
            current=decision.current_replicas,
            desired=decision.desired_replicas,
            reason=decision.reason.value,
            clamp=decision.clamp.value if decision.clamp else None,
            dry_run=self.dry_run,
            hpa=hpa.name if hpa else None,
            rollout=observation.rollout_in_progress,
            free_gpus=observation.free_gpus,
            config_generation=self.watcher.generation,
            **decision.values.as_dict(),
        )
        return TargetOutcome(ns, name, outcome.action, decision=decision, observation=observation)

    def _failed(
        self,
        log: Any,
        ns: str,
        name: str,
        kind: str,
        error: str,
        error_type: str = "LookupError",
        decision: Decision | None = None,
    ) -> TargetOutcome:
        self.metrics.errors.labels(ns, name, kind).inc()
        log.error(
            "target_failed",
            error=error,
            error_type=error_type,
            desired=decision.desired_replicas if decision else None,
            reason=decision.reason.value if decision else None,
        )
        return TargetOutcome(ns, name, "error", decision=decision, error=error)

    def _event(self, ns: str, deployment: Any, reason: str, type_: str, message: str) -> None:
        try:
            self.kube.emit_event(ns, deployment, reason, message, type_=type_, fence=self._fence)
        except KubeError as exc:  # events are informational
            self.log.warning("event_failed", namespace=ns, reason=reason, error=str(exc))

    # ---- what survives a restart or a failover, kept in a ConfigMap of the controller's namespace

    def _load_state(self) -> None:
        """Read the state ConfigMap unless it is known (read or written since this replica last
        started leading); fold what it keeps into the states in memory. A replica that cannot
        read it keeps trying, and never writes it nor scales down before it has."""
        name = self.watcher.current.controller.state_configmap
        if self._stored is not None and self._stored_name == name:
            return
        # what is held was read from another ConfigMap (a reload renamed it): it counts for the new
        # one only once the new one is read, and is never written back on the old one's version
        self._stored = None
        try:
            stored = self.kube.read_state(self.controller_namespace, name)
        except KubeError as exc:
            self.log.warning("state_unreadable", configmap=name, error=str(exc))
            return
        records: dict[str, Any] = {}
        for key, raw in stored.data.items():
            try:
                records[key] = json.loads(raw)
                from_record(records[key])  # check it whole
            except (ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError) as exc:
                records.pop(key, None)
                self.log.warning("state_entry_ignored", key=key, error=str(exc))
        for (ns, dep), state in self.states.items():
            record = records.get(state_key(ns, dep))
            if record is not None:
                self.states[(ns, dep)] = from_record(record, state)
        self._records = records
        self._stored, self._stored_name = stored, name

    def _forget_released(self, keys: set[tuple[str, str]]) -> None:
        """What this replica remembers of targets no longer configured or selected: dropped, as
        their state ConfigMap entries are (`_state_data`). A target added again starts as a
        restarted replica would, not from its old scale events, windows and learned capacity."""
        for memo in (self.states, self._rescale_failed, self._annotations_logged, self._annotations_reported):
            for key in [k for k in memo if k not in keys]:
                del memo[key]
        self._hpa_warned &= keys
        names = {state_key(*key) for key in keys}
        self._records = {name: record for name, record in self._records.items() if name in names}

    def _initial_state(self, ns: str, name: str) -> PolicyState:
        record = self._records.get(state_key(ns, name))
        return from_record(record) if record is not None else PolicyState()

    def _state_data(self, override: Mapping[tuple[str, str], PolicyState] | None = None) -> dict[str, str]:
        """What the state ConfigMap should hold: one entry per target of this tick (entries of
        targets no longer configured or selected are dropped), this replica's state where it has one
        (`override` first), else what was stored."""
        stored = self._stored.data if self._stored is not None else {}
        data: dict[str, str] = {}
        for target in self._targets:
            key = (target.namespace, target.deployment)
            name = state_key(*key)
            state = (override or {}).get(key) or self.states.get(key)
            if state is not None:
                data[name] = json.dumps(to_record(state), sort_keys=True, separators=(",", ":"))
            elif name in stored:
                data[name] = stored[name]
        return data

    def _write_state(self, data: dict[str, str]) -> KubeError | None:
        """Write `data` if it differs from what is stored, conditionally on what was read; the
        error, if any (a conflict: read it again next tick)."""
        assert self._stored is not None
        if data == self._stored.data:
            return None
        name = self.watcher.current.controller.state_configmap
        try:
            self._stored = self.kube.write_state(self.controller_namespace, name, data, previous=self._stored,
                                                 fence=self._fence)
        except KubeConflict as exc:
            self.log.warning("state_conflict", configmap=name, error=str(exc))
            self._stored, self._state_conflict = None, exc
            return exc
        except KubeNotFound as exc:  # deleted since it was read: read it again (and create it) next tick
            self.log.warning("state_gone", configmap=name, error=str(exc))
            self._stored = None
            return exc
        except KubeError as exc:
            self.log.warning("state_unwritable", configmap=name, error=str(exc))
            return exc
        return None

    def _record_ahead(self, log: Any, planned: Plan, key: tuple[str, str], new_state: PolicyState) -> Written | None:
        """Before a scale write: record the scale event it makes in the state ConfigMap, so that
        no restart or failover can forget it. None when the write may go ahead; else what
        stands instead. A scale-down whose event could not be recorded is not sent (holding is
        safe); a scale-up is, unless the state changed under this replica (a conflict: it
        reads it again and decides again next tick)."""
        if planned.skip is not None:
            return None
        name = self.watcher.current.controller.state_configmap
        if self._stored is None and self._state_conflict is not None:
            # another replica wrote it during this tick: what this decision counted may be stale
            return Written(Outcome.CONFLICT, self._state_conflict)
        if self._stored is None:
            error: KubeError | None = KubeError(f"the state ConfigMap {self.controller_namespace}/{name} could not "
                                                "be read: the scale events the limits count are unknown",
                                                verb="get", resource="configmaps")
        else:
            error = self._write_state(self._state_data({key: new_state}))
        if error is None:
            return None
        if isinstance(error, KubeConflict):
            return Written(Outcome.CONFLICT, error)
        if isinstance(error, KubeFenced):
            return Written(Outcome.FENCED, error)
        if planned.desired < planned.current:
            return Written(Outcome.FAILED, error)
        log.warning("scale_event_unrecorded", error=str(error), current=planned.current, desired=planned.desired)
        return None

    def _persist_state(self) -> None:
        if self._stored is None or self.dry_run or not self._leading():
            return
        self._write_state(self._state_data())

    def close(self) -> None:
        if self._prometheus is not None:
            self._prometheus.close()


def _event_message(decision: Decision) -> str:
    v = decision.values
    return (
        f"{decision.current_replicas} -> {decision.desired_replicas}: {decision.reason.value}"
        + (f" (limited by {decision.clamp.value})" if decision.clamp else "")
        + f"; queue {v.queue_replicas:.1f} / KV {v.kv_replicas:.1f} / forecast {v.forecast_replicas:.1f} replicas,"
        f" {v.waiting_total:.0f} waiting, lead time {v.lead_time_seconds:.0f} s, {v.pods_in_flight} pods in flight"
    )


def run_forever(controller: Controller, stop: threading.Event, once: bool = False) -> None:
    """Tick every `controller.tick_seconds` until `stop` is set. A tick in progress always
    finishes (no half-done patch); the wait between ticks ends at once on stop."""
    while not stop.is_set():
        started = time.monotonic()
        try:
            controller.tick()
        except Exception as exc:  # a bug must not kill the loop; /healthz reports a stall
            controller.log.exception("tick_failed", error=str(exc))
        if once:
            return
        period = controller.watcher.current.controller.tick_seconds
        stop.wait(max(0.0, period - (time.monotonic() - started)))
