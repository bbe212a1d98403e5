"""tools/image_check.py (`make image-check`), which runs the Dockerfile's steps without Docker:
how it stands in for an image build, on a small Dockerfile of shell steps (fast); and that it
can run the real Dockerfile's steps (every path they name is one it moves, every file they copy
one the build context has). The real run, which compiles the decision core and builds the
wheel (1.5-2 min), is `make image-check`, not part of `make test`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("image_check", REPO / "tools" / "image_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["image_check"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


tool = _tool()

SMALL = """\
# syntax=docker/dockerfile:1
ARG BASE=python:3.11@sha256:0000
FROM ${BASE} AS build
ENV GREETING=hello \\
    TOOL_HOME=/opt/tool
WORKDIR /src
COPY data.txt ./
COPY pkg ./pkg
RUN mkdir -p /opt/tool/bin \\
 && printf 'echo "from the tool: $GREETING"\\n' > /opt/tool/bin/python \\
 && chmod +x /opt/tool/bin/python \\
 && cat data.txt pkg/a.txt > $TOOL_HOME/out.txt \\
 && python -c 'import sys; print(sys.version_info[0])' > /opt/tool/major.txt

FROM ${BASE} AS runtime
COPY --from=build /opt/tool /opt/tool
COPY data.txt /usr/share/doc/small/data.txt
ENV PATH=/opt/tool/bin:$PATH
RUN python > /opt/tool/runtime.txt
USER 65532:65532
"""


@pytest.fixture
def context(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "pkg" / "__pycache__").mkdir(parents=True)
    (repo / "data.txt").write_text("data\n")
    (repo / "pkg" / "a.txt").write_text("a\n")
    (repo / "pkg" / "__pycache__" / "a.pyc").write_text("")
    (repo / "secret.txt").write_text("not in the context\n")
    (repo / ".dockerignore").write_text("*\n!data.txt\n!pkg/\n**/__pycache__\n")
    return repo


def test_runs_each_stage_under_the_root(context: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    stages = tool.Runner(context, root, sys.executable, log=False).run(SMALL)
    assert [s.name for s in stages] == ["build", "runtime"]
    # WORKDIR, COPY (a file, a folder's contents without what .dockerignore drops), ENV, RUN
    assert (root / "src" / "data.txt").read_text() == "data\n"
    assert sorted(p.name for p in (root / "src" / "pkg").iterdir()) == ["a.txt"]
    assert (root / "opt" / "tool" / "out.txt").read_text() == "data\na\n"
    # `python` is the given one in the build stage, the one ENV PATH puts first in the runtime's
    assert (root / "opt" / "tool" / "major.txt").read_text() == "3\n"
    assert (root / "opt" / "tool" / "runtime.txt").read_text() == "from the tool: \n"  # ENV is per stage
    assert (root / "usr" / "share" / "doc" / "small" / "data.txt").read_text() == "data\n"
    assert stages[1].env["PATH"].startswith(f"{root}/opt/tool/bin:{root}/.shims:")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("RUN python > /opt/tool/runtime.txt", "RUN false"), "stage runtime: RUN false: exit 1"),
        (("COPY data.txt ./", "COPY secret.txt ./"), ".dockerignore keeps secret.txt out"),
        (("COPY --from=build /opt/tool /opt/tool", "COPY --from=build /opt/nothing /opt/tool"), "/opt/nothing is not in stage build"),
        (("RUN python > /opt/tool/runtime.txt", "RUN python > /etc/runtime.txt"), "/etc/runtime.txt: an absolute path outside"),
    ],
)
def test_refuses_what_a_build_would_fail_or_what_would_touch_this_machine(
    context: Path, tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    assert change[0] in SMALL
    with pytest.raises(tool.StepFailed, match=message.replace("(", r"\(")):
        tool.Runner(context, tmp_path / "root", sys.executable, log=False).run(SMALL.replace(*change))


def test_dockerignore_as_docker_reads_it() -> None:
    patterns = (REPO / ".dockerignore").read_text().split()
    kept = ["pyproject.toml", "setup.py", "README.md", "LICENSE", "requirements.lock", "requirements-build.lock",
            "autoscaler", "autoscaler/policy/decide.py"]
    dropped = ["tests", "tests/policy/test_compiled.py", "Makefile", "autoscaler/__pycache__",
               "autoscaler/policy/__pycache__/decide.cpython-311.pyc", "autoscaler/x.pyc", ".venv"]
    assert [p for p in kept if tool.ignored(p, patterns)] == []
    assert [p for p in dropped if not tool.ignored(p, patterns)] == []


def test_instructions_join_continuations_and_drop_comments() -> None:
    # a parser directive, a comment inside a continued RUN, a lower-case keyword: what Docker reads
    text = "# syntax=docker/dockerfile:1\nFROM python:3.11 AS build\n# a comment\nRUN pip wheel \\\n" \
           "    # inside the RUN\n    -w /wheels .\nenv A=1\n"
    assert tool.instructions(text) == [
        ("FROM", "python:3.11 AS build"), ("RUN", "pip wheel     -w /wheels ."), ("ENV", "A=1")]


def test_the_real_dockerfile_is_one_it_can_run(tmp_path: Path) -> None:
    """Every RUN of the Dockerfile names only paths the tool moves under its root, every COPY a
    file of the build context; and the wheel it checks is the one the build stage writes."""
    runner = tool.Runner(REPO, tmp_path, sys.executable, log=False)
    dockerfile = (REPO / "Dockerfile").read_text()
    steps = tool.instructions(dockerfile)
    runs = [args for keyword, args in steps if keyword == "RUN"]
    assert len(runs) == 4 and all(runner.map(r) for r in runs)
    for keyword, args in steps:
        if keyword == "COPY" and not args.startswith("--from"):
            assert not [s for s in args.split()[:-1] if tool.ignored(s, runner.ignore)], args
    assert "-w /wheels ." in runs[2] and "/opt/vllm-queue-autoscaler/bin" in dockerfile
    assert [m.rsplit("/", 1)[1] for m in tool.compiled_modules(REPO)][:2] == ["capacity_table", "decide"]
