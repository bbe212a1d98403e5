"""`autoscaler check-config FILE`: validate a config document and show each target's effective policy.

Exit status: 0 valid (warnings, if any, go to stderr); 2 invalid or unreadable, with one line per
problem on stderr (`key = value, must be ...`) and nothing on stdout; with `--kubeconfig` or
`--context`, 1 when the cluster cannot be read (one line on stderr).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import click
import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

from autoscaler.cli.output import JSON, TEXT, YAML, console, format_value, output_option
from autoscaler.config import (
    AutoscalerConfig,
    ConfigError,
    TargetConfig,
    load_config_file,
    load_config_stream,
    merge_policy,
)
from autoscaler.config.annotations import flatten
from autoscaler.policy.params import PolicyParams

EXIT_INVALID = 2
MAX_TABLE_TARGETS = 100
"""Targets shown in the tables (a column each); all of them are checked, and `-o json` lists all."""

_DEFAULTS_CHANGED = "cyan"
_TARGET_CHANGED = "bold yellow"


@click.command("check-config")
@click.argument("file", metavar="FILE")
@output_option(TEXT, JSON, YAML)
@click.option("--json", "as_json", is_flag=True, hidden=True, help="Deprecated spelling of -o json.")
@click.option("--kubeconfig", default=None,
              help="Also read the cluster (read-only): every target, listed or found by target_selector, "
                   "with the source of each value (ConfigMap or annotation).")
@click.option("--context", default=None, help="Kubeconfig context (implies reading the cluster).")
@click.pass_context
def check_config(ctx: click.Context, file: str, output: str, as_json: bool, kubeconfig: str | None,
                 context: str | None) -> None:
    """Validate the config FILE (`-` = stdin) and print every target's effective policy.

    Exits 0 when the file is valid and 2 otherwise, printing one line per problem to stderr,
    in the form `key = value, must be ...`. With --kubeconfig or --context, also the targets
    in that cluster with the Deployments' annotations merged (1 when it cannot be read).
    """
    try:
        if file == "-":  # bytes, as a file is read: at most 1 MiB
            config = load_config_stream(sys.stdin.buffer, source="<stdin>")
        else:
            config = load_config_file(file)
    except ConfigError as exc:
        for line in exc.problems:
            click.echo(line, err=True)
        ctx.exit(EXIT_INVALID)
    for note in config.warnings():
        click.echo(f"warning: {note}", err=True)
    cluster = None
    if kubeconfig is not None or context is not None:
        # Imported here: the Kubernetes client is a fifth of a second a check of a file alone does not need.
        from autoscaler.cli.cluster_view import ClusterUnreadable, cluster_targets, render_cluster

        try:
            cluster = cluster_targets(config, kubeconfig, context)
        except ClusterUnreadable as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(EXIT_INVALID if exc.bad_input else 1)
    doc = effective_policies_json(config)
    if cluster is not None:
        doc["cluster"] = cluster
    if as_json or output == JSON:
        click.echo(json.dumps(doc, indent=2))
    elif output == YAML:
        click.echo(yaml.safe_dump(doc, sort_keys=False), nl=False)
    else:
        out = console()
        render(config, out, source="<stdin>" if file == "-" else file)
        if cluster is not None:
            render_cluster(cluster, out, context=context)  # imported above, where cluster was read


def effective_policies_json(config: AutoscalerConfig) -> dict[str, Any]:
    """`{"controller": {...}, "targets": [{namespace, deployment, overrides, policy}]}`."""
    return {
        "controller": config.controller.model_dump(mode="json"),
        "targets": [
            {
                "namespace": target.namespace,
                "deployment": target.deployment,
                "overrides": target.overrides(),
                "policy": policy.model_dump(mode="json"),
            }
            for target, policy in config.effective_policies()
        ],
    }


def render(config: AutoscalerConfig, console: Console, *, source: str) -> None:
    """Controller settings, then the policy: one row per key (a nested section's keys as
    `slo.ttft_seconds`, ...), one column per target.

    The `defaults` column is the built-in default merged with the document's `defaults`
    (cyan and `*` where the document changed it); a target's value is bold yellow and `*` where
    it differs from that column. Targets are split over several tables so each fits the console width.
    """
    n = len(config.targets)
    console.print(f"{source}: valid, {n} target{'' if n == 1 else 's'}")

    controller = Table(title="controller", title_justify="left", show_header=False, box=None, pad_edge=False)
    controller.add_column("key", style="bold")
    controller.add_column("value", overflow="fold")
    for key, value in flatten(config.controller.model_dump()).items():
        controller.add_row(key, format_value(value))
    console.print(controller)

    builtin = flatten(PolicyParams().model_dump())  # `slo` as rows slo.ttft_seconds, ...
    defaults = flatten(merge_policy(PolicyParams().model_dump(), config.defaults.as_dict()))
    pairs = list(config.effective_policies())
    shown = pairs[:MAX_TABLE_TARGETS]
    policy_of = {id(t): p for t, p in shown}
    cell_width = {id(t): _cell_width(flatten(p.model_dump())) for t, p in shown}
    for chunk in _chunks([t for t, _ in shown], console.width, _cell_width(defaults), cell_width):
        table = Table(title="effective policy", title_justify="left", header_style="bold")
        # Values fold (a long capacity_profile name on a narrow console), keys never do.
        table.add_column("key", no_wrap=True, min_width=max(len(k) for k in builtin))
        table.add_column("defaults", justify="right", overflow="fold")
        for target in chunk:
            table.add_column(Text(f"{target.deployment}\n{target.namespace}"), justify="right", overflow="fold")
        # by identity: `t in chunk` compared models, n^2
        policies = [flatten(policy_of[id(t)].model_dump()) for t in chunk]
        for key, default in builtin.items():
            row = [_cell(defaults[key], default, _DEFAULTS_CHANGED)]
            row += [_cell(p[key], defaults[key], _TARGET_CHANGED) for p in policies]
            table.add_row(key, *row)
        console.print(table)
    if len(pairs) > len(shown):
        console.print(f"{len(pairs) - len(shown)} more targets not shown (the tables hold the first "
                      f"{MAX_TABLE_TARGETS}; -o json lists all)")
    if pairs:
        console.print(
            Text.assemble(
                "* differs: ",
                ("defaults", _DEFAULTS_CHANGED), " from the built-in default, ",
                ("a target", _TARGET_CHANGED), " from defaults",
            )
        )


def _cell(value: object, reference: object, style: str) -> Text:
    """The value, marked `*` and styled when it differs from `reference` (also readable without colour)."""
    if value == reference:
        return Text(format_value(value))
    return Text(format_value(value) + "*", style=style)


def _cell_width(values: dict[str, Any]) -> int:
    """The widest cell of a column: a value, with its `*`."""
    return max(len(format_value(v)) + 1 for v in values.values())


def _chunks(
    targets: Sequence[TargetConfig], width: int, defaults_width: int, cell_width: dict[int, int]
) -> Iterable[list[TargetConfig]]:
    """Consecutive groups of targets whose columns fit `width` next to the key and defaults
    columns (a column is as wide as its header or its widest value: `capacity_profile` is a name)."""
    key_width = max(len(k) for k in flatten(PolicyParams().model_dump())) + 3
    room = max(width - key_width - max(defaults_width, 8) - 4, 14)
    chunk: list[TargetConfig] = []
    used = 0
    for target in targets:
        need = max(len(target.deployment), len(target.namespace), 8, cell_width[id(target)]) + 3
        if chunk and used + need > room:
            yield chunk
            chunk, used = [], 0
        chunk.append(target)
        used += need
    if chunk:
        yield chunk


