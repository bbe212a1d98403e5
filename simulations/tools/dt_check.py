"""How the tick length changes the calibration: the closed-loop GPUStack points and the
saturation burst (tests/sim/test_calibration.py) at several ticks. In a closed loop the next
request can only be admitted at the next tick, so a long tick adds up to one tick of idle time
per request and under-states throughput; in the fleet (open loop) arrivals are admitted at
their own time within the tick, and the tick only delays admission when a replica is full.
`python simulations/tools/dt_check.py --out simulations/results/dt_check.json`."""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

from autoscaler.sim.calibration import closed_loop, sharegpt_like
from autoscaler.sim.profile import load_profile

REPO = Path(__file__).resolve().parents[2]
REF = REPO / "tests" / "fixtures" / "sim" / "gpustack_qwen3-8b_h100-sxm_vllm0.11.0_sharegpt_concurrency.csv"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dts", default="0.002,0.1,1,2")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    profile = load_profile("qwen3-8b-h100")
    rows = list(csv.DictReader(REF.open()))
    out: list[dict[str, float | int | str]] = []
    for dt in (float(x) for x in a.dts.split(",")):
        for row in rows:
            n_in, n_out = sharegpt_like(int(row["num_prompts"]), int(row["total_input_tokens"]), int(row["total_output_tokens"]))
            r = closed_loop(profile, n_in, n_out, int(row["concurrency"]), dt=dt)
            out.append({"dt": dt, "point": f"c{row['concurrency']}",
                        "out_tok_s_err": r.output_tok_per_s / float(row["output_tok_per_s"]) - 1,
                        "ttft_err": r.ttft_mean_ms / float(row["ttft_mean_ms"]) - 1,
                        "tpot_err": r.tpot_mean_ms / float(row["tpot_mean_ms"]) - 1})
        n_in, n_out = sharegpt_like(1000, 232_600, 220_610, seed=1)
        r = closed_loop(profile, n_in, n_out, 1000, dt=dt)
        out.append({"dt": dt, "point": "burst1000", "total_tok_s_err": r.total_tok_per_s / 13_305.38 - 1,
                    "out_tok_s": r.output_tok_per_s})
    for o in out:
        print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in o.items()})
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
