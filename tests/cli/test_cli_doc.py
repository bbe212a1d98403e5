"""docs/cli.md holds the exit status of every subcommand, in one table, and names every hidden
old spelling that the commands still accept."""

from __future__ import annotations

import re

import click

from autoscaler.cli.main import subcommands
from tests.cli.helpers import REPO

DOC = (REPO / "docs" / "cli.md").read_text()


def test_every_subcommand_has_a_row_in_the_table() -> None:
    rows = [line for line in DOC.splitlines() if line.startswith("| `")]
    named = {re.match(r"\| `([a-z-]+)", row).group(1) for row in rows}  # type: ignore[union-attr]
    assert named == set(subcommands())


def test_every_hidden_option_is_documented_as_an_old_spelling() -> None:
    hidden = {(name, opt) for name, cmd in subcommands().items() for p in cmd.params
              if isinstance(p, click.Option) and p.hidden for opt in p.opts}
    assert hidden  # the aliases exist
    flat = " ".join(DOC.split())  # a spelling may wrap
    for name, opt in hidden:
        assert f"`{name} {opt}" in flat, (name, opt)
