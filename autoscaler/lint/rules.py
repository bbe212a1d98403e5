"""The lint rules: one small check per pitfall of running vLLM on Kubernetes, each with a stable
id (`VQA001`...), a name, a severity, and the fix.

Every check receives the `LintContext` of one run (all documents, the workloads among them,
HPAs, Nodes, and the Deployments our controller scales) and yields `Hit`s; `lint()` turns them
into `Finding`s with the rule's id, severity and fix. Ids are never reused or renumbered.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import ValidationError

from autoscaler.adapters.kubernetes.objects import LabelSelector, Taint, Toleration, parse_quantity, pod_spec_gpus
from autoscaler.config.annotations import PREFIX as POLICY_PREFIX
from autoscaler.config.annotations import key_problems
from autoscaler.config.bounded import load_yaml
from autoscaler.config.model import TargetSelector
from autoscaler.policy.params import PolicyParams
from autoscaler.lint.findings import Finding, LintOptions, ObjectRef, Severity
from autoscaler.lint.loader import Document, YList, YMap, line_of
from autoscaler.lint.workload import (
    LINT_IGNORE_ANNOTATION,
    MANAGED_ANNOTATION,
    SHELLS,
    Container,
    Workload,
    image_reference,
    is_gpu_resource,
)

__all__ = ["RULES", "ControllerTarget", "Hit", "LintContext", "Rule", "lint", "resolve_rule"]

CONFIG_KEY = "autoscaler.yaml"  # the controller's ConfigMap data key
DEFAULT_HF_HOME = "/root/.cache/huggingface"  # the vLLM image runs as root
HF_TOKEN_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACEHUB_API_TOKEN", "HF_API_TOKEN")
HF_TOKEN_PREFIX = "hf_"
DEFAULT_GPU_MEMORY_UTILIZATION = "0.9"
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
_PERSISTENT_SOURCES = frozenset({
    "persistentVolumeClaim", "hostPath", "nfs", "csi", "image", "iscsi", "cephfs", "glusterfs", "rbd", "fc",
    "azureFile", "azureDisk", "awsElasticBlockStore", "gcePersistentDisk", "portworxVolume", "flexVolume",
})
_GPU_SHARING_LABELS = (
    "cloud.google.com/gke-gpu-sharing-strategy",
    "cloud.google.com/gke-max-shared-clients-per-gpu",
    "nvidia.com/gpu.sharing-strategy",
)


# --------------------------------------------------------------------------- context


@dataclass(frozen=True)
class ControllerTarget:
    """A Deployment our controller scales, and where the input says so."""

    namespace: str | None  # None: the manifest leaves the namespace open
    deployment: str
    origin: str
    gpus_per_replica: int | None = None  # what the controller's config gives it; None: not in the input
    annotation_keys: tuple[str, ...] | None = None  # controller.annotation_keys: the policy annotations honoured


def _same_namespace(a: str | None, b: str | None) -> bool:
    """Namespaces match when equal, or when a manifest leaves its own open (`kubectl -n`)."""
    return a is None or b is None or a == b


def _ymap(value: Any) -> YMap:
    return value if isinstance(value, YMap) else YMap()


def _ylist(value: Any) -> YList:
    return value if isinstance(value, YList) else YList()


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def _default_gpus(data: dict[str, Any]) -> int | None:
    """`defaults.gpus_per_replica`, else the built-in 1; None when it is set but no whole number
    (check-config's to report)."""
    defaults = data.get("defaults")
    if isinstance(defaults, dict) and "gpus_per_replica" in defaults:
        return _whole(defaults["gpus_per_replica"])
    return int(PolicyParams.model_fields["gpus_per_replica"].default)


def _annotation_keys(data: dict[str, Any]) -> tuple[str, ...] | None:
    """`controller.annotation_keys`: the policy keys a Deployment's annotations may set (None: all)."""
    keys = data.get("controller", {}).get("annotation_keys") if isinstance(data.get("controller"), dict) else None
    return tuple(str(k) for k in keys) if isinstance(keys, list) else None


def _config_targets(data: Any, origin: str) -> list[ControllerTarget]:
    if not isinstance(data, dict):
        return []
    targets = data.get("targets")
    fallback, allowed = _default_gpus(data), _annotation_keys(data)
    return [
        ControllerTarget(str(t["namespace"]) if t.get("namespace") else None, str(t["deployment"]), origin,
                         _whole(t["gpus_per_replica"]) if "gpus_per_replica" in t else fallback, allowed)
        for t in targets if isinstance(t, dict) and t.get("deployment")
    ] if isinstance(targets, list) else []


def _config_selector(data: Any, origin: str) -> tuple[TargetSelector, str, int | None, tuple[str, ...] | None] | None:
    """The config's `target_selector`, where it was read and the GPUs per replica of what it finds
    (`defaults`), if it has a valid one (an invalid one is check-config's to report; the controller
    would not start on it)."""
    if not isinstance(data, dict) or data.get("target_selector") is None or "targets" not in data:
        return None  # a config without `targets` is refused by the controller (check-config says so)
    try:
        return TargetSelector.model_validate(data["target_selector"]), origin, _default_gpus(data), _annotation_keys(data)
    except (ValidationError, ValueError, TypeError):
        return None


def _selected(selector: TargetSelector, wl: Workload) -> bool:
    """Whether `selector` finds the Deployment `wl`; a manifest without a namespace (`kubectl -n`)
    is in any of the selector's namespaces."""
    labels = {str(k): str(v) for k, v in _ymap(_ymap(wl.doc.data.get("metadata")).get("labels")).items()}
    namespaces = selector.namespaces if wl.namespace is not None else []
    return selector.model_copy(update={"namespaces": namespaces}).matches(wl.namespace or "", labels)


class LintContext:
    """Everything one lint run looked at."""

    def __init__(self, documents: Sequence[Document], options: LintOptions) -> None:
        self.documents = list(documents)
        self.options = options
        self.workloads = [w for d in self.documents if (w := Workload.from_document(d)) is not None]
        self.vllm_workloads = [w for w in self.workloads if w.is_vllm]
        self.hpas = [d for d in self.documents if d.kind == "HorizontalPodAutoscaler"]
        self.nodes = [d for d in self.documents if d.kind == "Node"]
        self.targets = self._controller_targets()

    def _controller_targets(self) -> list[ControllerTarget]:
        targets: list[ControllerTarget] = []
        selectors: list[tuple[TargetSelector, str, int | None, tuple[str, ...] | None] | None] = []
        for doc in self.documents:
            where = f"{doc.source}:{doc.line}"
            if doc.kind == "ConfigMap":
                text = _ymap(doc.data.get("data")).get(CONFIG_KEY)
                if isinstance(text, str):
                    try:
                        parsed = load_yaml(text)  # bounded: depth, aliases (config.bounded)
                    except yaml.YAMLError:
                        continue
                    ref = ObjectRef("ConfigMap", doc.name, doc.namespace)
                    targets += _config_targets(parsed, f"listed in {ref} ({where})")
                    selectors.append(_config_selector(parsed, f"{ref} ({where})"))
            elif not doc.kind and "targets" in doc.data:  # the controller's config file itself
                targets += _config_targets(doc.data, f"listed in the controller config {where}")
                selectors.append(_config_selector(doc.data, f"the controller config {where}"))
        for wl in self.workloads:
            if wl.kind != "Deployment":
                continue
            if wl.opted_in:
                targets.append(ControllerTarget(wl.namespace, wl.name, f'annotated {MANAGED_ANNOTATION}: "true"'))
            for found in selectors:
                if found is not None and _selected(found[0], wl):
                    targets.append(ControllerTarget(wl.namespace, wl.name,
                                                    f"selected by target_selector {found[0].to_string()} of {found[1]}",
                                                    found[2], found[3]))
        return targets

    def controller_target(self, namespace: str | None, deployment: str) -> ControllerTarget | None:
        """The target naming this Deployment: one in its very namespace first, then one that leaves
        a namespace open (a manifest without one, applied with `kubectl -n`)."""
        found = [t for t in self.targets if t.deployment == deployment and _same_namespace(t.namespace, namespace)]
        exact = [t for t in found if t.namespace == namespace]
        return (exact or found)[0] if found else None

    def hpa_target(self, hpa: Document) -> tuple[str, str]:
        ref = _ymap(_ymap(hpa.data.get("spec")).get("scaleTargetRef"))
        return str(ref.get("kind") or ""), str(ref.get("name") or "")

    def hpas_of(self, wl: Workload) -> list[Document]:
        return [
            hpa for hpa in self.hpas
            if self.hpa_target(hpa) == (wl.kind, wl.name) and _same_namespace(hpa.namespace, wl.namespace)
        ]

    def workload_of(self, hpa: Document) -> Workload | None:
        kind, name = self.hpa_target(hpa)
        for wl in self.workloads:
            if (wl.kind, wl.name) == (kind, name) and _same_namespace(hpa.namespace, wl.namespace):
                return wl
        return None


# --------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class Hit:
    """What a check found: in which object, at which line; the rule supplies id, severity and fix
    (a hit may lower or raise the severity when the evidence is weaker or stronger)."""

    obj: Document
    line: int
    message: str
    container: str | None = None
    severity: Severity | None = None


Check = Callable[[LintContext], Iterable[Hit]]


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    severity: Severity
    summary: str
    fix: str
    check: Check
    pitfall: int | None = None  # its number in the README's "seven ways vLLM dies on Kubernetes"


RULES: list[Rule] = []


def rule(id_: str, name: str, severity: Severity, summary: str, fix: str,
         pitfall: int | None = None) -> Callable[[Check], Check]:
    def register(check: Check) -> Check:
        RULES.append(Rule(id_, name, severity, summary, fix, check, pitfall))
        return check

    return register


def resolve_rule(key: str) -> Rule | None:
    """The rule with this id (any case) or name."""
    for r in RULES:
        if key.upper() == r.id or key.lower() == r.name:
            return r
    return None


def _vllm_containers(ctx: LintContext) -> Iterator[tuple[Workload, Container]]:
    for wl in ctx.vllm_workloads:
        for c in wl.vllm_containers:
            yield wl, c


@rule("VQA001", "gpu-limit-missing", Severity.ERROR,
      "vLLM container without a GPU limit (or with 0), or with one that is no whole number (1.5, -1)",
      'set resources.limits["nvidia.com/gpu"] to the GPUs one server uses (tensor x pipeline parallel size)', pitfall=1)
def _gpu_limit_missing(ctx: LintContext) -> Iterator[Hit]:
    for wl, c in _vllm_containers(ctx):
        bad = c.bad_gpu_limits()
        if (c.gpus > 0 and not bad) or c.dra_claims:
            continue  # a GPU limit (a zero for another accelerator beside it is fine), or DRA
        requested = sorted(str(n) for n in c.resource_requests() if is_gpu_resource(str(n)))
        if bad:
            name, value = sorted(bad.items())[0]
            message = f"GPU limit {name}: {value!r} is no whole number of GPUs: the API server rejects the pod"
        elif c.zero_gpu_limits():
            message = (f"GPU limit {c.zero_gpu_limits()[0]}: 0 reserves no GPU for the server, so the pod can land on "
                       "a node without a free GPU and vLLM fails to start, or share one with another pod")
        elif requested:
            message = (f"{requested[0]} is in resources.requests only: extended resources need a limit, "
                       "the API server rejects the pod")
        else:
            message = ("no GPU limit: nothing reserves a GPU for the server, so the pod can land on a node "
                       "without a free GPU and vLLM fails to start, or share one with another pod")
        yield Hit(wl.doc, line_of(c.spec, "resources", "limits"), message, c.name)


def _gpu_selector_keys(wl: Workload) -> list[str]:
    """Node labels the pod template selects that name GPU hardware (nodeSelector, required affinity)."""
    keys = [str(k) for k in _ymap(wl.pod.get("nodeSelector"))]
    required = _ymap(_ymap(_ymap(wl.pod.get("affinity")).get("nodeAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution"))
    for term in _ylist(required.get("nodeSelectorTerms")):
        keys += [str(_ymap(e).get("key")) for e in _ylist(_ymap(term).get("matchExpressions"))]
    return [k for k in keys if "gpu" in k.lower() or "accelerator" in k.lower()]


def _node_is_gpu(node: Document) -> bool:
    status = _ymap(node.data.get("status"))
    resources = [str(k) for part in ("capacity", "allocatable") for k in _ymap(status.get(part))]
    labels = [str(k) for k in _ymap(node.metadata.get("labels"))]
    taints = [str(_ymap(t).get("key")) for t in _ylist(_ymap(node.data.get("spec")).get("taints"))]
    return (any(is_gpu_resource(r) for r in resources)
            or any("gpu" in k.lower() or "accelerator" in k.lower() for k in labels + taints))


def _node_selected(wl: Workload, node: Document) -> bool:
    labels = {str(k): str(v) for k, v in _ymap(node.metadata.get("labels")).items()}
    if any(labels.get(str(k)) != str(v) for k, v in _ymap(wl.pod.get("nodeSelector")).items()):
        return False
    required = _ymap(_ymap(_ymap(wl.pod.get("affinity")).get("nodeAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution"))
    terms = [LabelSelector.from_object({"matchExpressions": _ymap(t).get("matchExpressions")})
             for t in _ylist(required.get("nodeSelectorTerms"))]
    return not terms or any(term.matches(labels) for term in terms)


@rule("VQA002", "gpu-toleration-missing", Severity.ERROR,
      "GPU nodes are tainted but the pod template tolerates no GPU taint",
      "add the GPU nodes' taint to spec.template.spec.tolerations "
      "(commonly key nvidia.com/gpu, operator Exists, effect NoSchedule)", pitfall=1)
def _gpu_toleration_missing(ctx: LintContext) -> Iterator[Hit]:
    gpu_nodes = [n for n in ctx.nodes if _node_is_gpu(n)]
    for wl in ctx.vllm_workloads:
        selector_keys = _gpu_selector_keys(wl)
        if wl.gpus == 0 and not selector_keys:
            continue
        raw = _ylist(wl.pod.get("tolerations"))
        tolerations = [Toleration.from_object(t) for t in raw]
        line = raw.line if raw else line_of(wl.template, "spec")
        candidates = [n for n in gpu_nodes if _node_selected(wl, n)]
        if candidates:
            blocked: list[tuple[Document, Taint]] = []
            for node in candidates:
                taints = [Taint.from_object(t) for t in _ylist(_ymap(node.data.get("spec")).get("taints"))]
                missing = [t for t in taints if t.effect in _BLOCKING_EFFECTS
                           and not any(tol.tolerates(t) for tol in tolerations)]
                if not missing:
                    break
                blocked.append((node, missing[0]))
            else:
                node, taint = blocked[0]
                shown = f"{taint.key}={taint.value}:{taint.effect}" if taint.value else f"{taint.key}:{taint.effect}"
                yield Hit(wl.doc, line, f"no GPU node in the input accepts the pod: Node {node.name} has taint "
                                        f"{shown} and the pod template has no toleration for it")
            continue
        if not gpu_nodes and not any(
            (t.operator == "Exists" and not t.key)
            or any(word in f"{t.key} {t.value}".lower() for word in ("gpu", "nvidia", "accelerator"))
            for t in tolerations
        ):  # no Node in the input to say what the taints are: a warning
            what = f"it selects GPU nodes ({selector_keys[0]})" if selector_keys else "it asks for a GPU"
            yield Hit(wl.doc, line, f"{what} but tolerates no GPU taint: GPU node pools are usually tainted "
                                    "(nvidia.com/gpu:NoSchedule) and the pod then stays Pending, unless the cluster "
                                    "adds the toleration itself (the ExtendedResourceToleration admission plugin, as "
                                    "on GKE) or leaves its GPU nodes untainted; lint the Nodes too (kubectl get nodes "
                                    "-o yaml) to know", severity=Severity.WARNING)


def _probe_budget(probe: YMap) -> tuple[int, int, int, int]:
    """(seconds before the probe gives up, initialDelaySeconds, failureThreshold, periodSeconds)."""

    def number(key: str, default: int) -> int:
        value = probe.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else default

    delay = number("initialDelaySeconds", 0)
    threshold, period = number("failureThreshold", 3), number("periodSeconds", 10)
    return delay + threshold * period, delay, threshold, period


@rule("VQA003", "liveness-without-startup-probe", Severity.ERROR,
      "livenessProbe without a startupProbe",
      "add a startupProbe on /health whose failureThreshold x periodSeconds covers the model load "
      "(e.g. 60 x 10 s); liveness only starts after it succeeds", pitfall=2)
def _liveness_without_startup(ctx: LintContext) -> Iterator[Hit]:
    for wl, c in _vllm_containers(ctx):
        liveness = c.spec.get("livenessProbe")
        if not isinstance(liveness, YMap) or "startupProbe" in c.spec:
            continue
        budget, delay, _, _ = _probe_budget(liveness)
        if budget < ctx.options.model_load_seconds:
            message = (f"livenessProbe without a startupProbe: the kubelet restarts the container {budget} s after "
                       f"it starts, while loading the model can take {ctx.options.model_load_seconds} s, so it may "
                       "restart forever and never become ready")
        else:
            message = (f"livenessProbe without a startupProbe: its initialDelaySeconds ({delay} s) guesses the load "
                       "time on every start; a hung server is only restarted after that long")
        yield Hit(wl.doc, c.spec.line_of("livenessProbe"), message, c.name)


@rule("VQA004", "startup-budget-too-short", Severity.ERROR,
      "startupProbe gives up before the model can load",
      "raise startupProbe.failureThreshold (or periodSeconds) so that initialDelaySeconds + "
      "failureThreshold x periodSeconds covers the worst model load (weights download included)", pitfall=2)
def _startup_budget(ctx: LintContext) -> Iterator[Hit]:
    need = ctx.options.model_load_seconds
    for wl, c in _vllm_containers(ctx):
        probe = c.spec.get("startupProbe")
        if not isinstance(probe, YMap):
            continue
        budget, delay, threshold, period = _probe_budget(probe)
        if budget < need:
            yield Hit(wl.doc, c.spec.line_of("startupProbe"),
                      f"startupProbe allows {budget} s (initialDelaySeconds {delay} + failureThreshold {threshold} "
                      f"x periodSeconds {period}) but loading the model can take {need} s: the container is "
                      "killed while loading", c.name)


@rule("VQA005", "readiness-probe-missing", Severity.ERROR,
      "vLLM container without a readinessProbe",
      "add a readinessProbe: httpGet /health on the server port (e.g. periodSeconds 5, failureThreshold 3)", pitfall=2)
def _readiness_missing(ctx: LintContext) -> Iterator[Hit]:
    for wl, c in _vllm_containers(ctx):
        if "readinessProbe" not in c.spec:
            yield Hit(wl.doc, c.spec.line, "no readinessProbe: the pod is Ready as soon as the container starts, "
                                           "so the Service sends it requests and the autoscaler counts it as "
                                           "serving capacity minutes before the model is loaded", c.name)


def _mount_for(c: Container, path: str) -> YMap | None:
    """The volumeMount whose mountPath holds `path` (the longest one). An entry that is no
    mapping (`volumeMounts: ["/cache"]`) mounts nothing: it counts as absent, as every field of
    the wrong type does here."""
    best: YMap | None = None
    for mount in _ylist(c.spec.get("volumeMounts")):
        if not isinstance(mount, YMap):
            continue
        mount_path = str(mount.get("mountPath") or "").rstrip("/") or "/"
        if path == mount_path or path.startswith(mount_path.rstrip("/") + "/"):
            if best is None or len(mount_path) > len(str(best.get("mountPath"))):
                best = mount
    return best


def _shm(wl: Workload, c: Container) -> tuple[YMap | None, YMap]:
    """The container's /dev/shm mount and its volume's emptyDir (empty when none or another kind)."""
    mount = _mount_for(c, "/dev/shm")
    volume = wl.volume(str(mount.get("name"))) if mount is not None else None
    return mount, _ymap(volume.get("emptyDir")) if volume is not None else YMap()


@rule("VQA006", "shm-missing", Severity.ERROR,
      "multi-GPU vLLM without a memory-backed /dev/shm",
      "mount an emptyDir {medium: Memory, sizeLimit: ...} at /dev/shm and raise the memory limit by its size",
      pitfall=3)
def _shm_missing(ctx: LintContext) -> Iterator[Hit]:
    for wl, c in _vllm_containers(ctx):
        if max(c.parallel_gpus, c.gpus) < 2 or wl.pod.get("hostIPC") is True:
            continue
        mount, source = _shm(wl, c)
        if mount is not None and source.get("medium") == "Memory":
            continue
        tp = c.flags.get("--tensor-parallel-size")
        why = f"--tensor-parallel-size {tp}" if c.parallel_gpus >= 2 and tp else f"{max(c.parallel_gpus, c.gpus)} GPUs"
        state = "a /dev/shm that is not memory-backed" if mount is not None else "the container's 64 MiB /dev/shm"
        line = mount.line if mount is not None else line_of(c.spec, "volumeMounts")
        yield Hit(wl.doc, line, f"{why} with {state}: the workers exchange tensors through shared memory, and "
                                "NCCL fails or hangs when it runs out", c.name)


@rule("VQA007", "max-model-len-missing", Severity.WARNING,
      "no explicit --max-model-len",
      "pass --max-model-len (e.g. 32768 for Qwen3-8B) sized to the requests you serve and the KV cache you have",
      pitfall=4)
def _max_model_len_missing(ctx: LintContext) -> Iterator[Hit]:
    for wl, c in _vllm_containers(ctx):
        if c.flags_known and "--max-model-len" not in c.flags and "--config" not in c.flags:
            yield Hit(wl.doc, line_of(c.spec, "args") if "args" in c.spec else line_of(c.spec, "command"),
                      "no --max-model-len: vLLM uses the model's full context length, which sets how many "
                      "sequences fit in the KV cache per replica, and refuses to start when one full-length "
                      "sequence does not fit", c.name)


def _sees_gpus_unallocated(c: Container) -> bool:
    """A container that sees GPUs through NVIDIA_VISIBLE_DEVICES without a GPU of its own."""
    visible = (c.env_literal("NVIDIA_VISIBLE_DEVICES") or "").strip().lower()
    return c.gpus == 0 and "NVIDIA_VISIBLE_DEVICES" in c.env and visible not in ("none", "void")


@rule("VQA008", "gpu-shared", Severity.ERROR,
      "--gpu-memory-utilization while another container shares the GPU",
      "run one vLLM per GPU: give every server its own GPU (its own pod and nvidia.com/gpu limit); "
      "if sharing is deliberate, make the --gpu-memory-utilization of all sharers add up to at most 0.9", pitfall=4)
def _gpu_shared(ctx: LintContext) -> Iterator[Hit]:
    for wl, c in _vllm_containers(ctx):
        if c.gpus == 0:
            continue
        util = c.flags.get("--gpu-memory-utilization") or DEFAULT_GPU_MEMORY_UTILIZATION
        line = line_of(c.spec, "args")
        sharers = [o.name for o in wl.containers if o is not c and _sees_gpus_unallocated(o)]
        shared_resource = sorted(n for n in c.gpu_resources() if n.endswith(".shared"))
        sharing_labels = [k for k in _GPU_SHARING_LABELS if k in _ymap(wl.pod.get("nodeSelector"))]
        if sharers:
            yield Hit(wl.doc, line, f"container {sharers[0]} also uses this pod's GPUs (NVIDIA_VISIBLE_DEVICES) "
                                    f"while vLLM reserves {util} of the GPU memory for itself: one of them runs "
                                    "out of memory", c.name)
        elif shared_resource or sharing_labels:
            how = shared_resource[0] if shared_resource else f"nodeSelector {sharing_labels[0]}"
            yield Hit(wl.doc, line, f"the GPU is time-sliced with other pods ({how}) while vLLM reserves {util} of "
                                    "its memory: the next server on that GPU runs out of memory", c.name)


def _persistent(wl: Workload, volume_name: str) -> tuple[bool, str]:
    """(whether the volume outlives the pod, its source type)."""
    if volume_name in wl.claim_template_names():
        return True, "volumeClaimTemplate"
    volume = wl.volume(volume_name)
    if volume is None:
        return False, "undefined volume"
    source = next((str(k) for k in volume if k != "name"), "unknown")
    if source == "ephemeral":  # a new PVC per pod: persistent only when cloned from a pre-filled source
        spec = _ymap(_ymap(_ymap(volume.get("ephemeral")).get("volumeClaimTemplate")).get("spec"))
        return bool(spec.get("dataSource") or spec.get("dataSourceRef")), source
    return source in _PERSISTENT_SOURCES, source


@rule("VQA009", "model-cache-missing", Severity.WARNING,
      "model weights not cached on a persistent volume",
      "mount a PersistentVolumeClaim (ReadWriteMany, shared by all replicas) and point HF_HOME at it", pitfall=5)
def _model_cache_missing(ctx: LintContext) -> Iterator[Hit]:
    for wl, c in _vllm_containers(ctx):
        model = c.model or ""
        variable: str | None = None
        if model.startswith("/"):
            if _mount_for(c, model) is None:
                continue  # weights baked into the image: pulled with it, never downloaded
            what, path, line = f"the model path {model}", model, line_of(c.spec, "args")
        elif c.flags.get("--download-dir"):
            path = str(c.flags["--download-dir"])
            what, line = f"--download-dir {path}", line_of(c.spec, "args")
        else:
            variable = next((v for v in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME") if v in c.env), None)
            if variable is None:
                what, path = "the default HF_HOME", DEFAULT_HF_HOME
                line = line_of(c.spec, "env") if "env" in c.spec else c.spec.line
            else:
                value = c.env_literal(variable)
                if value is None:
                    continue  # set from a ConfigMap or Secret: cannot tell where it points
                what, path, line = f"{variable}={value}", value, c.env[variable].line
        if not path.startswith("/"):
            continue  # relative to the working directory: cannot tell
        mount = _mount_for(c, path)
        if mount is not None:
            persistent, source = _persistent(wl, str(mount.get("name")))
            if persistent:
                continue
            message = (f"{what} is on volume {mount.get('name')} ({source}), which is gone with the pod: every new "
                       "replica fetches the weights again, adding minutes to each scale-up")
            line = mount.line
        elif variable is None and path == DEFAULT_HF_HOME:
            message = ("no HF_HOME and no model cache volume: every new replica downloads the weights into the "
                       "container's filesystem, adding minutes to each scale-up")
        else:
            message = (f"{what} is on the container's filesystem: every new replica downloads the weights again, "
                       "adding minutes to each scale-up")
        yield Hit(wl.doc, line, message, c.name)


def _redact(token: str) -> str:
    return token[:5] + "..." if len(token) > 5 else "..."


def _token_in(text: str) -> str | None:
    for word in text.replace("=", " ").replace('"', " ").replace("'", " ").split():
        if word.startswith(HF_TOKEN_PREFIX) and len(word) >= 20 and word[3:].isalnum():
            return word
    return None


@rule("VQA010", "hf-token-literal", Severity.ERROR,
      "Hugging Face token written into the manifest (or read from a ConfigMap)",
      "store the token in a Secret and use env[].valueFrom.secretKeyRef; revoke the token that was committed",
      pitfall=5)
def _hf_token_literal(ctx: LintContext) -> Iterator[Hit]:
    for wl in ctx.vllm_workloads:
        for c in wl.all_containers():
            for name, entry in c.env.items():
                source = _ymap(entry.get("valueFrom"))
                if name in HF_TOKEN_VARIABLES and "configMapKeyRef" in source:
                    yield Hit(wl.doc, entry.line, f"env {name} is read from a ConfigMap: a ConfigMap is not a "
                                                  "secret (anyone who can read ConfigMaps, or list them, has the "
                                                  "token)", c.name)
                value = c.env_literal(name)
                if not value:
                    continue
                token = _token_in(value)
                if token or (name in HF_TOKEN_VARIABLES and "$(" not in value):
                    shown = _redact(token or value)
                    yield Hit(wl.doc, entry.line, f"env {name} holds a literal token ({shown}): anyone who can read "
                                                  "the manifest, its repository or the Deployment has it", c.name)
            for key in ("command", "args"):
                items = _ylist(c.spec.get(key))
                for i, item in enumerate(items):
                    token = _token_in(str(item))
                    if token:
                        yield Hit(wl.doc, items.line_of(i), f"{key} holds a literal Hugging Face token "
                                                            f"({_redact(token)})", c.name)


@rule("VQA011", "image-latest", Severity.ERROR,
      "container image not pinned (`:latest` or no tag)",
      "pin a release tag (e.g. vllm/vllm-openai:v0.11.0) or a digest, and upgrade on purpose")
def _image_latest(ctx: LintContext) -> Iterator[Hit]:
    for wl in ctx.vllm_workloads:
        for c in wl.all_containers():
            if not c.image:
                continue
            _, tag, digest = image_reference(c.image)
            if digest is None and tag in (None, "latest"):
                yield Hit(wl.doc, c.spec.line_of("image"),
                          f"image {c.image} is not pinned: a restart or a new node may pull another vLLM version, "
                          "with other flags, defaults and metric names than the ones tested", c.name)


def _hpa_resource_metrics(hpa: Document) -> tuple[list[str], int]:
    """CPU/memory metrics an HPA scales on (autoscaling/v1 and an empty metrics list mean CPU)."""
    spec = _ymap(hpa.data.get("spec"))
    if hpa.api_version == "autoscaling/v1":
        return ["cpu"], spec.line_of("targetCPUUtilizationPercentage") if spec else hpa.line
    metrics = _ylist(spec.get("metrics"))
    if not metrics:
        return ["cpu"], spec.line if spec else hpa.line  # the HPA default: 80 % CPU
    found: list[str] = []
    line = metrics.line
    for i, metric in enumerate(metrics):
        metric = _ymap(metric)
        for key in ("resource", "containerResource"):
            name = str(_ymap(metric.get(key)).get("name") or "")
            if name in ("cpu", "memory"):
                if not found:
                    line = metrics.line_of(i)
                found.append(name)
    return found, line


@rule("VQA012", "hpa-cpu-memory", Severity.ERROR,
      "HorizontalPodAutoscaler scales a vLLM workload on CPU or memory",
      "delete the HPA and list the Deployment in the vllm-queue-autoscaler ConfigMap "
      "(queue depth and KV-cache usage, not CPU, show a vLLM server's load)", pitfall=6)
def _hpa_cpu_memory(ctx: LintContext) -> Iterator[Hit]:
    for hpa in ctx.hpas:
        wl = ctx.workload_of(hpa)
        if wl is None or not wl.is_vllm:
            continue
        metrics, line = _hpa_resource_metrics(hpa)
        if metrics:
            yield Hit(hpa, line, f"it scales {wl.kind} {wl.name} (vLLM) on {' and '.join(dict.fromkeys(metrics))}: "
                                 "a GPU-bound server's CPU and memory stay flat while its queue grows")


@rule("VQA013", "hpa-and-controller", Severity.ERROR,
      "an HPA and vllm-queue-autoscaler both target the same Deployment",
      "delete the HPA (vllm-queue-autoscaler replaces it), or take the Deployment out of the "
      "controller's targets (its targets entry, the labels target_selector matches, its opt-in annotation)", pitfall=6)
def _hpa_and_controller(ctx: LintContext) -> Iterator[Hit]:
    for hpa in ctx.hpas:
        kind, name = ctx.hpa_target(hpa)
        if kind != "Deployment":
            continue
        target = ctx.controller_target(hpa.namespace, name)
        if target is not None:
            spec = _ymap(hpa.data.get("spec"))
            yield Hit(hpa, spec.line_of("scaleTargetRef") if spec else hpa.line,
                      f"it scales Deployment {name}, which vllm-queue-autoscaler also targets ({target.origin}): "
                      "the controller stands aside while an HPA exists, and two scalers would fight over replicas")


_ZERO = (0, "0", "0%")


@rule("VQA014", "max-surge-with-gpu", Severity.ERROR,
      "GPU Deployment rolls out with maxSurge > 0 (or with maxSurge and maxUnavailable both 0)",
      "set strategy.rollingUpdate to maxSurge: 0, maxUnavailable: 1 (replace pods in place, GPU by GPU)", pitfall=7)
def _max_surge_with_gpu(ctx: LintContext) -> Iterator[Hit]:
    for wl in ctx.vllm_workloads:
        if wl.kind != "Deployment" or wl.gpus == 0:
            continue
        strategy = _ymap(wl.spec.get("strategy"))
        if strategy.get("type") == "Recreate":
            continue
        rolling = _ymap(strategy.get("rollingUpdate"))
        surge = rolling.get("maxSurge", "25%")
        if surge in _ZERO and rolling.get("maxUnavailable", "25%") in _ZERO:
            yield Hit(wl.doc, line_of(wl.spec, "strategy", "rollingUpdate", "maxUnavailable"),
                      "maxSurge 0 and maxUnavailable 0: the API server rejects the Deployment (maxUnavailable "
                      "may not be 0 when maxSurge is 0): no pod could ever be replaced")
            continue
        if surge in _ZERO:
            continue
        default = "" if "maxSurge" in rolling else " (the default)"
        line = line_of(wl.spec, "strategy", "rollingUpdate", "maxSurge")
        yield Hit(wl.doc, line, f"maxSurge {surge}{default} with {wl.gpus} GPU(s) per pod: each rollout step needs "
                                "a spare GPU; on a full GPU pool the new pod stays Pending and the rollout stalls")


@rule("VQA015", "replicas-in-managed-manifest", Severity.WARNING,
      "spec.replicas set in the manifest of an autoscaled Deployment",
      "remove spec.replicas from the manifest: the autoscaler owns it, and every kubectl apply would reset it. "
      "If the manifest was applied with client-side kubectl apply, first drop it from the last-applied "
      "annotation (kubectl apply edit-last-applied, or apply server-side): otherwise the next apply "
      "deletes the field and the Deployment goes to 1 replica", pitfall=6)
def _replicas_in_managed(ctx: LintContext) -> Iterator[Hit]:
    for wl in ctx.vllm_workloads:
        if "replicas" not in wl.spec or _live_object(wl.doc):
            continue
        target = ctx.controller_target(wl.namespace, wl.name) if wl.kind == "Deployment" else None
        hpas = ctx.hpas_of(wl)
        if target is None and not hpas:
            continue
        who = "vllm-queue-autoscaler" if target is not None else f"HorizontalPodAutoscaler {hpas[0].name}"
        yield Hit(wl.doc, wl.spec.line_of("replicas"),
                  f"spec.replicas is {wl.spec.get('replicas')} while {who} scales it: every kubectl apply of this "
                  "manifest resets the replica count the autoscaler chose")


@rule("VQA016", "invalid-autoscaler-annotation", Severity.ERROR,
      "a vllm-queue-autoscaler.io/ annotation the controller would ignore",
      "fix the value or the key as the message says: while one policy annotation is invalid the controller "
      "ignores them all and keeps the ConfigMap's policy; an invalid paused does not pause")
def _invalid_annotation(ctx: LintContext) -> Iterator[Hit]:
    for wl in ctx.workloads:
        if wl.kind != "Deployment":
            continue
        annotations = _ymap(wl.doc.metadata.get("annotations"))
        for problem in key_problems({str(k): str(v) for k, v in annotations.items()}):
            key = next((k for k in annotations if problem.startswith(f"{k} =")), None)
            yield Hit(wl.doc, annotations.line_of(key) if key is not None else annotations.line, problem)


@rule("VQA017", "repeated-key", Severity.ERROR,
      "a key written twice in one mapping",
      "keep one entry of the key, with everything both meant (e.g. one envFrom list holding both sources): "
      "kubectl sends only the last, and the API server never sees the first")
def _repeated_key(ctx: LintContext) -> Iterator[Hit]:
    for doc in ctx.documents:
        for path, mapping in _mappings(doc.data, ""):
            for key, first, line in mapping.repeated:
                where = f"{path}.{key}" if path else str(key)
                yield Hit(doc, line, f"{where} is written twice (lines {first} and {line}): kubectl keeps the last "
                                     "and drops the first without a word (kubernetes/kubernetes#99286)")


@rule("VQA018", "gpu-limit-parallel-mismatch", Severity.ERROR,
      "GPU limit differs from the GPUs the vLLM flags use (tensor x pipeline x data parallel size)",
      "set the GPU limit to tensor x pipeline x data parallel size (e.g. --tensor-parallel-size 2 -> 2 GPUs), and "
      "gpus_per_replica in the controller's config to the same number", pitfall=1)
def _gpu_parallel_mismatch(ctx: LintContext) -> Iterator[Hit]:
    for wl, c in _vllm_containers(ctx):
        whole = c.gpu_resources()
        if not c.flags_known:
            continue  # a custom command in the vLLM image: its flags are not read here
        if not whole or c.dra_claims or c.bad_gpu_limits() or not all(str(n).endswith("/gpu") for n in whole):
            continue  # no valid limit (VQA001), DRA, or shared / MIG / other accelerators: no GPU count to compare
        sizes = [c.flags.get(f) for f in ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size")]
        if any(v is not None and _positive_int(v) is None for v in sizes):
            continue  # set from a variable or otherwise unreadable here
        need = 1
        for v in sizes:
            need *= _positive_int(v) or 1
        if c.gpus < need:
            yield Hit(wl.doc, line_of(c.spec, "resources", "limits"),
                      f"GPU limit {c.gpus} for {need} GPUs of parallelism: vLLM cannot start its workers", c.name)
        elif c.gpus > need:
            yield Hit(wl.doc, line_of(c.spec, "resources", "limits"),
                      f"GPU limit {c.gpus} for {need} GPU(s) of parallelism: {c.gpus - need} reserved GPU(s) stay idle "
                      "(and the controller counts each replica's GPUs by gpus_per_replica, not by this limit)", c.name)


@rule("VQA019", "flag-and-value-in-one-item", Severity.ERROR,
      "a vLLM flag and its value in one command/args item",
      'split it into two items ("--max-model-len", "8192") or join them with = ("--max-model-len=8192")')
def _flag_and_value_in_one_item(ctx: LintContext) -> Iterator[Hit]:
    for wl, c in _vllm_containers(ctx):
        command = _ylist(c.spec.get("command"))
        if command and str(command[0]).rsplit("/", 1)[-1] in SHELLS:
            continue  # a shell script: the shell splits it into words
        for key in ("command", "args"):
            items = _ylist(c.spec.get(key))
            for i, item in enumerate(items):
                text = str(item)
                flag = text.split(None, 1)[0] if text.startswith("--") else ""
                if flag and "=" not in flag and len(text.split(None, 1)) == 2:
                    yield Hit(wl.doc, items.line_of(i), f"{key} item {text!r} is one argument, not two: vLLM's "
                                                        f"parser knows no flag {text!r} and refuses to start "
                                                        "(unrecognized arguments)", c.name)


@rule("VQA020", "probe-port-mismatch", Severity.ERROR,
      "a probe checks a port the vLLM server does not listen on",
      "point the probe at the server's port (--port, 8000 by default), by number or by the containerPort's name",
      pitfall=2)
def _probe_port_mismatch(ctx: LintContext) -> Iterator[Hit]:
    for wl, c in _vllm_containers(ctx):
        if not c.flags_known:
            continue  # a custom command in the vLLM image: its port is not read here
        raw = c.flags.get("--port")
        served = _positive_int(raw) if raw is not None else 8000
        if served is None:
            continue  # set from a variable (or unreadable): not read here
        named = {str(_ymap(p).get("name")): _ymap(p).get("containerPort") for p in _ylist(c.spec.get("ports"))}
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            probe = _ymap(c.spec.get(kind))
            action = _ymap(probe.get("httpGet")) or _ymap(probe.get("tcpSocket"))
            port = action.get("port")
            number = named.get(port) if isinstance(port, str) and not port.isdigit() else port
            checked = _positive_int(str(number)) if number is not None else None
            if checked is not None and checked != served:
                yield Hit(wl.doc, line_of(c.spec, kind), f"{kind} checks port {port}"
                                                         + (f" ({checked})" if str(port) != str(checked) else "")
                                                         + f" but vLLM listens on {served}: the probe never passes",
                          c.name)


# What vLLM's own processes need of a container's memory limit besides /dev/shm, at the least:
# the API server, the engine core and one worker per GPU, each a Python process with torch and a
# CUDA context (about a GiB or more each).
SHM_MEMORY_HEADROOM_BYTES = 4 * 2**30


@rule("VQA021", "shm-unbounded", Severity.WARNING,
      "a memory-backed /dev/shm without a sizeLimit, or one that leaves under 4 GiB of the memory limit",
      "give the emptyDir a sizeLimit (e.g. 2Gi, as vLLM's Kubernetes guide does) and keep the memory limit at "
      "least 4 GiB above it (vLLM's own processes live in the same limit)", pitfall=3)
def _shm_unbounded(ctx: LintContext) -> Iterator[Hit]:
    for wl, c in _vllm_containers(ctx):
        mount, source = _shm(wl, c)
        if mount is None or source.get("medium") != "Memory":
            continue  # no memory-backed /dev/shm: VQA006's business when it needs one
        raw = source.get("sizeLimit")
        size = parse_quantity(raw) if raw is not None else 0.0
        memory = parse_quantity(c.resource_limits().get("memory"))
        if raw is not None and size <= 0:
            yield Hit(wl.doc, line_of(source, "sizeLimit"), f"/dev/shm sizeLimit {raw!r} is not a positive quantity "
                                                            "(e.g. 2Gi): the API server refuses it", c.name)
        elif raw is None:
            yield Hit(wl.doc, line_of(source, "medium"), "a memory-backed /dev/shm with no sizeLimit: the tmpfs may "
                                                         "grow to the pod's memory limit (to the node's memory without "
                                                         "one), and what it holds counts against the container's "
                                                         "memory: a full /dev/shm ends in an OOM kill", c.name)
        elif memory > 0 and size + SHM_MEMORY_HEADROOM_BYTES > memory:
            yield Hit(wl.doc, line_of(source, "sizeLimit"), f"/dev/shm sizeLimit {raw} leaves under 4 GiB of the "
                                                            f"memory limit {c.resource_limits().get('memory')} for vLLM "
                                                            "itself: what /dev/shm holds counts against the container's "
                                                            "memory, so the container is OOM-killed before /dev/shm is "
                                                            "full", c.name)


def _blocks_every_eviction(pdb: YMap, replicas: int | None) -> str | None:
    """Why a PodDisruptionBudget spec allows no eviction at all, or None. `replicas`: the
    workload's fixed replica count (None when an autoscaler moves it)."""
    unavailable, available = pdb.get("maxUnavailable"), pdb.get("minAvailable")
    if unavailable in _ZERO:
        return f"maxUnavailable {unavailable}"
    if available == "100%":
        return "minAvailable 100%"
    if replicas is None or isinstance(available, bool):
        return None
    if isinstance(available, int) and available >= replicas:
        return f"minAvailable {available} with {replicas} replica(s)"
    percent = str(available).rstrip("%") if isinstance(available, str) and available.endswith("%") else None
    if percent is not None and percent.isdigit() and math.ceil(int(percent) * replicas / 100) >= replicas:
        # Kubernetes rounds a percentage of minAvailable up
        return f"minAvailable {available} with {replicas} replica(s) (rounded up: {replicas})"
    return None


@rule("VQA022", "pdb-blocks-eviction", Severity.WARNING,
      "a PodDisruptionBudget that lets no pod of a vLLM workload be evicted",
      "allow one disruption (maxUnavailable: 1); to keep capacity through a drain, raise min replicas instead")
def _pdb_blocks_eviction(ctx: LintContext) -> Iterator[Hit]:
    for pdb in (d for d in ctx.documents if d.kind == "PodDisruptionBudget"):
        spec = _ymap(pdb.data.get("spec"))
        raw = spec.get("selector")
        selector = LabelSelector.from_object(_ymap(raw))
        # policy/v1: a null selector selects no pod, an empty one ({}) every pod of the namespace;
        # policy/v1beta1: an empty one selects none
        if not isinstance(raw, YMap) or (selector.is_empty and pdb.data.get("apiVersion") != "policy/v1"):
            continue
        for wl in ctx.vllm_workloads:
            labels = {str(k): str(v) for k, v in _ymap(_ymap(wl.template.get("metadata")).get("labels")).items()}
            if not _same_namespace(pdb.namespace, wl.namespace) or not selector.matches(labels):
                continue
            autoscaled = ctx.hpas_of(wl) or (wl.kind == "Deployment" and ctx.controller_target(wl.namespace, wl.name))
            fixed = wl.spec.get("replicas", 1)
            replicas = None if autoscaled or not isinstance(fixed, int) or isinstance(fixed, bool) else fixed
            why = _blocks_every_eviction(spec, replicas)
            if why is not None:
                key = "maxUnavailable" if "maxUnavailable" in spec else "minAvailable"
                yield Hit(pdb, spec.line_of(key), f"{why} for the pods of {wl.kind} {wl.name}: no pod may be "
                                                  "evicted, so a node drain (a node upgrade, the cluster autoscaler "
                                                  "removing an idle GPU node) waits for ever")


@rule("VQA023", "gpus-per-replica-mismatch", Severity.ERROR,
      "the controller's gpus_per_replica for a Deployment differs from the GPUs its pods ask for",
      "set gpus_per_replica (the targets entry, defaults, or the Deployment's vllm-queue-autoscaler.io/gpus_per_replica "
      "annotation) to the pod's GPU limit", pitfall=1)
def _gpus_per_replica_mismatch(ctx: LintContext) -> Iterator[Hit]:
    for wl in ctx.vllm_workloads:
        target = ctx.controller_target(wl.namespace, wl.name) if wl.kind == "Deployment" else None
        gpus = pod_spec_gpus(wl.pod)  # what the controller counts: nvidia.com/gpu, init containers too
        if target is None or gpus == 0 or any(c.bad_gpu_limits() for c in wl.containers):
            continue  # not ours, no nvidia.com/gpu (other accelerators: the controller counts none), or VQA001's
        said, where = target.gpus_per_replica, target.origin
        annotated = wl.annotations.get(POLICY_PREFIX + "gpus_per_replica")
        honoured = target.annotation_keys is None or "gpus_per_replica" in target.annotation_keys
        if annotated is not None and honoured:  # else the controller ignores it (annotation_keys)
            said, where = _positive_int(annotated), f"its {POLICY_PREFIX}gpus_per_replica annotation"
        if said is not None and said != gpus:
            yield Hit(wl.doc, wl.doc.line, f"gpus_per_replica is {said} ({where}) but each pod asks for {gpus} "
                                           "GPU(s): the controller's GPU budget (max_gpus) and its check for a free "
                                           "GPU (the lead time with or without a new node) count the wrong number")


def _positive_int(value: str | None) -> int | None:
    try:
        n = int(str(value))
    except ValueError:
        return None
    return n if n >= 1 else None


def _mappings(node: Any, path: str) -> Iterator[tuple[str, YMap]]:
    """Every mapping under `node` (itself included), with its path (`spec.containers[0]`)."""
    if isinstance(node, YMap):
        yield path, node
        for key, value in node.items():
            yield from _mappings(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, YList):
        for i, item in enumerate(node):
            yield from _mappings(item, f"{path}[{i}]")


def _live_object(doc: Document) -> bool:
    """An object read from a cluster (`kubectl get -o yaml`), not a manifest: the API server
    always fills in spec.replicas there."""
    return "status" in doc.data or any(k in doc.metadata for k in ("uid", "resourceVersion", "creationTimestamp"))


# --------------------------------------------------------------------------- running


def _ignored_by_annotation(doc: Document) -> set[str]:
    value = _ymap(doc.metadata.get("annotations")).get(LINT_IGNORE_ANNOTATION)
    return {part.strip() for part in str(value or "").split(",") if part.strip()}


def lint(documents: Sequence[Document], options: LintOptions | None = None) -> tuple[list[Finding], LintContext]:
    """Run every rule over `documents`; findings sorted by file and line, without duplicates."""
    options = options or LintOptions()
    ctx = LintContext(documents, options)
    ignored = {r.id for key in options.ignore if (r := resolve_rule(key)) is not None}
    findings: dict[Finding, None] = {}
    for r in RULES:
        if r.id in ignored:
            continue
        for hit in r.check(ctx):
            skip = {x.id for key in _ignored_by_annotation(hit.obj) if (x := resolve_rule(key)) is not None}
            if r.id in skip:
                continue
            finding = Finding(
                rule=r.id, name=r.name, severity=hit.severity or r.severity,
                obj=ObjectRef(hit.obj.kind, hit.obj.name, hit.obj.namespace),
                file=hit.obj.source, line=hit.line, message=hit.message, fix=r.fix, container=hit.container,
            )
            findings[finding] = None
    return sorted(findings, key=lambda f: f.sort_key), ctx
