"""`autoscaler lint`: the corpus (one manifest per rule, each raising exactly its rule), the
classic minimal manifest, the shipped deploy/ trees, the loader, the CLI's formats and exit codes."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from autoscaler.cli import main
from autoscaler.lint import RULES, LintOptions, Severity, lint, load_inputs, load_text
from autoscaler.lint.loader import line_of
from autoscaler.lint.workload import Container, image_reference, parse_vllm_flags

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).resolve().parent / "fixtures" / "lint"
RULE_FILES = sorted(CORPUS.glob("VQA*.yaml"))


def run(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(main, ["lint", *args], input=stdin)


def rules_in(*paths: Path | str, **options: Any) -> list[str]:
    loaded = load_inputs([str(p) for p in paths])
    assert not loaded.errors
    findings, _ = lint(loaded.documents, LintOptions(**options))
    return sorted(f.rule for f in findings)


def findings_of(text: str, **options: Any) -> list[Any]:
    findings, _ = lint(load_text(textwrap.dedent(text), "test.yaml"), LintOptions(**options))
    return findings


# --------------------------------------------------------------------------- the corpus


@pytest.mark.parametrize("path", RULE_FILES, ids=[p.name for p in RULE_FILES])
def test_each_bad_manifest_raises_exactly_its_rule(path: Path) -> None:
    rule = path.name.split("_", 1)[0]
    assert rules_in(path) == [rule]


def test_every_rule_has_a_bad_manifest_and_the_ids_are_stable() -> None:
    covered = {p.name.split("_", 1)[0] for p in RULE_FILES}
    ids = [r.id for r in RULES]
    assert ids == [f"VQA{i:03d}" for i in range(1, len(RULES) + 1)]  # never renumbered, no gaps
    assert covered == set(ids)
    assert len({r.name for r in RULES}) == len(RULES)
    for r in RULES:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", r.name), r.name
        assert r.summary and r.fix


def test_the_clean_manifest_is_clean() -> None:
    assert rules_in(CORPUS / "clean.yaml") == []


def test_classic_minimal_manifest_raises_every_rule_that_applies() -> None:
    classic = CORPUS / "classic.yaml"
    assert len(classic.read_text().splitlines()) == 14
    # GPU limit, readiness, --max-model-len, model cache, :latest. Not: taints (no taint or GPU
    # selector in sight), probes timing (no probes), shm (one GPU), sharing, token, HPAs, surge
    # (only counted with a GPU limit), replicas (not autoscaled).
    assert rules_in(classic) == ["VQA001", "VQA005", "VQA007", "VQA009", "VQA011"]
    result = run(str(classic))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{classic}:11: error VQA001 gpu-limit-missing: Deployment qwen3-8b, container vllm: ")
    assert lines[1].startswith("    fix: ")
    assert lines[-1] == "3 errors, 2 warnings: 1 vLLM workload in 1 file (1 document)"


@pytest.mark.parametrize("tree", ["deploy/vllm", "deploy/controller", "deploy"])
def test_shipped_manifests_lint_clean(tree: str) -> None:
    result = run(str(REPO / tree))
    assert result.exit_code == 0, result.output
    assert "error" not in result.stdout and "warning" not in result.stdout


def test_a_folder_of_kustomize_patches_says_so_and_an_empty_one_too(tmp_path: Path) -> None:
    result = run(str(REPO / "deploy" / "vllm" / "overlays" / "tp2"))
    assert result.exit_code == 2
    assert "its YAML files are all kustomize patches or generator sources" in result.output
    assert "kubectl kustomize" in result.output and "Traceback" not in result.output
    empty = run(str(tmp_path))
    assert empty.exit_code == 2 and "no *.yaml, *.yml or *.json file in this folder" in empty.output


def test_folders_skip_kustomize_patches_and_generator_sources() -> None:
    loaded = load_inputs([str(REPO / "deploy" / "vllm")])
    names = {Path(f).name for f in loaded.files}
    assert "deployment-tp2.yaml" not in names and "args-tp2.yaml" not in names  # patches
    assert "kustomization.yaml" not in names
    assert "deployment.yaml" in names
    loaded = load_inputs([str(REPO / "deploy" / "controller")])
    assert "autoscaler.yaml" not in {Path(f).name for f in loaded.files}  # configMapGenerator source
    # a patch named on the command line is still read
    patch = REPO / "deploy" / "vllm" / "overlays" / "tp2" / "deployment-tp2.yaml"
    assert load_inputs([str(patch)]).files == [str(patch)]


# --------------------------------------------------------------------------- rules in detail


GOOD = (CORPUS / "clean.yaml").read_text()


def test_vllm_is_recognised_by_command_line_or_image() -> None:
    shell = GOOD.replace("""          args:
            - --model=Qwen/Qwen3-8B
            - --max-model-len=32768
            - --gpu-memory-utilization=0.90""", """          image: python:3.12-slim
          command: ["/bin/sh", "-ec"]
          args: ["pip install vllm && exec vllm serve Qwen/Qwen3-8B --gpu-memory-utilization 0.9"]""")
    shell = shell.replace("          image: vllm/vllm-openai:v0.11.0\n", "")
    assert [f.rule for f in findings_of(shell)] == ["VQA007"]  # recognised, and the flags were read
    module = GOOD.replace("          args:\n",
                          '          command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]\n'
                          "          args:\n")
    assert findings_of(module) == []
    other = GOOD.replace("vllm/vllm-openai:v0.11.0", "nginx:1.27").replace("--model=Qwen/Qwen3-8B", "--port=80")
    _, ctx = lint(load_text(other, "x.yaml"))
    assert ctx.vllm_workloads == []


def test_env_references_in_args_are_expanded() -> None:
    text = GOOD.replace("--model=Qwen/Qwen3-8B", "--model=$(MODEL)").replace(
        "            - name: HF_HOME", "            - name: MODEL\n              value: /cache/models/qwen\n"
                                      "            - name: HF_HOME")
    findings, ctx = lint(load_text(text, "x.yaml"))
    assert findings == []
    assert ctx.vllm_workloads[0].vllm_containers[0].model == "/cache/models/qwen"
    # a local model path on a volume that dies with the pod is fetched again by every replica
    bad = text.replace("persistentVolumeClaim: {claimName: vllm-model-cache}", "emptyDir: {}")
    (finding,) = lint(load_text(bad, "x.yaml"))[0]
    assert finding.rule == "VQA009" and finding.message.startswith("the model path /cache/models/qwen is on volume")
    # outside any volume it is baked into the image: nothing is downloaded
    assert lint(load_text(text.replace("value: /cache/models/qwen", "value: /models/qwen"), "x.yaml"))[0] == []


def test_statefulset_with_a_claim_template_is_a_persistent_cache() -> None:
    text = GOOD.replace("kind: Deployment", "kind: StatefulSet").replace("""  strategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: 0, maxUnavailable: 1}
""", """  serviceName: qwen3-8b
  volumeClaimTemplates:
    - metadata: {name: model-cache}
      spec:
        accessModes: [ReadWriteOnce]
        resources: {requests: {storage: 100Gi}}
""").replace("""        - name: model-cache
          persistentVolumeClaim: {claimName: vllm-model-cache}
""", "")
    findings, ctx = lint(load_text(text, "x.yaml"))
    assert findings == [] and ctx.vllm_workloads[0].kind == "StatefulSet"


def test_liveness_message_depends_on_its_budget() -> None:
    text = (CORPUS / "VQA003_liveness_without_startup_probe.yaml").read_text()
    (short,) = findings_of(text)
    assert "restarts the container 90 s after it starts" in short.message
    slow = text.replace("            periodSeconds: 15\n", "            initialDelaySeconds: 900\n"
                                                         "            periodSeconds: 15\n")
    (late,) = findings_of(slow)
    assert late.rule == "VQA003" and "initialDelaySeconds (900 s)" in late.message


def test_startup_budget_follows_the_option() -> None:
    assert [f.rule for f in findings_of(GOOD, model_load_seconds=601)] == ["VQA004"]
    assert findings_of(GOOD, model_load_seconds=600) == []  # 60 x 10 s


def test_multi_gpu_limit_needs_shm_and_host_ipc_is_enough() -> None:
    two = GOOD.replace('nvidia.com/gpu: "1"', 'nvidia.com/gpu: "2"')
    (idle,) = findings_of(two)  # two GPUs for a server that uses one
    assert idle.rule == "VQA018" and "GPU limit 2 for 1 GPU(s) of parallelism: 1 reserved GPU(s) stay idle" in idle.message
    two = two.replace("- --max-model-len=32768", "- --max-model-len=32768\n            - --tensor-parallel-size=2")
    assert findings_of(two) == []  # the clean manifest has a memory /dev/shm
    no_shm = two.replace("          emptyDir: {medium: Memory, sizeLimit: 2Gi}", "          emptyDir: {}")
    (finding,) = findings_of(no_shm)
    assert finding.rule == "VQA006" and "--tensor-parallel-size 2 with a /dev/shm that is not memory-backed" in finding.message
    host_ipc = no_shm.replace("    spec:\n      tolerations:", "    spec:\n      hostIPC: true\n      tolerations:")
    assert findings_of(host_ipc) == []


def test_taint_rule_is_a_warning_without_nodes_and_tolerations_fix_it() -> None:
    text = (CORPUS / "VQA002_gpu_toleration_missing.yaml").read_text()
    (finding,) = findings_of(text)
    assert finding.severity is Severity.WARNING
    fixed = text.replace("      containers:", "      tolerations:\n        - {key: nvidia.com/gpu, operator: Exists, "
                                              "effect: NoSchedule}\n      containers:", 1)
    assert findings_of(fixed) == []
    nodes = (CORPUS / "VQA002_node_taint.yaml").read_text()
    (finding,) = findings_of(nodes)
    assert finding.severity is Severity.ERROR
    tolerated = nodes.replace("      containers:",
                              "      tolerations:\n        - {key: nvidia.com/gpu, operator: Equal, "
                              "value: present, effect: NoSchedule}\n      containers:", 1)
    assert findings_of(tolerated) == []
    # a node the pod does not select is no evidence
    elsewhere = nodes.replace("    spec:\n      containers:", "    spec:\n      nodeSelector: {pool: a100}\n"
                                                              "      tolerations: [{key: nvidia.com/gpu, operator: "
                                                              "Exists}]\n      containers:")
    assert findings_of(elsewhere) == []


@pytest.mark.parametrize(("limit", "flags", "rules"), [
    ("nvidia.com/gpu: 4", ["--tensor-parallel-size=2", "--pipeline-parallel-size=2"], []),  # 2 x 2 = 4
    ("nvidia.com/gpu: 4", ["-tp=2", "-dp=2"], []),  # tensor x data parallel
    ("nvidia.com/gpu: 2", ["--tensor-parallel-size=4"], ["VQA018"]),  # too few: cannot start
    ("nvidia.com/gpu: 2", ["--tensor-parallel-size=$(TP)"], []),  # from a variable: not read here
    ("nvidia.com/mig-3g.40gb: 1", [], []),  # a MIG slice: no whole-GPU count to compare
    ("google.com/tpu: 4", [], []),  # another accelerator: a limit (no VQA001), no GPU count rule
    ("aws.amazon.com/neuron: 1", [], []),
    ("habana.ai/gaudi: 1", [], []),
])
def test_gpu_limit_against_parallelism_and_other_accelerators(limit: str, flags: list[str], rules: list[str]) -> None:
    text = GOOD.replace('nvidia.com/gpu: "1"', limit)
    text = text.replace("- --max-model-len=32768", "\n            ".join(["- --max-model-len=32768"] + [f"- {f}" for f in flags]))
    text = text.replace("          emptyDir: {medium: Memory, sizeLimit: 2Gi}", "          emptyDir: {medium: Memory, sizeLimit: 8Gi}")
    assert sorted(f.rule for f in findings_of(text)) == rules


def test_a_gpu_limit_without_any_gpu_toleration_is_a_warning_without_nodes() -> None:
    # no Node in the input: the pod asks for a GPU and tolerates no GPU taint (pitfall 1's second half)
    bare = GOOD.replace("      tolerations:\n        - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n", "")
    (finding,) = findings_of(bare)
    assert (finding.rule, finding.severity) == ("VQA002", Severity.WARNING)
    assert finding.message.startswith("it asks for a GPU but tolerates no GPU taint")
    # with the Nodes in the input, they decide: an untainted GPU node accepts the pod
    node = textwrap.dedent("""\
        ---
        apiVersion: v1
        kind: Node
        metadata: {name: gpu-1, labels: {nvidia.com/gpu.present: "true"}}
        status: {capacity: {nvidia.com/gpu: "8"}}
        """)
    assert findings_of(bare + node) == []


@pytest.mark.parametrize(("old", "new", "rules"), [
    ("httpGet: {path: /health, port: http}", "httpGet: {path: /health, port: 8000}", []),  # by number, right
    ("- --max-model-len=32768", "- --max-model-len=32768\n            - --port=9000", ["VQA020"] * 3),  # every probe
    ("- --max-model-len=32768", "- --max-model-len=32768\n            - --port=$(PORT)", []),  # a variable: unread
    ("httpGet: {path: /health, port: http}", "tcpSocket: {port: 8001}", ["VQA020"]),
    ("httpGet: {path: /health, port: http}", "httpGet: {path: /health, port: metrics}", []),  # no such name: unread
])
def test_probe_ports_against_the_server_port(old: str, new: str, rules: list[str]) -> None:
    text = GOOD.replace(old, new, 1 if "port" in old else -1)
    assert sorted(f.rule for f in findings_of(text)) == rules


def test_a_custom_command_in_the_vllm_image_is_not_judged_on_flags_it_does_not_show() -> None:
    # `command: [/app/start.sh]` in the vLLM image: a vLLM workload whose flags are unknown. Two GPUs
    # and probes on port 9000 may be exactly what the script sets (--tensor-parallel-size 2 --port 9000).
    text = GOOD.replace("          args:\n", "          command: [/app/start.sh]\n          args:\n", 1)
    text = text.replace('nvidia.com/gpu: "1"', 'nvidia.com/gpu: "2"').replace("containerPort: 8000", "containerPort: 9000")
    rules = [f.rule for f in findings_of(text)]
    assert "VQA018" not in rules and "VQA020" not in rules


@pytest.mark.parametrize(("old", "new", "rules"), [
    ("sizeLimit: 2Gi", "sizeLimit: 34Gi", ["VQA021"]),  # as large as the memory limit: OOM kill first
    ("sizeLimit: 2Gi", "sizeLimit: 40Gi", ["VQA021"]),
    ("sizeLimit: 2Gi", "sizeLimit: 31Gi", ["VQA021"]),  # 3 GiB left for vLLM's own processes
    ("sizeLimit: 2Gi", "sizeLimit: 30Gi", []),  # 4 GiB left
    ("sizeLimit: 2Gi", "sizeLimit: 2G", []),  # decimal units are quantities too
    ("sizeLimit: 2Gi", "sizeLimit: 2GB", ["VQA021"]),  # not a Kubernetes quantity (2G or 2Gi)
    ("sizeLimit: 2Gi", "sizeLimit: two", ["VQA021"]),
    ("sizeLimit: 2Gi", "sizeLimit: [1]", ["VQA021"]),
    ("{medium: Memory, sizeLimit: 2Gi}", "{medium: Memory}", ["VQA021"]),  # unbounded
    ("limits: {memory: 34Gi, ", "limits: {", []),  # no memory limit to compare with: a size is enough
    ("{medium: Memory, sizeLimit: 2Gi}", "{sizeLimit: 2Gi}", []),  # on disk: not this rule (one GPU: not VQA006)
])
def test_shm_size_against_the_memory_limit(old: str, new: str, rules: list[str]) -> None:
    assert GOOD.count(old) == 1
    assert [f.rule for f in findings_of(GOOD.replace(old, new))] == rules


@pytest.mark.parametrize(("rolling", "rules"), [
    ("{maxSurge: 0, maxUnavailable: 0}", ["VQA014"]),  # the API server rejects it
    ('{maxSurge: "0%", maxUnavailable: "0%"}', ["VQA014"]),
    ("{maxSurge: 0}", []),  # maxUnavailable 25 % by default (one pod at least: the API resolves 0 to 1)
    ("{maxSurge: 1, maxUnavailable: 0}", ["VQA014"]),  # a spare GPU per step
])
def test_rolling_update_without_room_to_move(rolling: str, rules: list[str]) -> None:
    old = "rollingUpdate: {maxSurge: 0, maxUnavailable: 1}"
    assert GOOD.count(old) == 1
    findings = findings_of(GOOD.replace(old, f"rollingUpdate: {rolling}"))
    assert [f.rule for f in findings] == rules
    if "maxSurge: 0" in rolling or "maxSurge: \"0%\"" in rolling:
        both_zero = "maxUnavailable: 0}" in rolling or "maxUnavailable: \"0%\"}" in rolling
        assert both_zero == bool(findings) and all("the API server rejects the Deployment" in f.message for f in findings)


PDB = """---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: qwen3-8b, namespace: llm}}
spec:
  {budget}
  selector: {{matchLabels: {{app: {app}}}}}
"""


@pytest.mark.parametrize(("budget", "app", "extra", "rules"), [
    ("maxUnavailable: 0", "qwen3-8b", "", ["VQA022"]),
    ('maxUnavailable: "0%"', "qwen3-8b", "", ["VQA022"]),
    ('minAvailable: "100%"', "qwen3-8b", "", ["VQA022"]),
    ("minAvailable: 1", "qwen3-8b", "", ["VQA022"]),  # one replica (the default), one must stay
    ("minAvailable: 1", "qwen3-8b", "replicas: 2", []),  # one of two may go
    ('minAvailable: "50%"', "qwen3-8b", "", ["VQA022"]),  # 50 % of one pod, rounded up: 1
    ('minAvailable: "50%"', "qwen3-8b", "replicas: 2", []),  # 1 of 2
    ("maxUnavailable: 1", "qwen3-8b", "", []),
    ("maxUnavailable: 0", "other", "", []),  # selects other pods
    ("maxUnavailable: 0", "{}", "", ["VQA022"]),  # policy/v1: an empty selector selects every pod of the namespace
    # scaled by an HPA: its replicas move, so an absolute minAvailable is not judged; 0 % still is
    ("minAvailable: 1", "qwen3-8b", "hpa", []),
    ("maxUnavailable: 0", "qwen3-8b", "hpa", ["VQA022"]),
])
def test_a_disruption_budget_that_allows_no_eviction(budget: str, app: str, extra: str, rules: list[str]) -> None:
    text = GOOD + PDB.format(budget=budget, app=app)
    if app == "{}":
        text = text.replace("selector: {matchLabels: {app: {}}}", "selector: {}")
        assert "selector: {}" in text
    if extra.startswith("replicas"):
        text = text.replace("spec:\n  selector:\n    matchLabels: {app: qwen3-8b}", f"spec:\n  {extra}\n  selector:\n"
                            "    matchLabels: {app: qwen3-8b}", 1)
        assert extra in text
    if extra == "hpa":
        text += textwrap.dedent("""\
            ---
            apiVersion: autoscaling/v2
            kind: HorizontalPodAutoscaler
            metadata: {name: qwen3-8b, namespace: llm}
            spec:
              scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: qwen3-8b}
              minReplicas: 1
              maxReplicas: 4
              metrics:
                - type: Pods
                  pods:
                    metric: {name: vllm_num_requests_waiting}
                    target: {type: AverageValue, averageValue: "5"}
            """)
    assert sorted(f.rule for f in findings_of(text)) == rules


def test_time_sliced_gpu_is_shared() -> None:
    shared = GOOD.replace('nvidia.com/gpu: "1"', 'nvidia.com/gpu.shared: "1"')
    (finding,) = findings_of(shared)
    assert finding.rule == "VQA008" and "nvidia.com/gpu.shared" in finding.message and "0.90" in finding.message
    gke = GOOD.replace("    spec:\n      tolerations:", "    spec:\n      nodeSelector:\n"
                       "        cloud.google.com/gke-gpu-sharing-strategy: time-sharing\n      tolerations:")
    assert [f.rule for f in findings_of(gke)] == ["VQA008"]
    sidecar_without_gpu_access = (CORPUS / "VQA008_gpu_shared.yaml").read_text().replace(
        "{name: NVIDIA_VISIBLE_DEVICES, value: all}", "{name: NVIDIA_VISIBLE_DEVICES, value: none}")
    assert findings_of(sidecar_without_gpu_access) == []


def test_token_is_redacted_and_found_anywhere() -> None:
    (finding,) = findings_of((CORPUS / "VQA010_hf_token_literal.yaml").read_text())
    assert "hf_AbCdEf" not in finding.message and "hf_Ab..." in finding.message
    in_args = GOOD.replace("--model=Qwen/Qwen3-8B", "--hf-token=hf_0123456789abcdefghijKLMNOP")
    assert [f.rule for f in findings_of(in_args)] == ["VQA010"]
    other_var = GOOD.replace("            - name: HF_HOME", "            - name: MY_TOKEN\n"
                                                       "              value: hf_0123456789abcdefghijKLMNOP\n"
                                                       "            - name: HF_HOME")
    assert [f.rule for f in findings_of(other_var)] == ["VQA010"]


@pytest.mark.parametrize(("image", "pinned"), [
    ("vllm/vllm-openai", False),
    ("vllm/vllm-openai:latest", False),
    ("registry:5000/vllm/vllm-openai", False),
    ("registry:5000/vllm/vllm-openai:v0.11.0", True),
    ("vllm/vllm-openai@sha256:" + "a" * 64, True),
])
def test_image_pinning(image: str, pinned: bool) -> None:
    assert _vllm_image(image)
    rules = [f.rule for f in findings_of(GOOD.replace("vllm/vllm-openai:v0.11.0", image))]
    assert rules == ([] if pinned else ["VQA011"])


def _vllm_image(image: str) -> bool:
    repository, _, _ = image_reference(image)
    return repository.endswith("vllm/vllm-openai")


TWO_GPUS = GOOD.replace('nvidia.com/gpu: "1"', 'nvidia.com/gpu: "2"').replace(
    "- --max-model-len=32768", "- --max-model-len=32768\n            - --tensor-parallel-size=2")


@pytest.mark.parametrize(("text", "old", "new", "rules"), [
    # a field of the wrong type counts as absent: the finding its absence gives, never a traceback
    (GOOD, "- {name: model-cache, mountPath: /cache}", '- "/cache"', ["VQA009"]),
    (GOOD, "- {name: model-cache, mountPath: /cache}", "- 5", ["VQA009"]),
    (GOOD, "- {name: model-cache, mountPath: /cache}", "- [/cache]", ["VQA009"]),
    (TWO_GPUS, "- {name: dshm, mountPath: /dev/shm}", '- "/dev/shm"', ["VQA006"]),
    (GOOD, "          volumeMounts:\n", '          volumeMounts: "/cache"\n          unused:\n', ["VQA009"]),
    (GOOD, "          env:\n", "          env: 5\n          unused:\n", ["VQA009"]),
    (GOOD, "      volumes:\n", "      volumes: [/cache]\n      unused:\n", ["VQA009"]),
    (GOOD, "            limits: {memory: 34Gi, nvidia.com/gpu: \"1\"}", "            limits: [1]", ["VQA001"]),
], ids=["mount-string", "mount-number", "mount-list", "shm-mount-string", "mounts-string", "env-number",
        "volumes-strings", "limits-list"])
def test_fields_of_the_wrong_type_count_as_absent(text: str, old: str, new: str, rules: list[str]) -> None:
    assert text.count(old) == 1
    assert [f.rule for f in findings_of(text.replace(old, new))] == rules


def _node_paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every node under `node` (the root excluded)."""
    if path:
        yield path
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for key, child in children:
        yield from _node_paths(child, (*path, key))


@pytest.mark.parametrize("text", [GOOD, TWO_GPUS], ids=["one-gpu", "two-gpus"])
def test_no_rule_fails_on_any_field_of_the_wrong_type(text: str) -> None:
    """Every node of the clean manifest replaced in turn by a string, a number, a list of
    strings, a mapping with a number key or null: each still lints (the fuzzer's finding was
    `volumeMounts: ["/cache"]`)."""
    manifest = yaml.safe_load(text)
    for path in _node_paths(manifest):
        for value in ("/cache", 7, ["/dev/shm"], {1: [2]}, None):
            mutated = copy.deepcopy(manifest)
            parent = mutated
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]] = value
            lint(load_text(yaml.safe_dump(mutated), "x.yaml"))  # raises on a bug


def test_hpa_forms() -> None:
    v1 = GOOD + textwrap.dedent("""\
        ---
        apiVersion: autoscaling/v1
        kind: HorizontalPodAutoscaler
        metadata: {name: q, namespace: llm}
        spec:
          scaleTargetRef: {kind: Deployment, name: qwen3-8b}
          maxReplicas: 4
        """)
    assert [f.rule for f in findings_of(v1)] == ["VQA012"]  # v1 scales on CPU
    no_metrics = v1.replace("autoscaling/v1", "autoscaling/v2")
    assert [f.rule for f in findings_of(no_metrics)] == ["VQA012"]  # v2 without metrics: 80 % CPU
    other_ns = v1.replace("namespace: llm}", "namespace: other}")
    assert findings_of(other_ns) == []
    other_target = v1.replace("name: qwen3-8b}", "name: something-else}")
    assert findings_of(other_target) == []


def test_controller_config_file_counts_as_opt_in() -> None:
    text = (CORPUS / "VQA012_hpa_cpu_memory.yaml").read_text()
    config = (REPO / "config" / "autoscaler.yaml").read_text()  # targets llm/qwen3-8b
    findings, ctx = lint(load_text(text, "a.yaml") + load_text(config, "autoscaler.yaml"))
    assert sorted(f.rule for f in findings) == ["VQA012", "VQA013"]
    assert ctx.controller_target("llm", "qwen3-8b") is not None
    assert ctx.controller_target("other", "qwen3-8b") is None


def test_replicas_rule_spares_objects_read_from_a_cluster() -> None:
    text = (CORPUS / "VQA015_replicas_in_managed_manifest.yaml").read_text()
    assert [f.rule for f in findings_of(text)] == ["VQA015"]
    live = text.replace("  namespace: llm\n", "  namespace: llm\n  uid: 0b7c9c1e-6d1a-4b8e-9a55-2f4e8f1d2c3a\n"
                                                "  resourceVersion: \"123\"\n", 1)
    assert findings_of(live) == []


def test_annotation_rule_names_each_bad_key_on_its_line() -> None:
    text = (CORPUS / "VQA016_invalid_autoscaler_annotation.yaml").read_text()
    (finding,) = findings_of(text)
    assert finding.rule == "VQA016" and finding.line == text.splitlines().index(
        '    vllm-queue-autoscaler.io/max_replicas: "0"') + 1
    assert "vllm-queue-autoscaler.io/max_replicas = 0, must be >= 1" in finding.message
    several = text.replace('max_replicas: "0"', 'max_replica: "3"\n    vllm-queue-autoscaler.io/paused: "yes"', 1)
    messages = sorted(f.message for f in findings_of(several))
    assert len(messages) == 2 and "did you mean max_replicas?" in messages[0] + messages[1]
    assert any('paused = "yes", must be "true" or "false"' in m for m in messages)
    # valid annotations, and a rule between keys that depends on the ConfigMap: nothing to say
    fine = text.replace('max_replicas: "0"', 'min_replicas: "20"\n    vllm-queue-autoscaler.io/slo.ttft_seconds: "1.5"', 1)
    assert findings_of(fine) == []


def test_ignore_option_and_annotation() -> None:
    classic = CORPUS / "classic.yaml"
    assert rules_in(classic, ignore=frozenset({"VQA001", "max-model-len-missing"})) == ["VQA005", "VQA009", "VQA011"]
    annotated = classic.read_text().replace(
        "  name: qwen3-8b\n",
        '  name: qwen3-8b\n  annotations: {vllm-queue-autoscaler.io/lint-ignore: "VQA001, image-latest"}\n', 1)
    assert sorted(f.rule for f in findings_of(annotated)) == ["VQA005", "VQA007", "VQA009"]
    result = run("--ignore", "VQA001,VQA005", "--ignore", "image-latest", str(classic))
    assert result.exit_code == 0  # warnings only
    assert run("--ignore", "VQA999", str(classic)).exit_code == 2


# --------------------------------------------------------------------------- loader


def test_a_typed_list_from_the_api_gives_its_items_their_kind() -> None:
    # `kubectl get --raw /apis/apps/v1/namespaces/llm/deployments` answers a DeploymentList whose
    # items carry no kind or apiVersion: the items are Deployments of apps/v1
    deployment = yaml.safe_load(GOOD)
    for key in ("kind", "apiVersion"):
        del deployment[key]
    text = yaml.safe_dump({"apiVersion": "apps/v1", "kind": "DeploymentList", "metadata": {}, "items": [deployment]})
    (doc,) = load_text(text, "list.yaml")
    assert (doc.kind, doc.data["apiVersion"]) == ("Deployment", "apps/v1")
    broken = text.replace("nvidia.com/gpu: '1'", "memory: 1Gi")  # the item without its GPU limit is linted
    assert "VQA001" in [f.rule for f in findings_of(broken)]


def test_loader_keeps_lines_through_documents_lists_and_flow_style() -> None:
    text = textwrap.dedent("""\
        # comment
        apiVersion: v1
        kind: List
        items:
          - apiVersion: v1
            kind: ConfigMap
            metadata: {name: a}
          - {apiVersion: v1, kind: Secret, metadata: {name: b}}
        ---
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: c
        spec:
          template:
            spec:
              containers:
                - name: x
                  image: y
        """)
    docs = load_text(text, "t.yaml")
    assert [(d.kind, d.name, d.line) for d in docs] == [("ConfigMap", "a", 5), ("Secret", "b", 8),
                                                         ("Deployment", "c", 11)]
    spec = docs[2].data
    assert line_of(spec, "spec", "template", "spec", "containers", 0, "image") == 20
    assert line_of(spec, "spec", "template", "nothing", "here") == 16  # deepest existing node


def test_a_repeated_key_is_found_where_it_is_written_and_a_merge_override_is_not_one() -> None:
    text = """\
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: a, labels: {app: x, app: y}}
        defaults: &defaults {mode: fast, size: 1}
        data:
          <<: *defaults
          size: 2
          list:
            - {name: one, value: "1"}
            - name: two
              value: "2"
              value: "3"
        ---
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "b", "name": "c"}}
        """
    found = [(f.rule, f.line, f.obj.name, f.message.split(" is ")[0]) for f in findings_of(text)]
    # the flow mapping on line 3, the list item's value on line 12, a JSON document (line 14):
    # each where it is written again; `size` (line 7) overrides what the merge brought in: no repetition
    assert found == [("VQA017", 3, "a", "metadata.labels.app"), ("VQA017", 12, "a", "data.list[1].value"),
                     ("VQA017", 14, "c", "metadata.name")]
    assert "(lines 11 and 12)" in findings_of(text)[1].message
    assert findings_of(text, ignore=frozenset({"repeated-key"})) == []


def test_unreadable_inputs_exit_2_with_a_located_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: [\n")
    result = run(str(bad), str(CORPUS / "clean.yaml"))
    assert result.exit_code == 2
    assert re.search(rf"error: {re.escape(str(bad))}:3:1: invalid YAML: ", result.stderr)
    assert "clean: 1 vLLM workload" in result.stdout  # the readable input was still linted
    result = run(str(tmp_path / "missing.yaml"))
    assert result.exit_code == 2 and "missing.yaml: cannot read: no such file or folder" in result.stderr
    assert run().exit_code == 2  # no PATH at all
    (tmp_path / "empty").mkdir()
    assert run(str(tmp_path / "empty")).exit_code == 2
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    assert "not UTF-8" in run(str(binary)).stderr


@pytest.mark.parametrize("kustomization", [
    "patches: 5\n",
    "patchesStrategicMerge: 5\n",
    "configMapGenerator: 7\n",
    "configMapGenerator: [{files: 5}]\n",
    "configMapGenerator: [7, {name: a, files: [patch.yaml], envs: 3}]\n",
    "secretGenerator: [{envs: 3}]\n",
    'configMapGenerator: [{name: a, files: ["a\\0b", patch.yaml]}]\n',
    "patches: [{path: patch.yaml}]\nconfigMapGenerator: 7\nreplacements: {path: x}\n",
], ids=["patches-number", "strategic-merge-number", "generator-number", "files-number", "envs-number",
        "secret-envs-number", "nul-byte-in-files", "good-beside-bad"])
def test_kustomization_fields_of_the_wrong_type_count_as_absent(tmp_path: Path, kustomization: str) -> None:
    """As a kustomization that is no YAML at all: kustomize's problem, not lint's. The entries
    that are well-formed still name the files to skip."""
    (tmp_path / "kustomization.yaml").write_text(kustomization)
    (tmp_path / "deployment.yaml").write_text(GOOD)
    (tmp_path / "patch.yaml").write_text("kind: [\n")  # no manifest: invalid YAML if linted
    result = run(str(tmp_path))
    if "patch.yaml" in kustomization:  # skipped, as the well-formed entry says
        assert (result.exit_code, result.stderr) == (0, ""), result.output
        assert "clean: 1 vLLM workload in 1 file" in result.stdout
    else:  # linted as a manifest: one line about the patch, none about the kustomization
        assert result.exit_code == 2, result.output
        assert re.fullmatch(rf"error: {re.escape(str(tmp_path / 'patch.yaml'))}:\d+:\d+: invalid YAML: .*\n",
                            result.stderr)


def lint_process(*args: str, close_stdin: bool = False) -> subprocess.CompletedProcess[str]:
    """`autoscaler lint ARGS` in a child process, for what CliRunner cannot fake (a closed stdin,
    a read that blocks); killed after 60 s."""
    return subprocess.run([sys.executable, "-m", "autoscaler", "lint", *args], capture_output=True, text=True,
                          timeout=60, cwd=REPO, stdin=None if close_stdin else subprocess.DEVNULL,
                          preexec_fn=(lambda: os.close(0)) if close_stdin else None)


@pytest.mark.parametrize(("make", "problem"), [
    (os.mkfifo, "cannot read: not a regular file (a FIFO)"),
    (lambda path: path.symlink_to(path.name), "cannot read: Too many levels of symbolic links"),
], ids=["fifo", "symlink-loop"])
def test_folder_refuses_files_it_cannot_read_without_blocking(tmp_path: Path, make: Callable[[Path], object],
                                                               problem: str) -> None:
    (tmp_path / "deployment.yaml").write_text(GOOD)
    make(tmp_path / "f.yaml")
    done = lint_process(str(tmp_path))
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"error: {tmp_path / 'f.yaml'}: {problem}\n"
    assert "clean: 1 vLLM workload in 1 file" in done.stdout  # the readable file was still linted


def test_closed_stdin_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    done = lint_process("-", close_stdin=True)  # `autoscaler lint - <&-`: Python's sys.stdin is None
    assert (done.returncode, done.stderr) == (2, "error: <stdin>: cannot read: stdin is closed\n")
    monkeypatch.setattr(sys, "stdin", None)
    assert load_inputs(["-"]).errors == ["<stdin>: cannot read: stdin is closed"]


def test_stdin_and_json_format() -> None:
    result = run("--format", "json", "-", stdin=(CORPUS / "classic.yaml").read_text())
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["version"] == 1
    assert data["summary"] == {"errors": 3, "warnings": 2, "vllm_workloads": 1, "documents": 1,
                               "files": ["<stdin>"], "unreadable": []}
    first = data["findings"][0]
    assert first == {
        "rule": "VQA001", "name": "gpu-limit-missing", "severity": "error",
        "object": {"kind": "Deployment", "namespace": None, "name": "qwen3-8b"}, "container": "vllm",
        "file": "<stdin>", "line": 11, "message": first["message"], "fix": first["fix"],
    }
    assert [f["line"] for f in data["findings"]] == sorted(f["line"] for f in data["findings"])


def test_no_vllm_workload_and_list_rules() -> None:
    result = run("-", stdin="apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n")
    assert result.exit_code == 0 and "no vLLM workload" in result.stdout
    listing = CliRunner().invoke(main, ["lint", "--list-rules"], env={"COLUMNS": "250"})
    assert listing.exit_code == 0
    for r in RULES:
        assert r.id in listing.stdout and r.name in listing.stdout


def test_flag_parsing() -> None:
    flags, positionals = parse_vllm_flags(
        ["Qwen/Qwen3-8B", "--max_model_len", "8192", "-tp", "2", "--enforce-eager", "--port=8000", "--x", "-1"])
    assert flags == {"--max-model-len": "8192", "--tensor-parallel-size": "2", "--enforce-eager": None,
                     "--port": "8000", "--x": "-1"}
    assert positionals == ["Qwen/Qwen3-8B"]


def test_docs_list_every_rule() -> None:
    docs = (REPO / "docs" / "lint.md").read_text()
    for r in RULES:
        assert f"`{r.id}`" in docs and r.name in docs, r.id


def test_container_model_from_positional_or_flag() -> None:
    def container(args: list[str], command: list[str] | None = None) -> Container:
        text = json.dumps({"name": "v", "image": "vllm/vllm-openai:v0.11.0", "args": args,
                           **({"command": command} if command else {})})
        return Container.from_spec(load_text(text, "c")[0].data)

    assert container(["Qwen/Qwen3-8B", "--port", "8000"]).model == "Qwen/Qwen3-8B"
    assert container(["--model", "m"]).model == "m"
    assert container(["serve", "x"], command=["/entrypoint.sh"]).flags_known is False


@pytest.mark.parametrize(("args", "rules"), [
    (['"--max-model-len 8192"'], ["VQA007", "VQA019"]),  # one item: vLLM refuses it, and no --max-model-len is set
    (['"--served-model-name=qwen chat"'], ["VQA007"]),  # flag=value with a space in the value: one argument, fine
    (['"--max-model-len"', '"8192"'], []),
])
def test_a_flag_and_its_value_in_one_item(args: list[str], rules: list[str]) -> None:
    text = GOOD.replace("- --max-model-len=32768", "\n            ".join(f"- {a}" for a in args))
    assert sorted(f.rule for f in findings_of(text)) == rules


def test_a_shell_script_splits_its_words_itself() -> None:
    script = GOOD.replace("          args:\n", "          command: [sh, -c, \"vllm serve Qwen/Qwen3-8B --max-model-len 8192\"]\n"
                                             "          unused:\n")
    assert "VQA019" not in [f.rule for f in findings_of(script)]


@pytest.mark.parametrize("selector, found", [
    ('{namespaces: [llm], match_labels: {vllm-queue-autoscaler.io/autoscale: "true"}}', True),
    ('{match_labels: {vllm-queue-autoscaler.io/autoscale: "false"}}', False),  # another value
    ('{namespaces: [other], match_labels: {vllm-queue-autoscaler.io/autoscale: "true"}}', False),
    ('{match_expressions: [{key: vllm-queue-autoscaler.io/autoscale, operator: Exists}]}', True),
    ("{match_labels: {}}", False),  # invalid (selects everything): check-config's to report, no target
])
def test_a_deployment_found_by_target_selector_is_a_controller_target(selector: str, found: bool) -> None:
    """VQA013 and VQA015 know the Deployments `target_selector` finds, as the controller does."""
    text = (CORPUS / "VQA013_hpa_and_target_selector.yaml").read_text()
    text = text.replace('    target_selector:\n      namespaces: [llm]\n      match_labels: {vllm-queue-autoscaler.io/autoscale: "true"}',
                        f"    target_selector: {selector}")
    assert f"target_selector: {selector}" in text
    assert ("VQA013" in [f.rule for f in lint(load_text(text, "t.yaml"), LintOptions())[0]]) is found
    deployment, hpa, configmap = text.split("\n---\n")
    assert "kind: HorizontalPodAutoscaler" in hpa
    deployment = deployment.replace("spec:\n  selector:", "spec:\n  replicas: 2\n  selector:", 1)
    rules = [f.rule for f in lint(load_text(deployment + "\n---\n" + configmap, "t.yaml"), LintOptions())[0]]
    assert ("VQA015" in rules) is found  # no HPA: the replicas in the manifest of a target


@pytest.mark.parametrize("value, rules, says", [
    ("0", ["VQA001"], "GPU limit nvidia.com/gpu: 0 reserves no GPU for the server"),
    ('"abc"', ["VQA001"], "'abc' is no whole number of GPUs: the API server rejects the pod"),
    ("-1", ["VQA001"], "the API server rejects the pod"),
    ('"NaN"', ["VQA001"], "the API server rejects the pod"),
    ('"1.5"', ["VQA001"], "'1.5' is no whole number"),  # not "GPU limit 2" (rounded up) nor a 2-GPU /dev/shm check
    ("1", [], None),
    ('"1"', [], None),
    ('"1", amd.com/gpu: 0', [], None),  # a chart that renders every accelerator: the server has its GPU
    ('0, amd.com/gpu: "0"', ["VQA001"], "reserves no GPU"),
])
def test_a_gpu_limit_that_is_no_whole_count_is_one_finding(value: str, rules: list[str], says: str | None) -> None:
    """One finding naming the value, not "no GPU limit" beside "GPU limit 0 for 1 GPUs" (VQA018)."""
    text = (CORPUS / "clean.yaml").read_text()
    assert 'nvidia.com/gpu: "1"' in text
    findings = lint(load_text(text.replace('nvidia.com/gpu: "1"', f"nvidia.com/gpu: {value}"), "t.yaml"), LintOptions())[0]
    assert sorted(f.rule for f in findings) == rules
    if says:
        assert says in findings[0].message


@pytest.mark.parametrize("edit, found", [
    ({}, True),  # the defaults' 1 for a 2-GPU pod
    ({"entry": "        gpus_per_replica: 2\n"}, False),
    ({"defaults": "    defaults: {gpus_per_replica: 2}\n"}, False),
    ({"annotation": '"2"'}, False),  # the Deployment's annotation, honoured (annotation_keys null)
    ({"annotation": '"2"', "keys": "    controller: {annotation_keys: [min_replicas]}\n"}, True),  # not honoured
    ({"annotation": '"3"'}, True),
])
def test_gpus_per_replica_against_the_gpu_limit(edit: dict[str, str], found: bool) -> None:
    text = (CORPUS / "VQA023_gpus_per_replica_mismatch.yaml").read_text()
    text = text.replace("        max_replicas: 8\n", "        max_replicas: 8\n" + edit.get("entry", ""))
    text = text.replace("    targets:\n", edit.get("defaults", "") + edit.get("keys", "") + "    targets:\n")
    if "annotation" in edit:
        text = text.replace("  namespace: llm\nspec:", "  namespace: llm\n  annotations: {vllm-queue-autoscaler.io/gpus_per_replica: "
                            + edit["annotation"] + "}\nspec:", 1)
    assert text != (CORPUS / "VQA023_gpus_per_replica_mismatch.yaml").read_text() or not edit
    rules = [f.rule for f in lint(load_text(text, "t.yaml"), LintOptions())[0]]
    assert ("VQA023" in rules) is found, rules
    assert set(rules) <= {"VQA023"}


def test_the_shipped_tp2_overlay_and_release_agree_on_gpus_per_replica() -> None:
    """deploy/vllm/overlays/tp2's Deployment tells the controller of deploy/release its 2 GPUs."""
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl not installed")
    rendered = [subprocess.run(["kubectl", "kustomize", str(REPO / path)], capture_output=True, text=True, check=True).stdout
                for path in ("deploy/vllm/overlays/tp2", "deploy/release")]
    findings = lint(load_text("\n---\n".join(rendered), "rendered.yaml"), LintOptions())[0]
    assert [f.rule for f in findings] == []
    without = rendered[0].replace("vllm-queue-autoscaler.io/gpus_per_replica", "example.com/unrelated")
    findings = lint(load_text(without + "\n---\n" + rendered[1], "rendered.yaml"), LintOptions())[0]
    assert [f.rule for f in findings] == ["VQA023"]


def test_gpus_per_replica_counts_what_the_controller_counts() -> None:
    """nvidia.com/gpu of the containers, an init container's if larger (the scheduler's rule and
    `pod_spec_gpus`); a MIG slice or another accelerator is no GPU the controller counts: no finding."""
    text = (CORPUS / "VQA023_gpus_per_replica_mismatch.yaml").read_text()
    mig = text.replace('nvidia.com/gpu: "2"', 'nvidia.com/mig-3g.40gb: "2"').replace("            - --tensor-parallel-size=2\n", "")
    assert "VQA023" not in [f.rule for f in lint(load_text(mig, "t.yaml"), LintOptions())[0]]
    one = text.replace('nvidia.com/gpu: "2"', 'nvidia.com/gpu: "1"').replace("            - --tensor-parallel-size=2\n", "")
    assert "VQA023" not in [f.rule for f in lint(load_text(one, "t.yaml"), LintOptions())[0]]  # 1 = the default 1


def test_gpus_per_replica_reads_the_target_in_the_deployments_namespace_first() -> None:
    """Two entries of that name, another namespace's first (it matches too where a manifest leaves
    its namespace open): the entry in the Deployment's own namespace is the one read."""
    text = (CORPUS / "VQA023_gpus_per_replica_mismatch.yaml").read_text()
    entries = ("      - namespace: other\n        deployment: qwen3-8b\n"
               "      - namespace: llm\n        deployment: qwen3-8b\n        gpus_per_replica: 2\n")
    listed = text.replace("      - namespace: llm\n        deployment: qwen3-8b\n        max_replicas: 8\n", entries)
    assert listed != text
    assert "VQA023" not in [f.rule for f in lint(load_text(listed, "t.yaml"), LintOptions())[0]]
