"""`autoscaler lint PATH... | -`: report the vLLM-on-Kubernetes pitfalls in manifests.

Exit status: 0 no error-severity finding (warnings allowed); 1 at least one error-severity
finding; 2 an input could not be read or parsed (findings of the readable inputs are still
printed), or the command line is wrong.
"""

from __future__ import annotations

import sys

import click

from autoscaler.cli.output import JSON, TEXT, console, output_option
from autoscaler.lint import (
    DEFAULT_MODEL_LOAD_SECONDS,
    RULES,
    LintOptions,
    Severity,
    lint,
    load_inputs,
    resolve_rule,
)
from autoscaler.lint.report import render_json, render_rules, render_text

EXIT_FINDINGS = 1
EXIT_UNREADABLE = 2


@click.command("lint")
@click.argument("paths", nargs=-1, metavar="PATH... | -")
@output_option(TEXT, JSON)
@click.option("--format", "fmt", type=click.Choice([TEXT, JSON]), default=None, hidden=True,
              help="Deprecated spelling of -o.")
@click.option("--model-load-seconds", type=click.IntRange(min=1), default=DEFAULT_MODEL_LOAD_SECONDS,
              show_default=True, help="Worst-case model load time a startupProbe must allow (VQA004).")
@click.option("--ignore", "ignore", multiple=True, metavar="RULE",
              help="Do not report this rule (id or name; repeat, or separate with commas).")
@click.option("--list-rules", is_flag=True, help="Print the rules and exit.")
@click.pass_context
def lint_command(ctx: click.Context, paths: tuple[str, ...], output: str, fmt: str | None, model_load_seconds: int,
                 ignore: tuple[str, ...], list_rules: bool) -> None:
    """Check Kubernetes manifests for the pitfalls of running vLLM.

    PATH is a file, a folder (read recursively: *.yaml, *.yml, *.json; kustomize patches are
    skipped) or `-` for stdin, e.g. `kubectl kustomize DIR | autoscaler lint -`. Every
    Deployment or StatefulSet that runs `vllm serve` or the vLLM OpenAI image is checked, with
    the HorizontalPodAutoscalers, Nodes and vllm-queue-autoscaler ConfigMaps found beside it.

    Exits 1 when an error-severity finding exists, 2 when an input cannot be read.
    """
    fmt = fmt or output
    if list_rules:
        if fmt == JSON:
            click.echo(rules_json())
        else:
            render_rules(console())
        return
    if not paths:
        raise click.UsageError("give at least one PATH (a file, a folder, or - for stdin)")
    keys = [k.strip() for item in ignore for k in item.split(",") if k.strip()]
    unknown = [k for k in keys if resolve_rule(k) is None]
    if unknown:
        raise click.BadParameter(f"no such rule: {', '.join(unknown)} (see --list-rules)", param_hint="--ignore")

    loaded = load_inputs(paths, stdin=sys.stdin)
    for problem in loaded.errors:
        click.echo(f"error: {problem}", err=True)
    findings, context = lint(loaded.documents, LintOptions(model_load_seconds=model_load_seconds,
                                                           ignore=frozenset(keys)))
    if fmt == JSON:
        click.echo(render_json(findings, context, loaded))
    elif loaded.files or not loaded.errors:  # nothing readable: the error lines say it all
        render_text(findings, context, loaded, console())
    if loaded.errors:
        ctx.exit(EXIT_UNREADABLE)
    if any(f.severity is Severity.ERROR for f in findings):
        ctx.exit(EXIT_FINDINGS)


def rules_json() -> str:
    """`lint --list-rules -o json`: `{"rules": [{id, name, severity, pitfall, summary, fix}]}`."""
    import json

    return json.dumps({"rules": [{"id": r.id, "name": r.name, "severity": r.severity.value, "pitfall": r.pitfall,
                                  "summary": r.summary, "fix": r.fix} for r in RULES]}, indent=2)
