"""A clairvoyant heuristic (registry name `oracle`): NOT a lower bound, and in no published table.

It reads the trace's future work per minute and runs a fleet sized for it, with its nodes
pre-provisioned ahead of the need (`node_floor`) - nodes no other policy gets for free. On a
trace with second-scale bursts (Azure code) it cannot reach 99 % attainment while a static
fleet can, so its cost says nothing about what any autoscaler must pay. The provable bound is
`autoscaler.sim.bound`. What remains in use: `work_per_bin` and `need_replicas` size the fleet
every policy starts from (`experiment.Prepared.initial_need`), and `OraclePolicy` stays for
investigations (the runner gives it its node floor).

1. **Need.** Per 60 s bin, the GPU-seconds of work that arrives in it: each request costs its
   prefill (`profile.prefill_s(input)`, attention included) plus its share of the decode steps at the replica's
   best operating batch (`output * step(B*) / B*`, `Profile.capacity_rps`). Replicas needed =
   work / 60 s / u (u, its knob, the fraction of that capacity it dares to use); the bin before
   and after count too (a burst at the edge of a bin).
2. **Schedule.** A replica needed at t is asked for `model_load_s` before (its node
   `node_provision_s` before that, pre-provisioned and not billed). A replica idle for a gap
   shorter than the load time is kept: the need's running maximum over the next load time.
3. **Cost.** `schedule_cost()` is the GPU-seconds of that schedule with every start paying its
   load time: the cheapest schedule covering this heuristic's need, not a bound on the cost of
   meeting the SLO.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from autoscaler.baselines.view import ClusterView
from autoscaler.sim.profile import Profile
from autoscaler.sim.traces import Trace

BIN_S = 60.0


def work_per_bin(trace: Trace, profile: Profile, tpot_budget_s: float = 0.05) -> npt.NDArray[np.float64]:
    """GPU-seconds of work arriving in each 60 s bin of the slice."""
    mean_in, mean_out = trace.mean_lengths()
    per_token = _decode_s_per_token(profile, mean_in, mean_out, tpot_budget_s)
    n_bins = int(math.ceil(trace.duration / BIN_S))
    work = np.zeros(n_bins)
    for ch in trace.chunks():
        b = np.minimum((ch.arrival // BIN_S).astype(np.int64), n_bins - 1)
        cost = profile.prefill_s(ch.n_in.astype(np.float64)) + ch.n_out * per_token
        work += np.bincount(b, weights=cost, minlength=n_bins)
    return work


def _decode_s_per_token(profile: Profile, mean_in: float, mean_out: float, tpot_budget_s: float) -> float:
    mu = profile.capacity_rps(mean_in, mean_out, tpot_budget_s)
    # 1/mu = mean_in * t_pf + mean_out * d  ->  d
    return max((1.0 / mu - float(profile.prefill_s(mean_in))) / max(mean_out, 1e-9), 1e-6)


def need_replicas(work: npt.NDArray[np.float64], utilisation: float, min_replicas: int = 1) -> npt.NDArray[np.int64]:
    """Replicas per bin: ceil(max(work of the bin and its neighbours) / 60 / u)."""
    w = work.copy()
    if w.size > 1:
        w[1:] = np.maximum(w[1:], work[:-1])
        w[:-1] = np.maximum(w[:-1], work[1:])
    return np.maximum(np.ceil(w / BIN_S / utilisation - 1e-9).astype(np.int64), min_replicas)


def schedule(need: npt.NDArray[np.int64], load_s: float) -> npt.NDArray[np.int64]:
    """Replicas to run per bin: the need's maximum over the next load time (bridges every gap
    shorter than the load time, which is cheaper than stopping and restarting)."""
    k = int(math.ceil(load_s / BIN_S))
    out = need.copy()
    for j in range(1, k + 1):
        out[:-j] = np.maximum(out[:-j], need[j:])
    return out


def schedule_cost(need: npt.NDArray[np.int64], load_s: float) -> float:
    """GPU-seconds of the cheapest schedule covering `need` when every start costs `load_s`
    GPU-seconds before it serves: per replica level k, the bins with need >= k form runs; a gap
    between runs is bridged when it is shorter than the load time, else the replica stops and
    pays the load again. Levels are independent, so this per-level greedy is optimal."""
    total = 0.0
    top = int(need.max()) if need.size else 0
    for k in range(1, top + 1):
        on = need >= k
        idx = np.flatnonzero(on)
        if idx.size == 0:
            continue
        starts = 1
        cost = BIN_S  # the first bin
        for a, b in zip(idx[:-1], idx[1:]):
            gap = (b - a - 1) * BIN_S
            if gap < load_s:
                cost += gap + BIN_S
            else:
                starts += 1
                cost += BIN_S
        total += cost + starts * load_s
    return total


class OraclePolicy:
    """Runs the oracle's schedule: desired replicas = the need over [now, now + load time]."""

    name = "oracle"
    interval_s = 15.0

    def __init__(self, need: npt.NDArray[np.int64], profile: Profile, max_replicas: int) -> None:
        self.need = need
        self.p = profile
        self.max_replicas = max_replicas
        self.lead_bins = int(math.ceil((profile.model_load_s + self.interval_s) / BIN_S))
        self.node_bins = int(math.ceil((profile.model_load_s + profile.node_provision_s + self.interval_s) / BIN_S))

    def _max_over(self, now: float, bins: int) -> int:
        b0 = int(now // BIN_S)
        seg = self.need[b0 : b0 + bins + 1]
        if seg.size == 0:
            return int(self.need[-1]) if self.need.size else 1
        return int(seg.max())

    def decide(self, view: ClusterView, now: float) -> int:
        return min(self._max_over(now, self.lead_bins), self.max_replicas)

    def node_floor(self, now: float) -> int:
        """Nodes the oracle keeps warm (pre-provisioned ahead of the need; nodes are not billed)."""
        return min(self._max_over(now, self.node_bins), self.max_replicas) * self.p.gpus_per_replica
