"""What `autoscaler lint` reports: severities, findings and the options of a run."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["Finding", "LintOptions", "ObjectRef", "Severity"]

DEFAULT_MODEL_LOAD_SECONDS = 600
"""Startup budget a startupProbe must allow by default: Qwen3-8B-class models are ready in
25-60 s warm, 60-120 s with a cold compile cache and about 5 min when the weights are
downloaded first; 10 min leaves room for a slow mirror or a larger model."""


class Severity(StrEnum):
    ERROR = "error"  # the workload breaks (does not schedule, crash-loops, leaks a secret...)
    WARNING = "warning"  # it runs, but slower, costlier or less predictable than it should


@dataclass(frozen=True)
class ObjectRef:
    """The manifest a finding is about."""

    kind: str
    name: str
    namespace: str | None = None

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name}


@dataclass(frozen=True)
class Finding:
    """One pitfall found in one object: stable rule id and name, where, what, and the fix."""

    rule: str
    name: str
    severity: Severity
    obj: ObjectRef
    file: str
    line: int
    message: str
    fix: str
    container: str | None = None

    @property
    def sort_key(self) -> tuple[str, int, str, str]:
        return (self.file, self.line, self.rule, self.container or "")

    def as_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "name": self.name,
            "severity": self.severity.value,
            "object": self.obj.as_json(),
            "container": self.container,
            "file": self.file,
            "line": self.line,
            "message": self.message,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class LintOptions:
    """`model_load_seconds`: the startup budget a startupProbe must allow; `ignore`: rule ids
    (or names) not to report."""

    model_load_seconds: int = DEFAULT_MODEL_LOAD_SECONDS
    ignore: frozenset[str] = field(default_factory=frozenset)
