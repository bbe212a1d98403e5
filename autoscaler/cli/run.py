"""`autoscaler run`: the controller process."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from types import FrameType

from typing import Any

import click
from pydantic import ValidationError
from rich.table import Table

from autoscaler.adapters.kubernetes import KubeClient
from autoscaler.adapters.prometheus import PrometheusSource
from autoscaler.cli.errors import fail
from autoscaler.cli.output import JSON, TEXT, console, output_option, print_json
from autoscaler.config import ConfigError, ConfigWatcher
from autoscaler.config.model import PrometheusSettings
from autoscaler.controller.leader import LeaderElector, LeaseSettings
from autoscaler.controller.logs import configure_logging
from autoscaler.controller.loop import (
    Controller,
    PrometheusFactory,
    TargetOutcome,
    default_prometheus_factory,
    run_forever,
)
from autoscaler.controller.telemetry import ControllerMetrics, HealthServer

DEFAULT_CONFIG = "/etc/vllm-queue-autoscaler/autoscaler.yaml"
LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


@click.command("run")
@click.option(
    "--config", "config_path", default=DEFAULT_CONFIG, show_default=True, envvar="AUTOSCALER_CONFIG",
    help="The ConfigMap's autoscaler.yaml (a mounted ConfigMap is re-read when it changes).",
)
@click.option("--prometheus-url", default=None, metavar="URL",
              help="Prometheus base URL, instead of the config's controller.prometheus.url "
                   "(e.g. http://127.0.0.1:9090 through kubectl port-forward).")
@click.option("--kubeconfig", default=None, help="Kubeconfig file; default: in-cluster, else $KUBECONFIG.")
@click.option("--context", default=None, help="Kubeconfig context.")
@click.option("--dry-run", is_flag=True, help="Decide and log, never patch. Also shadows Deployments an HPA scales.")
@click.option("--once", is_flag=True, help="Run one tick, print the decisions on stdout and exit (1 if a target "
                                           "or Prometheus could not be read); the log goes to stderr.")
@output_option(TEXT, JSON)
@click.option("--log-level", type=click.Choice(list(LOG_LEVELS)), default="info", show_default=True,
              help="Least severe log line written.")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="Port of /metrics, /healthz, /readyz (default: config; 0: any free port).")
@click.option("--metrics-host", default="0.0.0.0", show_default=True, help="Address to serve them on.")
@click.option(
    "--leader-elect/--no-leader-elect", default=False, show_default=True,
    help="Elect one acting replica through a Lease in the controller's namespace (run 2 replicas).",
)
@click.option("--lease-name", default="vllm-queue-autoscaler", show_default=True, help="Name of that Lease.")
@click.option("--lease-duration", type=int, default=15, show_default=True,
              help="Seconds a follower waits, seeing the Lease unchanged, before it takes over.")
@click.option("--renew-deadline", type=float, default=10.0, show_default=True,
              help="Seconds without a renewal after which the leader stops writing (< --lease-duration).")
@click.option("--retry-period", type=float, default=2.0, show_default=True,
              help="Seconds between two attempts to acquire or renew the Lease (< --renew-deadline).")
@click.option("--list-page-size", type=click.IntRange(0, 100_000), default=0, show_default=True,
              help="Read each Kubernetes list in pages of this many objects; 0 = in one answer (docs/scale.md).")
def run(
    config_path: str,
    prometheus_url: str | None,
    kubeconfig: str | None,
    context: str | None,
    dry_run: bool,
    once: bool,
    output: str,
    log_level: str,
    metrics_port: int | None,
    metrics_host: str,
    leader_elect: bool,
    lease_name: str,
    lease_duration: int,
    renew_deadline: float,
    retry_period: float,
    list_page_size: int,
) -> None:
    """Run the controller: scale each target Deployment on queue depth and KV-cache usage.

    The controller writes its decision log (JSON lines) on stdout. With --once, stdout holds the
    decisions (a table, or -o json) and the log goes to stderr.
    """
    if once and leader_elect:
        # one tick cannot wait for a Lease to expire, and acting without one could race a leader
        fail("--once cannot be used with --leader-elect: run one tick without election "
             "(only where no other replica runs), or run without --once")
    if output != TEXT and not once:
        click.echo(f"error: -o {output} goes with --once (the controller writes its log as JSON lines)", err=True)
        sys.exit(2)
    factory = default_prometheus_factory if prometheus_url is None else _prometheus_at(prometheus_url)
    configure_logging(sys.stderr if once else sys.stdout, LOG_LEVELS[log_level])
    try:
        watcher = ConfigWatcher(config_path)
    except ConfigError as exc:
        for line in exc.problems:
            click.echo(line, err=True)
        sys.exit(2)
    try:
        kube = KubeClient.from_environment(kubeconfig=kubeconfig, context=context, list_page_size=list_page_size)
    except Exception as exc:  # the kubernetes client raises many types for bad configs
        fail(f"cannot configure the Kubernetes client: {exc}")  # a YAML error's lines joined into one

    metrics = ControllerMetrics()
    stop = threading.Event()
    # The election stops only after the last tick (which a signal lets finish, its writes
    # fenced): it renews the Lease until then, and cannot take the Lease back after release.
    election_stop = threading.Event()
    namespace = os.environ.get("POD_NAMESPACE") or watcher.current.controller.namespace
    elector: LeaderElector | None = None
    if leader_elect:
        try:
            settings = LeaseSettings(namespace=namespace, name=lease_name, lease_duration_seconds=lease_duration,
                                     renew_deadline_seconds=renew_deadline, retry_period_seconds=retry_period)
        except ValueError as exc:
            fail(str(exc))
        elector = LeaderElector(kube, settings)
        elector.step()  # the first tick knows whether it leads
        elector.start(election_stop)
    controller = Controller(
        watcher=watcher, kube=kube, metrics=metrics, dry_run=dry_run, controller_namespace=namespace, fence=elector,
        prometheus_factory=factory,
    )
    server: HealthServer | None = None

    def healthy() -> bool:
        return controller.healthy() and (elector is None or elector.healthy())

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        controller.log.info("stopping", signal=signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        if not once:
            port = watcher.current.controller.metrics_port if metrics_port is None else metrics_port
            try:
                server = HealthServer(metrics, healthy, controller.ready, host=metrics_host, port=port).start()
            except (OSError, OverflowError) as exc:  # a port in use, an address not of this host
                click.echo(f"error: cannot serve /metrics on {metrics_host[:200]!r} port {port}: {exc}", err=True)
                sys.exit(2)
            controller.log.info("serving", port=server.port, paths=["/metrics", "/healthz", "/readyz"])
        if once:
            outcomes = controller.tick()
            if output == JSON:
                print_json(outcomes_json(outcomes, dry_run))
            else:
                print_outcomes(outcomes, dry_run)
            sys.exit(1 if any(o.action == "error" or o.metrics_error for o in outcomes) else 0)
        run_forever(controller, stop)
    finally:
        stop.set()
        if elector is not None:
            election_stop.set()
            elector.join()  # no step in flight: none can take the Lease back after the release
            elector.release()
        controller.close()
        kube.close()
        if server is not None:
            server.stop()


def _prometheus_at(url: str) -> PrometheusFactory:
    """A Prometheus factory that queries `url` with the config's other settings; a URL that is not
    http(s) is one line and exit 2, before anything is read."""
    try:
        PrometheusSettings(url=url)
    except ValidationError:
        click.echo(f"error: --prometheus-url {' '.join(url.split())[:200]!r}: must be an http:// or https:// URL",
                   err=True)
        sys.exit(2)

    def factory(settings: PrometheusSettings) -> PrometheusSource:
        return default_prometheus_factory(settings.model_copy(update={"url": url}))

    return factory


def outcomes_json(outcomes: list[TargetOutcome], dry_run: bool) -> dict[str, Any]:
    """`run --once -o json`: `{"dry_run": bool, "decisions": [{namespace, deployment, action,
    error, current, desired, reason, clamp, values, sources}]}`, `values` and `sources` as in the
    decision log."""
    rows: list[dict[str, Any]] = []
    for o in outcomes:
        d = o.decision
        rows.append({
            "namespace": o.namespace, "deployment": o.deployment, "action": o.action,
            "error": o.error or o.metrics_error,
            "current": d.current_replicas if d else None, "desired": d.desired_replicas if d else None,
            "reason": d.reason.value if d else None, "clamp": d.clamp.value if d and d.clamp else None,
            "values": d.values.as_dict() if d else None, "sources": o.sources,
        })
    return {"dry_run": dry_run, "decisions": rows}


def print_outcomes(outcomes: list[TargetOutcome], dry_run: bool) -> None:
    """A table of this tick's decisions, on stdout (the log lines go to stderr)."""
    table = Table(title="decisions" + (" (dry run: nothing patched)" if dry_run else ""))
    for col in ("target", "replicas", "reason", "limit", "queue", "KV", "SLO ttft/tpot", "bound by", "lead s",
                "in flight", "action"):
        table.add_column(col)
    for o in outcomes:
        d = o.decision
        annotated = sorted(k for k, source in o.sources.items() if source == "annotation")
        action = o.action + (f" (annotated: {', '.join(annotated)})" if annotated else "")
        if o.metrics_error:
            action += f" (error: {o.metrics_error})"
        if d is None:  # paused, disabled (scaled to 0), or an error before deciding
            table.add_row(f"{o.namespace}/{o.deployment}", *["-"] * 9,
                          f"error: {o.error}" if o.action == "error" else action)
            continue
        v = d.values
        table.add_row(
            f"{o.namespace}/{o.deployment}",
            f"{d.current_replicas} -> {d.desired_replicas}",
            d.reason.value,
            d.clamp.value if d.clamp else "",
            f"{v.waiting_total:.0f} waiting ({v.queue_replicas:.1f})",
            f"{v.kv_cache_usage_mean:.2f} ({v.kv_replicas:.1f})",
            _slo_cell(v.ttft_attainment, v.tpot_attainment, v.slo_replicas),
            v.bound_signal,
            f"{v.lead_time_seconds:.0f}",
            str(v.pods_in_flight),
            action,
        )
    console(min_width=160).print(table)


def _slo_cell(ttft: float | None, tpot: float | None, replicas: float) -> str:
    """Shares within the SLO and the SLO's replicas: `0.97/0.99 (5.1)`; `-` for an unknown share."""
    def share(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"
    return f"{share(ttft)}/{share(tpot)} ({replicas:.1f})"
