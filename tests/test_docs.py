"""The documents stay in step with the code and with each other.

* The configuration reference (docs/configuration.md) lists every key of the models, and the
  lint rules table (docs/lint.md) every rule as the linter defines it.
* README.md stays a newcomer's page: under 15 KiB, with the two commands of the quick start.
* Every relative link of README.md, docs/*.md, config/README.md and simulations/README.md
  resolves to an existing file, and a `#fragment` into a Markdown file to one of its headings.
* Every fact lives once: no paragraph of README.md (>= 200 characters; a table row counts as
  one) appears in a document of docs/, and no paragraph of one document under docs/
  (config/README.md and simulations/README.md included) appears in another, whatever the line
  wrap and wherever it is embedded.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from pydantic import BaseModel

from autoscaler.config import ControllerSettings, PrometheusSettings
from autoscaler.lint.rules import RULES
from autoscaler.policy.params import PolicyParams

ROOT = Path(__file__).resolve().parents[1]
README_PATH = ROOT / "README.md"
README = README_PATH.read_text()
DOCS = sorted((ROOT / "docs").glob("*.md"))
# Documents of their folders, held to the same rules as docs/ (links, one place per fact).
FOLDER_READMES = [ROOT / "config" / "README.md", ROOT / "simulations" / "README.md"]
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text()
LINT = (ROOT / "docs" / "lint.md").read_text()

README_MAX_BYTES = 15 * 1024
MIN_PARAGRAPH_CHARS = 200

_FENCE = re.compile(r"^\s*(```|~~~)")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks (a link in a code sample is not a link)."""
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return out


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: inline markup dropped, lower case, punctuation removed,
    spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links keep their text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: Counter[str] = Counter()
    anchors: set[str] = set()
    for line in _prose_lines(path.read_text()):
        m = _HEADING.match(line)
        if not m:
            continue
        slug = _slug(m.group(2))
        anchors.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return anchors


def _links(path: Path) -> list[str]:
    targets: list[str] = []
    for line in _prose_lines(path.read_text()):
        line = re.sub(r"`[^`]*`", "", line)  # a link in inline code is not a link either
        targets += _LINK.findall(line)
    return targets


def _paragraphs(text: str) -> list[str]:
    """Blocks between blank lines (code blocks included), whitespace collapsed, so that a copy
    cannot hide behind a different line wrap; each list item and each table row of a block
    counts on its own too."""
    blocks = re.split(r"\n\s*\n", text)
    items = [item for b in blocks for item in re.split(r"\n(?=\s*(?:\d+\.|[-*+]|\|)\s)", b)]
    return sorted({p for p in (" ".join(u.split()) for u in blocks + items) if len(p) >= MIN_PARAGRAPH_CHARS})


# --------------------------------------------------------------------------- in step with the code


def test_every_key_is_in_the_configuration_reference() -> None:
    keys = []
    for name, info in PolicyParams.model_fields.items():
        nested = info.annotation
        if isinstance(nested, type) and issubclass(nested, BaseModel):  # `slo`: one row per key
            keys += [f"`{name}.{k}`" for k in nested.model_fields]
        else:
            keys.append(f"`{name}`")
    assert "`slo.ttft_seconds`" in keys
    keys += [f"`controller.{k}`" for k in ControllerSettings.model_fields if k != "prometheus"]
    keys += [f"`controller.prometheus.{k}`" for k in PrometheusSettings.model_fields]
    missing = [k for k in keys if f"| {k} |" not in CONFIGURATION]
    assert not missing, f"docs/configuration.md's reference lacks {missing}"


def test_every_lint_rule_is_in_the_rules_table() -> None:
    rows = {line.split("|")[1].strip(): line for line in LINT.splitlines() if line.startswith("| `VQA")}
    problems = []
    for r in RULES:
        row = rows.pop(f"`{r.id}`", None)
        if row is None:
            problems.append(f"{r.id} has no row")
            continue
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        _, name, severity, pitfall, _what, fix = cells
        if name != r.name or not severity.startswith(r.severity.value) or fix != r.fix:
            problems.append(f"{r.id}: the row says {cells}")
        if pitfall != (str(r.pitfall) if r.pitfall is not None else "-"):
            problems.append(f"{r.id}: pitfall {pitfall}, the rule says {r.pitfall}")
    problems += [f"{rule_id} is not a rule" for rule_id in rows]
    assert not problems, problems


# --------------------------------------------------------------------------- the README


def test_readme_has_the_two_commands() -> None:
    assert "make demo" in README and "make test" in README


def test_readme_stays_short() -> None:
    size = len(README_PATH.read_bytes())
    assert size < README_MAX_BYTES, f"README.md is {size} bytes; move detail to docs/ (limit {README_MAX_BYTES})"


def test_readme_keeps_the_seven_pitfalls() -> None:
    """The lint rules and deploy/vllm's comments refer to these numbers."""
    section = README.split("## The seven ways vLLM dies on Kubernetes", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^(\d)\. \*\*", section, flags=re.MULTILINE) == [str(n) for n in range(1, 8)]


# --------------------------------------------------------------------------- links


@pytest.mark.parametrize("path", [README_PATH, *DOCS, *FOLDER_READMES], ids=_rel)
def test_relative_links_resolve(path: Path) -> None:
    broken = []
    for target in _links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, flags=re.IGNORECASE):  # http:, https:, mailto:
            continue
        file_part, _, fragment = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in _anchors(linked):
            broken.append(f"{target}: no heading #{fragment} in {_rel(linked)}")
    assert not broken, f"{_rel(path)}: {broken}"


def test_the_documents_are_linked_from_the_readme() -> None:
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in _links(README_PATH)}
    orphans = [_rel(d) for d in [*DOCS, *FOLDER_READMES] if d.resolve() not in linked]
    assert not orphans, f"README.md links none of {orphans}"


# --------------------------------------------------------------------------- one place per fact


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_no_readme_paragraph_is_copied_into_docs() -> None:
    documents = {_rel(d): _flat(d.read_text()) for d in [*DOCS, *FOLDER_READMES]}
    copies = [f"{name}: {p[:80]}..." for p in _paragraphs(README) for name, text in documents.items() if p in text]
    assert not copies, f"README.md paragraphs repeated in docs: {copies}"


def test_no_paragraph_is_in_two_documents() -> None:
    documents = {_rel(d): d.read_text() for d in [*DOCS, *FOLDER_READMES]}
    flat = {name: _flat(text) for name, text in documents.items()}
    copies = [
        f"{name} and {other}: {p[:80]}..."
        for name, text in documents.items()
        for p in _paragraphs(text)
        for other, other_text in flat.items()
        if other != name and p in other_text
    ]
    assert not copies, f"paragraphs in more than one document: {copies}"


def test_the_checks_catch_a_copy_and_a_broken_link(tmp_path: Path) -> None:
    """The helpers above find what they are meant to find."""
    paragraph = "A fact stated once. " * 12
    assert _paragraphs(f"intro\n\n{paragraph}\n\nend") == [paragraph.strip()]
    listed = _paragraphs(f"1. {paragraph}\n2. short\n3. {paragraph.upper()}")
    assert "1. " + paragraph.strip() in listed and "3. " + paragraph.upper().strip() in listed
    assert _paragraphs(paragraph.replace(". ", ".\n")) == [paragraph.strip()]  # rewrapped: same
    assert _paragraphs(paragraph)[0] in _flat(f"a line before it, then\n{paragraph.replace('. ', '.  ')}")
    doc = tmp_path / "a.md"
    doc.write_text("# Title: `one` two?\n\n[x](b.md#nowhere) [y](#title-one-two) `[z](c.md)`\n```\n[w](d.md)\n```\n")
    assert _links(doc) == ["b.md#nowhere", "#title-one-two"]
    assert _anchors(doc) == {"title-one-two"}
