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

Stricter than client-go in two places, so that the fence below holds when the Lease is
deleted by hand (a common way to force a failover) or written by another replica:

* a 409 or 404 on this replica's own Lease write ends its leadership at once (client-go acts
  on until its renew deadline);
* a replica that finds no Lease creates one at once only when the holder it last saw was
  itself or nobody; after seeing another holder it waits until that holder's record has not
  changed for a lease duration, when its fence must have closed (`_other_holder_may_act`).
  A replica that never saw the Lease creates it at once, as client-go does.

Timestamps, all on this replica's monotonic clock: a renewal counts from *before* its GET
(the earliest moment the record it writes can be seen), an observation of another holder's
record from *after* the GET returns (the latest moment it can have been written). Both err
on the safe side: a slow Lease read delays a takeover, it never hastens one.

Fencing: the leader acts only while its last successful renewal is younger than
`renew_deadline_seconds`, which is shorter than the lease duration; and every try of every
write must be over by `lease_duration_seconds` after that renewal, the earliest moment
another replica can take over (`time_left`, the `Fence` the Kubernetes adapter asks before
every try and cuts the try's timeout to). A try may start up to the renew deadline, so it has
at least `lease_duration_seconds - renew_deadline_seconds` (5 s by default) to complete; a
retry starts only if the fence still allows one. A leader cut off from the API server
therefore stops writing before anyone else can take the Lease over.

Health: `run()` survives any error of a step (it logs it and tries again next period), and
`healthy()` (part of /healthz, like client-go's HealthzAdaptor) turns false when no step has
ended for longer than a step can take, or the thread is gone.
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

from autoscaler.adapters.kubernetes import KubeClient, KubeConflict, KubeError, KubeNotFound
from autoscaler.config.model import is_dns_subdomain


def micro_time(ts: float) -> str:
    """A Kubernetes MicroTime (RFC 3339 with microseconds): renewals within one second differ."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def default_identity() -> str:
    """POD_NAME from the downward API, else host name and process id."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


MAX_LEASE_DURATION_SECONDS = 3600  # an hour without a leader after a crash; the Lease's int32 is far above


@dataclass(frozen=True)
class LeaseSettings:
    namespace: str
    name: str = "vllm-queue-autoscaler"
    identity: str = ""
    lease_duration_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_period_seconds: float = 2.0

    def __post_init__(self) -> None:
        if not is_dns_subdomain(self.name):
            raise ValueError(f"--lease-name {self.name[:100]!r}: must be a DNS-1123 subdomain (lowercase a-z, 0-9, "
                             "'-' and '.', alphanumeric at both ends, at most 253 characters)")
        if not 0 < self.retry_period_seconds < self.renew_deadline_seconds < self.lease_duration_seconds:
            raise ValueError(
                "leader election needs 0 < retry_period_seconds < renew_deadline_seconds < lease_duration_seconds, "
                f"got {self.retry_period_seconds}, {self.renew_deadline_seconds}, {self.lease_duration_seconds}"
            )
        if not self.lease_duration_seconds <= MAX_LEASE_DURATION_SECONDS:
            raise ValueError(f"--lease-duration {self.lease_duration_seconds:g}: must be at most "
                             f"{MAX_LEASE_DURATION_SECONDS} seconds (a follower waits that long after a leader dies; "
                             "client-go's default is 15)")
        if self.lease_duration_seconds != int(self.lease_duration_seconds):
            raise ValueError(f"lease_duration_seconds must be whole seconds (the Lease stores an integer), "
                             f"got {self.lease_duration_seconds}")

    @property
    def lease_request_timeout_seconds(self) -> float:
        """One Lease request: half the renew deadline, so that a renewal (a GET and a PUT)
        ends within it."""
        return self.renew_deadline_seconds / 2

    @property
    def stalled_after_seconds(self) -> float:
        """No step ended for this long: the elector is stuck (a step lasts at most the renew
        deadline, and the next one starts a retry period later)."""
        return self.lease_duration_seconds + self.renew_deadline_seconds + self.retry_period_seconds


class LeaderElector:
    """One replica's side of the election. `step()` is one attempt to acquire or renew;
    `run(stop)` repeats it every retry period in a thread. `is_leader()` is the fence."""

    def __init__(
        self,
        kube: KubeClient,
        settings: LeaseSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = lambda: time.time(),  # looked up per call (a frozen clock in tests)
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
        self._observed_at = 0.0  # our clock, when a GET that returned it first ended
        self.transitions = 0
        self._last_step_end: float | None = None  # our clock; None: no step yet
        self._started_at: float | None = None
        self._thread: threading.Thread | None = None
        self._stop: threading.Event | None = None
        self.log = structlog.get_logger("autoscaler.leader").bind(identity=self.identity, lease=settings.name)

    # ---- the fence

    def is_leader(self) -> bool:
        with self._lock:
            return self._fenced_in(self._clock())

    def time_left(self) -> float:
        """The `Fence` of the Kubernetes adapter: 0 unless this replica leads (renewed within
        the renew deadline); else the seconds until `lease_duration_seconds` after that
        renewal, when another replica could take the Lease over. At least the margin
        `lease_duration_seconds - renew_deadline_seconds` while it is > 0."""
        with self._lock:
            now = self._clock()
            if self._last_renew is None or not self._fenced_in(now):
                return 0.0
            return self._last_renew + self.settings.lease_duration_seconds - now

    def _fenced_in(self, now: float) -> bool:
        return self._last_renew is not None and now - self._last_renew < self.settings.renew_deadline_seconds

    # ---- one attempt

    def step(self) -> bool:
        """Try to acquire or renew the Lease once; returns whether this replica may act."""
        started = self._clock()  # a renewal counts from before the read: the earliest it can be seen
        s = self.settings
        timeout = s.lease_request_timeout_seconds
        try:
            lease = self.kube.read_lease(s.namespace, s.name, timeout_seconds=timeout)
            read_at = self._clock()  # what was read was current at the latest now
            if lease is None:
                other = self._other_holder_may_act(read_at)
                if other is not None:
                    return self._lost(read_at, other)
                self.kube.create_lease(s.namespace, self._body(None, acquire=True, transitions=0),
                                       timeout_seconds=timeout)
                return self._won(started, "acquired")
            spec = _mapping(lease.get("spec"))
            meta = _mapping(lease.get("metadata"))
            holder = str(spec.get("holderIdentity") or "")
            record = (holder, spec.get("renewTime"), spec.get("leaseDurationSeconds"), meta.get("resourceVersion"))
            if record != self._observed:
                self._observed, self._observed_at = record, read_at
            duration = _seconds(spec.get("leaseDurationSeconds"), s.lease_duration_seconds)
            if holder and holder != self.identity and read_at - self._observed_at < duration:
                return self._lost(read_at, holder)
            ours = holder == self.identity
            transitions = _whole(spec.get("leaseTransitions")) + (0 if ours else 1)
            body = self._body(lease, acquire=not ours, transitions=transitions)
            self.kube.replace_lease(s.namespace, s.name, body, timeout_seconds=timeout)
            return self._won(started, "renewed" if ours else "took_over")
        except (KubeConflict, KubeNotFound) as exc:
            # another replica created or wrote the Lease first (409), or it was deleted under
            # us (404): someone else may lead from now on, so this replica stops at once rather
            # than at its renew deadline (client-go keeps acting until then); re-read next time
            self.log.warning("lease_lost_to_a_write", error=str(exc))
            return self._lost(self._clock(), "(another writer)")
        except KubeError as exc:
            self.log.warning("lease_renew_failed", error=str(exc))
            return self._keep(self._clock())
        finally:
            with self._lock:
                self._last_step_end = self._clock()

    def _other_holder_may_act(self, now: float) -> str | None:
        """The Lease is gone (deleted by hand, say): the holder last seen, when it is another
        replica and its record changed less than its lease duration ago by this clock. It may
        still be inside its fence (its renew deadline runs from a renewal no later than that
        change), so this replica creates the Lease only once that has passed. None: create now
        (the holder was this replica, nobody, or no Lease was ever seen).

        Worked example: holder "b" last seen changing at 100 with a 15 s lease: at 110, "b";
        at 115.5, None.
        """
        if self._observed is None:
            return None
        holder, _renew, duration_s, _version = self._observed
        if not holder or holder == self.identity:
            return None
        duration = _seconds(duration_s, self.settings.lease_duration_seconds)
        return holder if now - self._observed_at < duration else None

    def _body(self, lease: dict[str, Any] | None, *, acquire: bool, transitions: int) -> dict[str, Any]:
        s = self.settings
        stamp = micro_time(self._wall_clock())
        spec: dict[str, Any] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(s.lease_duration_seconds),
            "renewTime": stamp,
            "leaseTransitions": transitions,
        }
        old_spec = _mapping((lease or {}).get("spec"))
        spec["acquireTime"] = stamp if acquire or not old_spec.get("acquireTime") else old_spec["acquireTime"]
        metadata: dict[str, Any] = {"name": s.name, "namespace": s.namespace}
        if lease is not None:
            metadata["resourceVersion"] = _mapping(lease.get("metadata")).get("resourceVersion")
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
            timeout = s.lease_request_timeout_seconds
            lease = self.kube.read_lease(s.namespace, s.name, timeout_seconds=timeout)
            if lease is None or _mapping(lease.get("spec")).get("holderIdentity") != self.identity:
                return
            body = self._body(lease, acquire=False, transitions=_whole(_mapping(lease.get("spec")).get("leaseTransitions")))
            body["spec"]["holderIdentity"] = ""
            body["spec"]["leaseDurationSeconds"] = 1
            self.kube.replace_lease(s.namespace, s.name, body, timeout_seconds=timeout)
            self.log.info("released")
        except KubeError as exc:
            self.log.warning("release_failed", error=str(exc))
        finally:
            with self._lock:
                self._last_renew = None

    def run(self, stop: threading.Event) -> None:
        """Step every retry period until `stop`. A step that raises (a bug, an answer nobody
        expected) is logged and the loop goes on: a dead elector thread would leave the
        replica a follower for ever while /healthz said ok."""
        while not stop.is_set():
            try:
                self.step()
            except Exception as exc:  # never let the election thread die
                self.log.exception("leader_election_step_failed", error=str(exc))
                with self._lock:
                    self._last_renew = None  # unsure of the Lease: act as a follower
                    self._last_step_end = self._clock()
            stop.wait(self.settings.retry_period_seconds)

    def start(self, stop: threading.Event) -> threading.Thread:
        with self._lock:
            self._started_at = self._clock()
        self._stop = stop
        self._thread = threading.Thread(target=self.run, args=(stop,), name="leader-election", daemon=True)
        self._thread.start()
        return self._thread

    def join(self) -> None:
        """Wait for the election thread to end (after its stop event is set): at most one step,
        whose calls are bounded by the Lease request timeout and the adapter's retries."""
        if self._thread is not None:
            self._thread.join()

    def healthy(self) -> bool:
        """Liveness: false when the election thread died, or no step has ended for
        `stalled_after_seconds` (a step stuck somewhere). The process is then restarted,
        which is safe: a replica that does not renew is fenced out anyway."""
        if self._thread is not None and not self._thread.is_alive() and not (self._stop and self._stop.is_set()):
            return False
        with self._lock:
            since = self._last_step_end if self._last_step_end is not None else self._started_at
            return since is None or self._clock() - since <= self.settings.stalled_after_seconds


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _seconds(value: Any, default: float) -> float:
    """A Lease duration as the API gives it; `default` when missing or not a positive number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 10**6:
        return default
    return float(value)


def _whole(value: Any) -> int:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31 else 0
