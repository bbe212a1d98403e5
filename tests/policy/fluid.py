"""A tiny fluid model of a vLLM fleet, for scenario tests of decide() (test-only).

Each replica runs up to `batch` requests at once and queues the rest itself (vLLM queues per
engine); a running request finishes after `latency_seconds` on average, so a full replica
finishes batch / latency requests per second. A router sends new requests to the replicas
with the fewest outstanding (water-filling). New replicas become ready `lead_seconds` after
they are asked for. The real fleet model is the simulator's; this one only has to make a burst.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autoscaler.policy import MetricSample, Observation, PodInFlight, PodStage, PodStartup, ReadyPod


@dataclass
class Fleet:
    ready: int
    batch: int = 32
    latency_seconds: float = 20.0
    lead_seconds: float = 300.0
    report_throughput: bool = True
    in_system: list[float] = field(default_factory=list)  # per ready pod: waiting + running
    finished: list[float] = field(default_factory=list)  # per ready pod: finished per second
    starting: list[float] = field(default_factory=list)  # creation times of pods on their way

    def __post_init__(self) -> None:
        self.in_system = [0.0] * self.ready
        self.finished = [0.0] * self.ready

    @property
    def spec(self) -> int:
        return self.ready + len(self.starting)

    def step(self, now: float, dt: float, arrivals_per_second: float) -> None:
        became_ready = [t for t in self.starting if now - t >= self.lead_seconds]
        self.starting = [t for t in self.starting if now - t < self.lead_seconds]
        self.ready += len(became_ready)
        self.in_system += [0.0] * len(became_ready)
        self.finished += [0.0] * len(became_ready)
        self._route(arrivals_per_second * dt)
        for i, n in enumerate(self.in_system):
            served = min(n, min(n, self.batch) / self.latency_seconds * dt)
            self.in_system[i] = n - served
            self.finished[i] = served / dt

    def _route(self, amount: float) -> None:
        """Water-fill: raise the least loaded pods first."""
        if not self.in_system:
            return
        order = sorted(range(len(self.in_system)), key=lambda i: self.in_system[i])
        levels = [self.in_system[i] for i in order]
        k = 1
        while k < len(levels) and amount > 0:
            need = (levels[k] - levels[k - 1]) * k
            if need >= amount:
                break
            amount -= need
            for j in range(k):
                levels[j] = levels[k]
            k += 1
        for j in range(k):
            levels[j] += amount / k
        for idx, i in enumerate(order):
            self.in_system[i] = levels[idx]

    def scale_to(self, replicas: int, now: float) -> None:
        while self.spec < replicas:
            self.starting.append(now)
        while self.spec > replicas and self.starting:
            self.starting.pop()
        while self.spec > replicas:  # the least loaded pod goes (its requests re-route)
            i = min(range(self.ready), key=lambda j: self.in_system[j])
            moved = self.in_system.pop(i)
            self.finished.pop(i)
            self.ready -= 1
            self._route(moved)

    def observe(self, now: float) -> Observation:
        pods = []
        for i, n in enumerate(self.in_system):
            running = min(n, self.batch)
            pods.append(
                ReadyPod(
                    f"ready-{i}",
                    MetricSample(n - running, now),
                    MetricSample(running, now),
                    MetricSample(running / self.batch * 0.9, now),
                    completed_per_second=MetricSample(self.finished[i], now) if self.report_throughput else None,
                )
            )
        flight = tuple(
            PodInFlight(f"new-{t:.0f}-{i}", PodStage.LOADING, PodStartup(created_at=t, scheduled_at=t + 1))
            for i, t in enumerate(self.starting)
        )
        return Observation(spec_replicas=self.spec, ready_pods=tuple(pods), pods_in_flight=flight, free_gpus=64)

    def capacity_per_second(self, replicas: int) -> float:
        return replicas * self.batch / self.latency_seconds

    @property
    def waiting(self) -> float:
        return sum(max(0.0, n - self.batch) for n in self.in_system)
