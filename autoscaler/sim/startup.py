"""Random start-up times of new pods (model load) and new GPU nodes (provisioning).

A fixed start-up time equal to the autoscaler's own defaults would hand a lead-time-learning
policy an exact lead time. Here every pod scheduled during a run draws its model load time
(scheduled -> ready) and every node the cluster-autoscaler asks for draws its provisioning
time (requested -> ready), from the fleet's one seeded generator (`Cluster.rng`), so a run is
deterministic per seed. The warm fleet present at t = 0 draws nothing.

**Model load (measured shape, profile centre).** The shape is the empirical distribution of
vLLM process start -> ready (`actual_total_time_s`, the profiler's end-to-end time; the sum of
the logged phases, `total_time_s`, is 1-7 s smaller) for the 7-14B models in
`simulations/data/vllm-startup/startup_breakdown_vllm-startup-profiler.csv` (upb-cn/vllm-startup-
profiler @ 9ef96f4, Kabakibo et al., MLSys 2026): falcon-7b, llama2-7b-hf, qwen-7b, yi-9b,
llama2-13b-hf, qwen-14b, each in both setups, 12 rows:

* A100-40GB, warm torch.compile cache (average of 5 runs): 45.2, 45.0, 46.7, 54.3, 58.7, 60.9 s;
* H100 NVL, empty cache (single run): 48.2, 48.0, 67.2, 83.2, 74.8, 98.3 s.

Median 56.5 s, range 45.0-98.3 s (ratio to the median 0.80-1.74): right-skewed, the cold-cache
14B start is the tail. A draw takes the empirical quantile at a uniform u (linear interpolation
between the sorted samples, so values between the measured ones occur too) and divides by the
median: a ratio r, median 1. The pod's load time is

    load = container + (model_load_s - container) * r,   container = min(container_start_s, model_load_s)

so the container start (`container_start_s`, 20 s, the SCHEDULED stage) stays fixed, the vLLM
part scales with the measured spread, and the median stays the profile's `model_load_s`
(90 s for Qwen3-8B/H100, whose own derivation is this CSV's qwen-7b cold row plus container
start). For that profile: 75.7-141.8 s, median 90.0 s, mean 94.2 s, 90th percentile 122 s.
Assumption: the spread measured across models and cache states stands for the spread across pod
starts of one model (different nodes, warm or cold compile and page caches); the repository
has no repeated-start measurements of one model.

**Node provisioning (assumed).** There is no measured node provisioning time in the repository.
Public GKE/EKS GPU node-pool reports put it at 3-7 minutes; we assume a uniform distribution over
[0.6, 1.4] x `node_provision_s`, i.e. 180-420 s around the profile's 300 s (median and mean
300 s). This is an assumption, not data.

`mode="fixed"` returns the profile's numbers (the behaviour before random start-up), for tests
and for reproducing earlier results.
"""

from __future__ import annotations

import csv
import functools
import re
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from autoscaler.sim.profile import Profile

F = npt.NDArray[np.float64]
StartupMode = Literal["random", "fixed"]
STARTUP_MODES: tuple[StartupMode, ...] = ("random", "fixed")

STARTUP_CSV = (Path(__file__).resolve().parents[2] / "simulations" / "data" / "vllm-startup"
               / "startup_breakdown_vllm-startup-profiler.csv")
MODEL_SIZE_B = (7.0, 14.0)  # parameter range (billions) of the rows used: the 8B-class profile's neighbours
NODE_PROVISION_SPREAD = (0.6, 1.4)  # assumption: x node_provision_s, 180-420 s for 300 s (3-7 min reports)

_SIZE = re.compile(r"(\d+(?:\.\d+)?)b(?:-|$)")


def model_size_b(label: str) -> float | None:
    """Parameters in billions from the profiler's model label: 'llama2-13b-hf' -> 13.0,
    'qwen-0.5b' -> 0.5; None when the label names no size."""
    m = _SIZE.search(label)
    return float(m.group(1)) if m else None


@functools.lru_cache(maxsize=4)
def process_ready_samples(path: Path = STARTUP_CSV) -> tuple[float, ...]:
    """Measured vLLM process start -> ready seconds (`actual_total_time_s`) of the 7-14B models,
    every setup, sorted. Read once from the repository's CSV (numbers only) and cached."""
    lo, hi = MODEL_SIZE_B
    out: list[float] = []
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            size = model_size_b(row["model"])
            if size is not None and lo <= size <= hi:
                out.append(float(row["actual_total_time_s"]))
    if len(out) < 2:
        raise ValueError(f"{path}: fewer than two start-up rows of {lo:g}-{hi:g}B models")
    return tuple(sorted(out))


def load_ratio(u: F, samples: tuple[float, ...] | None = None) -> F:
    """Empirical quantile of the measured start -> ready times at u in [0, 1], divided by their
    median: median 1, e.g. 0.80 at u = 0 and 1.74 at u = 1 for the 12 rows used."""
    x = np.asarray(samples if samples is not None else process_ready_samples(), dtype=np.float64)
    grid = np.linspace(0.0, 1.0, x.size)
    q: F = np.interp(u, grid, x) / float(np.median(x))
    return q


def model_load_s(profile: Profile, u: F) -> F:
    """Model load (scheduled -> ready) at uniform u: fixed container start plus the vLLM part
    scaled by `load_ratio`; u = 0.5 gives exactly `profile.model_load_s`."""
    container = min(profile.container_start_s, profile.model_load_s)
    out: F = container + (profile.model_load_s - container) * load_ratio(u)
    return out


def node_provision_s(profile: Profile, u: F) -> F:
    """Node provisioning (requested -> ready) at uniform u: uniform over
    NODE_PROVISION_SPREAD x `profile.node_provision_s` (an assumption, see the module docstring)."""
    lo, hi = NODE_PROVISION_SPREAD
    out: F = profile.node_provision_s * (lo + (hi - lo) * np.asarray(u, dtype=np.float64))
    return out


class StartupTimes:
    """Start-up times of one run. Pods and nodes draw from two streams spawned from the fleet's
    generator, so the k-th new pod's load time does not depend on how many nodes were asked for
    (or on any other draw of the run) and policies compared at one seed see the same sequence of
    load times, in the order they start pods."""

    def __init__(self, profile: Profile, mode: StartupMode, rng: np.random.Generator) -> None:
        if mode not in STARTUP_MODES:
            raise ValueError(f"startup: expected one of {', '.join(STARTUP_MODES)}, got {mode!r}")
        self.p = profile
        self.mode = mode
        self._pod_rng, self._node_rng = rng.spawn(2)

    def pod_load_s(self) -> float:
        """Model load time of the next pod scheduled."""
        if self.mode == "fixed":
            return self.p.model_load_s
        return float(model_load_s(self.p, np.array([self._pod_rng.random()]))[0])

    def node_provision_s(self) -> float:
        """Provisioning time of the next node asked for."""
        if self.mode == "fixed":
            return self.p.node_provision_s
        return float(node_provision_s(self.p, np.array([self._node_rng.random()]))[0])


def least_load_s(profile: Profile, mode: StartupMode) -> float:
    """The shortest model load any pod of a run can draw: u = 0 (75.7 s for Qwen3-8B/H100),
    or the profile's number when start-up is fixed. The lead-time bound's `load_min_s`."""
    if mode == "fixed":
        return profile.model_load_s
    return float(model_load_s(profile, np.array([0.0]))[0])


def least_provision_s(profile: Profile, mode: StartupMode) -> float:
    """The shortest node provisioning any node of a run can draw (180 s for 300 s), or the
    profile's number when start-up is fixed."""
    if mode == "fixed":
        return profile.node_provision_s
    return float(node_provision_s(profile, np.array([0.0]))[0])
