"""Bounded reading of the files users feed the CLIs and the controller: size, line length, nesting
depth and YAML alias expansion (docs/limits.md lists every limit).

Every reader of a user file goes through here, so that no input can cost unbounded time or
memory, or raise anything but the reader's own one-line error:

* `read_bytes` reads at most a limit (also from a pipe, a FIFO or /dev/zero);
* `load_yaml` / `load_yaml_all` parse with libyaml when present (the C parser; 4-5x faster than
  PyYAML's pure-Python one, whose messages and acceptance stay: an input libyaml refuses is
  parsed again by the pure-Python parser, up to 1 MiB) and compose with `BoundedComposer`, which
  refuses collections nested deeper than `MAX_DEPTH`, recursive aliases, and aliases that expand
  to more than `MAX_ALIAS_NODES` nodes per input (a 1 KB "billion laughs" document). A scalar
  PyYAML resolves but cannot build (an integer of 5,000 digits, the date 2001-02-30) is a
  `ConstructorError` at its line instead of a ValueError;
* `check_depth` bounds the nesting of parsed JSON (iteratively);
* `LimitError` is a ValueError with a one-line message naming the file (and line or key), the
  value and what is allowed. YAML limits raise `YamlLimitError`, a `yaml.MarkedYAMLError`, so a
  reader's existing handling of YAML errors (with line and column) reports them.
"""

from __future__ import annotations

import math
import os
import re
from typing import IO, TYPE_CHECKING, Any, Final

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import BaseConstructor, ConstructorError, SafeConstructor
from yaml.events import AliasEvent, MappingStartEvent, SequenceStartEvent
from yaml.nodes import Node, ScalarNode, SequenceNode

MiB: Final = 1 << 20

MAX_DEPTH: Final = 100
"""Nesting of collections (a YAML or JSON list or mapping in another) in any input."""
MAX_ALIAS_NODES: Final = 1_000_000
"""Nodes that YAML aliases may add (each `*alias` counts the nodes of what it refers to) per input."""
MAX_DOCUMENTS: Final = 100_000
"""YAML documents in one input (a multi-document stream)."""
MAX_YAML_BYTES: Final = 1 * MiB
"""A config (the ConfigMap limit of Kubernetes), a scenario, a profile, a kustomization."""
MAX_MANIFEST_BYTES: Final = 4 * MiB
"""One input of `autoscaler lint` (a file or stdin): ~1.5 s to read 4 MiB of manifests, ~5 s for
the densest YAML (one small scalar a line)."""
_REPARSE_BYTES: Final = 1 * MiB
"""An input libyaml refuses is parsed again by PyYAML's pure-Python parser (its messages and
acceptance are the ones users know) up to this size; beyond, libyaml's message is reported."""


class LimitError(ValueError):
    """An input beyond a documented limit; the message is one line (file, where, value, allowed)."""


class YamlLimitError(ComposerError):
    """A YAML input beyond a limit (nesting, aliases, documents), at a line and column."""


def describe_size(limit: int) -> str:
    return f"{limit // MiB} MiB" if limit % MiB == 0 else f"{limit:,} bytes"


def read_bytes(path: str | os.PathLike[str], limit: int, what: str = "file") -> bytes:
    """The content of `path`, or `LimitError` if it holds more than `limit` bytes (never reads
    more than limit + 1: a FIFO, /dev/zero or a growing file cost no more). OSError as open()."""
    with open(path, "rb") as fh:
        return read_stream(fh, limit, os.fspath(path), what)


def read_stream(fh: IO[bytes], limit: int, source: str, what: str = "file") -> bytes:
    data = fh.read(limit + 1)
    if len(data) > limit:
        raise LimitError(f"{source}: {what} larger than {describe_size(limit)} (allowed: at most {describe_size(limit)})")
    return data


def read_text_stream(fh: IO[str], limit: int, source: str, what: str = "input") -> str:
    """At most `limit` characters of a text stream (stdin), else `LimitError`."""
    data = fh.read(limit + 1)
    if len(data) > limit:
        raise LimitError(f"{source}: {what} larger than {describe_size(limit)} (allowed: at most {describe_size(limit)})")
    return data


# --------------------------------------------------------------------------- JSON


def check_depth(value: Any, where: str, limit: int = MAX_DEPTH, *, start: int = 0) -> None:
    """Raise `LimitError` if lists/dicts nest deeper than `limit` in `value` (iterative); `value`
    itself sits `start` levels deep in its document."""
    stack: list[tuple[Any, int]] = [(value, start)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth + 1 > limit:
            raise LimitError(f"{where}: nested deeper than {limit} levels (allowed: at most {limit})")
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def depth_error(where: str, limit: int = MAX_DEPTH) -> LimitError:
    """The error for a JSON document whose parser ran out of recursion (nested ~1,000 deep)."""
    return LimitError(f"{where}: nested deeper than {limit} levels (allowed: at most {limit})")


# --------------------------------------------------------------------------- YAML


class BoundedComposer(Composer):
    """PyYAML's composer with limits: nesting depth (an alias counts the depth of what it refers
    to), nodes added by aliases per input, documents per input; a recursive alias (a collection
    that contains itself) is refused. Works over PyYAML's pure-Python parser or libyaml's."""

    max_depth: int = MAX_DEPTH
    max_alias_nodes: int = MAX_ALIAS_NODES
    max_documents: int = MAX_DOCUMENTS

    if TYPE_CHECKING:  # provided by the parser the composer is mixed with (PyYAML's or libyaml's)

        def check_event(self, *choices: type[Any]) -> bool: ...

        def peek_event(self) -> Any: ...

    def __init__(self) -> None:
        super().__init__()
        self._depth = 0
        self._alias_nodes = 0
        self._documents = 0
        self._done: dict[int, tuple[int, int]] = {}  # id(collection node) -> (nodes, height)

    def compose_document(self) -> Any:
        self._documents += 1
        if self._documents > self.max_documents:
            raise YamlLimitError(None, None, f"more than {self.max_documents:,} documents (allowed: at most "
                                 f"{self.max_documents:,})", self.peek_event().start_mark)
        try:
            return super().compose_document()
        finally:
            self._done.clear()

    def _size(self, node: Node) -> tuple[int, int]:
        if isinstance(node, ScalarNode):
            return 1, 0
        return self._done[id(node)]

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(AliasEvent):
            event = self.peek_event()
            target = self.anchors.get(event.anchor)
            if target is not None:
                info = (1, 0) if isinstance(target, ScalarNode) else self._done.get(id(target))
                if info is None:
                    raise YamlLimitError(None, None, f"recursive alias *{event.anchor} (a collection that contains "
                                         "itself; allowed: aliases to complete nodes)", event.start_mark)
                nodes, height = info
                self._alias_nodes += nodes
                if self._alias_nodes > self.max_alias_nodes:
                    raise YamlLimitError(None, None, f"aliases expand to more than {self.max_alias_nodes:,} nodes "
                                         f"(allowed: at most {self.max_alias_nodes:,})", event.start_mark)
                if self._depth + height > self.max_depth:
                    raise self._too_deep(event.start_mark)
            return super().compose_node(parent, index)
        if self.check_event(SequenceStartEvent, MappingStartEvent):
            event = self.peek_event()
            self._depth += 1
            if self._depth > self.max_depth:
                raise self._too_deep(event.start_mark)
            try:
                node: Any = super().compose_node(parent, index)  # adds `node` to `anchors` before its children
            finally:
                self._depth -= 1
            children = node.value if isinstance(node, SequenceNode) else [n for kv in node.value for n in kv]
            nodes, height = 1, 0
            for child in children:
                n, h = self._size(child)
                nodes += n
                height = max(height, h)
            self._done[id(node)] = (nodes, height + 1)
            return node
        return super().compose_node(parent, index)

    def compose_scalar_node(self, anchor: Any) -> Any:
        event = self.peek_event()
        if event.tag == "!":  # non-specific tag: libyaml marks an empty one not implicit, PyYAML always does
            event.implicit = (True, False)
        return super().compose_scalar_node(anchor)

    def _too_deep(self, mark: Any) -> YamlLimitError:
        return YamlLimitError(None, None, f"nested deeper than {self.max_depth} levels (allowed: at most "
                              f"{self.max_depth})", mark)


class SafeBuilder(SafeConstructor):
    """SafeConstructor whose scalars that resolve to a type but cannot be built (an integer of
    more than 4,300 digits, the date 2001-02-30) raise `ConstructorError` at their line."""

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError) as exc:
            value = node.value if isinstance(node, ScalarNode) else ""
            shown = value if len(value) <= 40 else value[:37] + "..."
            raise ConstructorError(None, None, f"cannot read {shown!r} as {node.tag.rsplit(':', 1)[-1]}: "
                                   f"{str(exc).splitlines()[0][:120]}", node.start_mark) from None


_LOADERS: dict[type[BaseConstructor], tuple[type[Any] | None, type[Any]]] = {}
_EXPONENT_FLOAT = re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
"""A float in exponent form that YAML 1.1 (PyYAML) reads as a string and YAML 1.2 (and
kubectl's go-yaml) as a number: `1e5`, `1.5e5`, `2E9` (YAML 1.1 wants a dot and a signed
exponent, `1.0e+5`)."""


def _resolver() -> type[Any]:
    """PyYAML's resolver, with exponent floats read as numbers (`_EXPONENT_FLOAT`)."""
    from yaml.resolver import Resolver

    class Resolver12Floats(Resolver):
        pass

    Resolver12Floats.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+0123456789"))
    return Resolver12Floats


def _loaders(constructor: type[BaseConstructor]) -> tuple[type[Any] | None, type[Any]]:
    """(libyaml loader or None, pure-Python loader) composing with `BoundedComposer` and building
    with `constructor` (a SafeConstructor subclass)."""
    got = _LOADERS.get(constructor)
    if got is not None:
        return got
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    Resolver = _resolver()

    class PyLoader(Reader, Scanner, Parser, BoundedComposer, constructor, Resolver):  # type: ignore[valid-type,misc]
        def __init__(self, stream: str) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)
            BoundedComposer.__init__(self)
            constructor.__init__(self)
            Resolver.__init__(self)

    c_loader: type[Any] | None = None
    try:
        from yaml._yaml import CParser
    except ImportError:  # pragma: no cover - PyYAML built without libyaml
        pass
    else:

        class CLoader(BoundedComposer, CParser, constructor, Resolver):  # type: ignore[valid-type,misc]
            # the composer's methods come first: CParser's own (C) composer is unbounded
            def __init__(self, stream: str) -> None:
                CParser.__init__(self, stream)
                BoundedComposer.__init__(self)
                constructor.__init__(self)
                Resolver.__init__(self)

        c_loader = CLoader
    _LOADERS[constructor] = (c_loader, PyLoader)
    return c_loader, PyLoader


def _run(loader_cls: type[Any], text: str, many: bool) -> list[Any]:
    loader = loader_cls(text)
    try:
        if many:
            out = []
            while loader.check_data():
                out.append(loader.get_data())
            return out
        return [loader.get_single_data()]
    finally:
        loader.dispose()


def _libyaml_reads_alike(text: str) -> bool:
    """False for the characters whose reading libyaml and PyYAML differ on (a byte-order mark
    inside the text; NEL, LS, PS line breaks): such a text is parsed by PyYAML alone, up to
    1 MiB (beyond, libyaml's reading: the pure-Python parser takes ~4 s a MiB). (Tabs:
    libyaml also accepts a tab as separation, `a:<TAB>b`, as YAML 1.2 and kubectl do, where
    PyYAML refuses the text; everything PyYAML reads, libyaml reads the same.)"""
    return not any(c in text for c in "\x85\u2028\u2029") and "\ufeff" not in text[1:]


def _load(text: str, constructor: type[BaseConstructor], many: bool) -> list[Any]:
    c_loader, py_loader = _loaders(constructor)
    if c_loader is None or (len(text) <= _REPARSE_BYTES and not _libyaml_reads_alike(text)):
        return _run(py_loader, text, many)
    try:
        return _run(c_loader, text, many)
    except (YamlLimitError, ConstructorError):
        raise  # ours, or raised by the (Python) constructor: the same with either parser
    except (yaml.YAMLError, UnicodeEncodeError) as exc:
        if len(text) > _REPARSE_BYTES:
            if isinstance(exc, yaml.YAMLError):
                raise
            raise yaml.YAMLError(f"cannot encode the text: {exc.reason}") from None
    return _run(py_loader, text, many)  # libyaml refused it: PyYAML's message, or its acceptance


def load_yaml(text: str, constructor: type[BaseConstructor] = SafeBuilder) -> Any:
    """The single document of `text` (None if empty), within the limits. Raises yaml.YAMLError
    (a `YamlLimitError` beyond a limit), with a mark where the input says where."""
    return _load(text, constructor, many=False)[0]


def load_yaml_all(text: str, constructor: type[BaseConstructor] = SafeBuilder) -> list[Any]:
    """Every document of `text`, within the limits (aliases counted over the whole input)."""
    return _load(text, constructor, many=True)


def load_yaml_mapping(path: str | os.PathLike[str], what: str) -> dict[Any, Any]:
    """One YAML mapping from the file at `path` (at most MAX_YAML_BYTES, bounded as `load_yaml`);
    any problem -> `ValueError` of one line naming the file (`LimitError` for a limit)."""
    try:
        raw = load_yaml(read_bytes(path, MAX_YAML_BYTES, what).decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except yaml.YAMLError as exc:
        raise ValueError(yaml_problem(exc, str(path))) from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping")
    return raw


def yaml_problem(exc: yaml.YAMLError, source: str) -> str:
    """One line `source:line:col: invalid YAML: context: problem` (limits: without "invalid YAML")."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        what = ": ".join(p for p in (exc.context, exc.problem) if p)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        kind = "" if isinstance(exc, YamlLimitError) else "invalid YAML: "
        return one_line(f"{where}: {kind}{what}")
    return one_line(f"{source}: invalid YAML: {exc}")


def one_line(text: str) -> str:
    """`text` with its whitespace folded when it holds a line break (as `config.messages._one_line`)."""
    return " ".join(text.split()) if any(c in text for c in "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029") else text


# --------------------------------------------------------------------------- numbers


def finite_in(value: Any, lo: float, hi: float) -> bool:
    """`value` is an int or float (not a bool) with lo <= value <= hi (NaN never is)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return lo <= value <= hi and (isinstance(value, int) or math.isfinite(value))  # int vs float: exact


__all__ = [
    "MAX_ALIAS_NODES",
    "MAX_DEPTH",
    "MAX_DOCUMENTS",
    "MAX_MANIFEST_BYTES",
    "MAX_YAML_BYTES",
    "BoundedComposer",
    "LimitError",
    "SafeBuilder",
    "YamlLimitError",
    "check_depth",
    "depth_error",
    "describe_size",
    "finite_in",
    "load_yaml",
    "load_yaml_all",
    "one_line",
    "read_bytes",
    "read_stream",
    "read_text_stream",
    "yaml_problem",
]

