"""/metrics, /healthz, /readyz under idle and slow clients: bounded threads and connections,
a timeout on every request, and the probes still answered."""

from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from autoscaler.controller.telemetry import ControllerMetrics, HealthServer


@pytest.fixture
def server() -> Iterator[HealthServer]:
    s = HealthServer(ControllerMetrics(), lambda: True, lambda: False, host="127.0.0.1", port=0,
                     max_connections=50, request_timeout_seconds=0.5).start()
    yield s
    s.stop()


def get(server: HealthServer, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def idle(server: HealthServer, n: int) -> list[socket.socket]:
    """`n` connections that never send a byte (slowloris)."""
    return [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(n)]


def wait_for(predicate: object, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


def test_the_endpoints(server: HealthServer) -> None:
    assert get(server, "/healthz") == 200
    assert get(server, "/readyz") == 503
    assert get(server, "/metrics") == 200
    assert get(server, "/nothing") == 404


def test_idle_connections_cost_no_thread_and_the_probes_still_answer(server: HealthServer) -> None:
    """Was: one thread per connection, held for ever (ThreadingHTTPServer, no timeout): 1,000
    idle connections, 1,000 threads."""
    threads = threading.active_count()
    sockets = idle(server, 40)
    try:
        assert wait_for(lambda: server.open_connections == 40)
        assert threading.active_count() <= threads + 1
        assert get(server, "/healthz") == 200  # answered while they hang
    finally:
        for s in sockets:
            s.close()


def test_an_idle_connection_is_closed_after_the_request_timeout(server: HealthServer) -> None:
    [s] = idle(server, 1)
    try:
        started = time.monotonic()
        assert s.recv(1) == b""  # the server hung up on it
        assert 0.4 <= time.monotonic() - started < 3.0
    finally:
        s.close()
    assert wait_for(lambda: server.open_connections == 0)


def test_connections_beyond_the_bound_are_closed_at_once(server: HealthServer) -> None:
    sockets = idle(server, 50)
    try:
        assert wait_for(lambda: server.open_connections == 50)
        [extra] = idle(server, 1)
        extra.settimeout(2)
        assert extra.recv(1) == b""  # closed without waiting for the request timeout
        extra.close()
        assert server.open_connections == 50
    finally:
        for s in sockets:
            s.close()
    assert wait_for(lambda: server.open_connections == 0)
    assert get(server, "/healthz") == 200


def test_a_huge_request_is_refused(server: HealthServer) -> None:
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    try:
        s.sendall(b"GET /healthz HTTP/1.1\r\n" + b"X-Junk: " + b"a" * 20000 + b"\r\n\r\n")
        assert s.recv(100) == b""
    except ConnectionResetError:
        pass
    finally:
        s.close()
    assert get(server, "/healthz") == 200
