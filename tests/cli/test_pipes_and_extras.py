"""Piped output never wraps (a URL, a rule name stay whole on one line), and a missing optional
extra is one line naming the `pip install` that brings it, exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from autoscaler.lint import RULES
from tests.cli.helpers import RECORDING, TRACE, cli

LONG_URL = "http://prometheus-k8s-with-a-rather-long-service-name.monitoring-and-observability.svc.cluster.local:9090/prometheus/api/prefix"


def test_check_config_piped_keeps_a_long_url_on_one_line(tmp_path: Path) -> None:
    config = tmp_path / "autoscaler.yaml"
    config.write_text(yaml.safe_dump({"controller": {"prometheus": {"url": LONG_URL}},
                                      "targets": [{"namespace": "llm", "deployment": "qwen"}]}))
    result = cli("check-config", str(config))
    assert result.returncode == 0, result.stderr
    assert len(LONG_URL) > 120
    [line] = [x for x in result.stdout.splitlines() if "prometheus.url" in x]
    assert LONG_URL in line


def test_lint_list_rules_piped_keeps_every_rule_on_one_line() -> None:
    result = cli("lint", "--list-rules")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for rule in RULES:
        [row] = [x for x in lines if f" {rule.id} " in x]
        assert rule.name in row and rule.fix in row and rule.summary in row


def test_columns_still_sets_the_width(tmp_path: Path) -> None:
    """`COLUMNS=80 autoscaler lint --list-rules | less`: asked for, so the table fits 80."""
    import os
    import subprocess
    import sys

    from tests.cli.helpers import env

    result = subprocess.run([sys.executable, "-m", "autoscaler.cli", "lint", "--list-rules"], capture_output=True,
                            text=True, env={**env(), "COLUMNS": "80"}, timeout=60, cwd=os.getcwd())
    assert result.returncode == 0, result.stderr
    assert max(len(x) for x in result.stdout.splitlines()) <= 80


NO_NUMPY = "import sys; sys.modules['numpy'] = None"
NO_MATPLOTLIB = "import sys; sys.modules['matplotlib'] = None"
NO_HIGHSPY = "import sys; sys.modules['highspy'] = None"
SIM_EXTRA = "pip install 'vllm-queue-autoscaler[sim]'"
REPLAY_EXTRA = "pip install 'vllm-queue-autoscaler[replay]'"


@pytest.mark.parametrize(("prelude", "args", "says"), [
    (NO_NUMPY, ("simulate", "--trace", TRACE, "--duration", "60", "--output-file", "out.json"), SIM_EXTRA),
    (NO_MATPLOTLIB, ("simulate", "--trace", TRACE, "--duration", "60", "--plot", "out.png"), SIM_EXTRA),
    (NO_HIGHSPY, ("simulate", "--trace", TRACE, "--duration", "60", "--output-file", "out.json"), SIM_EXTRA),
    (NO_MATPLOTLIB, ("replay", "--metrics", RECORDING, "--config", "hpa-queue", "--plot", "out.png"), REPLAY_EXTRA),
    (NO_NUMPY, ("replay", "--metrics", RECORDING, "--config", "hpa-queue", "--closed-loop", "hpa-queue"),
     REPLAY_EXTRA),
], ids=["simulate-numpy", "simulate-plot", "simulate-highspy", "replay-plot", "replay-closed-loop"])
def test_a_missing_extra_is_one_line_naming_it(prelude: str, args: tuple[str, ...], says: str, tmp_path: Path) -> None:
    result = cli(*args, prelude=prelude, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and line.endswith(says), line
    assert list(tmp_path.iterdir()) == []


def test_without_the_prelude_the_same_command_runs(tmp_path: Path) -> None:
    """The refusal above comes from the missing module, not from the command line."""
    result = cli("simulate", "--trace", TRACE, "--duration", "60", "--output-file", "out.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out.json").exists()
