"""The decision core stays readable: no function in autoscaler/policy/ is longer than 40 lines.

A function's length is its body without the docstring: from the line after the docstring (or
the first statement, when there is none) to its last line, blank and comment lines included.
The signature and the docstring do not count. Nested functions count in their outer function
and are checked on their own too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

MAX_LINES = 40
POLICY = Path(__file__).resolve().parents[2] / "autoscaler" / "policy"


def body_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of the function's body, the docstring left out."""
    first = fn.body[0]
    has_docstring = (
        isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
    )
    end = fn.end_lineno or fn.lineno
    if has_docstring:
        return end - (first.end_lineno or first.lineno)
    return end - first.lineno + 1


def too_long(source: str, limit: int = MAX_LINES) -> list[tuple[str, int]]:
    """(name, lines) of every function in `source` longer than `limit`."""
    return [
        (node.name, body_lines(node))
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and body_lines(node) > limit
    ]


def _function(body_statements: int, docstring_lines: int = 0) -> str:
    doc = ['    """'] + ["    words"] * docstring_lines + ['    """'] if docstring_lines else []
    return "\n".join(["def f(x):", *doc] + ["    x += 1"] * (body_statements - 1) + ["    return x", ""])


@pytest.mark.parametrize(
    ("statements", "docstring_lines", "flagged"),
    [
        (40, 0, False),  # exactly 40 lines of body: allowed
        (41, 0, True),  # one more: flagged
        (40, 30, False),  # the docstring does not count
        (41, 30, True),
    ],
)
def test_the_rule_counts_the_body_without_the_docstring(statements: int, docstring_lines: int, flagged: bool) -> None:
    assert bool(too_long(_function(statements, docstring_lines))) is flagged


def test_no_policy_function_longer_than_40_lines() -> None:
    files = sorted(POLICY.glob("*.py"))
    assert len(files) > 5  # the rule reads the real package
    found = {
        f"{path.name}:{name}": lines for path in files for name, lines in too_long(path.read_text())
    }
    assert found == {}, f"functions longer than {MAX_LINES} lines (body without docstring): {found}"

