"""`autoscaler replay`: what-if replay against recorded metrics.

Every failure the user can fix (unreadable, truncated or corrupt file, other format version,
a series the policy needs missing, config without the target, Prometheus errors) prints one
line `error: ...` to stderr and exits 2.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from autoscaler.cli.errors import fail
from autoscaler.cli.output import (
    JSON,
    TEXT,
    check_distinct_paths,
    check_output_path,
    console,
    finite,
    no_progress_option,
    output_file_option,
    output_option,
    print_json,
    require_extra,
    resolve_output_file,
)
from autoscaler.config.atomic import atomic_paths
from autoscaler.cli.values import parse_target


@click.command("replay")
@click.option("--metrics", required=True, type=click.Path(dir_okay=False), help="Recording (or Prometheus query_range export).")
@click.option("--config", "configs", required=True, multiple=True,
              help="Config file, or `hpa-queue[:target=5,min=1,max=10]`. Twice for a side-by-side diff.")
@click.option("--target", "target_text", default=None, help="NAMESPACE/DEPLOYMENT (default: the recording's).")
@click.option("--free-gpus", type=int, default=None, help="Free GPUs to assume each tick (default: unknown).")
@output_option(TEXT, JSON)
@output_file_option("the full timeline")
@click.option("--plot", "plot_out", default=None, type=click.Path(dir_okay=False), help="Write a PNG plot (matplotlib).")
@click.option("--limit", default=40, show_default=True, help="Differing ticks shown in the table.")
@no_progress_option()
@click.option("--closed-loop", "recorded_policy", default=None, metavar="RECORDED",
              help="Also run the closed-loop counterfactual on the fleet model: RECORDED is the policy that ran "
                   "(config file or hpa-queue[:...]); the --config are the candidates.")
@click.option("--profile", "profile_name", default="qwen3-8b-h100", show_default=True,
              help="Fleet-model profile of the closed-loop run (simulations/profiles/NAME.yaml or a path).")
@click.option("--seed", default=0, show_default=True, help="Seed of the rebuilt arrivals.")
def replay(
    metrics: str, configs: tuple[str, ...], target_text: str | None, free_gpus: int | None, output: str,
    output_file: str | None, json_alias: str | None, plot_out: str | None, limit: int, no_progress: bool,
    recorded_policy: str | None, profile_name: str, seed: int,
) -> None:
    """Open-loop replay: recorded observations through the same decide() the controller runs."""
    from rich.progress import Progress

    from autoscaler.replay.format import RecordingError
    from autoscaler.replay.open_loop import load_policy
    from autoscaler.replay.open_loop import replay as do_replay
    from autoscaler.replay.reader import read_recording
    from autoscaler.replay.report import plot, print_report, to_json, write_json

    fmt, json_out = resolve_output_file(output, output_file, json_alias)
    check_output_path("--output-file", json_out)
    check_output_path("--plot", plot_out, ".png")
    check_distinct_paths([("--output-file", json_out), ("--plot", plot_out)],
                         [("--metrics", metrics), ("--closed-loop", recorded_policy), ("--profile", profile_name)]
                         + [("--config", c) for c in configs])
    if plot_out:
        require_extra("matplotlib", "replay", "--plot")
    if recorded_policy is not None:
        require_extra("numpy", "replay", "--closed-loop")
    if len(configs) > 2:
        fail("at most two --config")
    if not 0 <= limit <= 10**6:
        fail(f"--limit {limit}: must be 0 .. 1000000")
    if free_gpus is not None and not 0 <= free_gpus <= 10**6:
        fail(f"--free-gpus {free_gpus}: must be 0 .. 1000000")
    if not 0 <= seed < 2**63:
        fail(f"--seed {seed}: must be 0 .. 2^63 - 1")
    try:
        target = parse_target(target_text) if target_text else None
    except ValueError as exc:
        fail(str(exc))
    try:
        recording = read_recording(metrics)
        ns, name = target if target else (recording.header.namespace, recording.header.deployment)
        if not ns or not name:
            raise RecordingError(f"{metrics}: the recording names no target: pass --target NAMESPACE/DEPLOYMENT")
        policies = [check_baseline(c, load_policy(c, ns, name)) for c in configs]
        closed_inputs = (_closed_loop_inputs(recording, recorded_policy, configs, ns, name, profile_name, seed)
                         if recorded_policy is not None else None)  # checked before any work is shown
        screen = console()
        replays = []
        show = not no_progress and len(recording.steps) >= 20_000
        with Progress(console=console(stderr=True), disable=not show, transient=True) as bar:
            for p in policies:
                task = bar.add_task(f"replaying {p.name}", total=len(recording.steps))

                def advance(n: int, task: Any = task) -> None:
                    bar.advance(task, n)

                replays.append(do_replay(recording, p, free_gpus=free_gpus, progress=advance))
    except RecordingError as exc:
        fail(str(exc))
    summaries: list[dict[str, Any]] = [
        r.summary(recording.header.step_seconds, p.gpus_per_replica) for r, p in zip(replays, policies)
    ]
    text = fmt == TEXT
    if text:
        print_report(screen, recording, replays, summaries, limit)
    closed: dict[str, Any] | None = None
    if closed_inputs is not None:
        closed = _closed_loop(screen if text else None, recording, closed_inputs, profile_name, seed)
    doc: dict[str, Any] | None = None
    if json_out or not text:
        doc = to_json(recording, replays, summaries)
        if closed is not None:
            doc["counterfactual"] = closed
    if doc is not None and not text:
        print_json(doc, indent=1, default=str)
    writers: list[tuple[str, Callable[[Path], object]]] = []
    if json_out and doc is not None:
        document: dict[str, Any] = finite(doc)  # NaN and infinities as null, as on stdout (strict JSON)
        writers.append((json_out, lambda tmp: write_json(tmp, document)))
    if plot_out:
        writers.append((plot_out, lambda tmp: plot(tmp, recording, replays)))
    try:
        with atomic_paths([p for p, _ in writers]) as tmps:  # all whole or none (`config.atomic`)
            for tmp, (_, write) in zip(tmps, writers):
                write(tmp)
    except OSError as exc:
        fail(f"cannot write output: {exc}")


# `hpa-queue:KEY=VALUE` options: (field of HpaParams, low, high); a value outside made the
# baseline divide by zero or overflow (target=1e-320, target=inf) or run on garbage (min=-5).
_BASELINE_RANGES: dict[str, tuple[str, float, float]] = {
    "target": ("target_average_value", 1e-3, 1e6),
    "min": ("min_replicas", 0, 10_000),
    "max": ("max_replicas", 1, 10_000),
    "tolerance": ("tolerance", 0.0, 0.99),
    "down_window": ("scale_down_window_seconds", 0, 3600),
    "gpus_per_replica": ("gpus_per_replica", 1, 64),
}


def check_baseline(spec: str, policy: Any) -> Any:
    """`policy` if its baseline options are in range (HPA's own limits where it has them: a
    stabilization window of at most 3600 s); else `RecordingError` naming the option."""
    import math

    from autoscaler.baselines.hpa import HpaParams
    from autoscaler.replay.format import RecordingError

    params = getattr(policy, "params", None)
    if not isinstance(params, HpaParams):
        return policy
    for option, (field_name, lo, hi) in _BASELINE_RANGES.items():
        value = getattr(params, field_name)
        if not (math.isfinite(value) and lo <= value <= hi):
            raise RecordingError(f"{spec}: {option} = {value!r} is out of range (allowed: {lo:g} .. {hi:g})")
    return policy


def _check_rebuilt_demand(recording: Any, seed: int) -> None:
    """The closed loop generates the rebuilt arrivals: refuse, before, more requests or longer
    ones than the simulator reads from a trace (`sim.experiment.MAX_REQUESTS`, `sim.traces.MAX_TOKENS`)."""
    from autoscaler.sim.counterfactual import RebuiltTrace
    from autoscaler.sim.experiment import MAX_REQUESTS
    from autoscaler.sim.traces import MAX_TOKENS

    rebuilt = RebuiltTrace(recording, seed=seed)
    expected = sum(rebuilt.rates) * rebuilt.step
    if not expected <= MAX_REQUESTS:
        fail(f"--closed-loop: the recording's demand rebuilds to ~{expected:.3g} requests (allowed: at most "
             f"{MAX_REQUESTS:,}): its requests/s or queue growth are out of range")
    for what, mean in (("prompt", rebuilt.mean_in), ("output", rebuilt.mean_out)):
        if not 0.0 <= mean <= MAX_TOKENS:
            fail(f"--closed-loop: the recording's mean {what} length is {mean:.3g} tokens (allowed: 0 .. {MAX_TOKENS:,})")


def _closed_loop_inputs(recording: Any, recorded: str, candidates: tuple[str, ...], ns: str, name: str,
                        profile_name: str, seed: int) -> tuple[Any, list[Any], Any]:
    """(the recorded policy, the candidates, the fleet profile) of `--closed-loop`, each checked
    before the open-loop replay runs or prints anything: a bad one is one line, exit 2."""
    from autoscaler.replay.format import RecordingError
    from autoscaler.replay.open_loop import load_policy

    try:
        from autoscaler.sim.profile import load_profile
    except ImportError as exc:
        fail(f"--closed-loop needs the simulator's dependencies (numpy): {exc}")
    try:
        base = check_baseline(recorded, load_policy(recorded, ns, name))
        cands = [check_baseline(c, load_policy(c, ns, name)) for c in candidates]
    except RecordingError as exc:
        fail(str(exc))
    _check_rebuilt_demand(recording, seed)
    try:
        profile = load_profile(profile_name)
    except (OSError, ValueError, KeyError) as exc:
        fail(f"--profile {profile_name}: {exc}")
    return base, cands, profile


def _closed_loop(screen: Any, recording: Any, inputs: tuple[Any, list[Any], Any], profile_name: str,
                 seed: int) -> dict[str, Any]:
    from rich.table import Table

    from autoscaler.sim.counterfactual import counterfactual

    base, cands, profile = inputs
    out = counterfactual(recording, base, cands, profile, seed=seed)
    out.pop("results")
    if screen is None:  # -o json: the counterfactual is in the document
        return out
    table = Table(title=f"Closed-loop counterfactual (fleet model, profile {profile_name})")
    table.add_column("")
    labels = ["recorded: " + base.name] + [f"{chr(65 + i)}: {c.name}" for i, c in enumerate(cands)]
    for lab in labels:
        table.add_column(lab, overflow="fold")
    for key, label in (("slo_attainment", "SLO attainment"), ("ttft_p99_s", "TTFT p99 (s)"),
                       ("gpu_hours", "GPU-hours"), ("scale_actions", "scale actions"),
                       ("peak_replicas", "peak replicas"), ("requests", "requests")):
        table.add_row(label, *[f"{b[key]:.3g}" if isinstance(b[key], float) else str(b[key])
                               for b in out["scoreboard"]])
    screen.print(table)
    f = out["fidelity"]
    screen.print(
        f"demand rebuilt from the recording: {out['demand_rebuild']['arrivals']}; prompt lengths: "
        f"{out['demand_rebuild']['prompt_lengths']}; output lengths: {out['demand_rebuild']['output_lengths']}"
    )
    screen.print(
        f"fidelity of the rebuilt run of the recorded policy over {f['minutes']} min: replicas off by "
        f"{f['replicas_mae']:.2f} on average, replica-hours {f['replica_hours_error']:+.1%}, requests waiting off by "
        f"{f['waiting_mae']:.1f} on average (recorded mean {f['recorded_waiting_mean']:.1f})"
    )
    return out
