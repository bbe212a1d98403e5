"""The autoscaler's ConfigMap document: typed, validated and defaulted in this one place.

Shape (YAML)::

    controller:          # how the controller itself runs (ControllerSettings)
      tick_seconds: 15
      prometheus: {url: ..., timeout_seconds: 5, bearer_token_file: null, ...}
      ...
    defaults:            # any subset of PolicyParams keys
      scale_down_window_seconds: 600
      slo: {ttft_seconds: 2, tpot_seconds: 0.1}   # a nested section: any subset of SloParams keys
    targets:             # may be empty: the controller then idles
      - namespace: llm
        deployment: qwen3-8b
        max_replicas: 8  # any PolicyParams key, overriding `defaults` for this target
        slo: {ttft_seconds: 1}   # overrides this key only: tpot_seconds stays 0.1

The policy keys are never listed here: `PolicyOverrides` and `TargetConfig` are generated from the
fields of `PolicyParams` (same types, same ranges), every key optional; a field of `PolicyParams`
that is itself a model (`slo: SloParams`) becomes a nested mapping generated the same way
(`SloOverrides`). The effective policy of a target is
`PolicyParams(**merge_policy(defaults, target overrides))`, validated as a whole: target keys win,
nested sections are merged key by key.

Every problem is reported as one line `key = value, must be ...` where `key` is the dotted path in
the document (`targets[0].max_replicas`); ranges in those lines come from the models' `Field`
constraints, never from text written per key.
"""

from autoscaler.config.load import load_config_file, load_config_stream, load_config_text
from autoscaler.config.messages import ConfigError, format_path
from autoscaler.config.model import (
    AutoscalerConfig,
    ControllerSettings,
    PolicyOverrides,
    PrometheusSettings,
    SloOverrides,
    TargetConfig,
    merge_policy,
)
from autoscaler.config.watch import ConfigWatcher

__all__ = [
    "AutoscalerConfig",
    "ConfigError",
    "ConfigWatcher",
    "ControllerSettings",
    "PolicyOverrides",
    "PrometheusSettings",
    "SloOverrides",
    "TargetConfig",
    "format_path",
    "load_config_file",
    "load_config_stream",
    "load_config_text",
    "merge_policy",
]
