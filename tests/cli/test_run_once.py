"""`autoscaler run --once --dry-run --prometheus-url URL`: the shadow run from a workstation,
against the real Prometheus (scraping a vLLM-format exporter) and the Kubernetes-API test server.
Data on stdout (the table, or `-o json`), the JSON log on stderr, `--log-level`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import cli
from tests.kube_api_server import KubeApiServer
from tests.prometheus_server import PrometheusServer
from tests.test_loop import NAME, NS, busy_fleet, seed_cluster, write_config  # noqa: F401 - busy_fleet: a fixture

pytestmark = pytest.mark.integration

DEAD = "http://127.0.0.1:9"  # nothing listens on the discard port of loopback


def log_lines(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def shadow(config: Path, kubeconfig: Path, *extra: str) -> Any:
    return cli("run", "--once", "--dry-run", "--config", str(config), "--kubeconfig", str(kubeconfig), *extra)


def test_prometheus_url_overrides_the_config_and_json_is_on_stdout(
    busy_fleet: PrometheusServer, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path  # noqa: F811
) -> None:
    seed_cluster(kube_server)
    config = write_config(tmp_path / "autoscaler.yaml", DEAD)  # the config's Prometheus answers nothing
    result = shadow(config, kubeconfig_path, "--prometheus-url", busy_fleet.url, "-o", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)  # all of stdout
    [row] = doc["decisions"]
    assert doc["dry_run"] is True
    # the busy fleet read through --prometheus-url: 2 -> 4 on the queue (tests/test_loop.py)
    assert (row["namespace"], row["deployment"], row["current"], row["desired"]) == (NS, NAME, 2, 4)
    assert (row["reason"], row["action"]) == ("scale_up_queue", "dry_run")
    assert row["values"]["waiting_total"] == pytest.approx(30)
    [logged] = [x for x in log_lines(result.stderr) if x["event"] == "decision"]
    assert logged["desired"] == 4 and not any(x["event"] == "metrics_unreadable" for x in log_lines(result.stderr))
    assert kube_server.requests_matching(method="PATCH") == []  # a shadow run writes no scale
    assert kube_server.get("deployments", NS, NAME)["spec"]["replicas"] == 2  # type: ignore[index]


def test_without_the_override_the_config_url_is_used(
    kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    """The counterpart: the dead URL of the config holds (so the test above read the override).
    A Prometheus that does not answer is said so, apart from one that answers without the pods'
    series (the try-it page's label check), and `--once` exits 1, as for a target not read."""
    seed_cluster(kube_server)
    config = write_config(tmp_path / "autoscaler.yaml", DEAD)
    result = shadow(config, kubeconfig_path, "-o", "json")
    assert result.returncode == 1, result.stderr
    [row] = json.loads(result.stdout)["decisions"]
    assert (row["desired"], row["reason"], row["action"]) == (2, "hold_metrics_unhealthy", "dry_run")
    assert row["error"].startswith("Prometheus unreadable: ") and "\n" not in row["error"]
    assert any(x["event"] == "metrics_unreadable" for x in log_lines(result.stderr))
    table = shadow(config, kubeconfig_path)
    assert table.returncode == 1
    [line] = [x for x in table.stdout.splitlines() if f"{NS}/{NAME}" in x]
    assert "hold_metrics_unhealthy" in line and "error: Prometheus" in line


def test_a_prometheus_without_the_pods_series_is_no_error(
    kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    """Prometheus answers and holds nothing for the pods: a hold on missing data, exit 0, no error
    (what the try-it page sends to the label check)."""
    seed_cluster(kube_server)
    with PrometheusServer(tmp_path / "prom", targets=[]) as empty:
        config = write_config(tmp_path / "autoscaler.yaml", empty.url)
        result = shadow(config, kubeconfig_path, "-o", "json")
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)["decisions"]
    assert (row["reason"], row["error"]) == ("hold_metrics_unhealthy", None)


def test_table_on_stdout_log_on_stderr_and_log_level(
    busy_fleet: PrometheusServer, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path  # noqa: F811
) -> None:
    seed_cluster(kube_server)
    config = write_config(tmp_path / "autoscaler.yaml", DEAD)
    result = shadow(config, kubeconfig_path, "--prometheus-url", busy_fleet.url)
    assert result.returncode == 0, result.stderr
    assert "{" not in result.stdout  # no log line among the data
    [row] = [x for x in result.stdout.splitlines() if f"{NS}/{NAME}" in x]  # one line per target: no wrapping
    assert "2 -> 4" in row and "scale_up_queue" in row and "dry_run" in row
    assert "dry run: nothing patched" in result.stdout
    assert [x["event"] for x in log_lines(result.stderr)].count("decision") == 1

    quiet = shadow(config, kubeconfig_path, "--prometheus-url", busy_fleet.url, "--log-level", "error")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""  # info lines (the decision) filtered out
    assert "scale_up_queue" in quiet.stdout


@pytest.mark.parametrize(("args", "says"), [
    (("--prometheus-url", "prometheus:9090"), "error: --prometheus-url 'prometheus:9090': must be an http:// or "
                                              "https:// URL"),
    (("-o", "json"), "error: -o json goes with --once"),
    (("--log-level", "loud"), "--log-level"),
])
def test_bad_run_options_are_one_line_and_exit_2(args: tuple[str, ...], says: str, tmp_path: Path) -> None:
    config = write_config(tmp_path / "autoscaler.yaml", DEAD)
    once = () if "-o" in args else ("--once",)
    result = cli("run", *once, "--dry-run", "--config", str(config), "--kubeconfig", "/nonexistent", *args)
    assert result.returncode == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(says) or says in line, line


def test_run_help_lists_the_shadow_run_options() -> None:
    result = cli("run", "--help")
    for option in ("--prometheus-url", "--log-level", "--kubeconfig", "--context", "-o, --output"):
        assert option in result.stdout


def test_list_page_size_pages_the_lists_and_decides_the_same(
    busy_fleet: PrometheusServer, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path  # noqa: F811
) -> None:
    seed_cluster(kube_server)
    config = write_config(tmp_path / "autoscaler.yaml", DEAD)
    result = shadow(config, kubeconfig_path, "--prometheus-url", busy_fleet.url, "-o", "json", "--list-page-size", "1")
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)["decisions"]
    assert (row["current"], row["desired"], row["reason"]) == (2, 4, "scale_up_queue")  # as in one answer
    pods = [r.query for r in kube_server.requests if r.path == "/api/v1/pods"]
    assert len(pods) >= 2 and all(q["limit"] == "1" for q in pods) and all(q.get("continue") for q in pods[1:])
    bad = shadow(config, kubeconfig_path, "--list-page-size", "-1")
    assert bad.returncode == 2 and "--list-page-size" in bad.stderr and "Traceback" not in bad.stderr
