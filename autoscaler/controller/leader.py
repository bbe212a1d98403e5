"""Leader election on a coordination.k8s.io/v1 Lease, fenced.

Two controller replicas run; both tick (their caches and learned state stay warm, and both serve
/healthz), but only the leader patches. The algorithm is client-go's `leaderelection`:

* the Lease names a holder and when it last renewed; the holder renews every
  `retry_period_seconds`;
* another replica takes over only after it has seen the Lease *unchanged* for
  `lease_duration_seconds` by its own clock (never comparing its clock with the holder's
  renewTime, so clock skew between nodes cannot cause two leaders);
* every write carries the resourceVersion it read: of two replicas racing for an expired
  Lease, one gets 409 and stays a follower.

Fencing: the leader acts only while its last successful renewal is younger than
`renew_deadline_seconds`, which is shorter than the lease duration. A leader cut off from the
API server therefore stops patching before anyone else can take the Lease over.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from autoscaler.adapters.kubernetes import KubeClient, KubeConflict, KubeError


def micro_time(ts: float) -> str:
    """A Kubernetes MicroTime (RFC 3339 with microseconds): renewals within one second differ."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def default_identity() -> str:
    """POD_NAME from the downward API, else host name and process id."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class LeaseSettings:
    namespace: str
    name: str = "vllm-queue-autoscaler"
    identity: str = ""
    lease_duration_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_period_seconds: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period_seconds < self.renew_deadline_seconds < self.lease_duration_seconds:
            raise ValueError(
                "leader election needs 0 < retry_period_seconds < renew_deadline_seconds < lease_duration_seconds, "
                f"got {self.retry_period_seconds}, {self.renew_deadline_seconds}, {self.lease_duration_seconds}"
            )


class LeaderElector:
    """One replica's side of the election. `step()` is one attempt to acquire or renew;
    `run(stop)` repeats it every retry period in a thread. `is_leader()` is the fence."""

    def __init__(
        self,
        kube: KubeClient,
        settings: LeaseSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        """`clock` times the lease (monotonic); `wall_clock` only stamps renewTime/acquireTime
        for humans reading the Lease."""
        self.kube = kube
        self.settings = settings
        self.identity = settings.identity or default_identity()
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._last_renew: float | None = None  # our clock, last successful write as holder
        self._observed: tuple[Any, ...] | None = None  # the Lease record last seen
        self._observed_at = 0.0  # our clock, when it last changed
        self.transitions = 0
        self.log = structlog.get_logger("autoscaler.leader").bind(identity=self.identity, lease=settings.name)

    # ---- the fence

    def is_leader(self) -> bool:
        with self._lock:
            return self._fenced_in(self._clock())

    def _fenced_in(self, now: float) -> bool:
        return self._last_renew is not None and now - self._last_renew < self.settings.renew_deadline_seconds

    # ---- one attempt

    def step(self) -> bool:
        """Try to acquire or renew the Lease once; returns whether this replica may act."""
        now = self._clock()
        s = self.settings
        try:
            lease = self.kube.read_lease(s.namespace, s.name)
            if lease is None:
                self.kube.create_lease(s.namespace, self._body(now, None, acquire=True, transitions=0))
                return self._won(now, "acquired")
            spec = lease.get("spec") or {}
            meta = lease.get("metadata") or {}
            holder = spec.get("holderIdentity") or ""
            record = (holder, spec.get("renewTime"), spec.get("leaseDurationSeconds"), meta.get("resourceVersion"))
            if record != self._observed:
                self._observed, self._observed_at = record, now
            duration = float(spec.get("leaseDurationSeconds") or s.lease_duration_seconds)
            if holder and holder != self.identity and now - self._observed_at < duration:
                return self._lost(now, holder)
            ours = holder == self.identity
            transitions = int(spec.get("leaseTransitions") or 0) + (0 if ours else 1)
            body = self._body(now, lease, acquire=not ours, transitions=transitions)
            self.kube.replace_lease(s.namespace, s.name, body)
            return self._won(now, "renewed" if ours else "took_over")
        except KubeConflict:
            # another replica wrote first: re-read next time, act only while still fenced in
            return self._keep(now)
        except KubeError as exc:
            self.log.warning("lease_renew_failed", error=str(exc))
            return self._keep(now)

    def _body(self, now: float, lease: dict[str, Any] | None, *, acquire: bool, transitions: int) -> dict[str, Any]:
        s = self.settings
        stamp = micro_time(self._wall_clock())
        spec: dict[str, Any] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(s.lease_duration_seconds),
            "renewTime": stamp,
            "leaseTransitions": transitions,
        }
        old_spec = (lease or {}).get("spec") or {}
        spec["acquireTime"] = stamp if acquire or not old_spec.get("acquireTime") else old_spec["acquireTime"]
        metadata: dict[str, Any] = {"name": s.name, "namespace": s.namespace}
        if lease is not None:
            metadata["resourceVersion"] = (lease.get("metadata") or {}).get("resourceVersion")
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}

    def _won(self, now: float, how: str) -> bool:
        with self._lock:
            was = self._fenced_in(now)
            self._last_renew = now
        if not was:
            self.transitions += 1
            self.log.info("leading", how=how)
        return True

    def _lost(self, now: float, holder: str) -> bool:
        with self._lock:
            was = self._last_renew is not None
            self._last_renew = None
        if was:
            self.log.warning("lost_lease", holder=holder)
        return False

    def _keep(self, now: float) -> bool:
        with self._lock:
            leading = self._fenced_in(now)
            if not leading and self._last_renew is not None:
                self._last_renew = None
                self.log.warning("fenced_out", reason="no renewal within the renew deadline")
        return leading

    # ---- lifecycle

    def release(self) -> None:
        """On a clean stop: hand the Lease back so a follower takes over at once."""
        if not self.is_leader():
            return
        s = self.settings
        try:
            lease = self.kube.read_lease(s.namespace, s.name)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            body = self._body(self._clock(), lease, acquire=False, transitions=int(
                (lease.get("spec") or {}).get("leaseTransitions") or 0))
            body["spec"]["holderIdentity"] = ""
            body["spec"]["leaseDurationSeconds"] = 1
            self.kube.replace_lease(s.namespace, s.name, body)
            self.log.info("released")
        except KubeError as exc:
            self.log.warning("release_failed", error=str(exc))
        finally:
            with self._lock:
                self._last_renew = None

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.step()
            stop.wait(self.settings.retry_period_seconds)

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name="leader-election", daemon=True)
        thread.start()
        return thread
