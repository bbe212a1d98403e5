"""The compiled build of the decision core: the image's (Dockerfile), and `make compiled`'s
(docs/scale.md).

Without AUTOSCALER_MYPYC=1 this is the plain pure-Python package that pyproject.toml describes
(the default: a dev checkout, `make test`). With AUTOSCALER_MYPYC=1 the modules of `COMPILED`
are compiled with mypyc (it ships with mypy) into C extensions beside their `.py` files, which
Python then imports instead: `decide()` runs the same code, some 1.5x faster.
`autoscaler.policy.COMPILED_MODULES` says which build is imported.

    AUTOSCALER_MYPYC=1 python setup.py build_ext --inplace     # what `make compiled` runs
    AUTOSCALER_MYPYC=1 pip wheel --no-build-isolation .        # a wheel with the extensions (the image's)

Both need mypy importable, with the package's own dependencies (mypyc type-checks the modules
first: pydantic and its mypy plugin, which pyproject.toml's [tool.mypy] loads), in the Python
that builds: pip's isolated build environment has only setuptools, hence --no-build-isolation;
and a C compiler with the Python headers. The wheel then carries the extensions and the shared
library they need (autoscaler_policy__mypyc.*.so), and needs neither mypy nor anything else at
run time. `make pure` removes the in-place extensions again.

Not compiled: `types.py` and `time_window.py` (the value types: `fast_init` rewrites frozen
dataclasses' `__init__` at run time, `DecisionValues.from_fields` and the lead-time estimate's
cache write an instance's `__dict__`, `TimeWindow` subclasses `tuple`; mypyc's native classes
allow none of that), `params.py` (pydantic models: mypyc cannot compile them, and they are read
once per target a tick) and `__init__.py` (it tells the builds apart).
"""

import os

from setuptools import setup

COMPILED = [
    "autoscaler/policy/capacity_table.py",
    "autoscaler/policy/decide.py",
    "autoscaler/policy/demand.py",
    "autoscaler/policy/forecast.py",
    "autoscaler/policy/headroom.py",
    "autoscaler/policy/health.py",
    "autoscaler/policy/in_flight.py",
    "autoscaler/policy/lead_time.py",
    "autoscaler/policy/limits.py",
    "autoscaler/policy/outcome.py",
    "autoscaler/policy/recommendation.py",
    "autoscaler/policy/rollout.py",
    "autoscaler/policy/sizing.py",
    "autoscaler/policy/slo_capacity.py",
    "autoscaler/policy/slo_series.py",
    "autoscaler/policy/stabilize.py",
    "autoscaler/replay/fast_decode.py",  # the recording reader's fast path (its reference path stays pure)
]

if os.environ.get("AUTOSCALER_MYPYC") == "1":
    try:
        from mypyc.build import mypycify
    except ImportError as exc:  # pip's isolated build environment
        raise SystemExit("AUTOSCALER_MYPYC=1 needs mypy importable: install it and build with "
                         "--no-build-isolation (or run `make compiled`)") from exc
    # One shared library with a fixed name (autoscaler_policy__mypyc.*.so at the root).
    setup(ext_modules=mypycify(COMPILED, opt_level="3", group_name="autoscaler_policy"))
else:
    setup()
