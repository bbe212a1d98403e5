"""Issue 13, defect 11: hostile inputs on check-config, lint, replay, simulate and record.

About 90 hostile inputs gave 20 tracebacks (deep nesting, infinite or huge timestamps, NaN/inf
knobs, 9e18 tokens, a hostile scenario file), accepted garbage with exit 0 (NaN, inf, negative
or 1e300 token counts and NaN arrivals in a trace), grew a 1 MB gzip bomb to 2 GB, spent 59 s on
a 1 KB YAML alias bomb and more than 20 s on a 20,000-target config.

The corpus (tests/hardening/corpus.py, ~250 command lines, generated: nothing big in git) runs
through the real command line, two at a time, each case in its own process: a fork of a server
that has imported the command line once (tests/hardening/forkserver.py; `python corpus.py` runs
them as `python -m autoscaler.cli`). Each refusal: exit 2, exactly one
line on stderr in the subcommand's format (`error: ...`; check-config's own `FILE:LINE:COL: ...`
or `key = value, must be ...`), no traceback. Inputs a command may accept (a lint finding on a
manifest with odd numbers, a valid 20,000-target config): exit 0 or 1 (2 for lint's unreadable
inputs), no traceback. Every call: under 20 s and 3 GB (peak RSS of the child)."""

from __future__ import annotations

import queue
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.hardening.corpus import REPO, Case, ForkServer, build, run_case

SECONDS = 20.0
MEGABYTES = 3 * 1024
CASES = build(Path(tempfile.gettempdir()) / "unused", write_files=False)


Outcome = tuple[Case, tuple[int | None, str, float, int]]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Outcome]]:
    """Every case run once (two at a time), with the case as built (its paths in `folder`)."""
    folder = tmp_path_factory.mktemp("hostile")
    cases = build(folder)
    assert [c.name for c in cases] == [c.name for c in CASES]
    todo: queue.SimpleQueue[Case] = queue.SimpleQueue()
    for case in cases:
        todo.put(case)

    def drain(server: ForkServer) -> dict[str, tuple[int | None, str, float, int]]:
        out = {}
        while True:
            try:
                case = todo.get_nowait()
            except queue.Empty:
                return out
            out[case.name] = server.run(case, timeout=SECONDS * 3)

    servers: list[ForkServer] = []
    try:
        for i in range(2):
            servers.append(ForkServer(tmp_path_factory.mktemp(f"stderr-{i}")))
        with ThreadPoolExecutor(2) as pool:
            results = {name: r for part in pool.map(drain, servers) for name, r in part.items()}
    finally:
        for server in servers:
            server.close()
    yield {c.name: (c, results[c.name]) for c in cases}


def test_the_corpus_is_large_and_names_are_unique() -> None:
    assert len(CASES) >= 200
    assert len({c.name for c in CASES}) == len(CASES)
    assert {c.argv[0] for c in CASES} >= {"check-config", "lint", "replay", "simulate", "record"}


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_hostile_input(name: str, outcomes: dict[str, Outcome]) -> None:
    case, (rc, stderr, seconds, megabytes) = outcomes[name]
    assert rc is not None, f"{case.name}: still running after {seconds:.0f} s"
    assert "Traceback" not in stderr, stderr[-2000:]
    assert seconds < SECONDS, f"{case.name}: {seconds:.1f} s"
    assert megabytes < MEGABYTES, f"{case.name}: {megabytes} MB"
    lines = stderr.strip().splitlines()
    if case.expect == "refuse":
        assert rc == 2, (rc, stderr[-500:])
        assert len(lines) == 1, stderr[-2000:]
        assert lines[0].startswith(case.prefix), lines[0]
        assert len(lines[0]) < 400, lines[0]
    else:
        assert rc in (0, 1, 2), (rc, stderr[-500:])


def test_the_fork_server_gives_what_python_m_gives(tmp_path: Path) -> None:
    """A fork of the server answers as `python -m autoscaler.cli` does (exit status, stderr to
    the byte) on a refusal of each kind, an accepted input and --version; and a case still running
    at its timeout is killed and reported as such."""
    cases = build(tmp_path / "cases")
    by_name = {c.name: c for c in cases}
    picked = [by_name[n] for n in ("check-config/deep-flow-seq", "simulate-flag/--seeds=0", "usage/simulate-duration-abc",
                                   "replay/notes-null")] + [Case("version", ("--version",), expect="run")]
    server = ForkServer(tmp_path / "stderr")
    try:
        for case in picked:
            rc, err, _, mb = server.run(case, timeout=SECONDS * 3)
            want_rc, want_err, _, _ = run_case(case, timeout=SECONDS * 3)
            assert (rc, err) == (want_rc, want_err), case.name
            assert 0 < mb < MEGABYTES
        slow = Case("slow", ("simulate", "--scenario", str(REPO / "simulations" / "scenarios" / "demo.yaml")))
        rc, err, seconds, _ = server.run(slow, timeout=0.5)
        assert rc is None and 0.5 <= seconds < 5
        rc, _, _, _ = server.run(by_name["simulate-flag/--seeds=0"], timeout=SECONDS)  # still serves
        assert rc == 2
    finally:
        server.close()
