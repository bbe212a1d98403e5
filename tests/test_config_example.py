"""The shipped configuration, the Knative way: the document carries only what a user sets, and its
`_example` block documents every key at the code's default (a test here compares the two, so the
block cannot drift from `autoscaler/config/model.py` and `autoscaler/policy/params.py`).

Knative's ConfigMaps (knative/serving config/core/configmaps/autoscaler.yaml) carry the same
`_example` key; Knative guards it with a checksum annotation checked by its webhook
(knative/pkg configmap/example.go). Here the guard is this file: it compares values, not a
checksum, so a default changed in the code fails it too."""

from __future__ import annotations

import re
import textwrap
import typing
from pathlib import Path
from typing import Any

import annotated_types
import pytest
from click.testing import CliRunner
from pydantic import BaseModel

from autoscaler.cli import main
from autoscaler.config import ControllerSettings, PrometheusSettings, load_config_file, load_config_text
from autoscaler.config.bounded import load_yaml
from autoscaler.config.load import EXAMPLE_KEY
from autoscaler.policy.params import PolicyParams, SloParams

REPO = Path(__file__).resolve().parent.parent
SHIPPED = REPO / "config" / "autoscaler.yaml"
KIT_FILE = REPO / "deploy" / "controller" / "autoscaler.yaml"


def _example_text(text: str | None = None) -> str:
    doc = load_yaml(SHIPPED.read_text() if text is None else text)
    assert isinstance(doc, dict) and isinstance(doc.get(EXAMPLE_KEY), str)
    return str(doc[EXAMPLE_KEY])


def _same(expected: object, found: object) -> bool:
    """Equal and of the same YAML kind: `false` is not `0`, `1` is not `true`, `null` is only None."""
    if expected is None or isinstance(expected, bool) or isinstance(found, bool):
        return expected is found or (isinstance(expected, bool) and isinstance(found, bool) and expected == found)
    if isinstance(expected, int | float):
        return isinstance(found, int | float) and float(found) == float(expected)
    return type(expected) is type(found) and expected == found


def _drift(model: type[BaseModel], block: object, where: str) -> list[str]:
    """Every key of `model` missing from, extra in, or not at its default in `block`."""
    if not isinstance(block, dict):
        return [f"{where}: missing (must list every key of {model.__name__})"]
    problems = [f"{where}.{key}: not a key of {model.__name__}" for key in block if key not in model.model_fields]
    defaults = model().model_dump()
    for name, info in model.model_fields.items():
        path = f"{where}.{name}"
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            problems += _drift(annotation, block.get(name), path)
        elif name not in block:
            problems.append(f"{path}: missing (default {defaults[name]!r})")
        elif not _same(defaults[name], block[name]):
            problems.append(f"{path} = {block[name]!r}, the code's default is {defaults[name]!r}")
    return problems


def example_drift(example: str) -> list[str]:
    doc = load_yaml(example)
    assert isinstance(doc, dict), "_example is a YAML mapping"
    return _drift(ControllerSettings, doc.get("controller"), "controller") + _drift(
        PolicyParams, doc.get("defaults"), "defaults"
    )


# --- the _example block ----------------------------------------------------------------------------


def test_example_lists_every_key_at_the_codes_default() -> None:
    assert example_drift(_example_text()) == []


def test_example_is_itself_a_valid_document_at_the_defaults() -> None:
    config = load_config_text(_example_text(), "_example")
    assert config.controller == ControllerSettings()
    assert config.defaults.as_dict() == PolicyParams().model_dump()  # every key set, each at its default


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (("tick_seconds: 15 ", "tick_seconds: 16 "), "controller.tick_seconds = 16, the code's default is 15.0"),
        (("ttft_seconds: 2 ", "ttft_seconds: 3 "), "defaults.slo.ttft_seconds = 3, the code's default is 2.0"),
        (("insecure_skip_tls_verify: false", "insecure_skip_tls_verify: 0"),
         "controller.prometheus.insecure_skip_tls_verify = 0, the code's default is False"),
        (("max_gpus: null", "max_gpus: 0"), "defaults.max_gpus = 0, the code's default is None"),
        (("  scale_up_period_seconds: 15", "  # scale_up_period_seconds: 15"),
         "defaults.scale_up_period_seconds: missing (default 15.0)"),
    ],
)
def test_a_drifted_example_is_caught(edit: tuple[str, str], expected: str) -> None:
    example = _example_text()
    assert edit[0] in example
    assert example_drift(example.replace(edit[0], edit[1], 1)) == [expected]


def test_a_key_the_code_does_not_have_is_caught() -> None:
    example = _example_text().replace("  tick_seconds: 15 ", "  tick_second: 15\n  tick_seconds: 15 ", 1)
    assert example_drift(example) == ["controller.tick_second: not a key of ControllerSettings"]


def _num(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _yaml_scalar(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return _num(value)


def _range_text(info: Any) -> str | None:
    """`range 0..86400`, `range >0..1`, `range 1..100000 or null`: the inclusive-unless-`>`
    convention of the block; `length 1..253 or null` for a string."""
    nullable = type(None) in typing.get_args(info.annotation)
    lengths = [getattr(m, a) for m in info.metadata for a in ("min_length", "max_length") if hasattr(m, a)]
    if len(lengths) == 2:
        return f"length {lengths[0]}..{lengths[1]}" + (" or null" if nullable else "")
    lo = hi = None
    for m in info.metadata:
        if isinstance(m, annotated_types.Ge):
            lo = _num(m.ge)
        elif isinstance(m, annotated_types.Gt):
            lo = ">" + _num(m.gt)
        elif isinstance(m, annotated_types.Le):
            hi = _num(m.le)
    if lo is None or hi is None:
        return None
    return f"range {lo}..{hi}" + (" or null" if nullable else "")


def _documented_models() -> list[tuple[str, type[BaseModel]]]:
    nested = [(f"defaults.{name}", info.annotation) for name, info in PolicyParams.model_fields.items()
              if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)]
    assert nested, "PolicyParams has nested sections (slo): they are documented key by key"
    return [("controller", ControllerSettings), ("controller.prometheus", PrometheusSettings),
            ("defaults", PolicyParams), *nested]


def _key_lines(text: str) -> dict[str, tuple[int, str]]:
    """Dotted key path -> (line number, line), for every key line outside `targets`."""
    out: dict[str, tuple[int, str]] = {}
    stack: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        match = re.match(r"^( *)([a-z_][a-z0-9_]*):", line)
        if not match or line.lstrip().startswith("#"):
            continue
        indent, key = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key))
        out[".".join(k for _, k in stack)] = (number, line)
    return out


def test_example_documents_every_key_with_its_default_and_range() -> None:
    text = _example_text()
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):  # every key line, targets included, has a comment
        if re.match(r"^ *(- )?[a-z_][a-z0-9_]*:", line):
            assert re.search(r" #\s*\S", line), f"_example line {number} has no comment: {line!r}"
    keys = _key_lines(text)
    for section, model in _documented_models():
        for name, info in model.model_fields.items():
            number, line = keys[f"{section}.{name}"]
            comment = line.split(" #", 1)[1]
            above = []  # the block comment right above the key, if any
            for previous in reversed(lines[: number - 1]):
                if not previous.strip().startswith("#"):
                    break
                above.append(previous)
            if isinstance(info.default, BaseModel) or info.default_factory is not None:
                continue  # a section (prometheus:): its keys are checked one by one
            default = _yaml_scalar(info.default)
            assert f"default {default}" in comment + " ".join(above), f"{section}.{name}: default {default}"
            expected_range = _range_text(info)
            if expected_range is not None:
                assert expected_range in comment, f"{section}.{name}: {expected_range}"


def test_example_target_is_valid_and_overrides_slo_key_by_key() -> None:
    config = load_config_text(_example_text(), "_example")
    [llama] = config.targets
    policy = config.policy_for(llama)
    assert llama.name == "llm/llama-3-70b"
    assert policy.max_gpus is not None and policy.max_gpus // policy.gpus_per_replica == 4
    assert policy.slo == SloParams(ttft_seconds=3, ttft_seconds_per_1k_prompt_tokens=0.25)  # the rest from defaults


# --- the document: only what a user sets -------------------------------------------------------


def _set_at_default(model: type[BaseModel], block: dict[str, Any], where: str) -> list[str]:
    defaults = model().model_dump()
    found = []
    for key, value in block.items():
        nested = model.model_fields[key].annotation
        if isinstance(value, dict) and isinstance(nested, type) and issubclass(nested, BaseModel):
            found += _set_at_default(nested, value, f"{where}.{key}")
        elif _same(defaults[key], value):
            found.append(f"{where}.{key}")
    return found


def test_shipped_document_sets_only_what_a_user_sets() -> None:
    config = load_config_file(SHIPPED)
    assert config.warnings() == []
    assert config.controller == ControllerSettings()
    assert config.defaults.as_dict() == {}  # nothing pinned: an upgrade brings its new defaults
    [(target, policy)] = list(config.effective_policies())
    assert (target.name, policy.max_replicas) == ("llm/qwen3-8b", 8)
    doc = load_yaml(SHIPPED.read_text())
    assert isinstance(doc, dict)
    settings = {k: v for k, v in doc.items() if k != EXAMPLE_KEY}
    at_default = _set_at_default(ControllerSettings, settings.get("controller") or {}, "controller")
    at_default += _set_at_default(PolicyParams, settings.get("defaults") or {}, "defaults")
    for i, t in enumerate(settings["targets"]):
        at_default += _set_at_default(PolicyParams, {k: v for k, v in t.items() if k not in ("namespace", "deployment")},
                                      f"targets[{i}]")
    assert at_default == []  # a key set to today's default would keep it after an upgrade changes it


def test_config_file_is_the_kits_file() -> None:
    """One file: config/autoscaler.yaml points at the file kustomize's configMapGenerator reads."""
    assert SHIPPED.is_symlink()
    assert SHIPPED.resolve() == KIT_FILE.resolve() and not KIT_FILE.is_symlink()


# --- the loader ignores _example ----------------------------------------------------------------


def test_loader_ignores_the_example_block() -> None:
    plain = "targets:\n  - {namespace: llm, deployment: a, max_replicas: 3}\n"
    broken = "_example: |\n  defaults:\n    max_replicas: -1\n  not: [yaml\n"  # neither valid nor YAML
    assert load_config_text(plain + broken) == load_config_text(plain)


def test_a_non_text_example_is_one_line_and_exit_2() -> None:
    text = "targets: []\n_example:\n  defaults: {max_replicas: 4}\n"
    result = CliRunner().invoke(main, ["check-config", "-"], input=text)
    assert result.exit_code == 2
    assert result.stderr == (
        "_example = a dict, must be a text block (documentation the controller ignores: "
        "copy a key out of it to set it)\n"
    )


def test_the_example_dedents_to_a_document_a_user_can_copy_from() -> None:
    # The block is the document one level down: a section copied out of it validates as is.
    example = _example_text()
    slo = re.search(r"^  slo:.*?(?=^  [a-z#])", example, re.M | re.S)
    assert slo is not None
    copied = "defaults:\n" + textwrap.indent(textwrap.dedent(slo.group(0)), "  ") + "targets: []\n"
    assert load_config_text(copied).defaults.as_dict() == {"slo": SloParams().model_dump()}
