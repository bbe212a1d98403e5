"""Load a script of simulations/tools/ as a module, by path (the tools are scripts, not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parents[2] / "simulations" / "tools"


def load_tool(name: str) -> ModuleType:
    """simulations/tools/NAME.py, registered in sys.modules (its dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod
