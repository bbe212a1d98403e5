"""The data in the repository (simulations/data) is what SHA256SUMS says: every listed file is
there with its checksum, every data file of traces/, vllm-perf/ and vllm-startup/ is listed, and
every folder holding data has a README naming its source and license. Also checks
simulations/tools/verify_data.py, the same check for a clone, on a broken copy."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from tests.sim.tool_loader import load_tool

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "simulations" / "data"
FOLDERS = ("traces", "vllm-perf", "vllm-startup")
_LINE = re.compile(r"^([0-9a-f]{64})[ ][ *](\S.*)$")


def _sums() -> dict[str, str]:
    sums: dict[str, str] = {}
    for line in (DATA / "SHA256SUMS").read_text().splitlines():
        m = _LINE.match(line)
        assert m, f"SHA256SUMS: not a sha256sum line: {line!r}"
        assert m.group(2) not in sums, f"SHA256SUMS lists {m.group(2)} twice"
        sums[m.group(2)] = m.group(1)
    return sums


def _data_files() -> list[Path]:
    return sorted(p for f in FOLDERS for p in (DATA / f).rglob("*") if p.is_file() and p.name != "README.md")


def _tool() -> ModuleType:
    return load_tool("verify_data")


SUMS = _sums()


@pytest.mark.parametrize("name", sorted(SUMS))
def test_every_listed_file_exists_with_its_checksum(name: str) -> None:
    path = DATA / name
    assert path.is_file(), f"{name} is listed in SHA256SUMS but missing"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == SUMS[name], f"{name} differs from SHA256SUMS"


def test_every_data_file_is_listed() -> None:
    files = _data_files()
    assert len(files) >= 20
    unlisted = [str(p.relative_to(DATA)) for p in files if str(p.relative_to(DATA)) not in SUMS]
    assert unlisted == [], "add their sums: cd simulations/data && sha256sum FILE >> SHA256SUMS"


@pytest.mark.parametrize("folder", sorted({str(p.parent.relative_to(DATA)) for p in _data_files()}))
def test_every_data_folder_has_a_readme_naming_source_and_license(folder: str) -> None:
    readme = DATA / folder / "README.md"
    assert readme.is_file(), f"simulations/data/{folder} has data but no README.md"
    text = readme.read_text().lower()
    assert "source" in text and "license" in text, f"{readme.relative_to(ROOT)} names no source or no license"


def test_the_verify_tool_passes_on_the_repository(capsys: pytest.CaptureFixture[str]) -> None:
    assert _tool().main([]) == 0
    assert capsys.readouterr().out.strip().endswith(f"{len(SUMS)} files OK")


def test_the_verify_tool_reports_a_changed_a_missing_and_an_unlisted_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    shutil.copytree(DATA / "vllm-startup", data / "vllm-startup")
    (data / "SHA256SUMS").write_text("".join(f"{d}  {n}\n" for n, d in SUMS.items() if n.startswith("vllm-startup/")))
    (data / "vllm-startup" / "kv_cache_bytes_per_token.csv").write_text("changed\n")
    (data / "vllm-startup" / "startup_capacity_facts.csv").unlink()
    (data / "vllm-startup" / "new.csv").write_text("a,b\n")
    assert _tool().main(["--data", str(data)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "vllm-startup/kv_cache_bytes_per_token.csv: SHA-256 differs from SHA256SUMS",
        "vllm-startup/startup_capacity_facts.csv: listed in SHA256SUMS but missing",
        "vllm-startup/new.csv: not listed in SHA256SUMS",
    ]
