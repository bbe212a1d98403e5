"""A small reverse proxy in front of a real Prometheus, with switchable faults (test-only).

Real HTTP in front (stdlib `ThreadingHTTPServer` on 127.0.0.1), the real Prometheus behind it
for every answer that is not an outright failure: rewriting modes forward the query and then
alter Prometheus' own answer.

Modes (`proxy.set_mode(mode, **options)`):

* `pass`       - forward as is.
* `down`       - the listening socket is closed: connection refused. `set_mode("pass")`
                 listens again on the same port.
* `reset`      - accept, read the request, close with a TCP RST (SO_LINGER 0): connection reset.
* `slow`       - sleep `delay_seconds` (default 3) before forwarding: past the client timeout.
* `status`     - answer `status` (500, 503, 422...) with Prometheus' error JSON
                 (`{"status": "error", "errorType": ..., "error": ...}`).
* `empty`      - Prometheus' answer with an empty result vector.
* `nan`/`inf`  - every sample value of the answer becomes "NaN" / "+Inf".
* `duplicate`  - every series of the answer appears twice.
* `drop_pods`  - series whose `pod` label is in `pods` are removed.
* `drop_metric`- queries mentioning any of `metrics` (e.g. the KV metric names) get an empty
                 result: the metric is gone, as after a rename the controller does not know.
* `lag`        - the query is evaluated `seconds` earlier than asked (a Prometheus replica or
                 querier lagging behind): every sample is that much older.

Independently of the mode, `proxy.bearer_tokens` (a set; None = no check) makes the proxy
answer 401 to a query whose `Authorization: Bearer <token>` is not one of them, as a
kube-rbac-proxy or an authenticating gateway in front of Prometheus does.

`proxy.requests` counts the queries seen; `proxy.stop()` ends everything (also sleeping handlers).
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit, urlunsplit

_ERROR_TYPES = {422: "execution", 400: "bad_data", 503: "unavailable", 500: "internal"}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    proxy: PrometheusProxy


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        self.server.proxy._handle(self, None)

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        self.server.proxy._handle(self, self.rfile.read(length))

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


class PrometheusProxy:
    def __init__(self, upstream: str, host: str = "127.0.0.1") -> None:
        self.upstream = upstream.rstrip("/")
        self.host = host
        self.port = 0
        self.mode = "pass"
        self.options: dict[str, Any] = {}
        self.bearer_tokens: set[str] | None = None
        self.requests = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # ---- lifecycle

    def start(self) -> PrometheusProxy:
        self._stopping.clear()
        self._listen()
        return self

    def _listen(self) -> None:
        server = _Server((self.host, self.port), _Handler)
        server.proxy = self
        self.port = int(server.server_address[1])
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                  name="prometheus-proxy", daemon=True)
        thread.start()
        self._server, self._thread = server, thread

    def _close(self) -> None:
        server, thread, self._server, self._thread = self._server, self._thread, None, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=10)

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers in a `slow` sleep
        self._close()

    def __enter__(self) -> PrometheusProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- control

    def set_mode(self, mode: str, **options: Any) -> None:
        known = ("pass", "down", "reset", "slow", "status", "empty", "nan", "inf", "duplicate", "drop_pods",
                 "drop_metric", "lag")
        if mode not in known:
            raise ValueError(f"unknown mode {mode!r}")
        with self._lock:
            was_down = self.mode == "down"
            self.mode, self.options = mode, dict(options)
        if mode == "down" and not was_down:
            self._close()  # nothing listens on the port any more: connection refused
        elif mode != "down" and was_down:
            self._listen()  # same port again

    def drop_pods(self, pods: Iterable[str]) -> None:
        self.set_mode("drop_pods", pods=set(pods))

    # ---- requests

    def _handle(self, h: BaseHTTPRequestHandler, body: bytes | None) -> None:
        with self._lock:
            mode, options, tokens = self.mode, dict(self.options), self.bearer_tokens
            self.requests += 1
        if tokens is not None:
            scheme, _, token = (h.headers.get("Authorization") or "").partition(" ")
            if scheme.lower() != "bearer" or token not in tokens:
                self._send(h, 401, {"status": "error", "errorType": "unauthorized", "error": "Unauthorized"})
                return
        if mode == "reset":
            sock = h.connection
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            h.close_connection = True
            sock.close()
            return
        if mode == "slow" and self._stopping.wait(float(options.get("delay_seconds", 3.0))):
            return
        if mode == "status":
            code = int(options.get("status", 500))
            error_type = options.get("error_type", _ERROR_TYPES.get(code, "internal"))
            message = options.get("error", f"injected fault: HTTP {code}")
            self._send(h, code, {"status": "error", "errorType": error_type, "error": message})
            return
        path = h.path
        if mode == "lag":
            path, body = self._lagged(path, body, float(options.get("seconds", 60.0)))
        code, data = self._forward(h, path, body)
        if code == 200 and mode in ("empty", "nan", "inf", "duplicate", "drop_pods", "drop_metric"):
            doc = json.loads(data)
            query = self._query_text(h.path, body)
            doc = self._rewrite(doc, mode, options, query)
            data = json.dumps(doc).encode()
        self._send_raw(h, code, data)

    @staticmethod
    def _lagged(path: str, body: bytes | None, seconds: float) -> tuple[str, bytes | None]:
        """Move the `time` parameter of an instant query `seconds` back (default: now)."""

        def shift(query: str) -> str:
            params = parse_qsl(query, keep_blank_values=True)
            at = next((float(v) for k, v in params if k == "time"), time.time())
            params = [(k, v) for k, v in params if k != "time"] + [("time", f"{at - seconds:.3f}")]
            return urlencode(params)

        parts = urlsplit(path)
        if body:
            return path, shift(body.decode()).encode()
        return urlunsplit(parts._replace(query=shift(parts.query))), body

    def _forward(self, h: BaseHTTPRequestHandler, path: str, body: bytes | None) -> tuple[int, bytes]:
        headers = {k: v for k, v in h.headers.items() if k.lower() in ("content-type", "accept", "authorization")}
        req = urllib.request.Request(self.upstream + path, data=body, headers=headers, method=h.command)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return int(resp.status), resp.read()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read()
        except (urllib.error.URLError, OSError) as exc:  # Prometheus itself is down: a gateway error
            return 502, json.dumps({"status": "error", "errorType": "unavailable",
                                    "error": f"proxy: upstream unreachable: {exc}"}).encode()

    @staticmethod
    def _query_text(path: str, body: bytes | None) -> str:
        params = parse_qs(urlsplit(path).query)
        if body:
            params.update(parse_qs(body.decode("utf-8", "replace")))
        return " ".join(params.get("query", []))

    @staticmethod
    def _rewrite(doc: Any, mode: str, options: dict[str, Any], query: str) -> Any:
        data = doc.get("data") if isinstance(doc, dict) else None
        if not isinstance(data, dict) or not isinstance(data.get("result"), list):
            return doc
        result: list[Any] = data["result"]
        if mode == "empty":
            result = []
        elif mode == "drop_metric":
            if any(m in query for m in options.get("metrics", ())):
                result = []
        elif mode in ("nan", "inf"):
            special = "NaN" if mode == "nan" else "+Inf"
            for series in result:
                # only the values: the tagged timestamp series must stay numbers
                if (series.get("metric") or {}).get("vqa_field", "value") == "value" and "value" in series:
                    series["value"] = [series["value"][0], special]
        elif mode == "duplicate":
            result = [s for series in result for s in (series, json.loads(json.dumps(series)))]
        elif mode == "drop_pods":
            pods = set(options.get("pods", ()))
            result = [s for s in result if (s.get("metric") or {}).get("pod") not in pods]
        data["result"] = result
        return doc

    def _send(self, h: BaseHTTPRequestHandler, code: int, doc: Any) -> None:
        self._send_raw(h, code, json.dumps(doc).encode())

    @staticmethod
    def _send_raw(h: BaseHTTPRequestHandler, code: int, data: bytes) -> None:
        try:
            h.send_response(code)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
        except OSError:  # the client gave up (timeout)
            pass
