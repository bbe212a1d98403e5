"""One output convention for every subcommand (docs/cli.md): `-o json` puts one valid JSON
document on stdout and nothing else; `--output-file PATH` writes it to a file (`-` = stdout);
the old spellings still work, hidden; progress and messages go to stderr."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.cli.helpers import RECORDING, SHIPPED_CONFIG, TRACE, VLLM_MANIFESTS, cli

SIMULATE = ("simulate", "--trace", TRACE, "--duration", "120", "--policy", "static")
REPLAY = ("replay", "--metrics", RECORDING, "--config", "hpa-queue")

JSON_ON_STDOUT = {
    "check-config -o json": (("check-config", "-o", "json", SHIPPED_CONFIG), "targets"),
    "check-config --json (old)": (("check-config", "--json", SHIPPED_CONFIG), "targets"),
    "lint -o json": (("lint", "-o", "json", VLLM_MANIFESTS), "summary"),
    "lint --format json (old)": (("lint", "--format", "json", VLLM_MANIFESTS), "summary"),
    "lint --list-rules -o json": (("lint", "--list-rules", "-o", "json"), "rules"),
    "simulate -o json": ((*SIMULATE, "-o", "json"), "policies"),
    "simulate --output-file -": ((*SIMULATE, "--output-file", "-"), "policies"),
    "simulate --json - (old)": ((*SIMULATE, "--json", "-"), "policies"),
    "replay -o json": ((*REPLAY, "-o", "json"), "ticks"),
    "replay --json - (old)": ((*REPLAY, "--json", "-"), "ticks"),
}


@pytest.mark.parametrize("case", list(JSON_ON_STDOUT))
def test_json_on_stdout_is_the_only_thing_there(case: str, tmp_path: Path) -> None:
    args, key = JSON_ON_STDOUT[case]
    result = cli(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)  # the whole of stdout: one document, no table, no progress
    assert key in doc and doc[key]
    assert list(tmp_path.iterdir()) == []  # `-` is stdout, never a file named `-`


def test_json_on_stdout_is_strict_json() -> None:
    """NaN and Infinity are not JSON (jq refuses them)."""
    result = cli(*REPLAY, "-o", "json")
    assert result.returncode == 0, result.stderr

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} on stdout")

    json.loads(result.stdout, parse_constant=refuse)


def test_output_file_writes_the_document_and_keeps_the_table_on_stdout(tmp_path: Path) -> None:
    new, old = tmp_path / "new.json", tmp_path / "old.json"
    a = cli(*SIMULATE, "--output-file", str(new))
    b = cli(*SIMULATE, "--json", str(old))  # the Makefile's spelling
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert "SLO %" in a.stdout and a.stdout == b.stdout  # the scoreboard, as before
    docs = [json.loads(new.read_text()), json.loads(old.read_text())]
    for doc in docs:
        doc["policies"]["static"].pop("wall_s")  # the run's own duration
    assert docs[0] == docs[1] and set(docs[0]) == {"meta", "policies"}


def test_replay_output_file_matches_json_on_stdout(tmp_path: Path) -> None:
    out = tmp_path / "replay.json"
    to_file = cli(*REPLAY, "--output-file", str(out), "--no-progress")
    on_stdout = cli(*REPLAY, "-o", "json")
    assert to_file.returncode == 0 and on_stdout.returncode == 0
    assert "Summary" in to_file.stdout
    assert json.loads(out.read_text()) == json.loads(on_stdout.stdout)


@pytest.mark.parametrize("args", [
    (*SIMULATE, "--json", "a.json", "--output-file", "b.json"),
    (*REPLAY, "--json", "a.json", "--output-file", "b.json"),
    (*SIMULATE, "--output-file", "."),
])
def test_conflicting_or_bad_output_file_is_one_line_and_exit_2(args: tuple[str, ...], tmp_path: Path) -> None:
    result = cli(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and "--output-file" in line
    assert list(tmp_path.iterdir()) == []


def test_check_config_yaml_is_the_json_document() -> None:
    import yaml

    as_yaml = cli("check-config", "-o", "yaml", SHIPPED_CONFIG)
    as_json = cli("check-config", "-o", "json", SHIPPED_CONFIG)
    assert as_yaml.returncode == 0, as_yaml.stderr
    assert yaml.safe_load(as_yaml.stdout) == json.loads(as_json.stdout)


@pytest.mark.parametrize("command", ["check-config", "lint", "simulate", "replay", "run"])
def test_every_data_command_documents_dash_o_and_hides_the_old_spellings(command: str) -> None:
    result = cli(command, "--help")
    assert result.returncode == 0, result.stderr
    assert "-o, --output" in result.stdout
    for old in ("--json", "--format", "--quiet"):
        assert old not in result.stdout


@pytest.mark.parametrize("command", ["simulate", "replay", "record"])
def test_one_progress_flag(command: str) -> None:
    result = cli(command, "--help")
    assert "--no-progress" in result.stdout and "--quiet" not in result.stdout


def test_record_quiet_is_still_accepted() -> None:
    # a bad --target fails after the options parsed: --quiet is known, not "no such option"
    result = cli("record", "--prometheus", "http://127.0.0.1:9", "--target", "bad", "--out", "x", "--quiet")
    assert result.returncode == 2
    assert result.stderr.splitlines() == ["error: --target must be NAMESPACE/DEPLOYMENT, got 'bad'"]


def test_log_lines_of_any_command_go_to_stderr(tmp_path: Path) -> None:
    """An adapter's retry warning went to stdout, structlog's default, in every command but
    `run`, in front of the data (found by a review). Log lines go to stderr, errors only: a
    failure is its one line, not preceded by retry chatter."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],  # nothing listens
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}], "users": [{"name": "u", "user": {}}]}))
    checked = cli("check-config", SHIPPED_CONFIG, "--kubeconfig", str(kubeconfig), "-o", "json")
    recorded = cli("record", "--prometheus", "http://127.0.0.1:1", "--target", "llm/x", "--out",
                   str(tmp_path / "r.jsonl.gz"), "--since", "1m", "--no-progress")
    # exit 1: the cluster cannot be read (docs/cli.md); 2: record's source is unreachable
    for result, event, code in ((checked, "kube_retry", 1), (recorded, "prometheus_retry", 2)):
        assert result.returncode == code and result.stdout == "", (result.stdout, result.stderr)
        assert f'"event": "{event}"' not in result.stderr
        assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: ")


def test_replay_output_file_writes_nan_as_null(tmp_path: Path) -> None:
    """A valid recording holding a NaN sample: `-o json` gave null, `--output-file` a traceback
    (json.dumps with allow_nan=False; found by a review). Both are strict JSON now, the same."""
    lines = gzip.open(RECORDING, "rt").read().splitlines()
    step = json.loads(lines[4])
    step["pods"][0][3] = ["NaN", step["pods"][0][3][1]]  # a waiting sample Prometheus answered NaN
    lines[4] = json.dumps(step)
    recording = tmp_path / "nan.jsonl.gz"
    with gzip.open(recording, "wt") as fh:
        fh.write("\n".join(lines) + "\n")
    out = tmp_path / "replay.json"
    to_file = cli("replay", "--metrics", str(recording), "--config", "hpa-queue", "--output-file", str(out),
                  "--no-progress")
    on_stdout = cli("replay", "--metrics", str(recording), "--config", "hpa-queue", "-o", "json")
    assert to_file.returncode == 0 and "Traceback" not in to_file.stderr, to_file.stderr
    assert json.loads(out.read_text()) == json.loads(on_stdout.stdout)
