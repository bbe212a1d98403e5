"""Check the data in a clone against simulations/data/SHA256SUMS: every listed file exists and has
its SHA-256, and every data file under the checked folders is listed. Standard library only, so
it runs before anything is installed. Exit status 0 when all is well, 1 otherwise (one line per
problem on stderr). Usage, from anywhere in a clone:

    python simulations/tools/verify_data.py [--data DIR]

(`cd simulations/data && sha256sum -c SHA256SUMS` checks the same sums without the listing.)
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"
SUMS = "SHA256SUMS"
# Folders whose every file but a README must be listed in SHA256SUMS.
CHECKED_FOLDERS = ("traces", "vllm-perf", "vllm-startup")
NOT_DATA = {"README.md"}


def read_sums(path: Path) -> dict[str, str]:
    """`sha256sum` output: `<64 hex digits><two spaces or space-asterisk><relative path>`."""
    sums: dict[str, str] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        digest, sep, name = line[:64], line[64:66], line[66:]
        if len(digest) != 64 or sep not in ("  ", " *") or not name or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError(f"{path}:{n}: not a sha256sum line: {line!r}")
        sums[name] = digest
    return sums


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def data_files(data: Path) -> list[str]:
    """The files of the checked folders (READMEs excepted), relative to `data`, sorted."""
    return sorted(str(p.relative_to(data)) for folder in CHECKED_FOLDERS for p in (data / folder).rglob("*")
                  if p.is_file() and p.name not in NOT_DATA)


def problems(data: Path) -> list[str]:
    """One line per missing, changed or unlisted file (empty when the data is intact)."""
    sums = read_sums(data / SUMS)
    out: list[str] = []
    for name, digest in sorted(sums.items()):
        path = data / name
        if not path.is_file():
            out.append(f"{name}: listed in {SUMS} but missing")
        elif sha256_of(path) != digest:
            out.append(f"{name}: SHA-256 differs from {SUMS}")
    out.extend(f"{name}: not listed in {SUMS}" for name in data_files(data) if name not in sums)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--data", type=Path, default=DATA, help=f"the data folder (default: {DATA})")
    a = ap.parse_args(argv)
    try:
        found = problems(a.data)
    except (OSError, ValueError) as e:
        print(f"{a.data}: {e}", file=sys.stderr)
        return 1
    for line in found:
        print(line, file=sys.stderr)
    n = len(read_sums(a.data / SUMS))
    print(f"{a.data}: {n} files listed, {len(found)} problem(s)" if found else f"{a.data}: {n} files OK")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
