"""The typed ConfigMap document: controller settings, policy defaults and targets, every policy key
generated from `PolicyParams` (same types, same ranges)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from autoscaler.config.messages import (
    _fmt_number,
    _fmt_value,
    _problem_lines,
    _Problems,
)
from autoscaler.policy.params import PolicyParams

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
    if len(value) > 253 or not _DNS_SUBDOMAIN.fullmatch(value):
        raise PydanticCustomError(
            "dns1123_subdomain",
            "must be a DNS-1123 subdomain (lowercase a-z, 0-9, '-' and '.', alphanumeric at both ends, "
            "at most 253 characters)",
        )
    return value


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
        if not re.fullmatch(r"https?://[^\s/?#]+(/[^\s]*)?", value):
            raise PydanticCustomError("http_url", "must be an http:// or https:// URL")
        return value


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


class _PolicyOverridesBase(BaseModel):
    model_config = _STRICT

    def as_dict(self) -> dict[str, Any]:
        """The policy keys the document sets, in `PolicyParams` order (an explicit `null` counts)."""
        return {k: getattr(self, k) for k in PolicyParams.model_fields if k in self.model_fields_set}


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
        """The policy keys this target sets, in `PolicyParams` order."""
        return {k: getattr(self, k) for k in PolicyParams.model_fields if k in self.model_fields_set}


def _optional_policy_fields() -> dict[str, Any]:
    """Every `PolicyParams` field with its type and constraints, but not required (unset = inherit)."""
    fields: dict[str, Any] = {}
    for name, info in PolicyParams.model_fields.items():
        annotation: Any = info.annotation
        if info.metadata:
            annotation = Annotated[(annotation, *info.metadata)]
        fields[name] = (annotation, Field(None, description=info.description))
    return fields


if TYPE_CHECKING:
    PolicyOverrides = _PolicyOverridesBase
    TargetConfig = _TargetConfigBase
else:
    PolicyOverrides = create_model(
        "PolicyOverrides",
        __base__=_PolicyOverridesBase,
        __doc__="Any subset of the PolicyParams keys, each validated like PolicyParams does.",
        **_optional_policy_fields(),
    )
    TargetConfig = create_model(
        "TargetConfig",
        __base__=_TargetConfigBase,
        __doc__="One vLLM Deployment to autoscale, with optional overrides of any PolicyParams key.",
        **_optional_policy_fields(),
    )


# --- the document --------------------------------------------------------------------------------


class AutoscalerConfig(BaseModel):
    """The whole ConfigMap document. Constructing one validates every target's effective policy."""

    model_config = _STRICT

    controller: ControllerSettings = Field(default_factory=ControllerSettings)
    defaults: PolicyOverrides = Field(default_factory=PolicyOverrides)
    targets: list[TargetConfig] = Field(description="Deployments to autoscale; [] = idle.")

    _policies: dict[tuple[str, str], PolicyParams] = PrivateAttr(default_factory=dict)

    key_sections: ClassVar[tuple[tuple[str, type[BaseModel]], ...]] = (
        ("controller", ControllerSettings),
        ("controller.prometheus", PrometheusSettings),
        ("defaults or a target", PolicyOverrides),
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
            try:
                self._policies[target.key] = PolicyParams.model_validate({**defaults, **target.overrides()})
            except ValidationError as exc:
                for line in _problem_lines(exc.errors(), root=PolicyParams):
                    problems.append(f"{where}.{line} in the effective policy of {target.name}")
        if problems:
            raise _Problems(problems)
        return self

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

    def find_target(self, namespace: str, deployment: str) -> TargetConfig | None:
        for target in self.targets:
            if target.key == (namespace, deployment):
                return target
        return None

    def warnings(self) -> list[str]:
        """Valid but probably unintended settings, one line each (the config is still used)."""
        notes: list[str] = []
        if not self.targets:
            notes.append("targets = [], no targets: the controller runs but scales nothing")
        prom = self.controller.prometheus
        if prom.insecure_skip_tls_verify and prom.ca_file is not None:
            notes.append(
                "controller.prometheus.ca_file = "
                f"{_fmt_value(prom.ca_file)}, ignored because insecure_skip_tls_verify is true"
            )
        return notes
