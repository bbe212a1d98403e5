"""The `autoscaler` command line: one module per subcommand."""

from autoscaler.cli.main import main

__all__ = ["main"]
