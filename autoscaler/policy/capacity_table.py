"""The cold start of the learned SLO capacity: a small table of published capacities.

A replica's SLO capacity is a region in (prompt tokens/s, generated tokens/s): at prompt rate p
and generation rate g it uses u = p / Cp + g / Cg of what it can serve within a typical SLO
(TTFT 2 s, TPOT 100 ms at the 99th percentile; see `slo_capacity`). This table gives (Cp, Cg)
per model and GPU before anything was learned. Every row is deliberately conservative (about
half the saturated throughput the sources measured): the learner grows a capacity that proves
too low within minutes, and one that is too high costs SLO misses first.

Sources: simulations/data/vllm-perf/README.md (numbers measured by third parties; the
derivations below are ours).

* Generation, 8B on one H100 SXM (bf16): saturated output throughput 5-6.5k tok/s for
  ShareGPT-like lengths (Lambda burst N = 320: 6,027 tok/s at median TPOT 20 ms, N = 160:
  3,922 tok/s at median TTFT 0.97 s, p99 1.45 s; AccelMark offline 5,128; GPUStack Qwen3-8B
  rate-inf 13,305 total tok/s, about 6.5k output). Cg = 3,000: half the saturated point, where
  the Lambda bursts still keep TTFT p99 under 1.5 s.
* Prefill, same: kernel sums of table 8 (aiconfigurator, vLLM kernels) give a 1k-token prefill
  in 18.5 ms, about 55k prompt tokens/s of raw prefill; with vLLM's per-step overhead and
  prefill chunks interleaved with decode, Cp = 15,000 (about a quarter of the raw rate).
* A100-80GB: AccelMark measured the H100/A100 ratio at 1.64-1.70 for decode (the HBM bandwidth
  ratio 3.35 / 2.04); prefill is compute-bound and dense bf16 FLOPs differ about 3x
  (989 / 312 TFLOPS). So Cg = 3,000 / 1.7 = 1,800 and Cp = 15,000 / 3 = 5,000.
* generic: no profile set. The A100 row of an 8B model, rounded down (Cp 4,000, Cg 1,500):
  a guess that errs on too many replicas. Larger models need a profile or the overrides
  (`capacity_prompt_tokens_per_second`, `capacity_generation_tokens_per_second`); the learner
  shrinks an estimate that is too high only once pods queue or latency breaks the SLO.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

GENERIC = "generic"


@dataclass(frozen=True)
class CapacityRow:
    """One row of the table: what one replica serves within a typical SLO, and whence."""

    prompt_tokens_per_second: float
    generation_tokens_per_second: float
    source: str


CAPACITY_TABLE: Mapping[str, CapacityRow] = MappingProxyType({
    GENERIC: CapacityRow(4_000.0, 1_500.0, "no profile: the A100 8B row rounded down (a guess, errs high)"),
    "llama-3-8b/h100": CapacityRow(
        15_000.0, 3_000.0,
        "Lambda vllm-benchmark N=160-320 bursts (3.9-6.0k output tok/s), halved; prefill from "
        "aiconfigurator table 8 kernel sums (1k prompt 18.5 ms), a quarter of the raw rate",
    ),
    "qwen3-8b/h100": CapacityRow(
        15_000.0, 3_000.0,
        "GPUStack Qwen3-8B H100 rate-inf (13.3k total tok/s, ~6.5k output), halved; the Llama-3-8B "
        "H100 prefill (same GQA shape class, aiconfigurator table 8)",
    ),
    "llama-3-8b/a100-80gb": CapacityRow(
        5_000.0, 1_800.0,
        "the H100 row over the AccelMark H100/A100 ratio (1.7, decode) and the bf16 FLOPs ratio (3, prefill)",
    ),
    "qwen3-8b/a100-80gb": CapacityRow(
        5_000.0, 1_800.0,
        "the H100 row over the AccelMark H100/A100 ratio (1.7, decode) and the bf16 FLOPs ratio (3, prefill)",
    ),
})  # read-only: no module state the policy could change


def cold_start_capacity(
    profile: str | None, prompt_override: float | None, generation_override: float | None
) -> tuple[float, float]:
    """(Cp, Cg) before anything is learned: the profile's row (the generic one when None or
    unknown; the configuration rejects unknown names), each overridden when set.

    Worked example: profile "llama-3-8b/h100", no override: (15,000, 3,000); with a generation
    override of 4,500: (15,000, 4,500); no profile: the generic (4,000, 1,500).
    """
    row = CAPACITY_TABLE.get(profile or GENERIC, CAPACITY_TABLE[GENERIC])
    return (
        prompt_override if prompt_override is not None else row.prompt_tokens_per_second,
        generation_override if generation_override is not None else row.generation_tokens_per_second,
    )
