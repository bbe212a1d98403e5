"""A loopback stand-in for the Prometheus HTTP API (stdlib), plain HTTP or HTTPS, whose
answer is a function of the request: enough to test TLS and what reaches logs."""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

EMPTY_VECTOR = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()

Responder = Callable[[str, dict[str, str]], tuple[int, bytes]]
"""(path with query, request headers) -> (status, body)."""


def empty_vector(_path: str, _headers: dict[str, str]) -> tuple[int, bytes]:
    return 200, EMPTY_VECTOR


class StubPrometheus:
    def __init__(self, responder: Responder = empty_vector, *, cert: Path | None = None, key: Path | None = None) -> None:
        self.responder = responder
        self.requests: list[tuple[str, dict[str, str]]] = []
        self._cert, self._key = cert, key
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> StubPrometheus:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                headers = {k: v for k, v in self.headers.items()}
                stub.requests.append((self.path, headers))
                status, body = stub.responder(self.path, headers)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer  # noqa: N815 - http.server API

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        if self._cert is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self._cert, self._key)
            server.socket = context.wrap_socket(server.socket, server_side=True)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        assert self._server is not None
        scheme = "https" if self._cert is not None else "http"
        return f"{scheme}://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> StubPrometheus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def self_signed_certificate(directory: Path, common_name: str = "127.0.0.1") -> tuple[Path, Path]:
    """(cert.pem, key.pem) for `common_name` (also the IP SAN), made with the openssl CLI
    (the `cryptography` package is not a dependency)."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "2", "-subj", f"/CN={common_name}", "-addext", f"subjectAltName=IP:{common_name}"],
        check=True, capture_output=True, timeout=60,
    )
    return cert, key
