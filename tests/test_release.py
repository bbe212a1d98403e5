"""Release artefacts of issue 16: the version (`autoscaler --version`, the build_info metric), the
license metadata, and the hash-locked dependencies of the image."""

from __future__ import annotations

import platform
import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

import autoscaler
from autoscaler.cli import main
from autoscaler.controller.telemetry import ControllerMetrics

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]


def test_version_prints_the_package_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output == f"autoscaler {autoscaler.__version__}\n"
    assert autoscaler.__version__ == VERSION  # installed metadata or the source tree: the same here


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
    assert sample.labels == {"version": autoscaler.__version__, "python_version": platform.python_version()}
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
