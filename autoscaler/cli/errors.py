"""Bad input on the command line: one line on stderr (`error: ...`, whitespace folded, words of
more than 100 characters cut), exit 2, nothing written. Shared by `autoscaler record`, `replay` and `simulate`."""

from __future__ import annotations

import sys
from typing import NoReturn

import click


def fail(message: str) -> NoReturn:
    click.echo(f"error: {' '.join(_cut(word) for word in message.split())}", err=True)
    sys.exit(2)


def _cut(word: str, limit: int = 100) -> str:
    """A word of the message (often a value echoed from the input: a 5,000-digit number, a long
    option) cut to `limit` characters, so that the line stays readable."""
    return word if len(word) <= limit else f"{word[:limit - 3]}..."
