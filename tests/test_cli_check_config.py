"""`autoscaler check-config`: exit codes, problem lines on stderr, tables and JSON on stdout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from autoscaler.cli import main
from autoscaler.policy.params import PolicyParams, SloParams

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "config"
SHIPPED = REPO / "config" / "autoscaler.yaml"


def run(*args: str, stdin: str | None = None, columns: int = 100) -> Result:
    return CliRunner().invoke(main, ["check-config", *args], input=stdin, env={"COLUMNS": str(columns)})


def test_shipped_file_is_valid() -> None:
    result = run(str(SHIPPED))
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    out = result.stdout
    assert out.splitlines()[0] == f"{SHIPPED}: valid, 1 target"
    assert "qwen3-8b" in out and "llm" in out
    for key in PolicyParams.model_fields:
        if key == "slo":  # a nested section: one row per key
            assert [k for k in SloParams.model_fields if f"│ slo.{k} " not in out] == []
        else:
            assert f"│ {key} " in out
    assert "prometheus.url" in out and "http://prometheus-operated.monitoring.svc:9090" in out


def test_overrides_are_marked() -> None:
    result = run(str(FIXTURES / "overrides.yaml"))
    assert result.exit_code == 0, result.output
    rows = {line.split()[1]: line for line in result.stdout.splitlines() if line.startswith("│")}
    # defaults column: changed by the document's defaults; target columns: differ from defaults
    assert rows["scale_down_window_seconds"].split("│")[2].strip() == "900*"
    assert [c.strip() for c in rows["max_replicas"].split("│")[2:5]] == ["10", "8*", "10"]
    assert [c.strip() for c in rows["max_gpus"].split("│")[2:5]] == ["32*", "32", "null*"]
    assert [c.strip() for c in rows["min_replicas"].split("│")[2:5]] == ["1", "1", "2*"]


def _rows(stdout: str) -> dict[str, list[str]]:
    """key -> the cells after it (defaults, then each target), of the effective-policy table."""
    return {line.split()[1]: [c.strip() for c in line.split("│")[2:-1]]
            for line in stdout.splitlines() if line.startswith("│")}


def test_effective_slo_per_target_is_shown_and_overrides_are_marked() -> None:
    result = run(str(FIXTURES / "slo_overrides.yaml"))
    assert result.exit_code == 0, result.output
    rows = _rows(result.stdout)
    # defaults: `*` where the document's defaults changed the built-in value; a target: `*`
    # where its effective value differs from the defaults column
    assert rows["slo.ttft_seconds"] == ["1*", "1", "4*"]
    assert rows["slo.tpot_seconds"] == ["0.1", "0.05*", "0.1"]
    assert rows["slo.attainment_target"] == ["0.99", "0.99", "0.99"]
    assert rows["slo.ttft_seconds_per_1k_prompt_tokens"] == ["0", "0", "0.25*"]
    assert rows["capacity_profile"] == ["null", "null", "llama-3-8b/a100-80gb*"]
    assert rows["capacity_prompt_tokens_per_second"] == ["null", "null", "12000*"]
    assert rows["capacity_generation_tokens_per_second"] == ["null", "null", "null"]
    assert "slo" not in rows  # the section itself is no row
    keys = list(rows)  # in PolicyParams order, slo where the section stands
    assert keys[keys.index("slo.ttft_seconds") - 1] == "tolerance_ratio"
    assert keys[keys.index("slo.ttft_seconds_per_1k_prompt_tokens") + 1] == "capacity_profile"


def test_effective_slo_in_json() -> None:
    result = run("--json", str(FIXTURES / "slo_overrides.yaml"))
    assert result.exit_code == 0, result.output
    qwen, llama = json.loads(result.stdout)["targets"]
    assert qwen["overrides"] == {"slo": {"tpot_seconds": 0.05}}
    assert qwen["policy"]["slo"] == {"ttft_seconds": 1, "tpot_seconds": 0.05, "attainment_target": 0.99,
                                     "ttft_seconds_per_1k_prompt_tokens": 0}
    assert llama["overrides"] == {"slo": {"ttft_seconds": 4, "ttft_seconds_per_1k_prompt_tokens": 0.25},
                                  "capacity_profile": "llama-3-8b/a100-80gb",
                                  "capacity_prompt_tokens_per_second": 12000}
    assert llama["policy"]["slo"] == SloParams(ttft_seconds=4, ttft_seconds_per_1k_prompt_tokens=0.25).model_dump()
    assert llama["policy"]["capacity_generation_tokens_per_second"] is None


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("negative_window.yaml", ["defaults.scale_down_window_seconds = -5, must be >= 0"]),
        ("unknown_key.yaml",
         ["defaults.scale_down_windw_seconds = 600, unknown key (did you mean scale_down_window_seconds?)"]),
        ("wrong_type.yaml", [
            "defaults.scale_down_window_seconds = 10m, must be a number >= 0 and <= 86400",
            'targets[0].max_replicas = "8", must be an integer >= 1 and <= 10000',
        ]),
        ("min_gt_max.yaml",
         ["targets[0].min_replicas = 4, must be <= max_replicas (2) in the effective policy of llm/qwen3-8b"]),
        ("duplicate_target.yaml",
         ["targets[1] = llm/qwen, must be unique (namespace, deployment), already at targets[0]"]),
        ("invalid_yaml.yaml", ["{path}:3:16: invalid YAML: mapping values are not allowed here"]),
        ("empty.yaml", ["{path}: empty document, must be a mapping with keys controller, defaults, targets"]),
        ("slo_out_of_range.yaml", [
            "defaults.slo.tpot_seconds = 0, must be > 0",
            "defaults.slo.attainment_target = 1, must be <= 0.999",
            "targets[1].slo.ttft_seconds = -1, must be > 0",
            "targets[1].slo.ttft_seconds_per_1k_prompt_tokens = 3601, must be <= 3600",
        ]),
    ],
)
def test_invalid_file_exits_2_with_one_line_per_problem(fixture: str, expected: list[str]) -> None:
    path = FIXTURES / fixture
    result = run(str(path))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [line.format(path=path) for line in expected]


def test_json_output_is_invalid_too() -> None:
    result = run("--json", str(FIXTURES / "negative_window.yaml"))
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "defaults.scale_down_window_seconds = -5, must be >= 0\n"


def test_unreadable_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    result = run(str(missing))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == f"{missing}: cannot read: No such file or directory\n"
    result = run(str(tmp_path))  # a directory
    assert result.exit_code == 2
    assert result.stderr == f"{tmp_path}: cannot read: Is a directory\n"


def test_json() -> None:
    result = run("--json", str(FIXTURES / "overrides.yaml"))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["controller"]["prometheus"]["timeout_seconds"] == 5
    qwen, llama = data["targets"]
    assert (qwen["namespace"], qwen["deployment"], qwen["overrides"]) == ("llm", "qwen3-8b", {"max_replicas": 8})
    assert qwen["policy"] == PolicyParams(max_replicas=8, max_gpus=32, scale_down_window_seconds=900).model_dump()
    assert llama["overrides"] == {"min_replicas": 2, "gpus_per_replica": 4, "max_gpus": None}
    assert llama["policy"]["max_gpus"] is None
    assert set(llama["policy"]) == set(PolicyParams.model_fields)


def test_stdin() -> None:
    result = run("--json", "-", stdin=SHIPPED.read_text())
    assert result.exit_code == 0, result.output
    assert [t["deployment"] for t in json.loads(result.stdout)["targets"]] == ["qwen3-8b"]
    result = run("-", stdin="defaults:\n  scale_down_window_seconds: -5\ntargets: []\n")
    assert result.exit_code == 2
    assert result.stderr == "defaults.scale_down_window_seconds = -5, must be >= 0\n"
    result = run("-", stdin="")
    assert result.stderr == "<stdin>: empty document, must be a mapping with keys controller, defaults, targets\n"


def test_no_targets_is_valid_with_a_warning() -> None:
    result = run(str(FIXTURES / "no_targets.yaml"))
    assert result.exit_code == 0
    assert result.stderr == "warning: targets = [], no targets: the controller runs but scales nothing\n"
    assert "valid, 0 targets" in result.stdout
    assert "effective policy" not in result.stdout


def test_many_targets_fit_100_columns(tmp_path: Path) -> None:
    names = ["qwen3-8b", "llama-3-70b-instruct", "mistral-7b", "gemma-2-27b-it", "phi-4", "deepseek-r1-distill"]
    doc = "targets:\n" + "".join(
        f"  - {{namespace: team-{i}, deployment: {n}, max_replicas: {i + 2}}}\n" for i, n in enumerate(names)
    )
    path = tmp_path / "many.yaml"
    path.write_text(doc)
    for columns in (100, 80):
        result = run(str(path), columns=columns)
        assert result.exit_code == 0, result.output
        assert max(len(line) for line in result.stdout.splitlines()) <= columns
        for name in names:  # every target is shown
            assert name in result.stdout
        assert result.stdout.count("effective policy") >= 2  # split over several tables


def test_profile_names_fit_and_keys_stay_whole(tmp_path: Path) -> None:
    """`capacity_profile` is the one value that is a name: every row of the table fits its
    column at 80 and 100 columns, keys whole; a name not in the table is one error line."""
    names = ["qwen3-8b/h100", "llama-3-8b/a100-80gb", "qwen3-8b/a100-80gb"]
    doc = "defaults:\n  capacity_profile: generic\ntargets:\n" + "".join(
        f"  - {{namespace: team-{i}, deployment: d{i}, capacity_profile: {n}}}\n" for i, n in enumerate(names))
    path = tmp_path / "profiles.yaml"
    path.write_text(doc)
    for columns in (100, 80):
        result = run(str(path), columns=columns)
        assert result.exit_code == 0, result.output
        assert max(len(line) for line in result.stdout.splitlines()) <= columns
        assert "…" not in result.stdout  # nothing cut: keys whole, values folded
        for path_key in ("slo.ttft_seconds_per_1k_prompt_tokens", "capacity_generation_tokens_per_second"):
            assert f"│ {path_key} " in result.stdout
    path.write_text("targets:\n  - {namespace: a, deployment: b, capacity_profile: vendor/unknown}\n")
    result = run(str(path))
    assert result.exit_code == 2
    assert "targets[0].capacity_profile = vendor/unknown, must be one of generic, llama-3-8b/a100-80gb" in result.output
    # set in defaults: named there, once, not once per target that inherits it (found by a fuzzer)
    path.write_text("defaults: {capacity_profile: vendor/unknown}\ntargets:\n  - {namespace: a, deployment: b}\n"
                    "  - {namespace: a, deployment: c}\n")
    result = run(str(path))
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "defaults.capacity_profile = vendor/unknown, must be one of generic, llama-3-8b/a100-80gb, llama-3-8b/h100, "
        "qwen3-8b/a100-80gb, qwen3-8b/h100"]


def test_registered_in_the_group() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    assert "check-config" in result.output
    result = CliRunner().invoke(main, ["check-config", "--help"])
    assert result.exit_code == 0
    assert "-o, --output" in result.output and "[text|json|yaml]" in result.output
    assert "--json" not in result.output  # the old spelling works, hidden (tests/cli)
