"""Writing an output file so that a reader sees the old file or the whole new one, never a part.

`with atomic_path(path) as tmp:` write to `tmp` (a new file in the same folder, same suffix, so
that a writer choosing the format by extension, e.g. matplotlib, still does), then it is flushed
to disk (fsync) and renamed over `path` (atomic on POSIX), and the folder is synced. On any
exception, KeyboardInterrupt or SystemExit (a SIGTERM the command turned into one), `tmp` is
removed and `path` is untouched: `autoscaler record` killed mid-write keeps the previous
recording (issue 13, defect 8). The new file gets the mode of the file it replaces, or the
umask's default. A path that exists and is no regular file (/dev/stdout, a FIFO) is written
in place: there is nothing to keep, and no folder to write beside it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path


def written_in_place(path: str | os.PathLike[str]) -> bool:
    """A path that exists and is neither a regular file nor a folder (/dev/stdout, /dev/null, a
    FIFO): `atomic_path` writes it in place, so two outputs may share it and its folder need
    not be writable. Worked example: /dev/null -> True; a missing or a regular file -> False."""
    try:
        target = Path(path)
        return target.exists() and not target.is_file() and not target.is_dir()
    except (OSError, ValueError):  # a NUL byte, a name too long: not a device either
        return False


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    final = Path(path)
    if written_in_place(final):
        yield final
        return
    folder = final.parent
    fd, tmp_name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=f".tmp{final.suffix}", dir=folder)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        os.chmod(tmp, _mode_for(final))
        yield tmp
        _fsync(tmp)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_folder(folder)


@contextlib.contextmanager
def atomic_paths(paths: Sequence[str | os.PathLike[str]]) -> Iterator[list[Path]]:
    """Several outputs of one command, all whole or none: each is written to its own temporary
    file (`atomic_path`), and only when every write has succeeded is each renamed over its
    path. A plot that fails after the JSON was written leaves neither (a reader never sees a
    JSON document without the plot of the same run)."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(atomic_path(p)) for p in paths]


def _mode_for(final: Path) -> int:
    try:
        return final.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - a platform without directory handles
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some file systems refuse fsync on a folder
        pass
    finally:
        os.close(fd)
