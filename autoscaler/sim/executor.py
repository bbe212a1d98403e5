"""Where a sweep's runs execute: `make_executor(spec, jobs)` gives a `concurrent.futures.Executor`.

Specs (`autoscaler simulate --sweep --executor SPEC`):

* `local` (the default): a process pool of `jobs` workers on this machine, no extra dependency.
* `dask://HOST:PORT` (port 8786 when left out): the workers of a running Dask distributed
  scheduler at `tcp://HOST:PORT`; `jobs` is ignored (the cluster's workers set the parallelism).
  Needs the `distributed` extra (`pip install 'vllm-queue-autoscaler[distributed]'`).

Jobs submitted must be picklable and self-contained (a module-level function and plain data):
the same job runs the same way, and gives the same result, in any executor.

Why Dask distributed and not Ray (docs/distributed-sweeps.md has the longer version): a sweep is
a few hundred independent, CPU-bound, seconds-to-minutes function calls with small arguments
and results - exactly `concurrent.futures`. `distributed.Client(address).get_executor()` *is* a
`concurrent.futures.Executor`, so the sweep code is the same for both specs and needs no actor,
object store or resource model. Dask distributed is pure Python (about 38 MB installed with the
17 packages it adds here; only psutil, msgpack, tornado and MarkupSafe carry a small compiled
module), one `pip install` on workers, `dask scheduler` / `dask worker ADDRESS` to start a
cluster, and `LocalCluster` runs one on 127.0.0.1 for tests. Ray would bring a large
platform-specific wheel with a compiled core (GCS, raylet, shared-memory object store), a strict
version match between client and cluster, and its own task API (`ray.remote`) or an adapter,
for features a sweep does not use.

Errors (all `ExecutorError`, a `RuntimeError`; one line, for the command line to print and exit 2):
an unknown or malformed spec is an `ExecutorSpecError` (also a `ValueError`), naming the allowed
forms; a missing extra names the extra to install; a scheduler that does not answer within
`connect_timeout_s` (default 10 s) says so with its address.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

ALLOWED = "local, dask://HOST:PORT"
DASK_SCHEME = "dask"
DASK_DEFAULT_PORT = 8786
CONNECT_TIMEOUT_S = 10.0
EXTRA_HINT = "pip install 'vllm-queue-autoscaler[distributed]'"


class ExecutorError(RuntimeError):
    """The executor a spec names cannot be used (missing extra, unreachable scheduler)."""


class ExecutorSpecError(ExecutorError, ValueError):
    """The spec is not one of the allowed forms."""


def check_spec(spec: str) -> str | None:
    """Validate a spec without connecting: None for `local`, else the Dask scheduler's `tcp://`
    address. Raises ExecutorSpecError (unknown form) or ExecutorError (extra not installed)."""
    if spec == "local":
        return None
    address = _dask_address(spec)
    _import_distributed(spec)
    return address


@contextmanager
def make_executor(spec: str = "local", jobs: int = 1,
                  connect_timeout_s: float = CONNECT_TIMEOUT_S) -> Iterator[Executor]:
    """The executor `spec` names, shut down (submitted work finished) on leaving the block."""
    address = check_spec(spec)
    if address is None:
        with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=mp.get_context("fork")) as ex:
            yield ex
        return
    with _dask_executor(spec, address, connect_timeout_s) as dex:
        yield dex


def _dask_address(spec: str) -> str:
    """`dask://HOST[:PORT]` -> `tcp://HOST:PORT`; anything else is an ExecutorSpecError."""
    parts = urlsplit(spec)
    if parts.scheme != DASK_SCHEME:
        raise ExecutorSpecError(_unknown(spec))
    try:
        port = parts.port if parts.port is not None else DASK_DEFAULT_PORT
    except ValueError:
        raise ExecutorSpecError(f"--executor {spec!r}: the port must be a number 0-65535 (allowed: {ALLOWED})") from None
    if not parts.hostname or parts.username or parts.password or parts.path.strip("/") or parts.query or parts.fragment:
        raise ExecutorSpecError(f"--executor {spec!r}: expected dask://HOST:PORT, nothing else (allowed: {ALLOWED})")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"tcp://{host}:{port}"


def _unknown(spec: str) -> str:
    hint = ""
    if spec.startswith("tcp://"):
        hint = f"; a Dask scheduler at {spec} is spelled {DASK_SCHEME}://{spec.removeprefix('tcp://')}"
    return f"--executor {spec!r}: unknown (allowed: {ALLOWED}){hint}"


def _import_distributed(spec: str) -> ModuleType:
    try:
        return importlib.import_module("distributed")
    except ImportError:
        raise ExecutorError(f"--executor {spec}: needs the distributed extra ({EXTRA_HINT})") from None


def _connect(spec: str, address: str, timeout_s: float) -> Any:
    """A `distributed.Client` connected to the scheduler (not made the process-wide default)."""
    distributed = _import_distributed(spec)
    try:
        return distributed.Client(address, timeout=f"{timeout_s}s", set_as_default=False)
    except OSError as e:  # includes TimeoutError and distributed's CommClosedError
        raise ExecutorError(f"--executor {spec}: no Dask scheduler answered at {address} within "
                            f"{timeout_s:g} s ({type(e).__name__}: {_first_line(e)})") from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else "no detail"


@contextmanager
def _dask_executor(spec: str, address: str, timeout_s: float) -> Iterator[Executor]:
    """The Client's concurrent.futures executor; every submit is its own task (`pure=False`: no
    hashing of arguments, no merging of equal calls). On an exception the pending tasks are
    cancelled; otherwise leaving waits for them, as a process pool does."""
    client = _connect(spec, address, timeout_s)
    try:
        ex: Executor = client.get_executor(pure=False)
        try:
            yield ex
        except BaseException:
            ex.shutdown(wait=False)
            raise
        ex.shutdown(wait=True)
    finally:
        client.close()
