"""How much of a slice any autoscaler can serve from the fleet it starts with: a measured ceiling.

The lower bounds (`autoscaler.sim.bound`, `.lead_bound`) let the fleet at t = 0 be any size for
free, so that they also bound a static fleet, which starts at its size. Every autoscaler of the
benchmark starts from the protocol's fleet instead (`experiment.Prepared.initial_need`). Until
`seal_s` no other pod can serve:
- a pod asked for at t >= 0 serves after its model load, at least `startup.least_load_s`;
- if the warm nodes of t = 0 have no free GPU, it also waits for a new node, at least
  `startup.least_provision_s` from its request.

So a request whose TTFT deadline (arrival + its TTFT bound) is at most `seal_s` gets its first
token, and then every other token, from a starting pod. `ceiling` runs those requests alone on
the starting fleet, held as it is (`StaticFleet`), over the whole slice, and counts their misses.

In any other run from the same start, the same starting pods meet the same requests:
- with the later requests added (more load on the same pods);
- with fewer pods when the policy deletes some;
- with other routing tie-breaks.

If more load and fewer pods never meet more of them, every run misses at least as many. Then
its attainment is at most 1 - misses / N (N: every request of the slice). That "if" is vLLM's
behaviour as the engine models it, not a theorem: this is a measurement, not a bound. It holds
only for policies whose router sends each request to a pod on arrival (no concurrency limit at
the router; KPA and Ray Serve queue there). Checked by running the largest fleet a scenario
allows from the first tick (`tests/sim/test_start_ceiling.py`; on azure-code it gives the same
96.8 %).

Worked example: azure-code, seed 0. The start is 9 pods, one a node. seal_s = 75.7 s of load +
180 s for a node = 255.7 s. 8,910 requests are due by then, 4,275 of them miss on the 9 pods (the
minute-3 burst), and N = 132,601: ceiling 1 - 4,275 / 132,601 = 96.78 %.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from autoscaler.baselines.static import StaticFleet
from autoscaler.sim.profile import Profile
from autoscaler.sim.runner import RunConfig, run
from autoscaler.sim.startup import least_load_s, least_provision_s
from autoscaler.sim.traces import Chunk, Trace


@dataclass(frozen=True)
class Ceiling:
    seal_s: float  # no pod but the starting ones serves before this
    due: int  # requests whose TTFT deadline is at most seal_s
    misses: int  # of those, missed on the starting fleet
    requests: int  # N, every request of the slice

    @property
    def attainment(self) -> float:
        """1 - misses / N (1 for an empty slice)."""
        return 1.0 - self.misses / self.requests if self.requests else 1.0


class SubsetTrace(Trace):
    """Some requests of another trace, over the same slice (same duration, same scale)."""

    def __init__(self, inner: Trace, chunk: Chunk) -> None:
        self.inner, self.chunk = inner, chunk
        self.name, self.start, self.duration, self.scale = inner.name, inner.start, inner.duration, inner.scale

    def chunks(self) -> Iterator[Chunk]:
        yield self.chunk

    def peak_rate(self) -> float:
        return self.inner.peak_rate()

    def mean_lengths(self) -> tuple[float, float]:
        return self.inner.mean_lengths()

    def expected_requests(self) -> float:
        return float(self.chunk.arrival.size)


def seal_s(profile: Profile, cfg: RunConfig) -> float:
    """When a pod other than the `cfg.initial_replicas` starting ones can first serve.

    Example (Qwen3-8B/H100, one GPU a node, random start-up): the warm nodes hold only the
    starting pods, so a new pod waits for a node: 180 s + 75.7 s = 255.7 s. On 8-GPU nodes with
    9 pods the second warm node has 7 free GPUs: 75.7 s."""
    per_node = profile.gpus_per_node // profile.gpus_per_replica
    nodes = max(math.ceil(cfg.initial_replicas * profile.gpus_per_replica / profile.gpus_per_node), cfg.min_nodes)
    load = least_load_s(profile, cfg.startup)
    return load if nodes * per_node > cfg.initial_replicas else load + least_provision_s(profile, cfg.startup)


def ceiling(trace: Trace, profile: Profile, cfg: RunConfig) -> Ceiling:
    """The starting fleet's misses among the requests due by `seal_s` (module docstring)."""
    arrival, n_in, n_out = trace.arrays()
    seal = seal_s(profile, cfg)
    due = arrival + cfg.slo.ttft_bound_s(n_in, profile.idle_ttft_s) <= seal
    n_due = int(due.sum())
    if n_due == 0:
        return Ceiling(seal, 0, 0, int(arrival.size))
    sub = SubsetTrace(trace, Chunk(arrival[due], n_in[due], n_out[due]))
    r = run(sub, profile, StaticFleet(cfg.initial_replicas), cfg)
    misses = int(round((1.0 - r.slo_attainment) * r.requests))
    return Ceiling(seal, n_due, misses, int(arrival.size))
