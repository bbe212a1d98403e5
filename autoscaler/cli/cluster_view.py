"""`autoscaler check-config FILE --kubeconfig K`: every target the controller would have in that
cluster (the listed `targets` and what `target_selector` finds), with each effective policy
value and where it came from (built-in default, the ConfigMap's `defaults`, its target entry, or
an annotation on the Deployment), whether it is paused, and its annotations' problems.

The same functions as the controller's tick (`AutoscalerConfig.targets_with`,
`autoscaler.config.annotations.resolve`), on one read-only snapshot of the cluster."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from autoscaler.adapters.kubernetes import KubeClient, KubeError
from autoscaler.cli.output import format_value
from autoscaler.config import AutoscalerConfig
from autoscaler.config.annotations import BUILTIN, flatten, resolve


class ClusterUnreadable(Exception):
    """The cluster could not be read: one line. `bad_input`: the kubeconfig or context itself is
    unusable (exit 2, as `run` does), not the cluster (exit 1)."""

    def __init__(self, message: str, *, bad_input: bool = False) -> None:
        super().__init__(message)
        self.bad_input = bad_input


def cluster_targets(config: AutoscalerConfig, kubeconfig: str | None, context: str | None) -> list[dict[str, Any]]:
    """One entry per target, in the controller's order: `namespace`, `deployment`, `listed` (a
    `targets` entry, else found by `target_selector`), `found` (the Deployment exists), and when
    found `paused`, `problems` and `policy` (dotted key -> {value, source})."""
    try:
        kube = KubeClient.from_environment(kubeconfig=kubeconfig, context=context, retry_attempts=2)
    except Exception as exc:  # the kubernetes client raises many types for bad configs
        raise ClusterUnreadable(f"cannot configure the Kubernetes client: {' '.join(str(exc).split())}",
                                bad_input=True) from None
    try:
        with kube:
            snapshot = kube.snapshot(config.namespaces_to_list())
    except KubeError as exc:
        raise ClusterUnreadable(f"cannot read the cluster: {' '.join(str(exc).split())}") from None
    out: list[dict[str, Any]] = []
    for target in config.targets_with((d.namespace, d.name, d.labels) for d in snapshot.deployments):
        entry: dict[str, Any] = {"namespace": target.namespace, "deployment": target.deployment,
                                 "listed": config.find_target(*target.key) is not None}
        deployment = snapshot.deployment(*target.key)
        entry["found"] = deployment is not None
        if deployment is not None:
            settings = resolve(config, target, deployment.annotations)
            values = flatten(settings.policy.model_dump(mode="json"))
            entry.update(paused=settings.paused, problems=list(settings.problems),
                         policy={key: {"value": values[key], "source": source}
                                 for key, source in settings.sources.items()})
        out.append(entry)
    return out


def render_cluster(entries: list[dict[str, Any]], console: Console, *, context: str | None) -> None:
    """One table per target: the keys not at their built-in default, value and source."""
    where = f"context {context}" if context else "the kubeconfig's current context"
    console.print(f"in the cluster ({where}): {len(entries)} target{'' if len(entries) == 1 else 's'}")
    for entry in entries:
        name = f"{entry['namespace']}/{entry['deployment']}"
        how = "listed in targets" if entry["listed"] else "found by target_selector"
        if not entry["found"]:
            console.print(f"{name}: {how}, Deployment not found")
            continue
        console.print(f"{name}: {how}" + (", PAUSED (no scale write)" if entry["paused"] else ""))
        for problem in entry["problems"]:
            console.print(f"  ignored: {problem}", markup=False)
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        table.add_column("key", no_wrap=True)
        table.add_column("value", justify="right", overflow="fold")
        table.add_column("source", no_wrap=True)
        shown = {k: v for k, v in entry["policy"].items() if v["source"] != BUILTIN}
        for key, cell in shown.items():
            table.add_row(key, format_value(cell["value"]), cell["source"])
        if shown:
            console.print(table)
        console.print(f"  every other key: {BUILTIN} default")

