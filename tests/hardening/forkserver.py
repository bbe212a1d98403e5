"""Run command lines of `autoscaler` in forks of one process that has imported the command line.

The hostile corpus is ~250 command lines; started as `python -m autoscaler.cli ...` each spends
~0.45 s importing Python, the command line and numpy before it reads its input (three quarters
of the corpus' CPU). Here one server process imports `autoscaler.cli` and every subcommand once,
then forks a child per case: the child is what `python -m autoscaler.cli ARGV` is after its imports
(the same `main`, its own process, stdin from /dev/null, stdout to /dev/null, stderr to a file,
an uncaught exception printed as the interpreter prints it, exit 1), so its exit status, stderr,
time and peak RSS (os.wait4 on it alone) are the case's. Interpreter start-up itself is tested by
the other tests that run `python -m autoscaler.cli`.

Protocol (one JSON object per line): the server reads `{"argv": [...], "stderr": PATH, "timeout": S}`
on stdin and answers `{"rc": int | null, "seconds": float, "maxrss_kb": int}` (rc null: killed at
the timeout, with the child's process group)."""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import time
import traceback


def _child(argv: list[str], stderr_path: str) -> None:
    """In the fork: become `autoscaler ARGV` and never return."""
    code = 1
    try:
        os.setpgid(0, 0)  # its own group: a timeout kills what it started too
        null = os.open(os.devnull, os.O_RDWR)
        err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(err, 2)
        sys.argv = ["autoscaler", *argv]
        from autoscaler.cli.main import main

        try:
            main(args=argv, prog_name="python -m autoscaler.cli")  # as click names it under -m
            code = 0
        except SystemExit as exc:  # as the interpreter ends on it
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:  # noqa: BLE001 - printed as an uncaught exception is
            traceback.print_exc()
            code = 1
    finally:
        try:
            atexit._run_exitfuncs()  # what the interpreter runs at its end (logging's flush among them)
        except BaseException:  # noqa: BLE001, S110 - a handler's error is printed by atexit itself
            pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001, S110 - a closed or broken stream: nothing to flush
                pass
        os._exit(code)


def _run(argv: list[str], stderr_path: str, timeout: float) -> dict[str, object]:
    sys.stdout.flush()
    sys.stderr.flush()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(argv, stderr_path)
    deadline = t0 + timeout
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return {"rc": os.waitstatus_to_exitcode(status), "seconds": time.monotonic() - t0,
                    "maxrss_kb": usage.ru_maxrss}
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:  # not yet its own group leader: the child alone
                os.kill(pid, signal.SIGKILL)
            os.wait4(pid, 0)
            return {"rc": None, "seconds": time.monotonic() - t0, "maxrss_kb": 0}
        time.sleep(0.01)


def serve() -> None:
    from autoscaler.cli.main import subcommands

    subcommands()  # every subcommand imported once, before the first fork
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        ask = json.loads(line)
        print(json.dumps(_run(list(ask["argv"]), str(ask["stderr"]), float(ask["timeout"]))), flush=True)


if __name__ == "__main__":
    serve()
