"""Issue 13, defect 7: a deeply nested ConfigMap raised RecursionError once, then was silently
ignored by `ConfigWatcher` (the content hash was recorded before loading, only `ConfigError` was
caught): never counted as rejected, so the rejection alert never fired; `autoscaler run` and
`check-config` with such a file printed a traceback.

Now every reader bounds nesting (100 levels) and `ConfigWatcher` counts any load failure as a
rejection, once per bad version."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autoscaler.config import ConfigError, ConfigWatcher
from autoscaler.config import watch as watch_module

GOOD = "targets:\n  - namespace: llm\n    deployment: qwen\n"
DEEP = GOOD + "extra: " + "[" * 5_000 + "]" * 5_000 + "\n"  # 5,000 levels: RecursionError before


def _poll_twice(watcher: ConfigWatcher) -> list[bool]:
    return [watcher.poll(), watcher.poll()]


def test_a_deeply_nested_version_is_rejected_once_and_the_good_one_stays(tmp_path: Path) -> None:
    path = tmp_path / "autoscaler.yaml"
    path.write_text(GOOD)
    watcher = ConfigWatcher(path)
    path.write_text(DEEP)
    assert _poll_twice(watcher) == [False, False]  # raised RecursionError out of poll() before
    assert watcher.rejected_total == 1
    assert watcher.last_error is not None
    (line,) = watcher.last_error.problems
    assert line.startswith(f"{path}:4:") and "nested deeper than 100 levels" in line, line
    assert [t.deployment for t in watcher.current.targets] == ["qwen"] and watcher.generation == 1
    path.write_text(GOOD.replace("qwen", "qwen2"))
    assert watcher.poll() is True and watcher.generation == 2 and watcher.last_error is None


def test_any_failure_of_the_loader_counts_as_a_rejection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a future reader bug raises, the version is counted as rejected, not lost."""
    path = tmp_path / "autoscaler.yaml"
    path.write_text(GOOD)
    watcher = ConfigWatcher(path)

    def broken(text: str, source: str = "<string>") -> None:
        raise RuntimeError("a bug in a reader")

    monkeypatch.setattr(watch_module, "load_config_text", broken)
    path.write_text(GOOD.replace("qwen", "qwen2"))
    assert _poll_twice(watcher) == [False, False]
    assert watcher.rejected_total == 1
    assert watcher.last_error is not None
    assert watcher.last_error.problems == [f"{path}: cannot load: RuntimeError: a bug in a reader"]


def test_a_loader_failure_at_start_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "autoscaler.yaml"
    path.write_text(GOOD)
    monkeypatch.setattr(watch_module, "load_config_text", lambda text, source="": 1 / 0)
    with pytest.raises(ConfigError) as err:
        ConfigWatcher(path)
    assert err.value.problems == [f"{path}: cannot load: ZeroDivisionError: division by zero"]


@pytest.mark.parametrize("command", [["check-config"], ["run", "--once", "--kubeconfig", "/nonexistent", "--config"]])
def test_the_cli_refuses_a_deep_config_in_one_line(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "autoscaler.yaml"
    path.write_text(DEEP)
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    result = subprocess.run([sys.executable, "-m", "autoscaler.cli", *command, str(path)], capture_output=True,
                            text=True, timeout=60, env=env)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"{path}:4:") and "nested deeper than 100 levels" in line, line
