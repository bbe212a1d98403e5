"""Run the real `autoscaler` command in a subprocess: stdout and stderr are pipes (not a TTY),
as in `autoscaler ... | jq`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRACE = str(REPO / "simulations" / "data" / "azure2023-conv-20min.csv")
RECORDING = str(REPO / "tests" / "fixtures" / "replay" / "hpa-6h.jsonl.gz")
SHIPPED_CONFIG = str(REPO / "config" / "autoscaler.yaml")
VLLM_MANIFESTS = str(REPO / "deploy" / "vllm")


def env() -> dict[str, str]:
    """The environment without what would set a width or a terminal (pipes must not wrap)."""
    drop = {"COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE", "KUBERNETES_SERVICE_HOST"}
    out = {k: v for k, v in os.environ.items() if k not in drop}
    out["PYTHONPATH"] = str(REPO)
    return out


def cli(*args: str, cwd: Path | None = None, prelude: str = "", timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`autoscaler ARGS`; `prelude` is Python run first (e.g. to make an import fail)."""
    code = f"{prelude}\nfrom autoscaler.cli import main\nmain()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                          env=env(), cwd=cwd or REPO)
