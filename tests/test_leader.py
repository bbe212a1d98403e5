"""Leader election over the Kubernetes-API test server: one acts, failover after the lease
duration, fencing before the lease can expire, races settled by resourceVersion."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoscaler.adapters.kubernetes import KubeClient
from autoscaler.controller.leader import LeaderElector, LeaseSettings
from tests.kube_api_server import KubeApiServer

NS = "autoscaler"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clients(kubeconfig_path: Path) -> Iterator[tuple[KubeClient, KubeClient]]:
    a = KubeClient.from_environment(kubeconfig=str(kubeconfig_path), sleep=lambda s: None, retry_attempts=1,
                                    reporting_instance="replica-a")
    b = KubeClient.from_environment(kubeconfig=str(kubeconfig_path), sleep=lambda s: None, retry_attempts=1,
                                    reporting_instance="replica-b")
    yield a, b
    a.close()
    b.close()


def electors(clients: tuple[KubeClient, KubeClient], clock: Clock) -> tuple[LeaderElector, LeaderElector]:
    settings = LeaseSettings(namespace=NS, lease_duration_seconds=15, renew_deadline_seconds=10,
                             retry_period_seconds=2)
    a = LeaderElector(clients[0], LeaseSettings(**{**settings.__dict__, "identity": "a"}), clock=clock,
                      wall_clock=lambda: 1_800_000_000.0 + clock.now)
    b = LeaderElector(clients[1], LeaseSettings(**{**settings.__dict__, "identity": "b"}), clock=clock,
                      wall_clock=lambda: 1_800_000_000.0 + clock.now)
    return a, b


def test_one_leads_the_other_follows_and_takes_over_after_the_lease_duration(
    kube_server: KubeApiServer, clients: tuple[KubeClient, KubeClient]
) -> None:
    clock = Clock()
    a, b = electors(clients, clock)
    assert a.step() is True
    assert b.step() is False
    lease = kube_server.get("leases", NS, "vllm-queue-autoscaler")
    assert lease is not None and lease["spec"]["holderIdentity"] == "a"

    # a keeps renewing every 2 s: b never takes over
    for _ in range(10):
        clock.now += 2
        assert a.step() and not b.step()
    assert a.is_leader() and not b.is_leader()

    # a dies. b has seen the lease change at its last step; 14 s later it is still live,
    # 15 s later (the lease duration) it takes over, with one more transition
    clock.now += 14
    assert b.step() is False
    clock.now += 1
    assert b.step() is True
    lease = kube_server.get("leases", NS, "vllm-queue-autoscaler")
    assert lease is not None and lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseTransitions"] == 1


def test_a_leader_that_cannot_renew_is_fenced_before_the_lease_expires(
    kube_server: KubeApiServer, clients: tuple[KubeClient, KubeClient]
) -> None:
    clock = Clock()
    a, b = electors(clients, clock)
    assert a.step()
    b.step()
    # the API server refuses a's renewals from now on
    kube_server.inject_fault(method="PUT", path_regex=r"/leases/", status=500, times=100)
    clock.now += 2
    assert a.step() is True  # 2 s since the last renewal: still fenced in
    clock.now += 7.9
    assert a.is_leader()  # 9.9 s < renew deadline 10 s
    clock.now += 0.1
    assert not a.is_leader()  # exactly the renew deadline: out, 5 s before b may take over
    assert a.step() is False
    kube_server.clear_faults()
    # b saw the lease last change 10 s ago: it must still wait until 15 s
    assert b.step() is False
    clock.now += 5
    assert b.step() is True
    assert not a.is_leader()


def test_racing_for_an_expired_lease_one_wins(
    kube_server: KubeApiServer, clients: tuple[KubeClient, KubeClient]
) -> None:
    clock = Clock()
    a, b = electors(clients, clock)
    # both see no lease and create it: while a's create is on its way, b reads and creates
    # first; a's create gets 409 AlreadyExists and a follows
    results: list[bool] = []
    kube_server.inject_fault(method="POST", path_regex=r"/leases$", status=None, times=1,
                             before=lambda: results.append(b.step()))
    won_a = a.step()
    assert (won_a, results) == (False, [True])
    assert kube_server.get("leases", NS, "vllm-queue-autoscaler")["spec"]["holderIdentity"] == "b"  # type: ignore[index]
    a, b = b, a  # from here on, "a" is the leader
    # a stale write (someone else wrote the Lease in between) is a 409: a stops acting at once
    # (client-go would act on until its renew deadline), and reads again next period
    kube_server.inject_conflict("leases", NS, "vllm-queue-autoscaler", method="PUT")
    clock.now += 2
    assert a.step() is False and a.time_left() == 0.0
    clock.now += 2
    assert a.step() is True  # the Lease still names a: renewed


def test_a_deleted_lease_never_gives_two_leaders(
    kube_server: KubeApiServer, clients: tuple[KubeClient, KubeClient]
) -> None:
    """`kubectl delete lease` to force a failover: b, which saw a lead, creates the Lease only
    once a's record has not changed for a lease duration (a's fence has closed by then); a,
    the holder it names, takes it back at once. Before, b created it at once and led while a's
    fence was still open, and a's conditional scale write went out (found by a review)."""
    clock = Clock()
    a, b = electors(clients, clock)
    assert a.step() and not b.step()
    clock.now += 1
    assert a.step() and not b.step()  # b sees a's record change at 1001
    kube_server.delete("leases", NS, "vllm-queue-autoscaler")
    clock.now += 0.5
    assert b.step() is False and kube_server.list("leases", NS) == []  # a may still act: b waits
    assert a.step() is True and a.time_left() > 0  # a finds no Lease and, the holder b saw, recreates it
    assert not b.step()
    # a is gone (no more renewals) and the Lease deleted again: b takes it 15 s after a's last change
    kube_server.delete("leases", NS, "vllm-queue-autoscaler")
    clock.now += 14
    assert b.step() is False and not a.is_leader()
    clock.now += 1.5
    assert b.step() is True


def test_a_409_on_creating_the_lease_means_another_replica_leads(
    kube_server: KubeApiServer, clients: tuple[KubeClient, KubeClient]
) -> None:
    """a led; its Lease was deleted; while a's create was on its way a replica that never saw
    the Lease (just started) created it: a's 409 ends its leadership at once, its fence closed
    for the scale write. Before, a acted on until its renew deadline, beside the new leader."""
    clock = Clock()
    a, _ = electors(clients, clock)
    c = LeaderElector(clients[1], LeaseSettings(namespace=NS, lease_duration_seconds=15, renew_deadline_seconds=10,
                                                retry_period_seconds=2, identity="c"), clock=clock)
    assert a.step()
    kube_server.delete("leases", NS, "vllm-queue-autoscaler")
    clock.now += 2
    kube_server.inject_fault(method="POST", path_regex=r"/leases$", status=None, times=1,
                             user_agent_regex="replica-a", before=lambda: c.step())
    assert a.step() is False and a.time_left() == 0.0
    assert kube_server.get("leases", NS, "vllm-queue-autoscaler")["spec"]["holderIdentity"] == "c"  # type: ignore[index]
    assert c.is_leader()


def test_release_hands_over_at_once(kube_server: KubeApiServer, clients: tuple[KubeClient, KubeClient]) -> None:
    clock = Clock()
    a, b = electors(clients, clock)
    assert a.step()
    assert not b.step()
    a.release()
    assert not a.is_leader()
    clock.now += 1.5  # released leases last 1 s
    assert b.step() is True


def test_settings_must_fence() -> None:
    with pytest.raises(ValueError, match="renew_deadline_seconds < lease_duration_seconds"):
        LeaseSettings(namespace=NS, lease_duration_seconds=10, renew_deadline_seconds=10)


@pytest.mark.parametrize("name", ["Bad_Name", "", "-x", "x" * 254, "a..b"])
def test_a_lease_name_the_api_would_refuse_is_refused_at_start(name: str) -> None:
    # found by a fuzzer: accepted, then every Lease request of the run answered 422
    with pytest.raises(ValueError, match="must be a DNS-1123 subdomain"):
        LeaseSettings(namespace=NS, name=name)
    assert LeaseSettings(namespace=NS, name="vllm-queue-autoscaler.team-a").name.endswith("team-a")


def test_a_slow_lease_read_never_makes_two_leaders(
    kube_server: KubeApiServer, clients: tuple[KubeClient, KubeClient]
) -> None:
    """b's GET of the Lease takes 10 s (a timeout somewhere); meanwhile a renews. b must count
    what it read from when the GET returned (client-go stamps after the GET): stamping it
    before gave b the Lease 5 s early, while a was still fenced in."""
    clock = Clock()
    a, b = electors(clients, clock)
    assert a.step()

    def slow_read() -> None:
        clock.now += 10  # the GET hangs 10 s; a renews while it does, then the answer comes
        assert a.step()

    kube_server.inject_fault("GET", r"/leases/", status=None, before=slow_read, times=1)
    assert b.step() is False  # b observed a's renewal at 1010 (its GET ended), not 1000
    kube_server.clear_faults()
    # a dies now: it renewed at 1010, so it writes until 1025 at the latest (fenced in until
    # 1020, each try over by 1025). b must not lead before that.
    while not b.step():
        assert clock.now < 1100
        clock.now += 1
    assert clock.now == 1025 and not a.is_leader() and a.time_left() == 0


def test_time_left_bounds_every_write_of_a_leader(
    kube_server: KubeApiServer, clients: tuple[KubeClient, KubeClient]
) -> None:
    """The fence the adapter asks before every try: a leader has until `lease_duration` after
    its last renewal (when b could take over); 0 once past the renew deadline."""
    clock = Clock()
    a, b = electors(clients, clock)
    assert a.time_left() == 0  # not leading yet
    clock.now = 1000.0
    assert a.step()
    assert a.time_left() == 15.0
    clock.now += 9.5  # inside the renew deadline: the margin (5 s) plus what is left of it
    assert a.time_left() == 5.5
    clock.now += 0.5  # at the renew deadline: no new try may start
    assert a.time_left() == 0
    assert not b.step()  # b saw the Lease at 1010: its takeover comes at 1025, after every try of a ended


def test_the_election_thread_survives_any_error_and_liveness_sees_a_stuck_one(
    kube_server: KubeApiServer, clients: tuple[KubeClient, KubeClient]
) -> None:
    clock = Clock()
    a, _ = electors(clients, clock)
    errors = iter([RuntimeError("a bug"), None, None])

    def flaky_step() -> bool:
        error = next(errors, None)
        if error is not None:
            raise error
        return LeaderElector.step(a)

    a.step = flaky_step  # type: ignore[method-assign]
    stop = threading.Event()
    thread = a.start(stop)
    try:
        deadline = time.monotonic() + 10
        while not a.is_leader() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert thread.is_alive() and a.is_leader()  # it went on after the error, and leads
        assert a.healthy()
        # a step that never ends (e.g. a hung connection the timeouts did not catch)
        clock.now += a.settings.stalled_after_seconds + 1
        assert not a.healthy()
    finally:
        stop.set()
        thread.join(timeout=5)
    assert not thread.is_alive()


def test_a_dead_election_thread_fails_liveness(clients: tuple[KubeClient, KubeClient]) -> None:
    clock = Clock()
    a, _ = electors(clients, clock)

    def die(stop: threading.Event) -> None:
        return  # the thread ends without being asked to stop

    a.run = die  # type: ignore[method-assign]
    thread = a.start(threading.Event())
    thread.join(timeout=5)
    assert not thread.is_alive() and not a.healthy()


def test_a_garbled_lease_answer_is_an_error_not_a_crash(
    kube_server: KubeApiServer, clients: tuple[KubeClient, KubeClient]
) -> None:
    clock = Clock()
    a, _ = electors(clients, clock)
    kube_server.inject_fault("GET", r"/leases/", status=200, body=b"<html>gateway</html>", times=1)
    assert a.step() is False  # a KubeError, logged: the thread would have died on a ValueError
    kube_server.put({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": "vllm-queue-autoscaler", "namespace": NS},
                     "spec": {"holderIdentity": ["not", "a", "string"], "leaseDurationSeconds": "x",
                              "leaseTransitions": "many"}})
    assert a.step() is False  # an odd Lease record: a follower, no exception
