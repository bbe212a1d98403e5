"""An output path that is also an input, or another output, is refused before any work (one line,
exit 2, every file as it was); `record --out` is checked before its queries, and a recording that
found no pod is not written. Found by a user-facing review: `replay --output-file` onto its own
`--metrics` replaced the recording with its JSON, exit 0."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from tests.cli.helpers import RECORDING, REPO, cli
from tests.prometheus_server import PrometheusServer

QUEUE_LEAD = str(REPO / "tests" / "fixtures" / "replay" / "queue-lead.yaml")
DEMO = str(REPO / "simulations" / "scenarios" / "demo.yaml")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_line(stderr: str) -> str:
    assert stderr.count("\n") == 1 and stderr.startswith("error: "), stderr
    return stderr


@pytest.mark.parametrize("which", ["--metrics", "--config"])
def test_replay_refuses_to_write_onto_its_input(tmp_path: Path, which: str) -> None:
    rec = tmp_path / "rec.jsonl.gz"
    conf = tmp_path / "queue-lead.yaml"
    shutil.copy(RECORDING, rec)
    shutil.copy(QUEUE_LEAD, conf)
    before = digest(rec), digest(conf)
    target = rec if which == "--metrics" else conf
    result = cli("replay", "--metrics", str(rec), "--config", str(conf), "--output-file", str(target))
    assert result.returncode == 2
    assert f"--output-file {target}: is also {which}, which it would overwrite" in one_line(result.stderr)
    assert (digest(rec), digest(conf)) == before


def test_replay_refuses_an_input_reached_through_a_hard_link(tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl.gz"
    shutil.copy(RECORDING, rec)
    os.link(rec, tmp_path / "link.json")
    result = cli("replay", "--metrics", str(rec), "--config", QUEUE_LEAD, "--output-file", str(tmp_path / "link.json"))
    assert result.returncode == 2 and "is also --metrics" in one_line(result.stderr)


def test_simulate_refuses_one_file_for_two_outputs_or_its_scenario(tmp_path: Path) -> None:
    scenario = tmp_path / "demo.yaml"
    shutil.copy(DEMO, scenario)
    before = digest(scenario)
    same = tmp_path / "same.png"
    result = cli("simulate", "--scenario", str(scenario), "--duration", "60", "--policy", "hpa",
                 "--output-file", str(same), "--plot", str(same))
    assert result.returncode == 2
    assert f"--output-file and --plot are the same file: {same}" in one_line(result.stderr)
    assert not same.exists()
    result = cli("simulate", "--scenario", str(scenario), "--duration", "60", "--policy", "hpa",
                 "--markdown", str(scenario))
    assert result.returncode == 2
    assert f"--markdown {scenario}: is also --scenario, which it would overwrite" in one_line(result.stderr)
    assert digest(scenario) == before


def test_record_checks_out_before_querying() -> None:
    # Prometheus is dead too: the --out folder is what is reported, before any query is tried
    result = cli("record", "--prometheus", "http://127.0.0.1:9", "--target", "llm/q", "--since", "1h",
                 "--out", "/nonexistent-folder/x.jsonl.gz")
    assert result.returncode == 2
    assert "--out /nonexistent-folder/x.jsonl.gz: no such folder" in one_line(result.stderr)


def test_record_names_its_token_file_option() -> None:
    result = cli("record", "--prometheus", "http://127.0.0.1:9", "--target", "llm/q", "--since", "1h",
                 "--out", "/tmp/x.jsonl.gz", "--bearer-token-file", "/nonexistent/token")
    assert result.returncode == 2
    assert "--bearer-token-file /nonexistent/token: No such file or directory" in one_line(result.stderr)


def test_record_start_out_of_range_says_the_range() -> None:
    result = cli("record", "--prometheus", "http://127.0.0.1:9", "--target", "llm/q", "--start", "1e300",
                 "--out", "/tmp/x.jsonl.gz")
    assert result.returncode == 2 and "must be a time from 1970 to 9999" in one_line(result.stderr)


@pytest.mark.integration
def test_record_that_finds_no_pod_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "rec.jsonl.gz"
    out.write_bytes(b"the previous recording")
    with PrometheusServer(tmp_path / "prom", targets=[]) as empty:
        result = cli("record", "--prometheus", empty.url, "--target", "llm/qwen3-8b", "--since", "10m",
                     "--step", "15s", "--out", str(out), "--no-progress")
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert "no pod of llm/qwen3-8b in Prometheus" in line and "not written" in line and "--pod-regex" in line
    assert out.read_bytes() == b"the previous recording"


@pytest.mark.parametrize("extra, says", [
    (("--closed-loop", "hpa-queue", "--profile", "nosuch"), "--profile nosuch"),
    (("--closed-loop", "hpa-queue:bogus=1"), "unknown option"),
])
def test_replay_checks_the_closed_loop_before_the_open_loop_report(extra: tuple[str, ...], says: str) -> None:
    result = cli("replay", "--metrics", RECORDING, "--config", QUEUE_LEAD, *extra)
    assert result.returncode == 2
    assert says in one_line(result.stderr)
    assert result.stdout == ""  # no report printed before the refusal


def test_a_device_may_take_two_outputs() -> None:
    """/dev/null or /dev/stdout is written in place (config.atomic): nothing is lost by sharing it."""
    result = cli("simulate", "--scenario", DEMO, "--duration", "60", "--policy", "hpa",
                 "--output-file", "/dev/null", "--markdown", "/dev/null")
    assert result.returncode == 0, result.stderr


def test_a_device_needs_no_writable_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    """`record --out /dev/stdout` as a user who may not write in /dev: the device is written, not /dev."""
    from autoscaler.cli import output

    monkeypatch.setattr(output.os, "access", lambda *_: False)  # nobody's view of /dev
    output.check_output_path("--out", "/dev/null")  # no SystemExit
    with pytest.raises(SystemExit):
        output.check_output_path("--out", "/tmp/x.jsonl.gz")  # a regular file's folder is still checked


def test_record_refuses_to_write_over_its_token_file(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("secret")
    result = cli("record", "--prometheus", "http://127.0.0.1:9", "--target", "llm/q", "--since", "1h",
                 "--bearer-token-file", str(token), "--out", str(token))
    assert result.returncode == 2 and "is also --bearer-token-file" in one_line(result.stderr)
    assert token.read_text() == "secret"
