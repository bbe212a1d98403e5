"""Read Kubernetes manifests (multi-document YAML or JSON) and keep the line of every node.

Inputs: files, folders (walked recursively for `*.yaml`, `*.yml`, `*.json`) and `-` (stdin, e.g.
`kubectl kustomize DIR | autoscaler lint -`). In a folder that holds a kustomization, the files
it uses as patches or generator sources are not manifests and are skipped; the kustomization
file itself too. A file found in a folder that is no regular file (a FIFO, a socket, a device)
is an unreadable input, refused before it is opened. Only documents that are mappings count;
`kind: List` is expanded into its items.

Mappings and sequences are loaded as `YMap` / `YList`: a dict / list that also knows its own
line and the line of each key / item, so that a finding can point at the exact field.

Reading is bounded (`autoscaler.config.bounded`, docs/limits.md): at most 4 MiB per input and
8 MiB in all, 100,000 documents per input, collections nested at most 100 deep, aliases adding at
most 1,000,000 nodes per input and no recursive alias; beyond, the input is an `InputError`.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import yaml

from autoscaler.config.bounded import (
    MAX_MANIFEST_BYTES,
    MAX_YAML_BYTES,
    LimitError,
    SafeBuilder,
    YamlLimitError,
    describe_size,
    load_yaml,
    load_yaml_all,
    read_bytes,
    read_text_stream,
)

__all__ = [
    "Document",
    "InputError",
    "LoadResult",
    "YList",
    "YMap",
    "line_of",
    "load_inputs",
    "load_text",
]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
STDIN = "-"
STDIN_NAME = "<stdin>"
MAX_TOTAL_BYTES = 2 * MAX_MANIFEST_BYTES
"""All inputs of one `autoscaler lint` together."""


class YMap(dict[Any, Any]):
    """A YAML mapping with `line` (1-based, where it starts), `key_lines` (key -> line) and
    `repeated` (key, first line, repeated line): keys written twice in it, of which YAML loaders,
    kubectl's included, keep the last without a word."""

    line: int = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.key_lines: dict[Any, int] = {}
        self.repeated: list[tuple[Any, int, int]] = []

    def line_of(self, key: Any) -> int:
        """Line of `key` in this mapping; the mapping's own line when the key is absent."""
        return self.key_lines.get(key, self.line)


class YList(list[Any]):
    """A YAML sequence with `line` and `item_lines` (index -> line)."""

    line: int = 0

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.item_lines: list[int] = []

    def line_of(self, index: int) -> int:
        return self.item_lines[index] if 0 <= index < len(self.item_lines) else self.line


def line_of(obj: Any, *path: Any, default: int = 0) -> int:
    """The line of the deepest node of `path` that exists under `obj` (a `YMap`/`YList`).

    `line_of(container, "resources", "limits")` is the line of `limits:` when present, else of
    `resources:`, else of the container itself.
    """
    line = getattr(obj, "line", 0) or default
    node = obj
    for key in path:
        if isinstance(node, YMap) and key in node:
            line = node.line_of(key)
            node = node[key]
        elif isinstance(node, YList) and isinstance(key, int) and 0 <= key < len(node):
            line = node.line_of(key)
            node = node[key]
        else:
            break
    return line


class _LineLoader(SafeBuilder):
    """A SafeConstructor building `YMap`/`YList` (merge keys `<<` and anchors work as usual)."""


def _construct_map(loader: _LineLoader, node: yaml.MappingNode) -> Iterator[YMap]:
    data = YMap()
    data.line = node.start_mark.line + 1
    yield data
    written = [key_node for key_node, _ in node.value if key_node.tag != "tag:yaml.org,2002:merge"]
    data.update(loader.construct_mapping(node))  # flattens `<<` merges into node.value first
    for key_node, _ in node.value:
        try:
            data.key_lines.setdefault(loader.construct_object(key_node), key_node.start_mark.line + 1)
        except TypeError:  # an unhashable key: construct_mapping has already refused it
            continue
    data.repeated = _repeated_keys(loader, written)


def _repeated_keys(loader: _LineLoader, written: list[yaml.Node]) -> list[tuple[Any, int, int]]:
    """Keys written more than once in one mapping, each repetition with the line of the first.
    A key a merge (`<<: *anchor`) brings in and the mapping sets again is no repetition: that
    override is what merges are for."""
    first: dict[Any, int] = {}
    repeated: list[tuple[Any, int, int]] = []
    for key_node in written:
        key, line = loader.construct_object(key_node), key_node.start_mark.line + 1
        try:
            if key in first:
                repeated.append((key, first[key], line))
            else:
                first[key] = line
        except TypeError:  # an unhashable key: construct_mapping has already refused it
            continue
    return repeated


def _construct_seq(loader: _LineLoader, node: yaml.SequenceNode) -> Iterator[YList]:
    data = YList()
    data.line = node.start_mark.line + 1
    yield data
    data.extend(loader.construct_sequence(node))
    data.item_lines = [item.start_mark.line + 1 for item in node.value]


_LineLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)  # type: ignore[type-var]
_LineLoader.add_constructor("tag:yaml.org,2002:seq", _construct_seq)  # type: ignore[type-var]


class InputError(Exception):
    """An input that cannot be read or parsed; the message is one line naming the source."""


@dataclass(frozen=True)
class Document:
    """One manifest: its mapping, the file it came from and the line where it starts."""

    source: str
    line: int
    data: YMap

    @property
    def kind(self) -> str:
        return str(self.data.get("kind") or "")

    @property
    def api_version(self) -> str:
        return str(self.data.get("apiVersion") or "")

    @property
    def metadata(self) -> YMap:
        meta = self.data.get("metadata")
        return meta if isinstance(meta, YMap) else YMap()

    @property
    def name(self) -> str:
        return str(self.metadata.get("name") or "")

    @property
    def namespace(self) -> str | None:
        """metadata.namespace; None when the manifest leaves it to `kubectl -n` / kustomize."""
        ns = self.metadata.get("namespace")
        return str(ns) if ns else None


def load_text(text: str, source: str) -> list[Document]:
    """Every mapping document of `text` (a `kind: List`, or a typed list such as the API's
    `DeploymentList`, gives its items). Raises `InputError`."""
    documents: list[Document] = []
    try:
        for data in load_yaml_all(text, _LineLoader):
            if not isinstance(data, YMap):
                continue  # empty documents, and scalars or lists that are no manifests
            kind = data.get("kind")
            if isinstance(kind, str) and kind.endswith("List") and isinstance(data.get("items"), YList):
                documents += [Document(source, item.line, _list_item(item, kind, data.get("apiVersion")))
                              for item in data["items"] if isinstance(item, YMap)]
            else:
                documents.append(Document(source, data.line, data))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        kind = "" if isinstance(exc, YamlLimitError) else "invalid YAML: "
        raise InputError(f"{where}: {kind}{exc.problem or exc.context or 'unknown error'}") from None
    except yaml.YAMLError as exc:  # e.g. a character YAML does not allow: its message spans lines
        raise InputError(" ".join(f"{source}: invalid YAML: {exc}".split())) from None
    return documents


def _list_item(item: YMap, list_kind: str, api_version: object) -> YMap:
    """An item of a list document. The API leaves `kind` and `apiVersion` out of the items of a
    typed list (`kind: DeploymentList`): they are the list's, without `List`."""
    if list_kind != "List":
        item.setdefault("kind", list_kind[: -len("List")])
        if api_version is not None:
            item.setdefault("apiVersion", api_version)
    return item


def _read(path: Path, source: str) -> str:
    try:
        return read_bytes(path, MAX_MANIFEST_BYTES).decode("utf-8-sig")
    except LimitError as exc:
        raise InputError(str(exc)) from None
    except OSError as exc:
        raise InputError(f"{source}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: cannot read: not UTF-8 ({exc.reason} at byte {exc.start})") from None


_SPECIAL_FILES: tuple[tuple[Callable[[int], bool], str], ...] = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _read_found(path: Path, source: str) -> str:
    """`_read` for a file found in a folder: anything but a regular file (a FIFO, a socket, a
    device) is refused before it is opened, so that reading a folder can never block. (A path
    named on the command line is read whatever it is: `lint <(kubectl kustomize DIR)`.)"""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise InputError(f"{source}: cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        what = next((name for test, name in _SPECIAL_FILES if test(mode)), "a special file")
        raise InputError(f"{source}: cannot read: not a regular file ({what})")
    return _read(path, source)


def _read_stdin(stream: TextIO | None) -> str:
    """All of stdin (bounded); `InputError` when the process has no stdin (`lint - <&-`)."""
    if stream is None:
        raise InputError(f"{STDIN_NAME}: cannot read: stdin is closed")
    return read_text_stream(stream, MAX_MANIFEST_BYTES, STDIN_NAME)


def _kustomization_inputs(folder: Path) -> set[Path]:
    """Files a kustomization in `folder` uses as patches or generator sources (not manifests),
    and the kustomization file itself."""
    used: set[Path] = set()
    for name in KUSTOMIZATION_FILES:
        path = folder / name
        if not path.is_file():
            continue
        used.add(_real_path(path) or path)
        try:
            data = load_yaml(read_bytes(path, MAX_YAML_BYTES).decode("utf-8"))
        except (OSError, UnicodeDecodeError, LimitError, yaml.YAMLError):
            continue  # a broken kustomization is kustomize's problem, not lint's
        if isinstance(data, dict):
            used |= {real for ref in _kustomization_refs(data) if (real := _real_path(folder / ref)) is not None}
    return used


def _kustomization_refs(data: dict[Any, Any]) -> list[str]:
    """The file names a kustomization gives as patches or generator sources. A field of the
    wrong type (`patches: 5`, an entry that is no mapping) counts as absent, as a kustomization
    that is no YAML does: a broken kustomization is kustomize's problem, not lint's."""
    refs: list[str] = []
    for key in ("patches", "patchesJson6902", "replacements"):
        refs += [str(p["path"]) for p in _entries(data.get(key)) if isinstance(p, dict) and p.get("path")]
    # patchesStrategicMerge entries are file paths or inline patches (YAML text)
    refs += [p for p in _entries(data.get("patchesStrategicMerge")) if isinstance(p, str) and "\n" not in p]
    for key in ("configMapGenerator", "secretGenerator"):
        for gen in _entries(data.get(key)):
            if isinstance(gen, dict):
                refs += _generator_sources(gen)
    return refs


def _generator_sources(gen: dict[Any, Any]) -> list[str]:
    """The files of one configMapGenerator / secretGenerator entry (`files`, `envs`, `env`)."""
    files = [str(f).split("=", 1)[-1] for f in _entries(gen.get("files"))]
    envs = [str(e) for e in _entries(gen.get("envs"))]
    return files + envs + ([str(gen["env"])] if gen.get("env") else [])


def _entries(value: Any) -> list[Any]:
    """A kustomization field that should be a list; anything else counts as absent."""
    return value if isinstance(value, list) else []


def _real_path(path: Path) -> Path | None:
    """`path` with its symlinks resolved (a symlink loop stays as written: reading the file then
    says why it cannot be read); None for a name no file can have (a NUL byte)."""
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return None


def _walk(folder: Path) -> Iterator[Path]:
    """Manifest files under `folder`, sorted, hidden folders and kustomize inputs left out."""
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        here = Path(root)
        skip = _kustomization_inputs(here)
        for name in sorted(files):
            path = here / name
            if name.endswith(MANIFEST_SUFFIXES) and not name.startswith(".") and _real_path(path) not in skip:
                yield path


def _why_empty(folder: Path) -> str:
    """Why `_walk` found nothing in `folder`: no manifest file at all, or only a kustomization's
    patches and generator sources (an overlay), which are no whole objects."""
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        if any(n.endswith(MANIFEST_SUFFIXES) and not n.startswith(".") for n in files):
            return (f"its YAML files are all kustomize patches or generator sources, no whole objects: lint what "
                    f"kustomize renders (kubectl kustomize {folder} | autoscaler lint -)")
    return "no *.yaml, *.yml or *.json file in this folder"


@dataclass
class LoadResult:
    """What `load_inputs` read: the documents, the files they came from, and the inputs that
    could not be read (one line each)."""

    documents: list[Document] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    chars_read: int = 0  # all inputs so far (MAX_TOTAL_BYTES)


def load_inputs(inputs: Sequence[str], stdin: TextIO | None = None) -> LoadResult:
    """Load every document of `inputs` (paths, folders, `-`). Unreadable inputs are collected in
    `errors`, the others are still loaded."""
    result = LoadResult()
    for arg in _unique(inputs):
        if arg == STDIN:
            _load_one(result, STDIN_NAME, partial(_read_stdin, stdin or sys.stdin))
            continue
        path = Path(arg)
        if path.is_dir():
            found = list(_walk(path))
            if not found:
                result.errors.append(f"{arg}: {_why_empty(path)}")
            for file in found:
                _load_one(result, str(file), partial(_read_found, file, str(file)))
        elif path.exists():
            _load_one(result, arg, partial(_read, path, arg))
        else:
            result.errors.append(f"{arg}: cannot read: no such file or folder")
    return result


def _load_one(result: LoadResult, source: str, read: Callable[[], str]) -> None:
    try:
        text = read()
        result.chars_read += len(text)
        if result.chars_read > MAX_TOTAL_BYTES:
            size = describe_size(MAX_TOTAL_BYTES)
            raise InputError(f"{source}: the inputs together are larger than {size} (allowed: at most {size})")
        result.documents += load_text(text, source)
    except LimitError as exc:
        result.errors.append(str(exc))
        return
    except InputError as exc:
        result.errors.append(str(exc))
        return
    except OSError as exc:  # stdin closed or unreadable
        result.errors.append(f"{source}: cannot read: {exc}")
        return
    result.files.append(source)


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
