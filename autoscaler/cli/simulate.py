"""`autoscaler simulate`: replay a trace through the fleet model under one or more policies."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
import yaml

from autoscaler.cli.errors import fail
from autoscaler.config.atomic import atomic_path

MAX_JOBS = 256


@click.command("simulate")
@click.option("--trace", "trace_path", type=click.Path(exists=False), help="Canonical CSV, or a ServeGen prefix (.../servegen/m-mid).")
@click.option("--scenario", type=click.Path(exists=True, dir_okay=False), help="A scenario YAML (simulations/scenarios); flags override it.")
@click.option("--profile", default=None, help="Profile name (simulations/profiles/NAME.yaml) or path. Default qwen3-8b-h100.")
@click.option("--policy", "policies", multiple=True, help="Policy to run; repeat. Default: all. Known: queue-lead, hpa-queue, hpa-cpu, keda, kpa, aibrix-apa, wva, ray, static-peak, oracle.")
@click.option("--rate-scale", type=float, default=None, help="Multiply the arrival rate by X.")
@click.option("--peak-replicas", type=int, default=None, help="Rescale the rate so that the peak needs N replicas.")
@click.option("--start", type=float, default=None, help="Slice start, seconds into the trace.")
@click.option("--duration", type=float, default=None, help="Slice length in seconds (default: to the end).")
@click.option("--dt", type=float, default=None, help="Simulation tick in seconds (default 1).")
@click.option("--max-replicas", type=int, default=None, help="Every policy's max replicas (default 100).")
@click.option("--queue-lead-knob", type=click.Choice(["target_kv_cache_usage_ratio", "target_running_per_replica"]),
              default=None, help="Which queue-lead target the sweep varies (default: the scenario's, else the KV target).")
@click.option("--knobs", "knob_grids", multiple=True, metavar="POLICY=V1,V2,...",
              help="With --sweep: sweep only these values for POLICY (a coarse sweep); repeat per policy.")
@click.option("--sweep", is_flag=True, help="Sweep each policy's main knob and report the cost to reach 99 % SLO attainment.")
@click.option("--jobs", type=int, default=None, help="Worker processes for --sweep (default: CPU count).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="Write results as JSON.")
@click.option("--plot", "plot_out", type=click.Path(dir_okay=False), default=None, help="Write a PNG: arrivals, queue, replicas.")
@click.option("--markdown", "md_out", type=click.Path(dir_okay=False), default=None, help="Write the table as Markdown.")
def simulate(trace_path: str | None, scenario: str | None, profile: str | None, policies: tuple[str, ...],
             rate_scale: float | None, peak_replicas: int | None, start: float | None, duration: float | None,
             dt: float | None, max_replicas: int | None, queue_lead_knob: str | None, knob_grids: tuple[str, ...], sweep: bool, jobs: int | None, json_out: str | None,
             plot_out: str | None, md_out: str | None) -> None:
    """Simulate a vLLM fleet on a real trace under each policy and print the scoreboard."""
    from dataclasses import replace

    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    from autoscaler.sim.experiment import (
        Scenario,
        check_knob,
        default_knob,
        prepare,
        run_many,
        run_one,
        sweep_jobs,
    )
    from autoscaler.sim.policies import POLICIES
    from autoscaler.sim.runner import RunResult
    from autoscaler.sim.scoreboard import markdown, rich_table, to_json

    console = Console(width=max(Console().width, 150))
    if not scenario and not trace_path:
        raise click.UsageError("give --trace or --scenario")
    if jobs is not None and jobs < 1:
        fail(f"--jobs {jobs}: must be >= 1")
    if jobs is not None and jobs > MAX_JOBS:
        fail(f"--jobs {jobs}: must be <= {MAX_JOBS}")
    try:
        sc = Scenario.load(scenario) if scenario else Scenario(name=Path(str(trace_path)).stem, trace=str(trace_path))
    except (ValueError, TypeError, OSError, yaml.YAMLError) as exc:
        fail(str(exc))
    over: dict[str, object] = {}
    if trace_path and scenario:
        over["trace"] = trace_path
    for key, val in (("profile", profile), ("rate_scale", rate_scale), ("peak_replicas", peak_replicas),
                     ("start", start), ("duration", duration), ("dt", dt), ("max_replicas", max_replicas),
                     ("queue_lead_knob", queue_lead_knob)):
        if val is not None:
            over[key] = val
    if rate_scale is not None:
        over["peak_replicas"] = None
    if policies:
        unknown = [p for p in policies if p not in POLICIES]
        if unknown:
            fail(f"--policy: unknown policy {', '.join(unknown)}; known: {', '.join(POLICIES)}")
        over["policies"] = tuple(policies)
    grids: dict[str, tuple[float, ...]] = dict(sc.knobs)  # the scenario's, then --knobs (checked before any run)
    for g in knob_grids:
        pol, _, vals = g.partition("=")
        if pol not in POLICIES or not vals:
            fail(f"--knobs {g!r}: expected POLICY=V1,V2,... with a known policy")
        try:
            grids[pol] = tuple(float(v) for v in vals.split(","))
        except ValueError:
            fail(f"--knobs {g!r}: values must be numbers")
    try:
        sc = replace(sc, **over)  # type: ignore[arg-type]
        for pol, values in grids.items():  # finite, > 0, in the policy's range: before any run
            for value in values:
                check_knob(sc, pol, value, f"--knobs {pol}")
        prep = prepare(sc)
    except (ValueError, OSError) as exc:  # a bad range, trace file or slice: one line, nothing written
        fail(str(exc))
    if "static-peak" in sc.policies:  # a fixed fleet must fit the simulated cluster (it has max_replicas + 8 pods)
        import math

        swept = [k for _, k in sweep_jobs(["static-peak"], sc.queue_lead_knob, grids)] if sweep else []
        for k in {default_knob(sc, "static-peak"), *(k for k in swept if k is not None)}:
            n = max(1, math.ceil(k * prep.peak_need - 1e-9))
            if n > sc.max_replicas + 8:
                fail(f"static-peak at {k:g} x the peak need ({prep.peak_need}) is {n} replicas, more than the simulated "
                     f"cluster holds (allowed: at most max_replicas + 8 = {sc.max_replicas + 8}); raise --max-replicas")
    desc = (f"{prep.trace.describe()} | {prep.profile.name} | capacity {prep.capacity_rps:.1f} req/s/replica | "
            f"peak needs {prep.peak_need} replicas")
    console.print(desc)
    names = list(sc.policies)
    results: dict[str, RunResult] = {}
    sweeps: dict[str, list[RunResult]] | None = None
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeElapsedColumn(), console=console, transient=True) as bar:
        if not sweep:
            for name in names:
                task = bar.add_task(f"{name:12s}", total=1.0)

                def _tick(f: float, task: TaskID = task) -> None:
                    bar.update(task, completed=f)

                results[name] = run_one(prep, name, None, progress=_tick)
                bar.update(task, completed=1.0)
        else:
            sweep_list = sweep_jobs(names, sc.queue_lead_knob, grids)
            # a policy's default run is its sweep run at the default knob when the grid holds it
            defaults = {n: default_knob(sc, n) for n in names}
            extra = [(n, None) for n in names if (n, defaults[n]) not in sweep_list]
            jobs_list = extra + sweep_list
            task = bar.add_task(f"sweep ({len(jobs_list)} runs)", total=len(jobs_list))
            done = run_many(prep, jobs_list, workers=jobs or os.cpu_count() or 1,
                            on_done=lambda r: bar.advance(task))
            results = {job[0]: r for job, r in zip(extra, done)}
            sweeps = {n: [] for n in names}
            for job, r in zip(sweep_list, done[len(extra):]):
                sweeps[r.policy].append(r)
                if job[1] == defaults[job[0]]:
                    results.setdefault(job[0], r)
            results = {n: results[n] for n in names}
    meta = {"scenario": sc.name, "trace": prep.trace.describe(), "rate_scale": prep.trace.scale,
            "profile": prep.profile.name, "capacity_rps_per_replica": prep.capacity_rps, "peak_need": prep.peak_need,
            "slo": {"ttft_s": sc.slo_ttft_s, "tpot_s": sc.slo_tpot_s}, "dt_s": sc.dt,
            "queue_lead_params": sc.queue_lead, "queue_lead_knob": sc.queue_lead_knob or "target_kv_cache_usage_ratio",
            "knob_grid_overrides": list(knob_grids), "scenario_knob_grids": {k: list(v) for k, v in sc.knobs.items()},
            "initial_replicas": prep.cfg.initial_replicas,
            "oracle_lower_bound_gpu_hours_u085": prep.oracle_bound_gpu_hours(0.85)}
    console.print(rich_table(results, sweeps, desc))
    # each output whole or not at all (a temporary file renamed over it, `config.atomic`)
    if json_out:
        Path(json_out).parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(json_out) as tmp:
            tmp.write_text(json.dumps(to_json(results, sweeps, meta), indent=1, default=float))
    if md_out:
        Path(md_out).parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(md_out) as tmp:
            tmp.write_text(f"{desc}\n\n" + markdown(results, sweeps))
    if plot_out:
        from autoscaler.sim.plot import plot

        Path(plot_out).parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(plot_out) as tmp:
            plot(results, tmp, desc)
        console.print(f"plot: {plot_out}")
