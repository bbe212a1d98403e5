"""The seeded sweep end to end (a tiny exploratory grid), the JSON against the schema documented
in docs/benchmark.md, the protocol and the scenario files it names."""

from __future__ import annotations

import json
import math
import pickle
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from autoscaler.cli import main
from autoscaler.sim.frontier import cost_at
from autoscaler.sim.experiment import (REPO, Job, Outcome, Scenario, load_protocol, run_job, static_refinement,
                                       static_replicas, sweep_jobs)
from autoscaler.sim.traces import open_trace
from tests.sim.tool_loader import load_tool

SCENARIOS = REPO / "simulations" / "scenarios"
DEMO = str(SCENARIOS / "demo.yaml")


def _schema() -> dict[str, Any]:
    text = (REPO / "docs" / "benchmark.md").read_text()
    block = re.search(r"```json\n(.*?)\n```", text, re.S)
    assert block, "docs/benchmark.md holds the schema in a ```json block"
    doc: dict[str, Any] = json.loads(block.group(1))
    return doc


_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _type_ok(value: Any, name: str) -> bool:
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, _TYPES[name])


def validate(value: Any, schema: dict[str, Any], root: dict[str, Any], where: str = "$") -> None:
    """The JSON Schema subset docs/benchmark.md uses: type, required, properties,
    additionalProperties, items, minItems, maxItems, oneOf, $ref."""
    if "$ref" in schema:
        validate(value, root["$defs"][schema["$ref"].split("/")[-1]], root, where)
        return
    if "oneOf" in schema:
        ok = 0
        for sub in schema["oneOf"]:
            try:
                validate(value, sub, root, where)
                ok += 1
            except AssertionError:
                pass
        assert ok == 1, f"{where}: matches {ok} of oneOf"
        return
    types = schema.get("type")
    if types is not None:
        names = types if isinstance(types, list) else [types]
        assert any(_type_ok(value, t) for t in names), f"{where}: {value!r} is not {types}"
    if isinstance(value, dict):
        for key in schema.get("required", []):
            assert key in value, f"{where}: missing {key}"
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, v in value.items():
            if key in props:
                validate(v, props[key], root, f"{where}.{key}")
            elif extra is False:
                raise AssertionError(f"{where}: unexpected key {key}")
            elif isinstance(extra, dict):
                validate(v, extra, root, f"{where}.{key}")
    if isinstance(value, list):
        assert len(value) >= schema.get("minItems", 0), where
        assert len(value) <= schema.get("maxItems", len(value)), where
        for i, v in enumerate(value):
            if "items" in schema:
                validate(v, schema["items"], root, f"{where}[{i}]")


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("sweep")
    res = CliRunner().invoke(main, [
        "simulate", "--scenario", DEMO, "--duration", "240", "--sweep", "--seeds", "2", "--jobs", "2",
        "--policy", "static", "--policy", "queue-lead", "--knobs", "static=0.5,1,2", "--knobs", "queue-lead=64,160",
        "--json", str(out / "s.json"), "--markdown", str(out / "s.md"), "--plot", str(out / "s.png")])
    assert res.exit_code == 0, res.output
    return json.loads((out / "s.json").read_text()), out


def test_the_sweep_document_follows_the_documented_schema(swept: tuple[dict[str, Any], Path]) -> None:
    doc, _ = swept
    schema = _schema()
    validate(doc, schema, schema)
    bad = json.loads(json.dumps(doc))
    del bad["policies"]["static"]["points"][0]["gpu_hours_pods"]
    with pytest.raises(AssertionError, match="missing gpu_hours_pods"):
        validate(bad, schema, schema)


def test_an_exploratory_sweep_is_marked_and_runs_every_point_with_every_seed(
        swept: tuple[dict[str, Any], Path]) -> None:
    doc, out = swept
    assert doc["preregistered"] is False
    assert doc["protocol"]["seeds"] == [0, 1] and doc["protocol"]["path"] == "simulations/preregistered.yaml"
    assert len(doc["protocol"]["sha256"]) == 64
    assert doc["policies"]["static"]["grid"] == [0.5, 1.0, 2.0]
    for entry in doc["policies"].values():
        assert [p["seeds"] for p in entry["points"]] == [[0, 1]] * (len(entry["grid"]) + len(entry.get("refined", [])))
    # the static fleet at 2 x the peak need costs twice the one at 1 x (6 -> 12 replicas, 240 s)
    static = doc["policies"]["static"]
    pts = {p["knob"]: p for p in static["points"]}
    assert pts[2.0]["gpu_hours_pods"]["mean"] == pytest.approx(2 * pts[1.0]["gpu_hours_pods"]["mean"])
    assert pts[1.0]["scale_actions"] == {"mean": 0.0, "ci95": [0.0, 0.0]}
    # the protocol's refinement: every integer fleet between the grid fleets around a target, each
    # billed in proportion to its size (knob = replicas / peak need 6)
    refined = static.get("refined", [])
    assert refined and all(k not in static["grid"] for k in refined)
    for k in refined:
        replicas = round(k * 6)
        assert replicas == pytest.approx(k * 6) and 3 < replicas < 12
        assert pts[k]["gpu_hours_pods"]["mean"] == pytest.approx(replicas / 6 * pts[1.0]["gpu_hours_pods"]["mean"])
    md = (out / "s.md").read_text()
    assert "NOT PREREGISTERED" in md and "| lower bound |" in md and "| static |" in md
    assert (out / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_document_keeps_every_seed_and_costs_are_the_mean_of_the_seeds(swept: tuple[dict[str, Any], Path]) -> None:
    doc, _ = swept
    for entry in doc["policies"].values():
        for p in entry["points"]:
            for metric in ("slo_attainment", "gpu_hours_nodes", "gpu_hours_pods", "scale_actions"):
                values = p["per_seed"][metric]
                assert len(values) == len(p["seeds"]) and p[metric]["mean"] == pytest.approx(sum(values) / len(values))
        for t, cell in entry["cost_at"].items():
            per_seed = entry["cost_at_seeds"][t]
            if cell is None:
                assert per_seed == [] and entry["attainment_at_seeds"][t] == []
            else:  # the seeds' linearized values at one operating point; their mean is the envelope's cost
                assert len(per_seed) == 2 and cell["mean"] == pytest.approx(sum(per_seed) / 2)
                atts = entry["attainment_at_seeds"][t]
                # the mixture's mean attainment is the target, unless the cheapest point already passes it
                assert len(atts) == 2 and sum(atts) / 2 >= float(t) - 1e-9
                mean_pts = [(p["gpu_hours_nodes"]["mean"], p["slo_attainment"]["mean"]) for p in entry["points"]]
                assert cell["mean"] == pytest.approx(cost_at(mean_pts, float(t)))


def test_rescoring_a_document_gives_it_back_unchanged(swept: tuple[dict[str, Any], Path]) -> None:
    from autoscaler.sim.scoreboard import rescore

    doc, _ = swept
    assert rescore(doc) == doc  # the statistics are a function of the per-seed values alone
    old = json.loads(json.dumps(doc))
    del old["policies"]["static"]["points"][0]["per_seed"]
    with pytest.raises(ValueError, match="no per_seed values to rescore"):
        rescore(old)


def test_the_bound_is_below_every_policy_in_the_document(swept: tuple[dict[str, Any], Path]) -> None:
    doc, _ = swept
    lb = doc["lower_bound"]["cost_at"]
    assert 0.0 < lb["0.9"] <= lb["0.95"] <= lb["0.99"]
    for entry in doc["policies"].values():
        for t, cost in entry["cost_at"].items():
            assert cost is None or lb[t] <= cost["mean"]


def test_summary_takes_preregistered_documents_only(swept: tuple[dict[str, Any], Path], tmp_path: Path) -> None:
    doc, _ = swept
    tool = _summary_tool()
    (tmp_path / "x.json").write_text(json.dumps(doc))
    (tmp_path / "calibration.json").write_text("{}")
    assert tool.load(tmp_path) == []
    (tmp_path / "x.json").write_text(json.dumps({**doc, "preregistered": True}))
    assert tool.main(["--results", str(tmp_path), "--out", str(tmp_path / "summary.md")]) == 0
    text = (tmp_path / "summary.md").read_text()
    assert "## demo" in text and "| lower bound |" in text and "| queue-lead |" in text
    assert "Ceiling from the start" not in text  # no slo-defaults.json: no ceiling line
    # with slo_defaults' rows beside the sweeps, each scenario gets its ceiling from the start
    row = {"scenario": "demo", "start_ceiling": {"mean": 0.9677, "ci95": [0.9672, 0.9682]}}
    (tmp_path / "slo-defaults.json").write_text(json.dumps({"rows": [row, {"scenario": "other", "start_ceiling": None}]}))
    assert tool.main(["--results", str(tmp_path), "--out", str(tmp_path / "summary.md")]) == 0
    text = (tmp_path / "summary.md").read_text()
    assert "Ceiling from the start: 96.8 % [96.7, 96.8] of requests at most" in text
    assert "Not the current protocol" not in text  # the sweep ran today's protocol file
    (tmp_path / "x.json").write_text(json.dumps({**doc, "preregistered": True,
                                                 "protocol": {**doc["protocol"], "sha256": "0c9f25d149ac" + "0" * 52}}))
    assert tool.main(["--results", str(tmp_path), "--out", str(tmp_path / "summary.md")]) == 0
    assert "**Not the current protocol**" in (tmp_path / "summary.md").read_text()
    assert "Routing sensitivity" not in (tmp_path / "summary.md").read_text()  # no sensitivity sweep


def _summary_tool() -> Any:
    """simulations/tools/summary.py, loaded as a module."""
    return load_tool("summary")


def test_summary_puts_a_random_routing_sweep_beside_the_published_one(swept: tuple[dict[str, Any], Path],
                                                                      tmp_path: Path) -> None:
    doc, _ = swept
    tool = _summary_tool()
    (tmp_path / "demo.json").write_text(json.dumps({**doc, "preregistered": True}))
    (tmp_path / "sensitivity").mkdir()
    routed = json.loads(json.dumps(doc))
    routed.update(scenario="sensitivity-demo-random-routing", meta={**doc["meta"], "routing": "random"})
    del routed["policies"]["static"]
    routed["policies"]["queue-lead"]["cost_at"]["0.9"] = {"mean": 123.0, "ci95": [120.0, 126.0]}
    (tmp_path / "sensitivity" / "demo-random-routing.json").write_text(json.dumps(routed))
    # a sweep that is not routed at random is left out
    (tmp_path / "sensitivity" / "other.json").write_text(json.dumps({**routed, "meta": doc["meta"]}))
    assert tool.main(["--results", str(tmp_path), "--out", str(tmp_path / "summary.md")]) == 0
    text = (tmp_path / "summary.md").read_text()
    section = text.split("## Routing sensitivity", 1)[1]
    assert section.count("### demo") == 1 and "1 of 2 policies." in section
    row = next(line for line in section.splitlines() if line.startswith("| queue-lead |"))
    published = tool.cost_cell(doc["policies"]["queue-lead"], "0.9")
    assert row.startswith(f"| queue-lead | {published} / 123 [120, 126] |")
    best = max(p["slo_attainment"]["mean"] for p in doc["policies"]["queue-lead"]["points"])
    assert row.endswith(f" | {100 * best:.2f} / {100 * best:.2f} |")
    assert "| static |" not in section


def test_summary_puts_a_many_seed_sweep_beside_the_published_one(swept: tuple[dict[str, Any], Path],
                                                                   tmp_path: Path) -> None:
    doc, _ = swept
    tool = _summary_tool()
    (tmp_path / "demo.json").write_text(json.dumps({**doc, "preregistered": True}))
    (tmp_path / "seeds").mkdir()
    more = json.loads(json.dumps(doc))
    for entry in more["policies"].values():
        for p in entry["points"]:
            p["seeds"] = list(range(10))
    more["policies"]["queue-lead"]["cost_at"]["0.9"] = {"mean": 77.0, "ci95": [76.0, 78.0]}
    (tmp_path / "seeds" / "demo-10-seeds.json").write_text(json.dumps(more))
    # another protocol's is left out
    other = {**more, "scenario": "demo", "protocol": {**doc["protocol"], "sha256": "f" * 64}}
    (tmp_path / "seeds" / "zz-10-seeds.json").write_text(json.dumps(other))
    assert tool.main(["--results", str(tmp_path), "--out", str(tmp_path / "summary.md")]) == 0
    section = (tmp_path / "summary.md").read_text().split("## Seeds: the published 3 against 10", 1)[1]
    assert section.count("### demo") == 1
    k = len(doc["policies"]["queue-lead"]["points"][0]["seeds"])
    assert f"@90 %: {k} seeds / 10 seeds" in section
    row = next(line for line in section.splitlines() if line.startswith("| queue-lead |"))
    assert row.startswith(f"| queue-lead | {tool.cost_cell(doc['policies']['queue-lead'], '0.9')} / 77 [76, 78] |")
    assert "seeds/demo-10-seeds-study.md" in section


def test_the_protocol_names_scenario_files_that_read_the_repository_traces() -> None:
    proto = load_protocol()
    assert proto.grid_points == 8 and proto.seeds == (0, 1, 2) and proto.targets == (0.9, 0.95, 0.99)
    assert all(len(g) == 8 for g in proto.grids.values())
    tuning = sorted(SCENARIOS.glob("tuning-*.yaml"))
    assert len(tuning) == len(proto.tuning)
    slices = {(str(REPO / t["trace"]), float(t["start"]), float(t["duration"])) for t in proto.tuning}
    assert {(sc.trace, sc.start, sc.duration) for sc in map(Scenario.load, tuning)} == slices
    for name in proto.evaluation:
        sc = Scenario.load(SCENARIOS / f"{name}.yaml")
        assert sc.name == name
    for path in SCENARIOS.glob("*.yaml"):
        sc = Scenario.load(path)
        assert sc.trace.startswith(str(REPO / "simulations" / "data")), path


def test_a_routing_sensitivity_scenario_is_its_evaluation_scenario_routed_at_random() -> None:
    sensitivity = sorted(SCENARIOS.glob("sensitivity-*-random-routing.yaml"))
    assert sensitivity
    for path in sensitivity:
        sc = Scenario.load(path)
        base = Scenario.load(SCENARIOS / (path.stem.removeprefix("sensitivity-").removesuffix("-random-routing") + ".yaml"))
        assert base.name in load_protocol().evaluation and base.routing == "least_outstanding"
        assert sc.routing == "random" and replace(sc, name=base.name, routing=base.routing) == base, path


def test_routing_is_a_scenario_key_with_its_allowed_values(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_text("trace: simulations/data/azure2023-conv-20min.csv\nrouting: round_robin\n")
    with pytest.raises(ValueError, match=r"routing = 'round_robin' is out of range \(allowed: least_outstanding or random\)"):
        Scenario.load(p)


def test_random_routing_is_said_and_routes_otherwise(tmp_path: Path) -> None:
    docs = {}
    for routing in ("least_outstanding", "random"):
        res = CliRunner().invoke(main, ["simulate", "--scenario", DEMO, "--duration", "240", "--policy", "static",
                                        "--routing", routing, "--no-progress", "--json", str(tmp_path / f"{routing}.json")])
        assert res.exit_code == 0, res.output
        docs[routing] = json.loads((tmp_path / f"{routing}.json").read_text())
    assert "routing" not in docs["least_outstanding"]["meta"] and docs["random"]["meta"]["routing"] == "random"
    near, rand = (docs[r]["policies"]["static"] for r in ("least_outstanding", "random"))
    assert near["requests"] == rand["requests"] and near["gpu_hours"] == rand["gpu_hours"]  # same fleet, same trace
    # the same pods, unevenly loaded: busier batches on some, a longer TPOT tail, fewer requests within the SLO
    assert rand["tpot_p99_s"] > near["tpot_p99_s"] and rand["slo_attainment"] < near["slo_attainment"]


def test_a_scenario_with_a_knob_grid_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_text("trace: simulations/data/azure2023-conv-20min.csv\nknobs:\n  static: [1, 2]\n")
    with pytest.raises(ValueError, match="a scenario holds no knob grid"):
        Scenario.load(p)
    p.write_text("trace: simulations/data/azure2023-conv-20min.csv\nslo: {ttft_s: 2, tpot: 0.1}\n")
    with pytest.raises(ValueError, match="unknown slo key"):
        Scenario.load(p)
    p.write_text("trace: simulations/data/azure2023-conv-20min.csv\nslo: {ttft_s: .nan}\n")
    with pytest.raises(ValueError, match=r"slo.ttft_s = nan is out of range"):
        Scenario.load(p)


def test_jobs_are_plain_picklable_data_seed_major() -> None:
    sc = Scenario.load(DEMO)
    jobs = sweep_jobs(sc, {"static": (1.0, 2.0), "kpa": (16.0,)}, [0, 1])
    assert [(j.policy, j.knob, j.seed) for j in jobs] == [
        ("static", 1.0, 0), ("static", 2.0, 0), ("kpa", 16.0, 0), ("static", 1.0, 1), ("static", 2.0, 1),
        ("kpa", 16.0, 1)]
    assert pickle.loads(pickle.dumps(jobs[0])) == jobs[0] and isinstance(jobs[0], Job)


def test_input_scale_multiplies_every_prompt(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,input_tokens,output_tokens\n0.0,100,10\n1.0,3,5\n")
    base = open_trace(trace, 0.0, 10.0)
    long = open_trace(trace, 0.0, 10.0, input_scale=4.0)
    got = np.concatenate([c.n_in for c in long.chunks()])
    assert got.tolist() == [400, 12]
    assert long.mean_lengths() == (base.mean_lengths()[0] * 4, base.mean_lengths()[1])
    assert np.concatenate([c.n_out for c in long.chunks()]).tolist() == [10, 5]
    with pytest.raises(ValueError, match="input_scale"):
        open_trace(trace, 0.0, 10.0, input_scale=float("nan"))


def test_the_table_names_every_baseline_cheaper_than_ours() -> None:
    from autoscaler.sim.scoreboard import winners_line

    def cost(v: float | None) -> dict[str, Any] | None:
        return None if v is None else {"mean": v, "ci95": None}

    doc = {"slo": {"attainment_targets": [0.9, 0.99]}, "policies": {
        "queue-lead": {"cost_at": {"0.9": cost(5.0), "0.99": cost(None)}},
        "static": {"cost_at": {"0.9": cost(6.0), "0.99": cost(9.0)}},
        "kpa": {"cost_at": {"0.9": cost(4.0), "0.99": cost(None)}}}}
    assert winners_line(doc) == ("Baselines cheaper than queue-lead (means; in brackets the difference in node "
                                 "GPU-hours, paired by seed, with its 95 % interval): at 90 %: kpa; at 99 %: static.")
    # with the seeds' values of both: the paired difference (the docstring's example at 90 %)
    doc["policies"]["kpa"]["cost_at_seeds"] = {"0.9": [7.6, 7.5, 7.7]}
    doc["policies"]["queue-lead"]["cost_at_seeds"] = {"0.9": [10.0, 10.5, 10.6]}
    d = [-2.4, -3.0, -2.9]  # 7.6 - 10.0, 7.5 - 10.5, 7.7 - 10.6: mean -2.767, sd 0.3215, h = 4.303 x 0.3215 / sqrt(3)
    m = sum(d) / 3
    h = 4.303 * math.sqrt(sum((x - m) ** 2 for x in d) / 2) / math.sqrt(3)
    assert "at 90 %: kpa -2.77 [-3.57, -1.97]; at 99 %: static." in winners_line(doc)
    assert (m - h, m + h) == pytest.approx((-3.566, -1.968), abs=1e-3)
    del doc["policies"]["kpa"]["cost_at_seeds"], doc["policies"]["queue-lead"]["cost_at_seeds"]
    doc["policies"]["kpa"]["cost_at"]["0.9"] = cost(7.0)
    doc["policies"]["static"]["cost_at"]["0.99"] = None
    assert winners_line(doc) == "No baseline is cheaper than queue-lead at any target (means)."


@pytest.mark.parametrize(("doc", "scenario", "policy", "point", "seed"), [
    ("azure-code", "azure-code", "queue-lead", 0, 1),
    ("azure-code", "azure-code", "static", 3, 2),
    ("azure-code-long", "azure-code-long", "keda", 2, 0),
    ("azure-code-long", "azure-code-long", "kpa", 4, 2),
    ("azure-conv", "azure-conv", "static", 1, 0),
    ("sensitivity/azure-code-random-routing", "sensitivity-azure-code-random-routing", "hpa-waiting", 1, 1),
    ("sensitivity/azure-code-random-routing", "sensitivity-azure-code-random-routing", "queue-lead", 2, 0),
])
def test_published_runs_reproduce_from_the_code(doc: str, scenario: str, policy: str, point: int, seed: int) -> None:
    """A published run, re-run from the scenario file at today's code, gives the published values to
    the last bit (the tables were swept at an older commit and rescored: nothing the runs depend on
    may have moved since; `make experiments` would rebuild them as they are)."""
    path = REPO / "simulations" / "results" / f"{doc}.json"
    if not path.exists():
        pytest.skip(f"{doc} not published")
    p = json.loads(path.read_text())["policies"][policy]["points"][point]
    out = run_job(Job(Scenario.load(SCENARIOS / f"{scenario}.yaml"), policy, p["knob"], seed))
    k = p["seeds"].index(seed)
    got = (out.slo_attainment, out.gpu_hours_nodes, out.gpu_hours_pods, float(out.scale_actions))
    want = tuple(p["per_seed"][m][k] for m in ("slo_attainment", "gpu_hours_nodes", "gpu_hours_pods", "scale_actions"))
    assert got == want


def test_every_published_document_follows_the_schema() -> None:
    docs = [json.loads(p.read_text()) for p in sorted((REPO / "simulations" / "results").glob("*.json"))]
    docs = [d for d in docs if isinstance(d, dict) and "lower_bound" in d]
    if not docs:
        pytest.skip("no published result of the new schema yet")
    schema = _schema()
    for doc in docs:
        validate(doc, schema, schema, doc.get("scenario", "$"))
        assert doc["preregistered"] is True, doc["scenario"]


def _beside_published(folder: str, suffix: str, none: str) -> list[tuple[Path, dict[str, Any], dict[str, Any]]]:
    """(path, document, published document) of every simulations/results/FOLDER/NAME{suffix}.json,
    each valid against the schema and of the published sweep's protocol (skipped when none)."""
    paths = sorted((REPO / "simulations" / "results" / folder).glob(f"*{suffix}.json"))
    if not paths:
        pytest.skip(none)
    schema = _schema()
    out = []
    for path in paths:
        doc = json.loads(path.read_text())
        validate(doc, schema, schema, doc.get("scenario", "$"))
        base = json.loads((path.parent.parent / path.name.replace(suffix, "")).read_text())
        assert doc["protocol"]["sha256"] == base["protocol"]["sha256"], path.name
        out.append((path, doc, base))
    return out


def test_every_routing_sensitivity_document_follows_the_schema_and_routes_only_the_unlimited() -> None:
    for path, doc, base in _beside_published("sensitivity", "-random-routing", "no routing-sensitivity sweep published"):
        assert doc["meta"]["routing"] == "random" and doc["preregistered"] is False, path.name
        for name, entry in doc["policies"].items():
            same = [p["per_seed"] for p in entry["points"]] == [p["per_seed"] for p in base["policies"][name]["points"]]
            # a per-pod limit keeps the policy's own router (kpa: the activator, ray: the handle): the same runs
            assert same == (name in ("kpa", "ray")), (path.name, name)


def test_the_seed_study_extends_the_published_sweep_by_seeds_only() -> None:
    """simulations/results/seeds: the published scenario with seeds 0-9 under the same protocol;
    its seeds 0-2 are the published runs, value for value (so the study scores the tables' own
    numbers against more seeds, not another experiment)."""
    for path, doc, base in _beside_published("seeds", "-10-seeds", "no seed study published"):
        assert doc["scenario"] == base["scenario"], path.name
        assert doc["preregistered"] is False  # more seeds than the protocol's: exploratory by the tool's rule
        compared = 0
        for name, entry in doc["policies"].items():
            published = {p["knob"]: p for p in base["policies"][name]["points"]}
            for p in entry["points"]:
                assert p["seeds"] == list(range(10)), (path.name, name)
                if p["knob"] in published:  # the static fleet's refinement may add fleets
                    q = published[p["knob"]]
                    assert {m: v[:3] for m, v in p["per_seed"].items()} == q["per_seed"], (path.name, name, p["knob"])
                    compared += 1
        assert compared >= 8 * len(doc["policies"]), path.name


@pytest.mark.parametrize(("spec", "says"), [
    ("bogus", "unknown (allowed: local, dask://HOST:PORT)"),
    ("dask://127.0.0.1:1", "no Dask scheduler answered at tcp://127.0.0.1:1"),  # ~10 s: the connect timeout
])
def test_a_bad_or_unreachable_executor_is_one_line_and_exit_2(spec: str, says: str) -> None:
    res = CliRunner().invoke(main, ["simulate", "--scenario", DEMO, "--duration", "240", "--sweep", "--seeds", "1",
                                    "--policy", "static", "--knobs", "static=1", "--executor", spec])
    assert res.exit_code == 2, res.output
    assert says in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1


def _static(fleet_attainment: dict[float, list[float]]) -> list[Outcome]:
    return [Outcome("static", k, s, a, 1.0, 1.0, 0, 1, 0.0) for k, att in fleet_attainment.items()
            for s, a in enumerate(att)]


@pytest.mark.parametrize(("attainment", "expected"), [
    # the docstring's example: need 5, grid fleets 5 (knob 0.91) -> 97 %, 7 (1.22) -> 99.5 %, 9 -> 100 %:
    # 0.90 and 0.95 are reached at the first fleet; 0.99 lies between 5 and 7 -> fleet 6 = knob 1.2
    ({0.91: [0.97, 0.97], 1.22: [0.995, 0.995], 1.64: [1.0, 1.0]}, (1.2,)),
    # 0.90 between 3 (0.5) and 5 (0.91), 0.95 and 0.99 between 5 and 7: fleets 4 and 6
    ({0.5: [0.8, 0.8], 0.91: [0.93, 0.93], 1.22: [0.995, 0.995]}, (0.8, 1.2)),
    # the seeds' mean decides: (0.984 + 0.994) / 2 = 0.989 < 0.99 at fleet 7 -> between 7 and 9: fleet 8
    ({0.91: [0.97, 0.97], 1.22: [0.984, 0.994], 1.64: [1.0, 1.0]}, (1.6,)),
    ({1.22: [0.5, 0.5], 1.64: [0.6, 0.6]}, ()),  # never reached: nothing to refine
])
def test_static_refinement_runs_every_integer_fleet_around_each_target(
        attainment: dict[float, list[float]], expected: tuple[float, ...]) -> None:
    grid = (0.50, 0.67, 0.91, 1.22, 1.64, 2.21, 2.97, 4.00)
    got = static_refinement(_static(attainment), grid, 5, (0.90, 0.95, 0.99))
    assert got == pytest.approx(expected)
    assert all(static_replicas(k, 5) == round(k * 5) for k in got)  # each knob gives back its fleet


def test_the_protocol_refines_the_static_fleet_and_refuses_an_unknown_rule(tmp_path: Path) -> None:
    assert load_protocol().refine_static is True
    text = (REPO / "simulations" / "preregistered.yaml").read_text()
    bad = tmp_path / "p.yaml"
    bad.write_text(text.replace("static_refinement: every_integer_fleet", "static_refinement: some"))
    with pytest.raises(ValueError, match="static_refinement = 'some' .allowed: every_integer_fleet"):
        load_protocol(bad)


def test_the_sweep_counts_its_refined_runs_before_they_start() -> None:
    from dataclasses import replace as _replace

    from autoscaler.sim.experiment import run_sweep

    sc = _replace(Scenario.load(DEMO), duration=240.0)
    done: list[int] = []
    more: list[tuple[int, int]] = []  # (runs announced, runs done when announced)
    out = run_sweep(sc, {"static": (0.5, 1.0, 2.0)}, [0], "local", 1, lambda: done.append(1),
                    refine_targets=(0.9, 0.95, 0.99), peak_need=6, on_more=lambda n: more.append((n, len(done))))
    extra = out.refined.get("static", ())
    assert extra and more == [(len(extra), 3)]  # announced once the 3 grid runs ended
    assert len(done) == 3 + len(extra) == len(out.outcomes)


def test_a_sweep_of_a_tuning_slice_runs_the_tuning_seeds() -> None:
    """`make tuning`'s sweeps run simulations/tuning.yaml's seeds, none an evaluation seed (a
    minute of the bursty tuning hour, the static fleet alone: ~15 s)."""
    from autoscaler.sim.experiment import load_protocol

    scenario = str(REPO / "simulations" / "scenarios" / "tuning-servegen-m-mid-d7-1h.yaml")
    res = CliRunner().invoke(main, ["simulate", "--scenario", scenario, "--duration", "60", "--policy", "static",
                                    "--sweep", "--jobs", "1", "--no-progress", "-o", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    protocol = load_protocol()
    assert doc["protocol"]["seeds"] == list(protocol.tuning_seeds) == [100, 101, 102]
    assert all(p["seeds"] == [100, 101, 102] for p in doc["policies"]["static"]["points"])
