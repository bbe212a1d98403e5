"""The lint's model of a workload: pod template, containers, and what vLLM was told on its
command line.

A container runs vLLM when its command line runs `vllm serve` (directly, through `python -m
vllm.entrypoints.openai.api_server`, or inside `sh -c "..."`) or its image is the vLLM OpenAI
image (`vllm/vllm-openai`, any registry, any tag). Kubernetes' `$(VAR)` references in command and
args are expanded from the container's literal env values first, as the kubelet does.
"""

from __future__ import annotations

from autoscaler.config.annotations import LINT_IGNORE, MANAGED

import math
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from autoscaler.adapters.kubernetes.objects import parse_quantity
from autoscaler.lint.loader import Document, YList, YMap

__all__ = [
    "MANAGED_ANNOTATION",
    "LINT_IGNORE_ANNOTATION",
    "SHELLS",
    "WORKLOAD_KINDS",
    "Container",
    "Workload",
    "image_reference",
    "is_gpu_resource",
    "parse_vllm_flags",
]

MANAGED_ANNOTATION = MANAGED
"""Opt-in marker on a Deployment: `"true"` declares that vllm-queue-autoscaler scales it. The
controller itself scales the targets of its ConfigMap; the lint takes either as the truth."""

LINT_IGNORE_ANNOTATION = LINT_IGNORE
"""Comma-separated rule ids or names the lint does not report for this object."""

WORKLOAD_KINDS = ("Deployment", "StatefulSet")

SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh"})
_SHELL_OPERATORS = frozenset({"&&", "||", ";", "|", "&", ";;", "(", ")", ">", "<", ">>"})
_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
_SHORT_FLAGS = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-dp": "--data-parallel-size",
    "-q": "--quantization",
}
# vLLM switches that take no value: without this list `--enforce-eager MODEL` would read MODEL
# as the switch's value. Flags missing here still parse right when written `--flag=value`.
_SWITCHES = frozenset({
    "--trust-remote-code", "--enforce-eager", "--enable-prefix-caching", "--no-enable-prefix-caching",
    "--enable-chunked-prefill", "--no-enable-chunked-prefill", "--disable-log-requests", "--disable-log-stats",
    "--enable-log-requests", "--enable-auto-tool-choice", "--enable-lora", "--disable-custom-all-reduce",
    "--disable-frontend-multiprocessing", "--headless", "--enable-expert-parallel", "--disable-fastapi-docs",
    "--enable-server-load-tracking", "--enable-sleep-mode", "--enable-reasoning", "--disable-uvicorn-access-log",
})


ACCELERATOR_RESOURCES = ("google.com/tpu", "aws.amazon.com/neuron", "aws.amazon.com/neuroncore",
                         "aws.amazon.com/neurondevice", "habana.ai/gaudi")
"""Device-plugin resources of the other accelerators vLLM runs on (TPU, Trainium/Inferentia, Gaudi)."""


def is_gpu_resource(name: str) -> bool:
    """Whether a resource name counts GPUs or another accelerator: `nvidia.com/gpu`, `amd.com/gpu`,
    `nvidia.com/gpu.shared` (time-sliced), MIG slices `nvidia.com/mig-*`, Intel `gpu.intel.com/*`,
    and `ACCELERATOR_RESOURCES` (`google.com/tpu`, AWS Neuron, Habana Gaudi)."""
    return (
        name.endswith("/gpu")
        or name.endswith("/gpu.shared")
        or name.startswith("nvidia.com/mig-")
        or name.startswith("gpu.intel.com/")
        or name in ACCELERATOR_RESOURCES
    )


def image_reference(image: str) -> tuple[str, str | None, str | None]:
    """`(repository, tag, digest)` of an image reference; the registry stays in the repository
    (`registry:5000/vllm/vllm-openai` has no tag: the port is not one)."""
    rest, _, digest = image.partition("@")
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > slash:
        return rest[:colon], rest[colon + 1:], digest or None
    return rest, None, digest or None


def _is_vllm_image(image: str) -> bool:
    repository, _, _ = image_reference(image)
    return repository.rsplit("/", 1)[-1].startswith("vllm-openai")


def _expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion: known variables are replaced, `$$` is a literal `$`,
    unknown references are kept as written."""

    def repl(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))

    return _VAR_REF.sub(repl, value)


def _split_shell(script: str) -> list[str]:
    lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: a best effort is enough to find flags
        return script.split()


def _command_line(tokens: list[str]) -> list[str]:
    """The tokens a shell would run for `sh -c SCRIPT`, else `tokens` unchanged."""
    if tokens and tokens[0].rsplit("/", 1)[-1] in SHELLS:
        for i, token in enumerate(tokens[1:], start=1):
            if token.startswith("-") and token.endswith("c") and i + 1 < len(tokens):
                return _split_shell(tokens[i + 1])
    return tokens


def _vllm_arguments(tokens: list[str]) -> tuple[list[str], bool] | None:
    """The arguments after `vllm serve` or `-m vllm.entrypoints.openai.api_server`, up to the
    next shell operator, and whether a positional argument is the model (`vllm serve MODEL`);
    None when the command line runs no vLLM server."""
    for i, token in enumerate(tokens):
        if token.rsplit("/", 1)[-1] == "vllm" and i + 1 < len(tokens) and tokens[i + 1] == "serve":
            start, positional_model = i + 2, True
        elif token == _API_SERVER_MODULE:
            start, positional_model = i + 1, False
        else:
            continue
        end = next((j for j in range(start, len(tokens)) if tokens[j] in _SHELL_OPERATORS), len(tokens))
        return tokens[start:end], positional_model
    return None


def parse_vllm_flags(arguments: list[str]) -> tuple[dict[str, str | None], list[str]]:
    """`({--flag: value or None}, positionals)`. `--flag=value` and `--flag value` both work,
    underscores in flag names read as dashes (vLLM accepts both); the last occurrence wins."""
    flags: dict[str, str | None] = {}
    positionals: list[str] = []
    i = 0
    while i < len(arguments):
        token = arguments[i]
        if token.startswith("-") and len(token) > 1 and not _is_number(token):
            name, eq, value = token.partition("=")
            if name.startswith("--"):
                name = "--" + name[2:].replace("_", "-")
            else:
                name = _SHORT_FLAGS.get(name, name)
            if eq:
                flags[name] = value
            elif name not in _SWITCHES and i + 1 < len(arguments) and not (
                arguments[i + 1].startswith("-") and not _is_number(arguments[i + 1])
            ):
                flags[name] = arguments[i + 1]
                i += 1
            else:
                flags[name] = None
        else:
            positionals.append(token)
        i += 1
    return flags, positionals


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _int_flag(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _ymap(value: Any) -> YMap:
    return value if isinstance(value, YMap) else YMap()


def _ylist(value: Any) -> YList:
    return value if isinstance(value, YList) else YList()


def _written_zero(value: Any) -> bool:
    """A quantity written as zero (0, "0", "0.0"), not one that failed to parse."""
    if isinstance(value, bool):
        return False
    try:
        return float(str(value)) == 0.0
    except ValueError:
        return False


@dataclass
class Container:
    """One container of a pod template, with its vLLM command line parsed when it runs vLLM."""

    spec: YMap
    init: bool = False
    env: dict[str, YMap] = field(default_factory=dict)  # name -> env entry
    argv: list[str] = field(default_factory=list)  # command + args, expanded, shell script split
    vllm: bool = False
    flags_known: bool = False  # the vLLM flags could be read from the command line
    flags: dict[str, str | None] = field(default_factory=dict)
    model: str | None = None

    @classmethod
    def from_spec(cls, spec: YMap, init: bool = False) -> Container:
        env = {str(e.get("name")): e for e in _ylist(spec.get("env")) if isinstance(e, YMap) and e.get("name")}
        literals = {k: str(e["value"]) for k, e in env.items() if "value" in e and e["value"] is not None}
        command = [_expand(str(t), literals) for t in _ylist(spec.get("command"))]
        args = [_expand(str(t), literals) for t in _ylist(spec.get("args"))]
        argv = _command_line(command + args)
        container = cls(spec=spec, init=init, env=env, argv=argv)
        found = _vllm_arguments(argv)
        image_entrypoint = not command and _is_vllm_image(container.image)
        if found is not None:
            arguments, positional_model = found
        elif image_entrypoint:  # the image's entrypoint is the vLLM server; args are its flags
            arguments, positional_model = args, True
        else:
            container.vllm = not init and _is_vllm_image(container.image)  # a custom command in the vLLM image
            return container
        container.vllm = not init
        container.flags_known = True
        container.flags, positionals = parse_vllm_flags(arguments)
        model = container.flags.get("--model")
        if model is None and positional_model and positionals:
            model = positionals[0]
        container.model = model
        return container

    @property
    def name(self) -> str:
        return str(self.spec.get("name") or "")

    @property
    def image(self) -> str:
        return str(self.spec.get("image") or "")

    def resource_limits(self) -> YMap:
        return _ymap(_ymap(self.spec.get("resources")).get("limits"))

    def resource_requests(self) -> YMap:
        return _ymap(_ymap(self.spec.get("resources")).get("requests"))

    def gpu_resources(self) -> dict[str, int]:
        """GPU resources in the container's limits, with their counts (at least 1); a limit that
        is no whole number (`bad_gpu_limits`, VQA001's) or zero counts none."""
        bad = self.bad_gpu_limits()
        return {
            str(name): int(parse_quantity(value))
            for name, value in self.resource_limits().items()
            if is_gpu_resource(str(name)) and str(name) not in bad and not _written_zero(value)
        }

    @property
    def gpus(self) -> int:
        return sum(self.gpu_resources().values())

    def bad_gpu_limits(self) -> dict[str, str]:
        """GPU limits that are no whole number of GPUs (1.5, -1, "abc", NaN), by resource name,
        with the value as written: the API server rejects a fraction or a negative count of an
        extended resource. A zero is a valid limit of none (`zero_gpu_limits`).

        Worked example: {nvidia.com/gpu: "1.5"} -> {"nvidia.com/gpu": "1.5"}; {nvidia.com/gpu: 2,
        amd.com/gpu: 0} -> {}."""
        out: dict[str, str] = {}
        for name, value in self.resource_limits().items():
            if not is_gpu_resource(str(name)) or _written_zero(value):
                continue
            count = parse_quantity(value) if not isinstance(value, bool) else 0.0
            if not (math.isfinite(count) and count >= 1 and count == int(count)):
                out[str(name)] = str(value)
        return out

    def zero_gpu_limits(self) -> list[str]:
        """GPU resources whose limit is written as zero (a chart that renders every accelerator)."""
        return sorted(str(n) for n, v in self.resource_limits().items() if is_gpu_resource(str(n)) and _written_zero(v))

    @property
    def dra_claims(self) -> bool:
        """Devices come from Dynamic Resource Allocation claims (`resources.claims`)."""
        return bool(_ylist(_ymap(self.spec.get("resources")).get("claims")))

    def env_literal(self, name: str) -> str | None:
        """The literal value of env var `name`; None when unset or set from a reference."""
        entry = self.env.get(name)
        if entry is None or "value" not in entry or entry["value"] is None:
            return None
        return str(entry["value"])

    def int_flag(self, name: str) -> int | None:
        return _int_flag(self.flags.get(name))

    @property
    def parallel_gpus(self) -> int:
        """GPUs one vLLM server spans: tensor x pipeline parallel sizes (1 when not set or unreadable)."""
        tp = self.int_flag("--tensor-parallel-size") or 1
        pp = self.int_flag("--pipeline-parallel-size") or 1
        return max(1, tp) * max(1, pp)


@dataclass
class Workload:
    """A Deployment or StatefulSet and its pod template."""

    doc: Document
    pod: YMap
    template: YMap
    containers: list[Container]
    init_containers: list[Container]

    @classmethod
    def from_document(cls, doc: Document) -> Workload | None:
        if doc.kind not in WORKLOAD_KINDS:
            return None
        spec = _ymap(doc.data.get("spec"))
        template = _ymap(spec.get("template"))
        pod = _ymap(template.get("spec"))
        return cls(
            doc=doc,
            pod=pod,
            template=template,
            containers=[Container.from_spec(c) for c in _ylist(pod.get("containers")) if isinstance(c, YMap)],
            init_containers=[
                Container.from_spec(c, init=True) for c in _ylist(pod.get("initContainers")) if isinstance(c, YMap)
            ],
        )

    @property
    def kind(self) -> str:
        return self.doc.kind

    @property
    def name(self) -> str:
        return self.doc.name

    @property
    def namespace(self) -> str | None:
        return self.doc.namespace

    @property
    def spec(self) -> YMap:
        return _ymap(self.doc.data.get("spec"))

    @property
    def is_vllm(self) -> bool:
        return any(c.vllm for c in self.containers)

    @property
    def vllm_containers(self) -> list[Container]:
        return [c for c in self.containers if c.vllm]

    def all_containers(self) -> Iterator[Container]:
        yield from self.init_containers
        yield from self.containers

    @property
    def gpus(self) -> int:
        return sum(c.gpus for c in self.containers)

    @property
    def annotations(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in _ymap(self.doc.metadata.get("annotations")).items()}

    @property
    def opted_in(self) -> bool:
        return self.annotations.get(MANAGED_ANNOTATION, "").strip().lower() == "true"

    def volume(self, name: str) -> YMap | None:
        for volume in _ylist(self.pod.get("volumes")):
            if isinstance(volume, YMap) and volume.get("name") == name:
                return volume
        return None

    def claim_template_names(self) -> set[str]:
        """Names of a StatefulSet's volumeClaimTemplates (each pod gets its own PVC)."""
        return {
            str(_ymap(t.get("metadata")).get("name"))
            for t in _ylist(self.spec.get("volumeClaimTemplates"))
            if isinstance(t, YMap)
        }
