"""The pure decision core. Import `decide` and the value types from here.

`COMPILED_MODULES`: the modules of this package imported from compiled extensions (`make
compiled` builds them with mypyc; docs/scale.md), sorted; empty for the pure-Python default.
Both builds give the same decisions, to the last bit (tests/policy/test_compiled.py).
"""

import sys
from importlib.machinery import EXTENSION_SUFFIXES

from autoscaler.policy.decide import decide
from autoscaler.policy.params import PolicyParams
from autoscaler.policy.types import (
    Clamp,
    Decision,
    DecisionValues,
    LatencyHistogram,
    LeadTimeState,
    MetricSample,
    Observation,
    PodInFlight,
    PodStage,
    PodStartup,
    PolicyState,
    ReadyPod,
    Reason,
    SampleHealth,
    SloState,
)


def _compiled_modules(package: str) -> tuple[str, ...]:
    """The submodules of `package` imported so far whose file is an extension module (every
    module `decide` needs is imported above)."""
    suffixes = tuple(EXTENSION_SUFFIXES)
    return tuple(sorted(
        name for name, module in list(sys.modules.items())
        if name.startswith(package + ".") and str(getattr(module, "__file__", "")).endswith(suffixes)
    ))


COMPILED_MODULES: tuple[str, ...] = _compiled_modules(__name__)

__all__ = [
    "COMPILED_MODULES",
    "Clamp",
    "Decision",
    "DecisionValues",
    "LatencyHistogram",
    "LeadTimeState",
    "MetricSample",
    "Observation",
    "PodInFlight",
    "PodStage",
    "PodStartup",
    "PolicyParams",
    "PolicyState",
    "ReadyPod",
    "Reason",
    "SampleHealth",
    "SloState",
    "decide",
]
