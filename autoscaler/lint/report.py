"""Output of `autoscaler lint`: text (one `file:line:` line per finding, editor-clickable, plus
its fix) and JSON (`{"findings": [...], "summary": {...}}`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from autoscaler.lint.findings import Finding, Severity
from autoscaler.lint.loader import LoadResult
from autoscaler.lint.rules import RULES, LintContext

__all__ = ["render_json", "render_rules", "render_text", "summary"]

JSON_FORMAT_VERSION = 1
_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow"}


def summary(findings: Sequence[Finding], ctx: LintContext, loaded: LoadResult) -> dict[str, Any]:
    return {
        "errors": sum(f.severity is Severity.ERROR for f in findings),
        "warnings": sum(f.severity is Severity.WARNING for f in findings),
        "vllm_workloads": len(ctx.vllm_workloads),
        "documents": len(loaded.documents),
        "files": list(loaded.files),
        "unreadable": list(loaded.errors),
    }


def render_json(findings: Sequence[Finding], ctx: LintContext, loaded: LoadResult) -> str:
    return json.dumps(
        {
            "version": JSON_FORMAT_VERSION,
            "findings": [f.as_json() for f in findings],
            "summary": summary(findings, ctx, loaded),
        },
        indent=2,
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def render_text(findings: Sequence[Finding], ctx: LintContext, loaded: LoadResult, console: Console) -> None:
    """`file:line: severity RULE name: Kind ns/name, container c: message` and an indented fix
    line per finding, then a one-line summary."""
    for f in findings:
        where = str(f.obj) + (f", container {f.container}" if f.container else "")
        console.print(Text.assemble(
            (f"{f.file}:{f.line}:", "bold"), " ",
            (f.severity.value, _STYLE[f.severity]), " ",
            (f"{f.rule} {f.name}", "cyan"), f": {where}: {f.message}",
        ))
        console.print(Text(f"    fix: {f.fix}", style="dim"))
    s = summary(findings, ctx, loaded)
    scope = (f"{_plural(s['vllm_workloads'], 'vLLM workload')} in {_plural(len(loaded.files), 'file')} "
             f"({_plural(s['documents'], 'document')})")
    if not ctx.vllm_workloads:
        console.print(f"no vLLM workload (a Deployment or StatefulSet running vllm serve or the vLLM OpenAI image) "
                      f"in {_plural(len(loaded.files), 'file')} ({_plural(s['documents'], 'document')})")
    elif not findings:
        console.print(Text.assemble(("clean: ", "bold green"), scope))
    else:
        console.print(Text.assemble(
            ("\n" + _plural(s["errors"], "error"), _STYLE[Severity.ERROR] if s["errors"] else ""), ", ",
            (_plural(s["warnings"], "warning"), _STYLE[Severity.WARNING] if s["warnings"] else ""), f": {scope}",
        ))


def render_rules(console: Console) -> None:
    table = Table(title="autoscaler lint rules", title_justify="left", header_style="bold", show_lines=False)
    for col in ("id", "name", "severity", "pitfall", "what", "fix"):
        table.add_column(col, overflow="fold")
    for r in RULES:
        table.add_row(r.id, r.name, r.severity.value, str(r.pitfall or "-"), r.summary, r.fix)
    console.print(table)
