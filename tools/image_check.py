"""Run the Dockerfile's steps without Docker (`make image-check`): what `make image` would build,
checked on this machine, which has no Docker engine.

    python tools/image_check.py              # every RUN of both stages, then the checks below
    python tools/image_check.py --keep DIR   # the same in DIR, left there afterwards

Each stage's RUN commands run as the Dockerfile has them (`sh -c`, its WORKDIR, its ENV), in
a scratch directory standing in for the image's root: every absolute path a step names (/opt,
/src, /wheels, ...) is moved under it, and a path outside those is refused. COPY copies from
this repository what the Dockerfile names, refusing a file .dockerignore keeps out of the build
context; `COPY --from=build` finds the build stage's files where it left them. `python` is this
machine's Python (the one running this script, or --python): the same minor version as the
bases (3.11), not their exact build, libraries or glibc; the bases themselves are not pulled.

Then, beyond the Dockerfile's own checks: the wheel carries the shared library of the mypyc
build (autoscaler_policy__mypyc.*.so) and an extension for each module setup.py compiles; the
runtime virtualenv has none of the build tools (mypy, mypyc, librt, ...); and
tests/policy/test_compiled.py passes against that install (pytest added to it for the purpose,
after the other checks), not skipped: the compiled decision core decides as the pure one.
Needs a C compiler, the Python headers and the package index (1.5-2 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from dockerfile_parse import DockerfileParser  # type: ignore[import-untyped]

REPO = Path(__file__).resolve().parent.parent
# Where the image's steps write: moved under the scratch root. Any other absolute path in a step
# is refused (it would read or write this machine's own files).
MAPPED = ("/opt", "/src", "/wheels", "/usr/share/doc")
ABSOLUTE = re.compile(r"(?<![\w.~$-])/[A-Za-z0-9_.*-]+(?:/[A-Za-z0-9_.*-]+)*")
BUILD_TOOLS = ("mypy", "mypyc", "librt", "mypy_extensions", "ast_serialize")


class StepFailed(Exception):
    """A step of the Dockerfile that failed, or that this script cannot stand in for."""


@dataclass
class Stage:
    name: str
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"


def instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of each instruction, as dockerfile-parse reads them (continuations
    joined, comments and parser directives dropped)."""
    parser = DockerfileParser(fileobj=io.BytesIO(dockerfile.encode()))
    return [(d["instruction"], d["value"]) for d in parser.structure if d["instruction"] != "COMMENT"]


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore keeps `path` (relative) out of the build context: the last pattern
    matching it or one of its parent directories decides, `!` re-includes."""
    parts = path.strip("/").split("/")
    candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    out = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        glob = pattern[3:] if pattern.startswith("**/") else pattern
        if any(fnmatch.fnmatchcase(c, pattern) or (glob != pattern and fnmatch.fnmatchcase(c.rsplit("/", 1)[-1], glob))
               for c in candidates):
            out = not negate
    return out


class Runner:
    """Runs a Dockerfile's instructions under `root` with `python` as the image's Python."""

    def __init__(self, repo: Path, root: Path, python: str, log: bool = True) -> None:
        self.repo, self.root, self.log = repo, root, log
        self.shims = root / ".shims"
        self.shims.mkdir(parents=True, exist_ok=True)
        for name in ("python", "python3"):  # a script, not a link: a virtualenv made by it names `python`'s home
            (self.shims / name).write_text(f'#!/bin/sh\nexec "{python}" "$@"\n')
            (self.shims / name).chmod(0o755)
        patterns = (repo / ".dockerignore").read_text().splitlines() if (repo / ".dockerignore").exists() else []
        self.ignore = [p.strip() for p in patterns if p.strip() and not p.lstrip().startswith("#")]

    def map(self, text: str) -> str:
        """`text` with each absolute path moved under the root; one outside MAPPED refused."""
        def move(m: re.Match[str]) -> str:
            path = m.group(0)
            if not any(path == p or path.startswith(p + "/") for p in MAPPED):
                raise StepFailed(f"{path}: an absolute path outside {', '.join(MAPPED)} (this script would touch this machine's)")
            return str(self.root) + path
        return ABSOLUTE.sub(move, text)

    def run(self, dockerfile: str) -> list[Stage]:
        stages: list[Stage] = []
        for keyword, args in instructions(dockerfile):
            if keyword == "FROM":
                stages.append(Stage(args.split(" AS ")[-1].strip() if " AS " in args else str(len(stages))))
                # the base's PATH: its `python` (this machine's, the shims), then this machine's tools
                stages[-1].env["PATH"] = f"{self.shims}:{os.environ.get('PATH', '/usr/bin:/bin')}"
                self.say(f"stage {stages[-1].name}")
            elif not stages:
                continue  # ARG before the first FROM: the bases, which are not pulled
            elif keyword == "ENV":
                stage = stages[-1]
                for key, value in re.findall(r"(\w+)=(\S+)", args):
                    stage.env[key] = re.sub(r"\$(\w+)|\$\{(\w+)\}",
                                            lambda m: stage.env.get(m.group(1) or m.group(2), ""), self.map(value))
            elif keyword == "WORKDIR":
                stages[-1].workdir = args
                Path(self.map(args)).mkdir(parents=True, exist_ok=True)
            elif keyword == "COPY":
                self.copy(stages, args)
            elif keyword == "RUN":
                self.shell(stages[-1], args)
        return stages

    def copy(self, stages: list[Stage], args: str) -> None:
        *sources, dest = args.split()
        target = Path(self.map(dest if dest.startswith("/") else stages[-1].workdir.rstrip("/") + "/" + dest))
        if sources[0].startswith("--from="):
            for source in sources[1:]:
                if not Path(self.map(source)).exists():
                    raise StepFailed(f"COPY {args}: {source} is not in stage {sources[0][7:]}")
            return  # one root for every stage: it is there already
        for source in sources:
            if ignored(source, self.ignore):
                raise StepFailed(f"COPY {args}: .dockerignore keeps {source} out of the build context")
            src = self.repo / source
            dst = target / src.name if dest.endswith("/") or len(sources) > 1 else target
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dst, dirs_exist_ok=True, ignore=lambda d, names: [
                    n for n in names if ignored(str((Path(d) / n).relative_to(self.repo)), self.ignore)])
            else:
                shutil.copy2(src, dst)

    def shell(self, stage: Stage, command: str) -> None:
        env = {**os.environ, **stage.env}
        started = time.monotonic()
        self.say(f"RUN {command}")
        proc = subprocess.run(["sh", "-c", self.map(command)], cwd=self.map(stage.workdir), env=env)
        if proc.returncode != 0:
            raise StepFailed(f"stage {stage.name}: RUN {command}: exit {proc.returncode}")
        self.say(f"  ok, {time.monotonic() - started:.0f} s")

    def say(self, text: str) -> None:
        if self.log:
            print(f"image-check: {text}", flush=True)


def compiled_modules(repo: Path) -> list[str]:
    """The modules setup.py compiles, as paths inside the wheel without the suffix."""
    text = (repo / "setup.py").read_text()
    start = text.index("COMPILED = [")
    listed: list[str] = ast.literal_eval(text[start + len("COMPILED = "):text.index("]", start) + 1])
    return [p.removesuffix(".py") for p in listed]


def check_wheel(root: Path, repo: Path) -> None:
    (wheel,) = sorted((root / "wheels").glob("*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    so = [n for n in names if n.endswith(".so")]
    missing = [m for m in compiled_modules(repo) if not any(n.startswith(m + ".cpython-") for n in so)]
    if missing or not any(n.startswith("autoscaler_policy__mypyc.") for n in so):
        raise StepFailed(f"{wheel.name}: extensions missing: {missing or 'autoscaler_policy__mypyc'} (has {so})")
    print(f"image-check: {wheel.name}: {len(so)} extensions ({len(so) - 1} modules and autoscaler_policy__mypyc)")


def check_runtime(root: Path, repo: Path) -> None:
    python = str(root / "opt" / "vllm-queue-autoscaler" / "bin" / "python")
    probe = ("import importlib.util as u, autoscaler.policy as p; "
             f"print(len(p.COMPILED_MODULES), [m for m in {BUILD_TOOLS!r} if u.find_spec(m)])")
    out = subprocess.run([python, "-I", "-c", probe], capture_output=True, text=True, check=True).stdout.split(" ", 1)
    if out[1].strip() != "[]":
        raise StepFailed(f"the runtime virtualenv has build tools: {out[1].strip()}")
    print(f"image-check: runtime virtualenv: {out[0]} compiled modules imported, no build tool installed")
    # tests/policy/test_compiled.py against the install: pytest added to it now (the checks above
    # are done), the repository off sys.path (importlib mode, no conftest, started away from it)
    subprocess.run([python, "-m", "pip", "install", "-q", "pytest"], check=True, cwd=root)
    proc = subprocess.run(
        [str(Path(python).parent / "pytest"), "-q", "-rs", "-p", "no:cacheprovider", "--noconftest",
         "--import-mode=importlib", "-c", os.devnull, "--rootdir", str(root),
         str(repo / "tests" / "policy" / "test_compiled.py")],
        cwd=root, capture_output=True, text=True)
    print(proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr)
    if proc.returncode != 0 or "skipped" in proc.stdout:
        raise StepFailed(f"tests/policy/test_compiled.py against the install:\n{proc.stdout}{proc.stderr}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=getattr(sys, "_base_executable", sys.executable),
                        help="the Python standing in for the image's (default: this one's base interpreter)")
    parser.add_argument("--keep", type=Path, help="work in this directory and leave it (default: a temporary one)")
    args = parser.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="image-check-"))
    started = time.monotonic()
    try:
        Runner(REPO, root.resolve(), args.python).run((REPO / "Dockerfile").read_text())
        check_wheel(root.resolve(), REPO)
        check_runtime(root.resolve(), REPO)
    except (StepFailed, subprocess.CalledProcessError) as exc:
        print(f"image-check: FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print(f"image-check: ok, {time.monotonic() - started:.0f} s (the Dockerfile's steps; not a docker build)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
