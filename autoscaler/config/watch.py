"""The live watcher: the last good config of a mounted ConfigMap stays in force."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable

from autoscaler.config.load import _read_text, load_config_text
from autoscaler.config.messages import ConfigError
from autoscaler.config.model import AutoscalerConfig

# --- live reload ---------------------------------------------------------------------------------


class ConfigWatcher:
    """The last good config of a file that may change under us (a mounted ConfigMap).

    The kubelet updates a mounted ConfigMap by writing a new timestamped directory and atomically
    swapping the `..data` symlink, so the file's own mtime is no signal: `poll()` re-reads the file
    and compares a hash of its content. An invalid new version is rejected once (counted in
    `rejected_total`, kept in `last_error`) and the last good config stays in force; a valid one
    replaces `current`, bumps `generation` and calls `on_change(old, new)`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        on_change: Callable[[AutoscalerConfig, AutoscalerConfig], None] | None = None,
    ) -> None:
        """Load the file now; raise `ConfigError` if it is invalid (the controller must not start)."""
        self.path = os.fspath(path)
        self.on_change = on_change
        text = _read_text(self.path)
        self.current: AutoscalerConfig = self._load(text)
        self.content_hash: str = _digest(text)
        """Hash of the content `current` was loaded from."""
        self.generation: int = 1  # 1 = the initial load; +1 per applied change
        self.rejected_total: int = 0
        self.last_error: ConfigError | None = None
        self._seen_hash = self.content_hash  # last content examined, good or bad

    def poll(self) -> bool:
        """Re-read the file; return True when a new valid config replaced `current`.

        Each distinct bad version (or read failure) is counted once, however many ticks it stays.
        """
        error: ConfigError | None = None
        try:
            text = _read_text(self.path)
            digest = _digest(text)
        except ConfigError as exc:
            text, digest, error = "", _digest("\0unreadable\0" + str(exc)), exc
        if digest == self._seen_hash:
            return False
        self._seen_hash = digest
        if error is None:
            try:
                new = self._load(text)
            except ConfigError as exc:
                error = exc
        if error is not None:
            self.rejected_total += 1
            self.last_error = error
            return False
        self.last_error = None
        if digest == self.content_hash:  # back to the version in force after a rejected one
            return False
        old, self.current, self.content_hash = self.current, new, digest
        self.generation += 1
        if self.on_change is not None:
            self.on_change(old, new)
        return True

    def _load(self, text: str) -> AutoscalerConfig:
        """`load_config_text`, with any failure a `ConfigError`: an exception of another type
        escaping `poll()` after the content hash was recorded left that version neither applied
        nor counted as rejected (issue 13, defect 7)."""
        try:
            return load_config_text(text, source=self.path)
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - a reader bug must still reject the version
            detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
            raise ConfigError([f"{self.path}: cannot load: {detail}"], source=self.path) from exc


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
