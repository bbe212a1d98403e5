"""A model-on-GPU profile: every number the replica model and the pod lifecycle need.

Profiles live in `simulations/profiles/<name>.yaml`, each number with its public source in a
comment. `load_profile("qwen3-8b-h100")` finds one by name; a path works too.

Step-time model of one engine step (one decode token for every running sequence, plus any
prefill tokens chunked into the same step, vLLM V1 chunked prefill):

    step = base_s + per_seq_s * B + per_kv_token_s * K + prefill_per_token_s * P

B running sequences in decode, K their context tokens (the KV cache read by attention), P
prefill tokens in the step. TTFT adds `ttft_overhead_s`, the non-GPU part (HTTP, chat
template, tokenisation) measured at concurrency 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PROFILE_DIR = Path(__file__).resolve().parents[2] / "simulations" / "profiles"


@dataclass(frozen=True)
class Profile:
    name: str
    model: str
    gpu: str
    gpus_per_replica: int
    # --- KV cache and scheduler limits
    kv_cache_tokens: int
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    # --- step time (seconds)
    base_s: float
    per_seq_s: float
    per_kv_token_s: float
    prefill_per_token_s: float
    ttft_overhead_s: float
    # --- lifecycle (seconds)
    node_provision_s: float
    container_start_s: float  # scheduled -> container running (stage SCHEDULED), part of model_load_s
    model_load_s: float  # scheduled -> ready
    drain_grace_s: float
    node_idle_remove_s: float
    gpus_per_node: int

    @property
    def kv_blocks(self) -> int:
        return self.kv_cache_tokens // self.block_size

    def decode_step_s(self, batch: float, context_tokens: float) -> float:
        return self.base_s + self.per_seq_s * batch + self.per_kv_token_s * context_tokens

    def capacity_rps(self, mean_input: float, mean_output: float, tpot_budget_s: float = 0.05,
                     kv_fill: float = 0.9) -> float:
        """Sustainable requests/s of one replica for a length mix: the best batch whose decode
        step stays within `tpot_budget_s` and whose KV stays below `kv_fill` of capacity.

        Each request costs its prefill (input tokens) plus its share of the decode steps:
        1 / (mean_input * prefill_per_token_s + mean_output * step(B) / B) requests/s.
        Worked example (Qwen3-8B/H100 profile, 233 in / 221 out): about 20 req/s.
        """
        best = 0.0
        ctx = mean_input + mean_output / 2.0
        for b in range(1, self.max_num_seqs + 1):
            if b * (mean_input + mean_output) > kv_fill * self.kv_cache_tokens:
                break
            step = self.decode_step_s(b, b * ctx)
            if step > tpot_budget_s:
                break
            rate = 1.0 / (mean_input * self.prefill_per_token_s + mean_output * step / b)
            best = max(best, rate)
        return best


def _num(d: dict[str, Any], key: str) -> float:
    v = d[key]
    if not isinstance(v, (int, float)) or not math.isfinite(float(v)):
        raise ValueError(f"profile key {key}: expected a number, got {v!r}")
    return float(v)


def profile_path(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p
    cand = PROFILE_DIR / f"{name_or_path}.yaml"
    if cand.exists():
        return cand
    known = sorted(x.stem for x in PROFILE_DIR.glob("*.yaml"))
    raise FileNotFoundError(f"profile {name_or_path!r} not found (known: {', '.join(known)})")


def load_profile(name_or_path: str) -> Profile:
    path = profile_path(name_or_path)
    raw = yaml.safe_load(path.read_text())
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping")
    kv, step, life = raw["kv_cache"], raw["step_time"], raw["lifecycle"]
    sched = raw["scheduler"]
    return Profile(
        name=str(raw.get("name", path.stem)),
        model=str(raw["model"]),
        gpu=str(raw["gpu"]),
        gpus_per_replica=int(raw.get("gpus_per_replica", 1)),
        kv_cache_tokens=int(_num(kv, "tokens")),
        block_size=int(_num(kv, "block_size")),
        max_num_seqs=int(_num(sched, "max_num_seqs")),
        max_num_batched_tokens=int(_num(sched, "max_num_batched_tokens")),
        max_model_len=int(_num(sched, "max_model_len")),
        base_s=_num(step, "base_s"),
        per_seq_s=_num(step, "per_seq_s"),
        per_kv_token_s=_num(step, "per_kv_token_s"),
        prefill_per_token_s=_num(step, "prefill_per_token_s"),
        ttft_overhead_s=_num(step, "ttft_overhead_s"),
        node_provision_s=_num(life, "node_provision_s"),
        container_start_s=_num(life, "container_start_s"),
        model_load_s=_num(life, "model_load_s"),
        drain_grace_s=_num(life, "drain_grace_s"),
        node_idle_remove_s=_num(life, "node_idle_remove_s"),
        gpus_per_node=int(_num(life, "gpus_per_node")),
    )
