"""Which committed version of the protocol a published sweep ran, and whether it defines the same
evaluation as another: shared by replace_policy.py, summary.py and slo_defaults.py. A protocol may
change where it does not define the experiment (`NOT_THE_EXPERIMENT`: the tuning traces and seeds,
comments) without making the published sweeps stale."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]

PROTOCOL = "simulations/preregistered.yaml"
NOT_THE_EXPERIMENT = ("tuning", "tuning_seeds")
"""Protocol keys that do not change an evaluation run (which traces and seeds defaults may be tuned on)."""


def protocol_texts_in_history(path: str = PROTOCOL) -> dict[str, str]:
    """Every committed version of the protocol file, by the sha256 of its bytes (git history)."""
    revs = subprocess.run(["git", "log", "--format=%H", "--", path], cwd=REPO, check=True,
                          capture_output=True, text=True).stdout.split()
    out: dict[str, str] = {}
    for rev in revs:
        blob = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=REPO, capture_output=True).stdout
        out.setdefault(hashlib.sha256(blob).hexdigest(), blob.decode())
    return out


def is_current(published_sha: str, current_sha: str) -> bool:
    """Whether a sweep of protocol `published_sha` defines the evaluation that `current_sha` does
    (the protocol file now, or another sweep's): the same file, or one changed only outside the
    experiment. Reads the git history only when the two differ; without it (a tarball, a shallow
    clone), a different file is not the same experiment."""
    if published_sha == current_sha:
        return True
    try:
        texts = protocol_texts_in_history()
    except (OSError, subprocess.CalledProcessError):
        return False
    return same_experiment(published_sha, current_sha, texts)


def same_experiment(published_sha: str, fresh_sha: str, texts: dict[str, str]) -> bool:
    """Whether two protocol versions define the same evaluation: equal after dropping the keys of
    NOT_THE_EXPERIMENT (comments never count: YAML drops them). Unknown versions are not the same."""
    if published_sha == fresh_sha:
        return True
    if published_sha not in texts or fresh_sha not in texts:
        return False

    def experiment(sha: str) -> Any:
        raw = yaml.safe_load(texts[sha])
        return {k: v for k, v in raw.items() if k not in NOT_THE_EXPERIMENT} if isinstance(raw, dict) else raw

    return bool(experiment(published_sha) == experiment(fresh_sha))


