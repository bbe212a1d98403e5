"""Where a sweep's runs execute: `make_executor(spec, jobs)` gives a `concurrent.futures.Executor`.

`local` (the default): a process pool of `jobs` workers on this machine, no extra dependency.
Other specs (a distributed engine at a cluster address) are added by the `distributed` extra.
Jobs submitted must be picklable and self-contained (a module-level function and plain data):
the same job runs the same way in any executor.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager


@contextmanager
def make_executor(spec: str = "local", jobs: int = 1) -> Iterator[Executor]:
    if spec != "local":
        raise ValueError(f"--executor {spec!r}: unknown (allowed: local)")
    with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=mp.get_context("fork")) as ex:
        yield ex
