"""The `autoscaler` command line. Each subcommand lives in its own module; this is the group."""

from __future__ import annotations

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
    line `error: ...` and exit 2, as every other refusal of the command line."""

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


def _register() -> None:
    # Subcommands register themselves here; imports are local so `--help` stays fast.
    from autoscaler.cli.check_config import check_config
    from autoscaler.cli.lint import lint_command
    from autoscaler.cli.record import record
    from autoscaler.cli.replay import replay
    from autoscaler.cli.run import run
    from autoscaler.cli.simulate import simulate

    main.add_command(run)
    main.add_command(check_config)
    main.add_command(lint_command)
    main.add_command(simulate)
    main.add_command(record)
    main.add_command(replay)


_register()


if __name__ == "__main__":
    main()
