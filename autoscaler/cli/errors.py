"""Bad input on the command line: one line on stderr (`error: ...`, whitespace folded), exit 2,
nothing written. Shared by `autoscaler record`, `replay` and `simulate`."""

from __future__ import annotations

import sys
from typing import NoReturn

import click


def fail(message: str) -> NoReturn:
    click.echo(f"error: {' '.join(message.split())}", err=True)
    sys.exit(2)
