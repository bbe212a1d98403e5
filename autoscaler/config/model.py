"""The typed ConfigMap document: controller settings, policy defaults and targets, every policy key
generated from `PolicyParams` (same types, same ranges)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from autoscaler.config.messages import (
    _fmt_number,
    _fmt_value,
    _problem_lines,
    _Problems,
)
from autoscaler.policy.params import PolicyParams, SloParams

_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)
"""Every model of the document: unknown keys are errors, no silent coercion (`"5"`, `true` and
`2.0` are not integers), immutable once loaded."""


# --- Kubernetes names ----------------------------------------------------------------------------

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _dns_label(value: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.fullmatch(value):
        raise PydanticCustomError(
            "dns1123_label",
            "must be a DNS-1123 label (lowercase a-z, 0-9 and '-', alphanumeric at both ends, "
            "at most 63 characters)",
        )
    return value


def _dns_subdomain(value: str) -> str:
    if not is_dns_subdomain(value):
        raise PydanticCustomError(
            "dns1123_subdomain",
            "must be a DNS-1123 subdomain (lowercase a-z, 0-9, '-' and '.', alphanumeric at both ends, "
            "at most 253 characters)",
        )
    return value


def is_dns_subdomain(value: str) -> bool:
    """A valid name of most Kubernetes objects (a Lease, a ConfigMap): a DNS-1123 subdomain."""
    return len(value) <= 253 and _DNS_SUBDOMAIN.fullmatch(value) is not None


def _absolute_path(value: str | None) -> str | None:
    if value is not None and not os.path.isabs(value):
        raise PydanticCustomError("absolute_path", "must be an absolute path (or null)")
    return value


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
DnsSubdomain = Annotated[str, AfterValidator(_dns_subdomain)]
AbsolutePath = Annotated[str | None, AfterValidator(_absolute_path)]


# --- controller settings ------------------------------------------------------------------------


class PrometheusSettings(BaseModel):
    """Where and how the controller queries Prometheus."""

    model_config = _STRICT

    url: str = Field(
        default="http://prometheus-operated.monitoring.svc:9090",
        description="Base URL of the Prometheus HTTP API (http:// or https://).",
    )
    timeout_seconds: float = Field(default=5.0, gt=0.0, le=300.0, description="Timeout of one query.")
    bearer_token_file: AbsolutePath = Field(
        default=None, description="File holding a bearer token (the token itself is never in the ConfigMap)."
    )
    ca_file: AbsolutePath = Field(default=None, description="PEM CA bundle to verify an https:// Prometheus.")
    insecure_skip_tls_verify: bool = Field(default=False, description="Do not verify Prometheus' certificate.")
    rate_window_seconds: int = Field(
        default=60, ge=2, le=3600,
        description="Window of rate(vllm:request_success_total[...]), the per-pod throughput; >= 4 scrape intervals.",
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not re.fullmatch(r"https?://[^\s/?#]+(/[^\s]*)?", value) or not _parses_as_url(value):
            raise PydanticCustomError("http_url", "must be an http:// or https:// URL")
        return value


def _parses_as_url(value: str) -> bool:
    """The URL's host and port are well formed (urllib's own check, as the client will read it):
    `http://[::1` (an unclosed bracket) or `http://h:99999` are not."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
        _ = parts.port  # ValueError on a port out of range or not a number
    except ValueError:
        return False
    return bool(parts.hostname)


def _policy_key(value: str) -> str:
    if value not in POLICY_KEYS:
        raise PydanticCustomError(
            "policy_key", "must be a policy key (a key of `defaults`, a nested one dotted: max_replicas, slo.ttft_seconds)"
        )
    return value


PolicyKey = Annotated[str, AfterValidator(_policy_key)]


class ControllerSettings(BaseModel):
    """How the controller itself runs (not how it scales: that is `PolicyParams`)."""

    model_config = _STRICT

    tick_seconds: float = Field(
        default=15.0, ge=1.0, le=3600.0, description="One decision round per target every tick."
    )
    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings)
    metrics_port: int = Field(default=9102, ge=1, le=65535, description="Port of /metrics, /healthz and /readyz.")
    state_configmap: DnsSubdomain = Field(
        default="vllm-queue-autoscaler-state", description="ConfigMap where learned lead times are kept."
    )
    namespace: DnsLabel = Field(
        default="vllm-queue-autoscaler",
        description="The controller's own namespace (env POD_NAMESPACE overrides it at runtime).",
    )
    annotation_keys: list[PolicyKey] | None = Field(
        default=None,
        description="Policy keys a Deployment's vllm-queue-autoscaler.io/<key> annotations may set; "
        "null = every key, [] = none (pausing is always allowed).",
    )

    @field_validator("prometheus", mode="before")
    @classmethod
    def _null_is_empty(cls, value: object) -> object:
        return {} if value is None else value

    @model_validator(mode="after")
    def _timeout_within_tick(self) -> ControllerSettings:
        if self.prometheus.timeout_seconds > self.tick_seconds:
            raise ValueError(
                f"prometheus.timeout_seconds = {_fmt_number(self.prometheus.timeout_seconds)}, "
                f"must be <= tick_seconds ({_fmt_number(self.tick_seconds)})"
            )
        return self


# --- policy overrides, generated from PolicyParams -----------------------------------------------


def _set_keys(model: BaseModel, order: type[BaseModel]) -> dict[str, Any]:
    """The keys of `order` that `model` sets (an explicit `null` counts), in `order`'s field order;
    a nested section (`slo`) as the dict of its own set keys, left out when it sets none."""
    out: dict[str, Any] = {}
    for name, info in order.model_fields.items():
        if name not in model.model_fields_set:
            continue
        value = getattr(model, name)
        nested = _nested_params(info)
        if nested is not None:
            value = _set_keys(value, nested) if isinstance(value, BaseModel) else {}
            if not value:
                continue
        out[name] = value
    return out


def _nested_params(info: FieldInfo) -> type[BaseModel] | None:
    """The model of a nested section of `PolicyParams` (`slo: SloParams`), else None."""
    annotation = info.annotation
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def merge_policy(defaults: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """`defaults` < `overrides`, key by key; a nested section (`slo`) is merged per key too, so a
    target that sets `slo.ttft_seconds` keeps the other `slo` keys of `defaults`."""
    merged = dict(defaults)
    for key, value in overrides.items():
        below = merged.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            merged[key] = merge_policy(below, value)
        else:
            merged[key] = value
    return merged


class _SectionOverridesBase(BaseModel):
    """Any subset of the keys of a nested section of `PolicyParams` (`slo`)."""

    model_config = _STRICT


class _PolicyOverridesBase(BaseModel):
    model_config = _STRICT

    def as_dict(self) -> dict[str, Any]:
        """The policy keys the document sets, in `PolicyParams` order (an explicit `null` counts);
        a nested section as the dict of the keys it sets (`{"slo": {"ttft_seconds": 1.0}}`)."""
        return _set_keys(self, PolicyParams)


class _TargetConfigBase(BaseModel):
    model_config = _STRICT

    namespace: DnsLabel = Field(description="Namespace of the vLLM Deployment.")
    deployment: DnsSubdomain = Field(description="Name of the vLLM Deployment.")

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.deployment)

    @property
    def name(self) -> str:
        return f"{self.namespace}/{self.deployment}"

    def overrides(self) -> dict[str, Any]:
        """The policy keys this target sets, in `PolicyParams` order (nested sections as in
        `PolicyOverrides.as_dict`)."""
        return _set_keys(self, PolicyParams)


def _null_is_empty(value: object) -> object:
    # A nested section whose keys are all commented out is YAML null: it sets nothing.
    return {} if value is None else value


_SECTION_OVERRIDES: dict[type[BaseModel], type[BaseModel]] = {}


def section_overrides(params: type[BaseModel]) -> type[BaseModel]:
    """The overrides model of a nested section of `PolicyParams` (`SloParams` -> `SloOverrides`):
    its keys, each optional, same types and ranges."""
    if params not in _SECTION_OVERRIDES:
        name = params.__name__.removesuffix("Params") + "Overrides"
        _SECTION_OVERRIDES[params] = create_model(
            name,
            __base__=_SectionOverridesBase,
            __doc__=f"Any subset of the {params.__name__} keys, each validated like {params.__name__} does.",
            **_optional_fields(params),
        )
    return _SECTION_OVERRIDES[params]


def _optional_fields(params: type[BaseModel]) -> dict[str, Any]:
    """Every field of `params` with its type and constraints, but not required (unset = inherit);
    a nested section becomes a mapping of its own optional keys (null = sets nothing)."""
    fields: dict[str, Any] = {}
    for name, info in params.model_fields.items():
        nested = _nested_params(info)
        annotation: Any
        if nested is not None:
            annotation = Annotated[section_overrides(nested), BeforeValidator(_null_is_empty)]
        else:
            annotation = info.annotation
            if info.metadata:
                annotation = Annotated[(annotation, *info.metadata)]
        fields[name] = (annotation, Field(None, description=info.description))
    return fields


def _nested_sections() -> tuple[tuple[str, type[BaseModel]], ...]:
    """`("defaults.slo or a target's slo", SloOverrides)`, ...: where the keys of nested sections stand."""
    return tuple(
        (f"defaults.{name} or a target's {name}", section_overrides(nested))
        for name, info in PolicyParams.model_fields.items()
        if (nested := _nested_params(info)) is not None
    )


if TYPE_CHECKING:
    PolicyOverrides = _PolicyOverridesBase
    TargetConfig = _TargetConfigBase
    SloOverrides = _SectionOverridesBase
else:
    PolicyOverrides = create_model(
        "PolicyOverrides",
        __base__=_PolicyOverridesBase,
        __doc__="Any subset of the PolicyParams keys, each validated like PolicyParams does.",
        **_optional_fields(PolicyParams),
    )
    TargetConfig = create_model(
        "TargetConfig",
        __base__=_TargetConfigBase,
        __doc__="One vLLM Deployment to autoscale, with optional overrides of any PolicyParams key.",
        **_optional_fields(PolicyParams),
    )
    SloOverrides = section_overrides(SloParams)


# --- discovery by label ----------------------------------------------------------------------------

_LABEL_NAME = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?)")


def _label_key(value: str) -> str:
    prefix, slash, name = value.rpartition("/")
    if (len(name) > 63 or not _LABEL_NAME.fullmatch(name)
            or (slash and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)))):
        raise PydanticCustomError(
            "label_key",
            "must be a label key ([prefix/]name: a name of at most 63 characters a-z, A-Z, 0-9, '-', '_', '.', "
            "alphanumeric at both ends; an optional DNS subdomain prefix)",
        )
    return value


def _label_value(value: str) -> str:
    if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        raise PydanticCustomError(
            "label_value",
            "must be a label value (at most 63 characters a-z, A-Z, 0-9, '-', '_', '.', alphanumeric at both "
            "ends, or empty)",
        )
    return value


LabelKey = Annotated[str, AfterValidator(_label_key)]
LabelValue = Annotated[str, AfterValidator(_label_value)]

SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


class LabelRequirement(BaseModel):
    """One `matchExpressions` item of a Kubernetes label selector."""

    model_config = _STRICT

    key: LabelKey = Field(description="The label key.")
    operator: str = Field(description="In, NotIn, Exists or DoesNotExist.")
    values: list[LabelValue] = Field(
        default_factory=list, description="Non-empty for In and NotIn, empty for Exists and DoesNotExist."
    )

    @field_validator("operator")
    @classmethod
    def _known_operator(cls, value: str) -> str:
        if value not in SELECTOR_OPERATORS:
            raise PydanticCustomError("operator", "must be one of " + ", ".join(SELECTOR_OPERATORS))
        return value

    @model_validator(mode="after")
    def _values_fit_operator(self) -> LabelRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"values = [], must be non-empty for operator {self.operator}")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"values = {_fmt_value(self.values)}, must be empty for operator {self.operator}")
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if self.operator == "In":
            return present and labels[self.key] in self.values
        return not present or labels[self.key] not in self.values  # NotIn


class TargetSelector(BaseModel):
    """Deployments to autoscale found by their labels, beside the explicit `targets` (Kubernetes
    label-selector semantics: every `match_labels` pair and every `match_expressions` item must
    hold). A Deployment both listed and selected is the listed target."""

    model_config = _STRICT

    namespaces: list[DnsLabel] = Field(
        default_factory=list,
        description="Namespaces to look in; [] = every namespace the controller may list.",
    )
    match_labels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict, description="Labels a Deployment must carry, with these values."
    )
    match_expressions: list[LabelRequirement] = Field(
        default_factory=list, description="Further requirements: key, operator (In, NotIn, Exists, DoesNotExist), values."
    )

    @model_validator(mode="after")
    def _selects_something(self) -> TargetSelector:
        if not self.match_labels and not self.match_expressions:
            raise ValueError(
                "match_labels = {}, must hold at least one label (or match_expressions one requirement): "
                "an empty selector would take every Deployment"
            )
        return self

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if self.namespaces and namespace not in self.namespaces:
            return False
        if any(labels.get(key) != value for key, value in self.match_labels.items()):
            return False
        return all(requirement.matches(labels) for requirement in self.match_expressions)

    def to_string(self) -> str:
        """The selector in `kubectl get -l` syntax."""
        parts = [f"{k}={v}" for k, v in self.match_labels.items()]
        for r in self.match_expressions:
            if r.operator in ("In", "NotIn"):
                parts.append(f"{r.key} {r.operator.lower()} ({','.join(r.values)})")
            else:
                parts.append(r.key if r.operator == "Exists" else f"!{r.key}")
        return ",".join(parts)


# --- the document --------------------------------------------------------------------------------


def _flat_keys(data: Mapping[str, Any], prefix: str = "") -> set[str]:
    """The dotted keys of a (nested) mapping: `{"slo": {"ttft_seconds": 1}}` -> `{"slo.ttft_seconds"}`."""
    out: set[str] = set()
    for key, value in data.items():
        if isinstance(value, Mapping):
            out |= _flat_keys(value, f"{prefix}{key}.")
        else:
            out.add(f"{prefix}{key}")
    return out


BUILTIN = "builtin"
CONFIGMAP_DEFAULTS = "configmap-defaults"
CONFIGMAP_TARGET = "configmap-target"
"""Where a policy value comes from in this document (and `annotation`: autoscaler.config.annotations)."""

POLICY_KEYS: tuple[str, ...] = tuple(
    f"{name}.{sub}" if nested is not None else name
    for name, info in PolicyParams.model_fields.items()
    for nested in (_nested_params(info),)
    for sub in (nested.model_fields if nested is not None else ("",))
)
"""Every policy key, a nested section's dotted (`slo.ttft_seconds`), in PolicyParams order."""


class AutoscalerConfig(BaseModel):
    """The whole ConfigMap document. Constructing one validates every target's effective policy."""

    model_config = _STRICT

    controller: ControllerSettings = Field(default_factory=ControllerSettings)
    defaults: PolicyOverrides = Field(default_factory=PolicyOverrides)
    targets: list[TargetConfig] = Field(description="Deployments to autoscale; [] = idle.")
    target_selector: TargetSelector | None = Field(
        default=None,
        description="Also autoscale the Deployments with these labels, with the `defaults` policy; null = none.",
    )

    _policies: dict[tuple[str, str], PolicyParams] = PrivateAttr(default_factory=dict)
    _defaults_policy: PolicyParams | None = PrivateAttr(default=None)
    _by_key: dict[tuple[str, str], TargetConfig] = PrivateAttr(default_factory=dict)
    _sources: dict[tuple[str, str], dict[str, str]] = PrivateAttr(default_factory=dict)

    key_sections: ClassVar[tuple[tuple[str, type[BaseModel]], ...]] = (
        ("controller", ControllerSettings),
        ("controller.prometheus", PrometheusSettings),
        ("defaults or a target", PolicyOverrides),
        *_nested_sections(),
        ("target_selector", TargetSelector),
    )
    """Where each key may stand: an unknown key's message names the section it belongs under."""

    @field_validator("controller", "defaults", mode="before")
    @classmethod
    def _null_is_empty(cls, value: object) -> object:
        # A section whose keys are all commented out is YAML null: treat it as empty.
        return {} if value is None else value

    @field_validator("targets", mode="before")
    @classmethod
    def _null_is_no_targets(cls, value: object) -> object:
        return [] if value is None else value

    @model_validator(mode="after")
    def _effective_policies(self) -> AutoscalerConfig:
        problems: list[str] = []
        first_index: dict[tuple[str, str], int] = {}
        defaults = self.defaults.as_dict()
        for i, target in enumerate(self.targets):
            where = f"targets[{i}]"
            if target.key in first_index:
                problems.append(
                    f"{where} = {target.name}, must be unique (namespace, deployment), "
                    f"already at targets[{first_index[target.key]}]"
                )
                continue
            first_index[target.key] = i
            self._by_key[target.key] = target
            try:
                self._policies[target.key] = PolicyParams.model_validate(merge_policy(defaults, target.overrides()))
            except ValidationError as exc:
                for line in _problem_lines(exc.errors(), root=PolicyParams):
                    problems.append(f"{where}.{line} in the effective policy of {target.name}")
        if self.target_selector is not None:
            try:
                self._defaults_policy = PolicyParams.model_validate(defaults)
            except ValidationError as exc:
                for line in _problem_lines(exc.errors(), root=PolicyParams):
                    problems.append(f"defaults.{line} in the effective policy of the Deployments target_selector finds")
        if problems:
            raise _Problems(problems)
        return self

    def base_policy(self, target: TargetConfig) -> PolicyParams:
        """The policy of a target before its Deployment's annotations: a listed target's effective
        policy, else (a Deployment `target_selector` found) `defaults` over the built-in values."""
        policy = self._policies.get(target.key)
        if policy is not None:
            return policy
        if self._defaults_policy is None:
            self._defaults_policy = PolicyParams.model_validate(self.defaults.as_dict())
        return self._defaults_policy

    def policy_for(self, target: TargetConfig) -> PolicyParams:
        """The effective policy of one of this config's targets (`defaults` merged with its overrides)."""
        try:
            return self._policies[target.key]
        except KeyError:
            raise KeyError(f"{target.name} is not a target of this config") from None

    def effective_policies(self) -> Iterator[tuple[TargetConfig, PolicyParams]]:
        """Every target, in document order, with its effective policy."""
        for target in self.targets:
            yield target, self._policies[target.key]

    def targets_with(self, deployments: Iterable[tuple[str, str, Mapping[str, str]]]) -> list[TargetConfig]:
        """The listed `targets`, then the Deployments among `deployments` (namespace, name,
        labels) that `target_selector` matches and that are not listed, sorted by namespace and
        name: the targets of one tick."""
        targets = list(self.targets)
        if self.target_selector is None:
            return targets
        listed = {t.key for t in targets}
        found: dict[tuple[str, str], TargetConfig] = {}
        for namespace, name, labels in deployments:
            key = (namespace, name)
            if key in listed or key in found or not self.target_selector.matches(namespace, labels):
                continue
            try:
                found[key] = TargetConfig.model_validate({"namespace": namespace, "deployment": name})
            except ValidationError:  # not a name the API server accepts: not a real Deployment
                continue
        return targets + [found[key] for key in sorted(found)]

    def namespaces_to_list(self) -> list[str]:
        """The namespaces one tick lists: those of the listed targets and of `target_selector`;
        [] = every namespace (a selector without namespaces)."""
        namespaces = {t.namespace for t in self.targets}
        if self.target_selector is not None:
            if not self.target_selector.namespaces:
                return []
            namespaces.update(self.target_selector.namespaces)
        return sorted(namespaces)

    def find_target(self, namespace: str, deployment: str) -> TargetConfig | None:
        return self._by_key.get((namespace, deployment))

    def configmap_sources(self, target: TargetConfig) -> dict[str, str]:
        """Every policy key (`slo.ttft_seconds` dotted, in PolicyParams order) -> where this
        document takes its value from for `target`: `configmap-target` (its entry),
        `configmap-defaults` or `builtin`. Computed once per target (the document is immutable)."""
        cached = self._sources.get(target.key)
        if cached is None:
            listed = self.find_target(*target.key)
            entry = _flat_keys(listed.overrides()) if listed is not None else set()
            defaults = _flat_keys(self.defaults.as_dict())
            cached = {key: CONFIGMAP_TARGET if key in entry else CONFIGMAP_DEFAULTS if key in defaults
                      else BUILTIN for key in POLICY_KEYS}
            self._sources[target.key] = cached
        return dict(cached)

    def warnings(self) -> list[str]:
        """Valid but probably unintended settings, one line each (the config is still used)."""
        notes: list[str] = []
        if not self.targets and self.target_selector is None:
            notes.append("targets = [], no targets: the controller runs but scales nothing")
        prom = self.controller.prometheus
        if prom.insecure_skip_tls_verify and prom.ca_file is not None:
            notes.append(
                "controller.prometheus.ca_file = "
                f"{_fmt_value(prom.ca_file)}, ignored because insecure_skip_tls_verify is true"
            )
        return notes
