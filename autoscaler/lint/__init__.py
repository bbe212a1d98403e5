"""`autoscaler lint`: find the pitfalls of running vLLM on Kubernetes in manifests, before they
reach a cluster.

    from autoscaler.lint import load_inputs, lint
    loaded = load_inputs(["deploy/vllm"])
    findings, ctx = lint(loaded.documents)

Modules: `loader` (multi-document YAML with line numbers; files, folders, stdin), `workload`
(pod templates and vLLM command lines), `rules` (one check per pitfall, ids VQA001...),
`report` (text and JSON). Nothing here talks to a cluster or imports `kubernetes`.
"""

from autoscaler.lint.findings import (
    DEFAULT_MODEL_LOAD_SECONDS,
    Finding,
    LintOptions,
    ObjectRef,
    Severity,
)
from autoscaler.lint.loader import (
    Document,
    InputError,
    LoadResult,
    load_inputs,
    load_text,
)
from autoscaler.lint.rules import RULES, LintContext, Rule, lint, resolve_rule
from autoscaler.lint.workload import LINT_IGNORE_ANNOTATION, MANAGED_ANNOTATION

__all__ = [
    "DEFAULT_MODEL_LOAD_SECONDS",
    "LINT_IGNORE_ANNOTATION",
    "MANAGED_ANNOTATION",
    "RULES",
    "Document",
    "Finding",
    "InputError",
    "LintContext",
    "LintOptions",
    "LoadResult",
    "ObjectRef",
    "Rule",
    "Severity",
    "lint",
    "load_inputs",
    "load_text",
    "resolve_rule",
]
