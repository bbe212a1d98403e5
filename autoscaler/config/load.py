"""Loading one document: YAML (duplicate keys refused) -> the typed model, or `ConfigError`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    ValidationError,
)

from autoscaler.config.messages import ConfigError, _kind, _one_line, _problem_lines
from autoscaler.config.model import AutoscalerConfig

# --- loading -------------------------------------------------------------------------------------


def load_config_text(text: str, source: str = "<string>") -> AutoscalerConfig:
    """Parse and validate one document; raise `ConfigError` listing every problem found."""
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError([_yaml_problem(exc, source)], source=source) from None
    if data is None:
        raise ConfigError(
            [f"{source}: empty document, must be a mapping with keys controller, defaults, targets"],
            source=source,
        )
    if not isinstance(data, dict):
        raise ConfigError(
            [f"{source}: document is {_kind(data)}, must be a mapping with keys controller, defaults, targets"],
            source=source,
        )
    try:
        return AutoscalerConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_problem_lines(exc.errors(), root=AutoscalerConfig, data=data), source=source) from None


def load_config_file(path: str | os.PathLike[str]) -> AutoscalerConfig:
    """Read and validate the document at `path` (UTF-8); unreadable -> `ConfigError` of one line."""
    source = os.fspath(path)
    return load_config_text(_read_text(source), source=source)


def _read_text(source: str) -> str:
    try:
        return Path(source).read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError([f"{source}: cannot read: {exc.strerror or exc}"], source=source) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{source}: cannot read: not UTF-8 ({exc.reason} at byte {exc.start})"], source=source) from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key repeated in one mapping (PyYAML silently keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # unhashable key: let SafeLoader report it
                continue
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {first.start_mark.line + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def _yaml_problem(exc: yaml.YAMLError, source: str) -> str:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        what = ": ".join(p for p in (exc.context, exc.problem) if p)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        return _one_line(f"{where}: invalid YAML: {what}")
    return _one_line(f"{source}: invalid YAML: {exc}")
