"""The `autoscaler` command line. Each subcommand lives in its own module; this is the group."""

from __future__ import annotations

import importlib
import logging
import sys
from typing import Any

import click

from autoscaler import __version__
from autoscaler.controller.logs import CurrentStderr, configure_logging
from autoscaler.policy import COMPILED_MODULES


def policy_build(compiled: tuple[str, ...]) -> str:
    """Which build of the decision core is imported, as `autoscaler --version` says it: "compiled,
    16 modules" (mypyc's: the image, `make compiled`; docs/scale.md) or "pure Python"."""
    return f"compiled, {len(compiled)} modules" if compiled else "pure Python"


class _Group(click.Group):
    """The group, with click's own refusals (an unknown option, a value of the wrong type) as one
    line `error: ...` and exit 2, as every other refusal of the command line, and its subcommands
    imported on first use (click's "lazily loading subcommands" pattern; `SUBCOMMANDS`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*SUBCOMMANDS, *(n for n in super().list_commands(ctx) if n not in SUBCOMMANDS)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in SUBCOMMANDS:
            return super().get_command(ctx, cmd_name)
        module, attr = SUBCOMMANDS[cmd_name].split(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command) and command.name == cmd_name, SUBCOMMANDS[cmd_name]
        return command

    def main(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("standalone_mode", True) is False:
            return super().main(*args, **kwargs)
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
        except click.ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            hint = f" (see: {ctx.command_path} -h)" if isinstance(exc, click.UsageError) and ctx is not None else ""
            click.echo(f"error: {' '.join(exc.format_message().split())}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="autoscaler",
                      message=f"%(prog)s %(version)s (policy: {policy_build(COMPILED_MODULES)})")
def main() -> None:
    """Autoscale vLLM Deployments on request queue depth and KV-cache usage."""
    # A command's log lines go to stderr, errors only: stdout holds its data and a failure is
    # its own one line (docs/cli.md), not preceded by an adapter's retry warnings. `run` sets
    # its own (stdout, the controller's output, from info up).
    configure_logging(CurrentStderr(), logging.ERROR)


# Each subcommand's module, imported when the command is run (or its help shown): a command
# does not pay for the others' imports (the Kubernetes client, numpy), so `check-config` and a
# refusal answer in a fraction of a second. In the order `autoscaler --help` lists them.
SUBCOMMANDS = {
    "run": "autoscaler.cli.run:run",
    "check-config": "autoscaler.cli.check_config:check_config",
    "lint": "autoscaler.cli.lint:lint_command",
    "simulate": "autoscaler.cli.simulate:simulate",
    "record": "autoscaler.cli.record:record",
    "replay": "autoscaler.cli.replay:replay",
}


def subcommands() -> dict[str, click.Command]:
    """Every subcommand by name, each imported (the docs' and the manifests' tests read them)."""
    ctx = click.Context(main)
    return {name: cmd for name in main.list_commands(ctx) if (cmd := main.get_command(ctx, name)) is not None}


if __name__ == "__main__":
    main()
