"""A corpus of hostile inputs for the user-facing readers, generated into a folder (nothing big in
git): each `Case` is a command line of `autoscaler` that must refuse its input with exit 2 and ONE
line on stderr, without a traceback, within a time and memory bound (issue 13, defect 11).

`build(folder)` writes the files and returns the cases; `python -m tests.hardening.corpus` runs
them and prints each outcome (a quick survey while hardening a reader).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RECORDING = REPO / "tests" / "fixtures" / "replay" / "hpa-6h.jsonl.gz"
CONFIG = REPO / "tests" / "fixtures" / "replay" / "queue-lead.yaml"


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]
    # the subcommand's one-line format: `error: ...` for lint/replay/simulate; check-config prints
    # one line per problem, `FILE:LINE:COL: ...` or `key = value, must be ...` (prefix "")
    prefix: str = "error:"
    # "refuse": exit 2 and one line; "run": a value the command may accept or report on (a lint
    # finding, exit 0 or 1), but no traceback either and within the same bounds
    expect: str = "refuse"


# --------------------------------------------------------------------------- YAML documents


def _deep_flow(n: int) -> str:
    return "a: " + "[" * n + "]" * n + "\n"


def _deep_flow_map(n: int) -> str:
    return "a: " + "{a: " * n + "1" + "}" * n + "\n"


def _deep_block(n: int) -> str:
    return "".join(" " * i + "a:\n" for i in range(n)) + " " * n + "b: 1\n"


def _alias_bomb(levels: int = 9, width: int = 9) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def _alias_bomb_manifest() -> str:
    """A vLLM Deployment whose env list expands to 9^8 entries through aliases."""
    lines = ['x0: &x0 [{name: A, value: "1"}, {name: A, value: "1"}, {name: A, value: "1"}]']
    lines += [f"x{i}: &x{i} [" + ",".join([f"*x{i - 1}"] * 9) + "]" for i in range(1, 9)]
    head = "\n".join(lines)
    return (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: vllm, namespace: llm}\n"
        "spec:\n  replicas: 1\n  template:\n    spec:\n      containers:\n"
        "      - name: vllm\n        image: vllm/vllm-openai:v0.11.0\n        args: [vllm, serve, m]\n"
        f"        env: *x8\n# {head.splitlines()[0]}\n"
    ).replace("spec:\n  replicas", head + "\nspec:\n  replicas", 1)


YAML_HOSTILE: dict[str, str] = {
    "deep-flow-seq": _deep_flow(100_000),
    "deep-flow-map": _deep_flow_map(50_000),
    "deep-block": _deep_block(3_000),
    "alias-bomb": _alias_bomb(),
    "recursive-alias": "targets: []\na: &a [*a]\n",
    "recursive-alias-map": "targets: []\na: &a {b: *a}\n",
    "huge-int": "targets: []\nb: " + "9" * 5_000 + "\n",
    "bad-date": "targets: []\nb: 2001-02-30\n",
    "bad-date-key": "targets: []\n2001-02-30: 1\n",
    "long-line": "targets: []\nb: '" + "x" * 3_000_000 + "'\n",
    "big-file": "targets: []\n" + "# padding padding padding padding padding padding padding\n" * 400_000,
    "many-keys": "targets: []\nb:\n" + "".join(f"  k{i}: {i}\n" for i in range(300_000)),
    "nul-bytes": "targets: []\nb: \x00\x00\n",
}


def _config_targets(n: int) -> str:
    return "targets:\n" + "".join(f"  - namespace: llm\n    deployment: model-{i}\n" for i in range(n))


CONFIG_HOSTILE: dict[str, str] = {
    "nan-knob": "defaults:\n  target_kv_cache_usage_ratio: .nan\ntargets: []\n",
    "inf-knob": "defaults:\n  max_replicas: .inf\ntargets: []\n",
    "inf-tick": "controller:\n  tick_seconds: .inf\ntargets: []\n",
    "nan-slo": "defaults:\n  slo:\n    ttft_seconds: .nan\ntargets: []\n",
    "huge-float-knob": "defaults:\n  scale_down_window_seconds: 1e300\ntargets: []\n",
    "9e18-replicas": "targets:\n  - namespace: llm\n    deployment: q\n    max_replicas: 9000000000000000000\n",
    "neg-zero-window": "defaults:\n  scale_down_window_seconds: -0.0\n  tolerance: -1e-320\ntargets: []\n",
    "binary-tag": "targets: !!binary AAAA\n",
    "python-tag": "targets: !!python/object/apply:os.system ['true']\n",
    "list-doc": "- 1\n- 2\n",
    "many-targets": _config_targets(200_000),  # > 1 MiB, the ConfigMap limit
}
BIG_VALID_CONFIG = _config_targets(20_000)  # 0.9 MB: valid, checked in seconds (was > 20 s)


# --------------------------------------------------------------------------- lint manifests


def _deployment(extra_container: str = "", replicas: str = "1", extra_spec: str = "") -> str:
    return (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: vllm, namespace: llm}\n"
        f"spec:\n  replicas: {replicas}\n{extra_spec}  template:\n    spec:\n      containers:\n"
        "      - name: vllm\n        image: vllm/vllm-openai:v0.11.0\n"
        "        args: [vllm, serve, m, --max-model-len, '4096']\n"
        f"{extra_container}"
    )


LINT_HOSTILE: dict[str, str] = {
    "replicas-inf": _deployment(replicas=".inf"),
    "replicas-huge": _deployment(replicas="1e400"),
    "gpu-limit-huge": _deployment("        resources: {limits: {nvidia.com/gpu: 1e400}}\n"),
    "gpu-limit-9e18": _deployment("        resources: {limits: {nvidia.com/gpu: '9e18'}}\n"),
    "probe-inf": _deployment(
        "        startupProbe: {httpGet: {path: /health, port: 8000}, failureThreshold: .inf, periodSeconds: 1e300}\n"
    ),
    "probe-nan": _deployment(
        "        startupProbe: {httpGet: {path: /health, port: 8000}, failureThreshold: .nan, periodSeconds: .nan}\n"
    ),
    "shm-huge": _deployment(
        "        volumeMounts: [{name: shm, mountPath: /dev/shm}]\n"
        "      volumes: [{name: shm, emptyDir: {medium: Memory, sizeLimit: 1e999Gi}}]\n"
    ),
    "cyclic-template": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: vllm}\nspec: &s\n  template: *s\n",
    "cyclic-list": "kind: List\nitems: &i [{kind: Deployment, spec: {template: {spec: {containers: *i}}}}]\n",
    "alias-bomb-env": _alias_bomb_manifest(),
    "many-documents": "---\n" * 2_000_000,
}


# --------------------------------------------------------------------------- recordings


def _header(**over: object) -> dict[str, object]:
    h: dict[str, object] = {"format": "vqa-recording", "version": 1, "target": {"namespace": "llm", "deployment": "qwen"},
                            "step_seconds": 15.0, "start": 1764547200.0, "end": 1764547215.0, "metadata": {}}
    h.update(over)
    return h


def _pod(value: object = 1.0, ts: object = 1764547199.0, created: object = 1764546300.0) -> list[object]:
    return ["qwen-0", True, None, [value, ts], [value, ts], [0.5, ts], "vllm:kv_cache_usage_perc", [1.0, ts],
            created, created, created]


def _step(t: object = 1764547200.0, **over: object) -> dict[str, object]:
    s: dict[str, object] = {"t": t, "spec": 1, "ready": 1, "rollout": False, "pods": [_pod()]}
    s.update(over)
    return s


def _recording(header: object, steps: list[object], raw_lines: list[str] | None = None) -> bytes:
    lines = [json.dumps(header)] + [json.dumps(s) for s in steps] + (raw_lines or [])
    lines.append(json.dumps({"end": True, "steps": len(steps) + len(raw_lines or [])}))
    return gzip.compress(("\n".join(lines) + "\n").encode())


def _gzip_bomb(chunk: bytes, n: int) -> bytes:
    """gzip of `chunk` repeated n times: one compressed member repeated (a gzip file may hold
    several members, read as one stream), so a 1 GiB bomb is built in milliseconds."""
    return gzip.compress(chunk, compresslevel=9) * n


def _deep_json(n: int) -> str:
    return "[" * n + "]" * n


def _export(values: list[list[object]], name: str = "vllm:num_requests_waiting") -> str:
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": name, "namespace": "llm", "pod": "qwen-0"}, "values": values}]}})


def _recordings() -> dict[str, bytes]:
    zeros = b"\0" * (1 << 20)
    newlines = b"\n" * (1 << 20)
    header_line = (json.dumps(_header()) + "\n").encode()
    return {
        "gzip-bomb-one-line": _gzip_bomb(zeros, 1024),  # 1 MB that decompresses to 1 GiB of one line
        "gzip-bomb-newlines": gzip.compress(header_line) + _gzip_bomb(newlines, 1024),
        "deep-header": ('{"format": "vqa-recording", "metadata": ' + _deep_json(100_000) + "}\n").encode(),
        "deep-step": _recording(_header(), [], [json.dumps(_step())[:-1] + ', "demand": {"x": ' + _deep_json(100_000) + "}}"]),
        "header-start-inf": _recording(_header(start="+Inf", end="+Inf"), [_step()]),
        "header-start-huge": _recording(_header(start=1e300, end=1e300), [_step()]),
        "step-seconds-tiny": _recording(_header(step_seconds=1e-300), [_step()]),
        "step-seconds-inf": _recording(_header(step_seconds="+Inf"), [_step()]),
        "step-t-inf": _recording(_header(), [_step("+Inf")]),
        "step-t-nan": _recording(_header(), [_step("NaN")]),
        "step-t-huge": _recording(_header(), [_step(1e300)]),
        "spec-9e18": _recording(_header(), [_step(spec=9_000_000_000_000_000_000)]),
        "spec-huge-float": _recording(_header(), [_step(spec=1e300)]),
        "sample-ts-inf": _recording(_header(), [_step(pods=[_pod(ts="+Inf")])]),
        "sample-value-huge": _recording(_header(), [_step(pods=[_pod(value=1e308)])]),
        "created-nan": _recording(_header(), [_step(pods=[_pod(created="NaN")])]),
        "created-huge": _recording(_header(), [_step(pods=[_pod(created=1e300)])]),
        "demand-9e18": _recording(_header(), [_step(demand={"requests_per_second": 9e18,
                                                             "prompt_tokens_per_second": 9e18})]),
        "demand-nan": _recording(_header(), [_step(demand={"requests_per_second": "NaN"})]),  # legal: "NaN"
        "int-5000-digits": _recording(_header(), [], [json.dumps(_step()).replace("1764547200.0", "1" * 5000, 1)]),
        "bucket-le-garbage": _recording(_header(), [_step(demand={"prompt_tokens_buckets": {"abc": 1.0}})]),
        "created-as-list": _recording(_header(), [_step(pods=[_pod(created=[1, 2])])]),
        "export-deep": _deep_json(100_000).encode(),
        "export-t-inf": _export([[1e309, "1"], [1764547200.0, "1"]]).replace("Infinity", "1e999").encode(),
        "export-t-huge": _export([[1e300, "1"], [1764547200.0, "1"]]).encode(),
        "export-t-nan": _export([["NaN", "1"]]).encode(),
        "export-counter-same-t": (
            "[" + _export([[1764547200.0, "1"]]) + ","
            + _export([[1764547200.0, "1"], [1764547200.0, "2"]], "vllm:request_success_total") + "]").encode(),
        "export-huge-gzip": gzip.compress(b'{"a": "') + _gzip_bomb(b"x" * (1 << 20), 1024),
    }


# --------------------------------------------------------------------------- traces, scenarios, profiles


def _csv(rows: list[str]) -> str:
    return "arrival_s,input_tokens,output_tokens\n" + "".join(r + "\n" for r in rows)


GOOD_ROWS = [f"{i * 0.5:.1f},100,20" for i in range(40)]

TRACES: dict[str, str] = {
    "nan-arrival": _csv(GOOD_ROWS + ["nan,100,20"]),
    "inf-arrival": _csv(GOOD_ROWS + ["inf,100,20"]),
    "neg-arrival": _csv(["-5,100,20"] + GOOD_ROWS),
    "huge-arrival": _csv(GOOD_ROWS + ["1e15,100,20"]),
    "nan-tokens": _csv(GOOD_ROWS + ["30,nan,20"]),
    "inf-tokens": _csv(GOOD_ROWS + ["30,100,inf"]),
    "neg-tokens": _csv(GOOD_ROWS + ["30,-100,20"]),
    "1e300-tokens": _csv(GOOD_ROWS + ["30,1e300,20"]),
    "9e18-tokens": _csv(GOOD_ROWS + ["30,9000000000000000000,9000000000000000000"]),
    "frac-tokens": _csv(GOOD_ROWS + ["30,100.5,20"]),
    "decreasing": _csv(GOOD_ROWS + ["1,100,20"]),
    "header-only": _csv([]),
    "garbage": "arrival_s,input_tokens,output_tokens\nhello,world,!\n",
    "four-columns": _csv(["0,1,2,3"]),
    "binary": "arrival_s,input_tokens,output_tokens\n\x00\x01\x02\xff\n",
    "long-line": _csv(["0," + "1" * 5_000_000 + ",1"]),
}

PROFILE_GOOD = (REPO / "simulations" / "profiles" / "qwen3-8b-h100.yaml").read_text()


def _profile(old: str, new: str) -> str:
    assert old in PROFILE_GOOD, old
    return PROFILE_GOOD.replace(old, new, 1)


def _profile_line(key: str) -> str:
    for line in PROFILE_GOOD.splitlines():
        if line.strip().startswith(key + ":"):
            return line
    raise KeyError(key)


def _profile_set(key: str, value: str) -> str:
    line = _profile_line(key)
    indent = line[: len(line) - len(line.lstrip())]
    return _profile(line, f"{indent}{key}: {value}")


PROFILES: dict[str, str] = {
    "block-size-0": _profile_set("block_size", "0"),
    "step-zero": _profile_set("overhead_s", "0"),
    "max-num-seqs-huge": _profile_set("max_num_seqs", "1000000000000000000"),
    "negative-load": _profile_set("model_load_s", "-100"),
    "gpus-per-replica-0": PROFILE_GOOD + "\ngpus_per_replica: 0\n",
    "missing-section": "name: x\nmodel: m\ngpu: g\n",
    "deep": _deep_flow(100_000),
    "alias-bomb": _alias_bomb(),
    "int-400-digits": _profile_set("block_size", "9" * 400),
}


def _scenario(trace: Path, extra: str) -> str:
    return f"name: hostile\ntrace: {trace}\nduration: 20\npolicies: [hpa-queue]\n{extra}\n"


SCENARIO_EXTRAS: dict[str, str] = {
    "dt-tiny": "dt: 1e-300",
    "duration-huge": "duration: 1e300",
    "start-huge": "start: 1e300",
    "rate-scale-huge": "rate_scale: 1e300",
    "rate-scale-nan": "rate_scale: .nan",
    "peak-replicas-huge": "peak_replicas: 1000000000000000000",
    "seed-float": "seed: 1e300",
    "seed-negative": "seed: -1",
    "seed-string": "seed: abc",
    "max-nodes-huge": "max_nodes: 1000000000000000000000000",
    "slo-nan": "slo: {ttft_s: .nan}",
    "slo-inf": "slo: {tpot_s: .inf}",
    "slo-list": "slo: [1, 2]",
    "slo-unknown-key": "slo: {ttft: 2}",
    "slo-idle-factor-huge": "slo: {ttft_idle_factor: 1e300}",
    "slo-old-key": "slo_ttft_s: 2",
    "input-scale-nan": "input_scale: .nan",
    "input-scale-huge": "input_scale: 1e300",
    "input-scale-string": "input_scale: x",
    "policies-int": "policies: 5",
    "policies-unknown": "policies: [bogus]",
    "queue-lead-unknown": "queue_lead: {bogus: 1}",
    "queue-lead-nan": "policies: [queue-lead]\nqueue_lead: {target_kv_cache_usage_ratio: .nan}",
    "queue-lead-knob-unknown": "policies: [queue-lead]\nqueue_lead_knob: bogus",
    "knobs-any": "knobs: {static: [1]}",
    "knobs-negative": "knobs: {hpa-queue: [-1]}",
    "knobs-huge": "policies: [static-peak]\nknobs: {static-peak: [1e300]}",
    "profile-devzero": "profile: /dev/zero",
    "profile-overrides-deep": "profile_overrides: " + "{a: " * 20_000 + "1" + "}" * 20_000,
    "profile-overrides-zero": "profile_overrides: {kv_cache: {block_size: 0}}",
    "name-list": "name: [a, b]",
    "min-replicas-string": "min_replicas: x",
    "start-400-digits": "start: " + "9" * 400,
    "policies-not-strings": "policies: [1, {a: b}]",
    "queue-lead-int-key": "queue_lead: {1: 2}",
    "knob-400-digits": "knobs: {hpa-queue: [" + "9" * 400 + "]}",
}


def build(folder: Path, *, write_files: bool = True) -> list[Case]:
    """Write every hostile file under `folder`; the cases that feed them to the CLI (with
    `write_files=False`, only the cases: their names are known before the files exist)."""
    if write_files:
        folder.mkdir(parents=True, exist_ok=True)
    cases: list[Case] = []

    def write(name: str, data: str | bytes) -> Path:
        path = folder / name
        if not write_files:
            return path
        if isinstance(data, str):
            path.write_text(data, encoding="utf-8", errors="surrogateescape")
        else:
            path.write_bytes(data)
        return path

    good_trace = write("good.csv", _csv(GOOD_ROWS))
    not_utf8 = write("not-utf8.yaml", b"targets: []\nb: \xff\xfe\n")

    for name, text in YAML_HOSTILE.items():
        path = write(f"yaml-{name}.yaml", text)
        valid_yaml = name in ("long-line", "many-keys")  # lint reads them (< 4 MiB); a config may not (> 1 MiB)
        cases.append(Case(f"check-config/{name}", ("check-config", str(path)), prefix=""))
        cases.append(Case(f"lint/{name}", ("lint", str(path)), expect="run" if valid_yaml else "refuse"))
        cases.append(Case(f"replay-config/{name}", ("replay", "--metrics", str(RECORDING), "--config", str(path))))
        cases.append(Case(f"scenario/{name}", ("simulate", "--scenario", str(path))))
    cases.append(Case("check-config/not-utf8", ("check-config", str(not_utf8)), prefix=str(not_utf8)))
    cases.append(Case("check-config/dev-zero", ("check-config", "/dev/zero"), prefix="/dev/zero"))
    cases.append(Case("check-config/directory", ("check-config", str(folder)), prefix=str(folder)))
    cases.append(Case("lint/dev-zero", ("lint", "/dev/zero")))
    for name, text in CONFIG_HOSTILE.items():
        path = write(f"config-{name}.yaml", text)
        cases.append(Case(f"check-config/{name}", ("check-config", str(path)), prefix=""))
    big = write("config-20000-targets.yaml", BIG_VALID_CONFIG)
    cases.append(Case("check-config/20000-targets-valid", ("check-config", str(big)), expect="run"))
    for name, text in LINT_HOSTILE.items():
        path = write(f"lint-{name}.yaml", text)
        numbers = name.split("-")[0] in ("replicas", "gpu", "probe", "shm")  # findings, not refusals
        cases.append(Case(f"lint/{name}", ("lint", str(path)), expect="run" if numbers else "refuse"))
    kust = folder / "kustomize-bomb"
    if write_files:
        kust.mkdir(exist_ok=True)
        (kust / "kustomization.yaml").write_text(_alias_bomb().replace("a8:", "patches:"))
        (kust / "deploy.yaml").write_text(_deployment())
    # a kustomization lint cannot read is skipped, as any broken one (kustomize's problem)
    cases.append(Case("lint/kustomization-alias-bomb", ("lint", str(kust)), expect="run"))
    deep_kust = folder / "kustomize-deep"
    if write_files:
        deep_kust.mkdir(exist_ok=True)
        (deep_kust / "kustomization.yaml").write_text(_deep_flow(100_000))
        (deep_kust / "deploy.yaml").write_text(_deployment())
    cases.append(Case("lint/kustomization-deep", ("lint", str(deep_kust)), expect="run"))

    for name, data in _recordings().items():
        path = write(f"rec-{name}.jsonl.gz", data)
        expect = "run" if name.startswith("spec-") or name == "demand-nan" else "refuse"  # replica counts: not bounded
        cases.append(Case(f"replay/{name}", ("replay", "--metrics", str(path), "--config", "hpa-queue", "--no-progress"),
                          expect=expect))
    cases.append(Case("replay/dev-zero", ("replay", "--metrics", "/dev/zero", "--config", "hpa-queue")))
    big_demand = write("rec-demand-1e12.jsonl.gz", _recording(_header(), [_step(demand={
        "requests_per_second": 1e12, "prompt_tokens_per_second": 1e14})]))
    cases.append(Case("replay/closed-loop-1e12", ("replay", "--metrics", str(big_demand), "--config", "hpa-queue",
                                                   "--closed-loop", "hpa-queue", "--no-progress")))
    long_requests = write("rec-demand-long.jsonl.gz", _recording(_header(), [_step(demand={
        "requests_per_second": 1e-9, "prompt_tokens_per_second": 1e6})]))
    cases.append(Case("replay/closed-loop-long-requests", ("replay", "--metrics", str(long_requests), "--config",
                                                           "hpa-queue", "--closed-loop", "hpa-queue", "--no-progress")))
    for spec in ("hpa-queue:target=nan", "hpa-queue:target=inf", "hpa-queue:target=1e-320", "hpa-queue:target=1e308",
                 "hpa-queue:min=-5", "hpa-queue:max=" + "9" * 30, "hpa-queue:down_window=" + "9" * 30,
                 "hpa-queue:tolerance=nan", "hpa-queue:tolerance=-1", "hpa-queue:gpus_per_replica=0",
                 "hpa-queue:max=" + "9" * 5000, "hpa-queue:target=" + "1" * 5000):
        cases.append(Case(f"replay-spec/{spec[:40]}{'...' if len(spec) > 40 else ''}{len(spec) if len(spec) > 40 else ''}", ("replay", "--metrics", str(RECORDING), "--config", spec)))
    cases.append(Case("replay/free-gpus-huge", ("replay", "--metrics", str(RECORDING), "--config", "hpa-queue",
                                                "--free-gpus", "9" * 30)))
    cases.append(Case("replay/seed-huge", ("replay", "--metrics", str(RECORDING), "--config", "hpa-queue",
                                           "--closed-loop", "hpa-queue", "--seed", "9" * 30)))

    for name, text in TRACES.items():
        path = write(f"trace-{name}.csv", text)
        cases.append(Case(f"trace/{name}", ("simulate", "--trace", str(path), "--policy", "hpa-queue")))
    cases.append(Case("trace/dev-zero", ("simulate", "--trace", "/dev/zero", "--policy", "hpa-queue")))
    for name, text in PROFILES.items():
        path = write(f"profile-{name}.yaml", text)
        cases.append(Case(f"profile/{name}", ("simulate", "--trace", str(good_trace), "--policy", "hpa-queue",
                                              "--profile", str(path))))
        cases.append(Case(f"replay-profile/{name}", ("replay", "--metrics", str(RECORDING), "--config", "hpa-queue",
                                                     "--closed-loop", "hpa-queue", "--profile", str(path))))
    for name, extra in SCENARIO_EXTRAS.items():
        path = write(f"scenario-{name}.yaml", _scenario(good_trace, extra))
        cases.append(Case(f"scenario/{name}", ("simulate", "--scenario", str(path))))
    path = write("scenario-no-trace.yaml", "name: x\n")
    cases.append(Case("scenario/no-trace", ("simulate", "--scenario", str(path))))
    base = ("simulate", "--trace", str(good_trace), "--policy", "hpa-queue")
    for flag, value in (("--rate-scale", "nan"), ("--rate-scale", "inf"), ("--rate-scale", "1e300"),
                        ("--rate-scale", "-1"), ("--start", "nan"), ("--duration", "inf"), ("--duration", "1e300"),
                        ("--dt", "1e-300"), ("--dt", "nan"), ("--max-replicas", "9" * 30),
                        ("--peak-replicas", "9" * 30), ("--knobs", "hpa-queue=nan"), ("--knobs", "hpa-queue=-1"),
                        ("--knobs", "static-peak=1e300"), ("--knobs", "queue-lead=inf")):
        extra = ("--sweep",) if flag == "--knobs" else ()
        policy = value.split("=")[0] if flag == "--knobs" else "hpa-queue"
        argv = ("simulate", "--trace", str(good_trace), "--policy", policy, flag, value, *extra)
        cases.append(Case(f"simulate-flag/{flag}={value[:20]}", argv if flag == "--knobs" else (*base, flag, value)))
    cases.append(Case("simulate-flag/--jobs=huge", (*base, "--sweep", "--knobs", "hpa-queue=2", "--jobs", "9" * 12)))
    for seeds in ("0", "-1", "9" * 30):
        cases.append(Case(f"simulate-flag/--seeds={seeds[:20]}", (*base, "--sweep", "--knobs", "hpa-queue=2",
                                                                 "--seeds", seeds)))
    cases.append(Case("simulate-flag/--seeds-without-sweep", (*base, "--seeds", "2")))
    cases.append(Case("simulate-flag/--executor=unknown", (*base, "--sweep", "--knobs", "hpa-queue=2",
                                                           "--executor", "tcp://" + "x" * 300)))
    cases.append(Case("simulate-flag/--policy-without-grid", (*base, "--sweep")))
    cases.append(Case("simulate-flag/static-peak-beyond-cluster",
                      ("simulate", "--trace", str(good_trace), "--policy", "static-peak", "--sweep", "--knobs",
                       "static-peak=1000")))
    # click's own refusals: one line too
    cases.append(Case("usage/simulate-duration-abc", (*base, "--duration", "abc")))
    cases.append(Case("usage/lint-model-load-0", ("lint", "--model-load-seconds", "0", str(good_trace))))
    cases.append(Case("usage/replay-limit-abc", ("replay", "--metrics", str(RECORDING), "--config", "hpa-queue",
                                                 "--limit", "abc")))
    cases.append(Case("usage/unknown-option", ("check-config", "--bogus", str(big))))
    record = ("record", "--prometheus", "http://127.0.0.1:9", "--target", "llm/qwen", "--out", str(folder / "r.gz"))
    for flags in (("--step", "1ms", "--since", "30d"), ("--step", "inf"), ("--end", "nan"), ("--end", "1e300"),
                  ("--timeout", "nan"), ("--start", "-1e300", "--end", "0"), ("--bearer-token-file", "/dev/zero"),
                  ("--bearer-token-file", str(not_utf8)),
                  # found by a fuzzer, 2026-12-04: each was a traceback
                  ("--step", "1e-300"), ("--rate-window", "inf"), ("--rate-window", "1e400")):
        shown = " ".join(Path(f).name if f.startswith("/tmp") else f for f in flags)  # the same without files
        cases.append(Case(f"record-flag/{shown}", (*record, *flags)))
    notes = write("rec-notes-null.jsonl.gz", _recording(_header(metadata={"notes": None}), [_step()]))
    cases += _output_cases(folder, good_trace, notes)
    return cases


def _output_cases(folder: Path, good_trace: Path, notes: Path) -> list[Case]:
    """Targets and output paths found by a fuzzer (2026-12-04), each a traceback then: a target
    without its namespace, a plot path matplotlib cannot name a format for, a folder that is a
    file or cannot be made; and a recording whose free-form notes are not a list (accepted)."""
    replay = ("replay", "--metrics", str(RECORDING), "--config", "hpa-queue", "--no-progress")
    simulate = ("simulate", "--trace", str(good_trace), "--policy", "hpa-queue")
    return [
        Case("replay-flag/--target=no-namespace", (*replay, "--target", "bad")),
        Case("replay-flag/--target=three-parts", (*replay, "--target", "a/b/c")),
        Case("replay-flag/--plot=no-suffix", (*replay, "--plot", str(folder / "p"))),
        Case("replay-flag/--plot=xyz", (*replay, "--plot", str(folder / "p.xyz"))),
        Case("replay-flag/--plot=missing-folder", (*replay, "--output-file", str(folder / "r.json"),
                                                   "--plot", "/nonexistent-dir/p.png")),
        Case("simulate-flag/--plot=no-suffix", (*simulate, "--plot", str(folder / "p"))),
        Case("simulate-flag/--output-file=under-a-file", (*simulate, "--output-file", f"{good_trace}/out.json")),
        Case("simulate-flag/--markdown=proc", (*simulate, "--output-file", str(folder / "o1.json"),
                                               "--markdown", "/proc/x/out.md")),
        Case("replay/notes-null", ("replay", "--metrics", str(notes), "--config", "hpa-queue", "--no-progress"),
             expect="run"),
    ]


def run_case(case: Case, timeout: float = 60.0) -> tuple[int | None, str, float, int]:
    """(exit status or None on timeout, stderr, seconds, peak RSS in MB) of one case."""
    import os
    import subprocess
    import sys
    import tempfile
    import time

    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "autoscaler.cli", *case.argv], cwd=REPO, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        deadline = t0 + timeout
        while True:  # os.wait4: the peak RSS of this child alone
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                proc.returncode = -9
                return None, "", time.monotonic() - t0, 0
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    return proc.returncode, text, time.monotonic() - t0, usage.ru_maxrss // 1024


class ForkServer:
    """`run_case` in a fork of one process that has imported the command line (forkserver.py):
    the same exit status, stderr, time and peak RSS without ~0.45 s of imports per case. One
    case at a time per server; a test runs two servers for two at a time."""

    def __init__(self, folder: Path) -> None:
        import os
        import subprocess
        import sys

        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.count = 0
        env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("forkserver.py"))], cwd=REPO,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == '{"ready": true}'

    def run(self, case: Case, timeout: float) -> tuple[int | None, str, float, int]:
        """(exit status or None on timeout, stderr, seconds, peak RSS in MB) of one case."""
        import json

        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.count += 1
        err = self.folder / f"stderr-{self.count}"
        self.proc.stdin.write(json.dumps({"argv": list(case.argv), "stderr": str(err), "timeout": timeout}) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        if answer["rc"] is not None and not err.exists():  # the fork failed before it was the command
            raise RuntimeError(f"{case.name}: the fork server's child did not start the command (exit {answer['rc']})")
        text = err.read_bytes().decode("utf-8", "replace") if err.exists() else ""
        return answer["rc"], text, answer["seconds"], answer["maxrss_kb"] // 1024

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self.proc.stdout is not None:
                self.proc.stdout.close()


if __name__ == "__main__":  # pragma: no cover - a survey tool
    import sys
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    pattern = sys.argv[1] if len(sys.argv) > 1 else ""
    with tempfile.TemporaryDirectory() as tmp:
        todo = [c for c in build(Path(tmp)) if pattern in c.name]
        with ThreadPoolExecutor(2) as pool:
            for case, (rc, err, secs, mb) in zip(todo, pool.map(run_case, todo)):
                lines = err.strip().splitlines()
                if case.expect == "refuse":
                    ok = rc == 2 and len(lines) == 1 and lines[0].startswith(case.prefix) and "Traceback" not in err
                else:
                    ok = rc in (0, 1, 2) and "Traceback" not in err
                first = (lines[-1] if "Traceback" in err else lines[0] if lines else "")[:150]
                print(f"{'ok ' if ok else 'BAD'} {case.name:45s} rc={rc} {secs:5.1f}s {mb:5d}MB {len(lines)}l {first}",
                      flush=True)
