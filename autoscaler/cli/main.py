"""The `autoscaler` command line. Each subcommand lives in its own module; this is the group."""

from __future__ import annotations

import click

from autoscaler import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="autoscaler")
def main() -> None:
    """Autoscale vLLM Deployments on request queue depth and KV-cache usage."""


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
