"""The output convention of every subcommand (docs/cli.md).

- Data on stdout, in the format `-o/--output text|json` (check-config also `yaml`) chooses;
  with `json`, stdout holds one JSON document and nothing else.
- `--output-file PATH` (simulate, replay) also writes the JSON document to PATH, whole or not
  at all; `-` means stdout, as `-o json`.
- Logs, progress, warnings and errors on stderr; `--no-progress` turns progress off.
- No wrapping when stdout is not a terminal (a pipe, a file): a URL or a rule name stays on one
  line. `COLUMNS`, when set, still gives the width.
- A missing optional extra is one line naming the `pip install` that brings it, and exit 2.
"""

from __future__ import annotations

import importlib
import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from autoscaler.cli.errors import fail
from autoscaler.config.atomic import written_in_place

F = TypeVar("F", bound=Callable[..., Any])

TEXT, JSON, YAML = "text", "json", "yaml"
STDOUT = "-"
NO_WRAP_WIDTH = 10_000
"""Width of a console that is not a terminal: wide enough that nothing wraps (tables take their
natural width; rich pads no line to the console width)."""

PACKAGE = "vllm-queue-autoscaler"


def output_option(*formats: str) -> Callable[[F], F]:
    """`-o/--output FORMAT`, default `text`."""
    return click.option(
        "-o", "--output", "output", type=click.Choice(list(formats)), default=TEXT, show_default=True,
        help=f"Output on stdout: {', '.join(formats)}.",
    )


def output_file_option(what: str) -> Callable[[F], F]:
    """`--output-file PATH`, and the deprecated `--json PATH` as a hidden alias of it."""
    def decorate(func: F) -> F:
        func = click.option("--json", "json_alias", default=None, metavar="PATH", hidden=True,
                            help="Deprecated spelling of --output-file.")(func)
        return click.option(
            "--output-file", "output_file", default=None, metavar="PATH",
            help=f"Also write {what} as JSON to PATH (whole or not at all); `-` = stdout, as -o json.",
        )(func)
    return decorate


def no_progress_option(*aliases: str) -> Callable[[F], F]:
    """`--no-progress`, and deprecated spellings (`record --quiet`) as hidden aliases."""
    def decorate(func: F) -> F:
        for alias in aliases:
            func = click.option(alias, "no_progress_alias", is_flag=True, hidden=True,
                                help="Deprecated spelling of --no-progress.")(func)
        return click.option("--no-progress", "no_progress", is_flag=True,
                            help="No progress output (it goes to stderr).")(func)
    return decorate


def resolve_output_file(output: str, output_file: str | None, json_alias: str | None) -> tuple[str, str | None]:
    """(format on stdout, file for the JSON document or None). `--output-file -` (or the old
    `--json -`) is `-o json`; both spellings at once are refused."""
    if output_file is not None and json_alias is not None:
        fail("--json is the old spelling of --output-file: give one of them")
    path = output_file if output_file is not None else json_alias
    if path == "":
        fail("--output-file: give a path, or - for stdout")
    if path == STDOUT:
        return JSON, None
    if path is not None and os.path.isdir(path):
        fail(f"--output-file {path}: is a directory; give a file")
    return output, path


def console(*, stderr: bool = False, min_width: int = 0) -> Console:
    """A rich console on stdout (or stderr) that never wraps when it is not a terminal, unless
    `COLUMNS` says how wide it is. On a terminal: its width, at least `min_width`."""
    probe = Console(stderr=stderr, highlight=False)
    if not probe.is_terminal and "COLUMNS" not in os.environ:
        return Console(stderr=stderr, highlight=False, width=NO_WRAP_WIDTH, soft_wrap=True)
    if probe.width < min_width:
        return Console(stderr=stderr, highlight=False, width=min_width)
    return probe


def print_json(doc: Any, *, indent: int | None = 2, default: Callable[[Any], Any] = float) -> None:
    """The one JSON document of stdout: strict JSON, a NaN or infinite number as null."""
    click.echo(json.dumps(finite(doc), indent=indent, default=default, allow_nan=False))


def finite(value: Any) -> Any:
    """`value` with every NaN or infinite float (at any depth of dicts, lists, tuples) as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def require_extra(module: str, extra: str, purpose: str) -> None:
    """Import `module` or stop: one line naming the extra that brings it, exit 2."""
    try:
        importlib.import_module(module)
    except ImportError:
        fail(f"{purpose} needs {module}, which is not installed: pip install '{PACKAGE}[{extra}]'")


def format_value(value: object) -> str:
    """A config value as YAML spells it: null, true/false, 2 for 2.0; else str()."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def check_output_suffix(flag: str, path: str | None, suffix: str) -> None:
    """Refuse an output name that does not end in `suffix` (`.png`: matplotlib picks the format
    by it): the name alone, before any other input is looked at. One line, exit 2."""
    if path is not None and path != STDOUT and Path(path).suffix.lower() != suffix:
        fail(f"{flag} {path}: must end in {suffix}")


def _same_file(a: str, b: str) -> bool:
    """Whether two paths name one file: the same path once resolved, or (both existing) one inode
    (a hard link, a bind mount). A device or FIFO is never "the same file": what is written to
    it streams through."""
    if written_in_place(a) or written_in_place(b):
        return False
    try:
        if Path(a).resolve() == Path(b).resolve():
            return True
        return os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b)
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL byte: another check says so
        return False


def check_distinct_paths(outputs: Sequence[tuple[str, str | None]],
                         inputs: Sequence[tuple[str, str | None]] = ()) -> None:
    """Refuse, before any work, an output that is also another output (one would be lost) or an
    input (it would be overwritten by what was read from it). `(flag, path)` pairs; None and `-`
    (stdout) are skipped. One line, exit 2.

    Worked example: `replay --metrics rec.jsonl.gz --output-file rec.jsonl.gz` -> "--output-file
    rec.jsonl.gz: is also --metrics, which it would overwrite"."""
    outs = [(f, p) for f, p in outputs if p is not None and p != STDOUT]
    ins = [(f, p) for f, p in inputs if p is not None and p != STDOUT]
    for n, (flag, path) in enumerate(outs):
        for other, other_path in outs[:n]:
            if _same_file(path, other_path):
                fail(f"{other} and {flag} are the same file: {path}")
        for other, other_path in ins:
            if _same_file(path, other_path):
                fail(f"{flag} {path}: is also {other}, which it would overwrite")


def check_output_path(flag: str, path: str | None, suffix: str | None = None, make_folder: bool = False) -> None:
    """Refuse, before any work, an output path that cannot be written: `suffix` not its own
    (`.png`: matplotlib picks the format by it), a directory, a folder that does not exist
    (`make_folder`: made now, as the command would after its run) or cannot be written. One
    line, exit 2."""
    if path is None or path == STDOUT:
        return
    target = Path(path)
    if suffix is not None and target.suffix.lower() != suffix:
        fail(f"{flag} {path}: must end in {suffix}")
    if written_in_place(path):  # /dev/stdout: its folder (/dev) is no one's to write in
        return
    if target.is_dir():
        fail(f"{flag} {path}: is a directory; give a file")
    folder = target.parent
    if make_folder:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            fail(f"{flag} {path}: cannot make its folder: {exc.strerror or exc}")
    if not folder.is_dir():
        fail(f"{flag} {path}: no such folder {folder}")
    if not os.access(folder, os.W_OK | os.X_OK):
        fail(f"{flag} {path}: cannot write in {folder}")
