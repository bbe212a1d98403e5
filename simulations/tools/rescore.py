"""Recompute the statistics of published sweep documents from their per-seed values, without
running anything (`autoscaler.sim.scoreboard.rescore`): for a change of the statistics alone,
e.g. how the interval of a cost at a target is computed. Writes each document's JSON, Markdown
and plot again, in place.

    python simulations/tools/rescore.py simulations/results/azure-conv.json [...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from autoscaler.sim.scoreboard import publish, rescore


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("documents", type=Path, nargs="+")
    args = ap.parse_args(argv)
    for path in args.documents:
        try:
            doc = rescore(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"rescore: {path}: {exc}", file=sys.stderr)
            return 2
        publish(doc, path)
        print(f"rescored {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
