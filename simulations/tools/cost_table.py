"""The cost-at-99 % table across scenarios, from the sweep JSONs `autoscaler simulate --sweep
--json` wrote: `python simulations/tools/cost_table.py simulations/results/azure-conv.json ...
--out simulations/results/cost_at_99.md`. Per scenario: each policy's cheapest GPU-hours with
attainment >= 99 % (and its knob), the ratio to the oracle's, and the best attainment it reached
when it never reached 99 %. Also writes the same as JSON next to the Markdown."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def rows(path: Path, target: float) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    d = json.loads(path.read_text())
    out = []
    oracle = None
    for name, runs in d.get("sweeps", {}).items():
        if not runs and name in d.get("policies", {}):  # a policy without a knob (hpa-cpu): its one run
            runs = [d["policies"][name]]
        ok = [r for r in runs if r["slo_attainment"] >= target]
        best = min(ok, key=lambda r: r["gpu_hours"]) if ok else None
        top = max(runs, key=lambda r: r["slo_attainment"]) if runs else None
        row = {"policy": name, "gpu_hours_at_99": best["gpu_hours"] if best else None,
               "knob_at_99": best["knob"] if best else None, "runs": len(runs),
               "best_attainment": top["slo_attainment"] if top else None,
               "best_attainment_gpu_hours": top["gpu_hours"] if top else None}
        if name == "oracle" and best:
            oracle = best["gpu_hours"]
        out.append(row)
    for r in out:
        r["x_oracle"] = r["gpu_hours_at_99"] / oracle if (oracle and r["gpu_hours_at_99"]) else None
    return d["meta"], sorted(out, key=lambda r: (r["gpu_hours_at_99"] is None, r["gpu_hours_at_99"] or 0.0))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--target", type=float, default=0.99)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    md: list[str] = []
    js: list[dict[str, Any]] = []
    for f in a.files:
        meta, rs = rows(Path(f), a.target)
        js.append({"file": f, "meta": meta, "rows": rs})
        ql = meta.get("queue_lead_knob", "target_kv_cache_usage_ratio")
        md.append(f"### {meta['scenario']}: {meta['trace']}, dt {meta['dt_s']} s, peak need {meta['peak_need']}\n")
        md.append(f"queue-lead knob: `{ql}`; fixed queue-lead params: `{meta.get('queue_lead_params', {})}`\n")
        md.append("| policy | GPU-h @99 % | knob @99 % | x oracle | best attainment (GPU-h) | runs |")
        md.append("|---|---|---|---|---|---|")
        for r in rs:
            g = f"{r['gpu_hours_at_99']:.2f}" if r["gpu_hours_at_99"] is not None else "not reached"
            k = f"{r['knob_at_99']:g}" if r["knob_at_99"] is not None else "-"
            x = f"{r['x_oracle']:.2f}" if r["x_oracle"] is not None else "-"
            b = (f"{100 * r['best_attainment']:.2f} % ({r['best_attainment_gpu_hours']:.2f})"
                 if r["best_attainment"] is not None else "-")
            md.append(f"| {r['policy']} | {g} | {k} | {x} | {b} | {r['runs']} |")
        md.append("")
    Path(a.out).write_text("\n".join(md))
    Path(a.out).with_suffix(".json").write_text(json.dumps(js, indent=1))
    print("\n".join(md))


if __name__ == "__main__":
    main()
