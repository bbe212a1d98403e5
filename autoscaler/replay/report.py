"""Output of `autoscaler replay`: rich tables, the JSON document and the PNG plot."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from autoscaler.replay.format import Recording
from autoscaler.replay.open_loop import Replay


def _ts(t: float) -> str:
    return dt.datetime.fromtimestamp(t, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def to_json(recording: Recording, replays: list[Replay], summaries: list[dict[str, Any]]) -> dict[str, Any]:
    h = recording.header
    ticks = []
    for i, step in enumerate(recording.steps):
        first = replays[0].ticks[i]
        row: dict[str, Any] = {
            "t": step.t,
            "recorded_replicas": first.current,
            "recorded_next": first.recorded_next,
            "ready": first.ready,
            "waiting_total": first.waiting_total,
            "policies": [
                {"desired": r.ticks[i].desired, "reason": r.ticks[i].reason, "clamp": r.ticks[i].clamp}
                for r in replays
            ],
        }
        ticks.append(row)
    return {
        "recording": {
            "target": h.target,
            "step_seconds": h.step_seconds,
            "start": h.start,
            "end": h.end,
            "steps": len(recording.steps),
            "metadata": h.metadata,
        },
        "mode": "open-loop",
        "policies": summaries,
        "ticks": ticks,
    }


def write_json(path: str | Path, doc: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(doc, indent=1, allow_nan=False, default=str) + "\n", encoding="utf-8")


def print_report(
    console: Console, recording: Recording, replays: list[Replay], summaries: list[dict[str, Any]], limit: int
) -> None:
    h = recording.header
    console.print(
        f"[bold]{h.target}[/bold]: {len(recording.steps)} steps of {h.step_seconds:g} s, "
        f"{_ts(h.start)} .. {_ts(h.end)} UTC (open loop: the recorded spec replicas are current each tick)"
    )
    notes = h.metadata.get("notes")
    for note in notes if isinstance(notes, list) else []:  # metadata is free-form: a non-list is not shown
        console.print(f"  [dim]note: {str(note)[:500]}[/dim]")
    two = len(replays) > 1
    labels = ["A", "B"][: len(replays)] if two else ["replay"]
    if two:
        for lab, r in zip(labels, replays):
            console.print(f"  {lab} = {r.policy}")
    summary = Table(title="Summary")
    summary.add_column("")
    for lab, s in zip(labels, summaries):
        summary.add_column(f"{lab}: {Path(str(s['policy'])).name}" if two else str(s["policy"]), overflow="fold")
    rows = [
        ("ticks", "ticks"),
        ("ticks differing from what ran", "ticks_differing"),
        ("scale actions (replayed)", "scale_actions"),
        ("  up / down", None),
        ("scale actions (recorded)", "recorded_scale_actions"),
        ("GPU-hours asked (open loop)", "desired_gpu_hours"),
        ("GPU-hours recorded", "recorded_gpu_hours"),
        ("max replicas asked", "max_desired"),
    ]
    for label, key in rows:
        if key is None:
            summary.add_row(label, *[f"{s['scale_ups']} / {s['scale_downs']}" for s in summaries])
        else:
            summary.add_row(label, *[_fmt(s[key]) for s in summaries])
    summary.add_row("top reasons", *[
        ", ".join(f"{k} {v}" for k, v in list(s["reasons"].items())[:3]) for s in summaries
    ])
    console.print(summary)

    two = len(replays) > 1
    title = "Ticks where the configs differ" if two else "Ticks where the replay differs from what ran"
    table = Table(title=title)
    table.add_column("time (UTC)", no_wrap=True)
    table.add_column("now", justify="right")
    table.add_column("ran", justify="right")
    table.add_column("waiting", justify="right")
    for lab in labels:
        table.add_column(lab, justify="right")
        table.add_column(f"{lab} reason (clamp)", overflow="fold")
    shown = 0
    total = 0
    for i in range(len(recording.steps)):
        ticks = [r.ticks[i] for r in replays]
        differs = (len({t.desired for t in ticks}) > 1) if two else ticks[0].differs
        if not differs:
            continue
        total += 1
        if shown >= limit:
            continue
        shown += 1
        first = ticks[0]
        cells: list[str] = []
        for t in ticks:
            cells += [str(t.desired), t.reason + (f" ({t.clamp})" if t.clamp else "")]
        table.add_row(
            _ts(first.t)[5:], str(first.current), "-" if first.recorded_next is None else str(first.recorded_next),
            f"{first.waiting_total:.0f}", *cells,
        )
    if total:
        console.print(table)
        if total > shown:
            console.print(f"[dim]{total - shown} more differing ticks (see --output-file)[/dim]")
    else:
        console.print("[green]no differing tick[/green]")


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.1f}"
    return str(v)


def plot(path: str | Path, recording: Recording, replays: list[Replay]) -> None:
    """Recorded vs replayed replicas, the queue, and the reason of each tick. Needs matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = recording.header.start
    xs = [(s.t - t0) / 3600.0 for s in recording.steps]
    fig, axes = plt.subplots(3, 1, figsize=(11, 8), sharex=True, gridspec_kw={"height_ratios": [3, 2, 2]})
    first = replays[0].ticks
    axes[0].step(xs, [t.current for t in first], where="post", label="recorded (spec)", color="black", linewidth=1.5)
    for r in replays:
        axes[0].step(xs, [t.desired for t in r.ticks], where="post", label=f"replayed: {r.policy}", linewidth=1)
    axes[0].set_ylabel("replicas")
    axes[0].legend(loc="upper left", fontsize=8)
    axes[1].plot(xs, [t.waiting_total for t in first], color="tab:red", linewidth=1)
    axes[1].set_ylabel("requests waiting")
    reasons = sorted({t.reason for r in replays for t in r.ticks})
    index = {name: i for i, name in enumerate(reasons)}
    for j, r in enumerate(replays):
        axes[2].scatter(xs, [index[t.reason] + 0.15 * j for t in r.ticks], s=3, label=r.policy)
    axes[2].set_yticks(range(len(reasons)))
    axes[2].set_yticklabels(reasons, fontsize=7)
    axes[2].set_xlabel(f"hours since {_ts(t0)} UTC")
    fig.suptitle(f"{recording.header.target}: open-loop replay")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
