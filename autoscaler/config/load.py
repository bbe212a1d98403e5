"""Loading one document: YAML (duplicate keys refused) -> the typed model, or `ConfigError`.

Bounded (`autoscaler.config.bounded`): at most 1 MiB (the size limit of a ConfigMap), collections
nested at most 100 deep, aliases adding at most 1,000,000 nodes, no recursive alias."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import IO, Any

import yaml
from pydantic import (
    ValidationError,
)

from autoscaler.config.bounded import (
    MAX_YAML_BYTES,
    LimitError,
    SafeBuilder,
    describe_size,
    load_yaml,
    read_bytes,
    read_stream,
    yaml_problem,
)
from autoscaler.config.messages import ConfigError, _kind, _problem_lines
from autoscaler.config.model import AutoscalerConfig

# --- loading -------------------------------------------------------------------------------------

EXAMPLE_KEY = "_example"
"""A top-level key the loader drops before validation: a text block documenting every key at its
default, as Knative's ConfigMaps carry (config/autoscaler.yaml; a test compares it with the models)."""


def load_config_text(text: str, source: str = "<string>") -> AutoscalerConfig:
    """Parse and validate one document; raise `ConfigError` listing every problem found."""
    if len(text) > MAX_YAML_BYTES or len(text.encode("utf-8", "replace")) > MAX_YAML_BYTES:  # bytes, as a file
        raise _too_large(source)
    try:
        data = load_yaml(text, _UniqueKeyBuilder)
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
    example = data.pop(EXAMPLE_KEY, None)
    if example is not None and not isinstance(example, str):
        raise ConfigError(
            [f"{EXAMPLE_KEY} = {_kind(example)}, must be a text block (documentation the controller ignores: "
             "copy a key out of it to set it)"],
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


def load_config_stream(fh: IO[bytes], source: str) -> AutoscalerConfig:
    """Read and validate the document of a byte stream (stdin) as a file is read: at most
    1 MiB of bytes, UTF-8; unreadable -> `ConfigError` of one line."""
    return load_config_text(_read_text(source, lambda: read_stream(fh, MAX_YAML_BYTES, source)), source=source)


def _read_text(source: str, read: Callable[[], bytes] | None = None) -> str:
    try:
        return (read() if read is not None else read_bytes(source, MAX_YAML_BYTES)).decode("utf-8")
    except LimitError:
        raise _too_large(source) from None
    except OSError as exc:
        raise ConfigError([f"{source}: cannot read: {exc.strerror or exc}"], source=source) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{source}: cannot read: not UTF-8 ({exc.reason} at byte {exc.start})"], source=source) from None


def _too_large(source: str) -> ConfigError:
    size = describe_size(MAX_YAML_BYTES)
    return ConfigError([f"{source}: larger than {size} (allowed: at most {size}, the limit of a ConfigMap)"],
                       source=source)


class _UniqueKeyBuilder(SafeBuilder):
    """A SafeConstructor that rejects a key repeated in one mapping (PyYAML silently keeps the last)."""

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


    def construct_leading_zero_refused(self, node: yaml.ScalarNode) -> int:
        """An integer written with a leading zero (`010`) is refused: YAML 1.1 (this loader, and
        kubectl's) reads it as octal 8, YAML 1.2 and a reader as 10."""
        text = str(self.construct_scalar(node))
        if _LEADING_ZERO.fullmatch(text):
            raise yaml.constructor.ConstructorError(
                None, None, f"{text!r}: a number with a leading zero is read as octal ({text} = "
                f"{SafeBuilder.construct_yaml_int(self, node)}); write it without the zero", node.start_mark)
        return int(SafeBuilder.construct_yaml_int(self, node))


_LEADING_ZERO = re.compile(r"[-+]?0[0-9_]+")
_UniqueKeyBuilder.add_constructor(  # type: ignore[type-var]
    "tag:yaml.org,2002:int", _UniqueKeyBuilder.construct_leading_zero_refused)

_yaml_problem = yaml_problem
