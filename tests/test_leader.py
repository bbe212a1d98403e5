"""Leader election over the Kubernetes-API test server: one acts, failover after the lease
duration, fencing before the lease can expire, races settled by resourceVersion."""

from __future__ import annotations

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
    a = KubeClient.from_environment(kubeconfig=str(kubeconfig_path), sleep=lambda s: None, retry_attempts=1)
    b = KubeClient.from_environment(kubeconfig=str(kubeconfig_path), sleep=lambda s: None, retry_attempts=1)
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
    # a stale write (someone else renewed in between) is a 409 and leaves a fenced
    kube_server.inject_conflict("leases", NS, "vllm-queue-autoscaler", method="PUT")
    clock.now += 2
    assert a.step() is True  # the conflict: a keeps acting only inside its renew deadline
    clock.now += 10
    assert a.is_leader() is False


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
