"""A tiny synthetic fleet for the baseline tests: pods with given gauges, and views of them."""

from __future__ import annotations

from autoscaler.baselines.view import ClusterView, InFlightPod, PodMetrics
from autoscaler.policy.types import PodStage


def pod(name: str, waiting: float | None = 0.0, running: float = 8.0, kv: float = 0.5, out: int | None = None,
        rate: float | None = None) -> PodMetrics:
    """A ready pod; `waiting=None`: not scraped yet (no gauge at all). `out` (live outstanding)
    defaults to waiting + running."""
    scraped = waiting is not None
    live = out if out is not None else int((waiting or 0.0) + running)
    return PodMetrics(name=name, waiting=waiting, running=running if scraped else None, kv=kv if scraped else None,
                      sample_t=100.0 if scraped else None, completed_per_second=rate, outstanding_now=live,
                      created=-200.0, scheduled=-190.0, ready=-100.0)


def pods(n: int, **kw: float | int | None) -> list[PodMetrics]:
    return [pod(f"p{i}", **kw) for i in range(n)]  # type: ignore[arg-type]


def loading(n: int) -> tuple[InFlightPod, ...]:
    return tuple(InFlightPod(f"l{i}", PodStage.LOADING, 50.0, 60.0) for i in range(n))


def pending(n: int) -> tuple[InFlightPod, ...]:
    return tuple(InFlightPod(f"u{i}", PodStage.UNSCHEDULABLE, 50.0, None) for i in range(n))


def view(spec: int, ready: list[PodMetrics], flight: tuple[InFlightPod, ...] = (), router: int = 0,
         free: int = 0) -> ClusterView:
    return ClusterView(spec, tuple(ready), flight, free, router)
