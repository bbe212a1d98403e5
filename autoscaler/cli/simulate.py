"""`autoscaler simulate`: replay a trace through the fleet model under one or more policies, or
sweep the preregistered protocol (simulations/preregistered.yaml) with seeds (docs/benchmark.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml

from autoscaler.cli.errors import fail
from autoscaler.cli.output import (
    JSON,
    TEXT,
    check_distinct_paths,
    check_output_path,
    check_output_suffix,
    console,
    no_progress_option,
    output_file_option,
    output_option,
    print_json,
    require_extra,
    resolve_output_file,
)
from autoscaler.config.atomic import atomic_paths

if TYPE_CHECKING:
    from autoscaler.sim.experiment import Prepared, Protocol, Scenario

MAX_JOBS = 256
MAX_SEEDS = 100
MIN_WIDTH = 150
"""Width of the scoreboard on a terminal narrower than that (a pipe: no wrapping at all)."""


@dataclass(frozen=True)
class Outputs:
    """Where the results go: `fmt` on stdout, the JSON document, Markdown and plot files."""

    fmt: str
    json_path: str | None
    md_path: str | None
    plot_path: str | None
    progress: bool

    @property
    def text(self) -> bool:
        return self.fmt == TEXT


@click.command("simulate")
@click.option("--trace", "trace_path", type=click.Path(exists=False), help="Canonical CSV, or a ServeGen prefix (.../servegen/m-mid).")
@click.option("--scenario", type=click.Path(exists=True, dir_okay=False), help="A scenario YAML (simulations/scenarios); flags override it.")
@click.option("--profile", default=None, help="Profile name (simulations/profiles/NAME.yaml) or path. Default qwen3-8b-h100.")
@click.option("--policy", "policies", multiple=True, help="Policy to run; repeat. Default: the scenario's (a sweep: the protocol's).")
@click.option("--rate-scale", type=float, default=None, help="Multiply the arrival rate by X.")
@click.option("--peak-replicas", type=int, default=None, help="Rescale the rate so that the peak needs N replicas.")
@click.option("--start", type=float, default=None, help="Slice start, seconds into the trace.")
@click.option("--duration", type=float, default=None, help="Slice length in seconds (default: to the end).")
@click.option("--dt", type=float, default=None, help="Simulation tick in seconds (default 1).")
@click.option("--max-replicas", type=int, default=None, help="Every policy's max replicas (default 100).")
@click.option("--routing", type=click.Choice(["least_outstanding", "random"]), default=None,
              help="How requests pick a ready pod: the least loaded (default), or at random as a Kubernetes Service does.")
@click.option("--knobs", "knob_grids", multiple=True, metavar="POLICY=V1,V2,...",
              help="With --sweep: sweep these values for POLICY instead of the protocol's grid (exploration: the "
                   "JSON says preregistered: false); repeat per policy.")
@click.option("--sweep", is_flag=True, help="Every policy of the protocol x its grid x seeds: frontiers, cost at the "
                                            "attainment targets, the lower bound.")
@click.option("--seeds", type=int, default=None, help="With --sweep: seeds 0 .. N-1 (default: the protocol's).")
@click.option("--jobs", type=int, default=None, help="Worker processes for --sweep (default: CPU count).")
@click.option("--executor", default="local", show_default=True, help="Where --sweep runs (autoscaler.sim.executor).")
@output_option(TEXT, JSON)
@output_file_option("the results")
@click.option("--plot", "plot_out", type=click.Path(dir_okay=False), default=None,
              help="Write a PNG: arrivals, queue, replicas (a sweep: the cost frontier).")
@click.option("--markdown", "md_out", type=click.Path(dir_okay=False), default=None, help="Write the table as Markdown.")
@no_progress_option()
def simulate(trace_path: str | None, scenario: str | None, profile: str | None, policies: tuple[str, ...],
             rate_scale: float | None, peak_replicas: int | None, start: float | None, duration: float | None,
             dt: float | None, max_replicas: int | None, routing: str | None, knob_grids: tuple[str, ...], sweep: bool, seeds: int | None,
             jobs: int | None, executor: str, output: str, output_file: str | None, json_alias: str | None,
             plot_out: str | None, md_out: str | None, no_progress: bool) -> None:
    """Simulate a vLLM fleet on a real trace under each policy and print the scoreboard."""
    from dataclasses import replace

    fmt, json_out = resolve_output_file(output, output_file, json_alias)
    check_output_suffix("--plot", plot_out, ".png")  # the name alone, first: its folder may be made later
    outs = Outputs(fmt, json_out, md_out, plot_out, not no_progress)
    require_extra("numpy", "sim", "autoscaler simulate")
    require_extra("highspy", "sim", "autoscaler simulate")  # the sweep's lead-time bound (sim/lead_bound.py)
    if plot_out:
        require_extra("matplotlib", "sim", "--plot")
    from autoscaler.sim.experiment import Scenario, known_policies, known_policy, prepared_for

    if not scenario and not trace_path:
        raise click.UsageError("give --trace or --scenario")
    _check_counts(jobs, seeds, sweep, knob_grids)
    try:
        sc = Scenario.load(scenario) if scenario else Scenario(name=Path(str(trace_path)).stem, trace=str(trace_path))
    except (ValueError, TypeError, OSError, yaml.YAMLError) as exc:
        fail(str(exc))
    over: dict[str, object] = {}
    if trace_path and scenario:
        over["trace"] = trace_path
    for key, val in (("profile", profile), ("rate_scale", rate_scale), ("peak_replicas", peak_replicas),
                     ("start", start), ("duration", duration), ("dt", dt), ("max_replicas", max_replicas),
                     ("routing", routing)):
        if val is not None:
            over[key] = val
    if rate_scale is not None:
        over["peak_replicas"] = None
    unknown = [p for p in policies if not known_policy(p)]
    if unknown:
        fail(f"--policy: unknown policy {', '.join(unknown)}; known: {', '.join(known_policies())}")
    if policies and not sweep:
        over["policies"] = tuple(policies)
    grids = _parse_knobs(knob_grids)
    try:
        sc = replace(sc, **over)  # type: ignore[arg-type]
        prep = prepared_for(sc, sc.seed)  # kept: a sweep's forked workers start with it
    except (ValueError, OSError) as exc:  # a bad range, trace file or slice: one line, nothing written
        fail(str(exc))
    check_distinct_paths([("--output-file", json_out), ("--markdown", md_out), ("--plot", plot_out)],
                         [("--scenario", scenario), ("--trace", sc.trace), ("--profile", profile)])
    for flag, path, suffix in (("--output-file", json_out, None), ("--markdown", md_out, None),
                               ("--plot", plot_out, ".png")):
        # once every other input is known good, before the run (not after it): folders made now
        check_output_path(flag, path, suffix, make_folder=True)
    if sweep:
        exploratory = bool(over or policies or knob_grids or not scenario)
        _sweep(sc, prep, list(policies), grids, seeds, exploratory, jobs, executor, outs)
    else:
        _single(sc, prep, outs)


def _check_counts(jobs: int | None, seeds: int | None, sweep: bool, knob_grids: tuple[str, ...]) -> None:
    if jobs is not None and not 1 <= jobs <= MAX_JOBS:
        fail(f"--jobs {jobs}: must be >= 1 and <= {MAX_JOBS}")
    if seeds is not None and not 1 <= seeds <= MAX_SEEDS:
        fail(f"--seeds {seeds}: must be >= 1 and <= {MAX_SEEDS}")
    if not sweep and (seeds is not None or knob_grids):
        fail("--seeds and --knobs go with --sweep")


def _parse_knobs(knob_grids: tuple[str, ...]) -> dict[str, tuple[float, ...]]:
    from autoscaler.sim.experiment import known_policy

    grids: dict[str, tuple[float, ...]] = {}
    for g in knob_grids:
        pol, _, vals = g.partition("=")
        if not known_policy(pol) or not vals:
            fail(f"--knobs {g!r}: expected POLICY=V1,V2,... with a known policy")
        try:
            grids[pol] = tuple(float(v) for v in vals.split(","))
        except ValueError:
            fail(f"--knobs {g!r}: values must be numbers")
    return grids


def _describe(prep: Prepared) -> str:
    return (f"{prep.trace.describe()} | {prep.profile.name} | capacity {prep.capacity_rps:.1f} req/s/replica | "
            f"peak needs {prep.peak_need} replicas")


def _routing(sc: Scenario) -> dict[str, str]:
    """`routing` for a document's meta when it is not the published runs' least outstanding (absent: that)."""
    return {} if sc.routing == "least_outstanding" else {"routing": sc.routing}


def _write(outputs: list[tuple[str | None, Callable[[Path], object]]]) -> None:
    """Every output given whole, or none of them (`config.atomic.atomic_paths`); their folders
    are made. A write that fails is one line and exit 2."""
    given = [(p, w) for p, w in outputs if p]
    try:
        for p, _ in given:
            Path(p).parent.mkdir(parents=True, exist_ok=True)
        with atomic_paths([p for p, _ in given]) as tmps:
            for tmp, (_, write) in zip(tmps, given):
                write(tmp)
    except OSError as exc:
        fail(f"cannot write output: {exc}")


def _single(sc: Scenario, prep: Prepared, outs: Outputs) -> None:
    from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    from autoscaler.sim.experiment import run_one
    from autoscaler.sim.runner import RunResult
    from autoscaler.sim.scoreboard import markdown, rich_table, to_json

    for name in sc.policies:
        _check_static(sc, prep, name, [])
    screen = console(min_width=MIN_WIDTH)
    desc = _describe(prep)
    if outs.text and outs.progress:  # what is running, beside the progress bars; the table repeats it
        console(stderr=True).print(desc)
    results: dict[str, RunResult] = {}
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeElapsedColumn(), console=console(stderr=True), transient=True,
                  disable=not outs.progress) as bar:
        for name in sc.policies:
            task = bar.add_task(f"{name:12s}", total=1.0)

            def _tick(f: float, task: TaskID = task) -> None:
                bar.update(task, completed=f)

            results[name] = run_one(prep, name, None, progress=_tick)
            bar.update(task, completed=1.0)
    meta = {"scenario": sc.name, "trace": prep.trace.describe(), "rate_scale": prep.trace.scale,
            "profile": prep.profile.name, "capacity_rps_per_replica": prep.capacity_rps, "peak_need": prep.peak_need,
            "slo": sc.slo.as_dict(), "dt_s": sc.dt, "seed": sc.seed, "initial_replicas": prep.cfg.initial_replicas,
            **_routing(sc)}
    doc = to_json(results, meta)
    if outs.text:
        screen.print(rich_table(results, desc))
    else:
        print_json(doc, indent=1)
    from autoscaler.sim.plot import plot

    _write([(outs.json_path, lambda tmp: tmp.write_text(json.dumps(doc, indent=1, default=float))),
            (outs.md_path, lambda tmp: tmp.write_text(f"{desc}\n\n" + markdown(results))),
            (outs.plot_path, lambda tmp: plot(results, tmp, desc))])
    if outs.plot_path:
        click.echo(f"plot: {outs.plot_path}", err=not outs.text)


def _check_static(sc: Scenario, prep: Prepared, name: str, grid: list[float]) -> None:
    """A fixed fleet must fit the simulated cluster (it has max_replicas + 8 pods)."""
    from autoscaler.sim.experiment import default_knob, registry_name, static_replicas

    if registry_name(name) != "static":
        return
    for k in grid or [default_knob(sc, name)]:
        n = static_replicas(k, prep.peak_need)
        if n > sc.max_replicas + 8:
            fail(f"{name} at {k:g} x the peak need ({prep.peak_need}) is {n} replicas, more than the simulated "
                 f"cluster holds (allowed: at most max_replicas + 8 = {sc.max_replicas + 8}); raise --max-replicas")


def _sweep_grids(sc: Scenario, protocol: Protocol, names: list[str],
                 overrides: dict[str, tuple[float, ...]]) -> dict[str, tuple[float, ...]]:
    from autoscaler.sim.experiment import check_knob

    grids: dict[str, tuple[float, ...]] = {}
    for name in names or list(protocol.grids):
        grid = overrides.get(name, protocol.grids.get(name))
        if grid is None:
            fail(f"--policy {name}: the protocol has no grid for it; give one with --knobs {name}=V1,V2,...")
        grids[name] = grid
    for pol in overrides:
        if pol not in grids:
            fail(f"--knobs {pol}: not a policy of this sweep ({', '.join(grids)})")
    try:
        for pol, values in grids.items():  # finite, > 0, in the policy's range: before any run
            for value in values:
                check_knob(sc, pol, value, f"--knobs {pol}")
    except ValueError as exc:
        fail(str(exc))
    return grids


def _sweep(sc: Scenario, prep: Prepared, names: list[str], overrides: dict[str, tuple[float, ...]],
           n_seeds: int | None, exploratory: bool, jobs: int | None, executor: str, outs: Outputs) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from autoscaler.sim.executor import ExecutorError, check_spec
    from autoscaler.sim.experiment import load_protocol, run_sweep
    from autoscaler.sim.scoreboard import sweep_document, sweep_markdown

    try:
        check_spec(executor)  # a bad spec or a missing extra fails before any run
        protocol = load_protocol()
    except (ValueError, OSError, ExecutorError) as exc:
        fail(str(exc))
    grids = _sweep_grids(sc, protocol, names, overrides)
    for name, grid in grids.items():
        _check_static(sc, prep, name, list(grid))
    seeds = list(range(n_seeds)) if n_seeds is not None else list(protocol.seeds_for(sc.name))
    named = sc.name in protocol.evaluation or sc.name.startswith("tuning-")
    preregistered = not exploratory and named and tuple(seeds) == protocol.seeds_for(sc.name)
    total = len(seeds) * sum(len(g) for g in grids.values())
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console(stderr=True), transient=True, disable=not outs.progress) as bar:
        task = bar.add_task(f"sweep ({total} runs, {len(seeds)} seeds)", total=total)
        try:
            refine = protocol.targets if protocol.refine_static else ()
            out = run_sweep(sc, grids, seeds, executor, jobs or os.cpu_count() or 1, lambda: bar.advance(task),
                            refine_targets=refine, peak_need=prep.peak_need,
                            on_more=lambda n: bar.update(task, total=total + n,
                                                         description=f"sweep ({total + n} runs, {len(seeds)} seeds)"))
        except (ValueError, ExecutorError) as exc:  # no scheduler answering, a slice a seed cannot prepare
            fail(str(exc))
    meta = {"trace": prep.trace.describe(), "profile": prep.profile.name, "dt_s": sc.dt,
            "peak_need_seed0": prep.peak_need, "max_replicas": sc.max_replicas, "min_replicas": sc.min_replicas,
            "input_scale": sc.input_scale, "wall_s_total": sum(o.wall_s for o in out.outcomes),
            "requests_per_seed": {str(o.seed): o.requests for o in out.outcomes}, **_routing(sc)}
    doc = sweep_document(sc, protocol, grids, seeds, out, protocol.knobs, preregistered, meta)
    md = sweep_markdown(doc)
    if outs.text:
        screen = console(min_width=MIN_WIDTH)
        screen.print(_describe(prep))
        screen.print(md)
    else:
        print_json(doc, indent=1)
    from autoscaler.sim.plot import plot_frontier

    _write([(outs.json_path, lambda tmp: tmp.write_text(json.dumps(doc, indent=1))),
            (outs.md_path, lambda tmp: tmp.write_text(md)),
            (outs.plot_path, lambda tmp: plot_frontier(doc, tmp))])
    if outs.plot_path:
        click.echo(f"plot: {outs.plot_path}", err=not outs.text)
