"""An in-process Kubernetes API test server (stdlib HTTP, threaded, loopback only).

The official `kubernetes` client talks to it like to a kube-apiserver, for the resources the
autoscaler uses: Deployments (+ the `scale` subresource), Pods, Nodes, HPAs (autoscaling/v2),
core/v1 Events, ConfigMaps and coordination.k8s.io/v1 Leases. Semantics kept from the real
server: a global resourceVersion bumped on every write (no-op writes do not write),
optimistic concurrency (409 Conflict on a stale metadata.resourceVersion in PUT and PATCH
bodies), Deployment metadata.generation bumped on spec changes (scale writes included),
merge / strategic-merge / JSON patches, label and field selectors, and `Status` error bodies.

A write to the `scale` subresource is also conditional on `metadata.uid` when the body carries
one (409 "precondition failed: UID in precondition", as the deployment registry answers).
Authentication: none by default; with `bearer_tokens` set, a request must carry
`Authorization: Bearer <one of them>`, else 401 (the set can change at run time: a rotation).

Not implemented: watch, pagination (`limit` is ignored, lists are complete), admission,
defaulting beyond Deployment `spec.replicas`, garbage collection, TLS (plain HTTP).
Strategic merge patch is approximated by a JSON merge patch in which lists of objects are
merged by their `name` (else `type`) key; `$patch` directives are not supported.

With `simulate_deployment_controller=True` (the default) a scale write also does what the
deployment controller would do within milliseconds: status.observedGeneration = generation
and status.replicas = status.updatedReplicas = spec.replicas (pods are NOT created).

With `simulate_replicaset_controller=True` (off by default), a scale write that lowers
spec.replicas also removes the pods the ReplicaSet controller would, at once (no
deletionTimestamp, no grace period): of the Deployment's pods (its selector, its namespace,
not terminating) it keeps spec.replicas and deletes the others in the controller's order,
kubernetes pkg/controller/controller_utils.go `ActivePodsWithRanks.Less` as used by
pkg/controller/replicaset/replica_set.go `getPodsToDelete`: unassigned before assigned,
Pending before Unknown before Running, not ready before ready, lower
`controller.kubernetes.io/pod-deletion-cost` first (an absent or unparsable one is 0), more
recently ready first, more container restarts first, newer first. Not modelled: the
"co-located pods" rank (pods of the ReplicaSet on the same node), the log-scale bucketing of
the ready time (LogarithmicScaleDown) and the UID tie-break. Pods are not created on a scale-up.

    with KubeApiServer() as server:
        server.put(deployment("vllm", "llm", replicas=2))
        server.write_kubeconfig(tmp_path / "kubeconfig")
        server.inject_fault(method="PATCH", path_regex=r"/scale$", status=429, headers={"Retry-After": "1"})

Standalone: `python -m tests.kube_api_server --port 8001 --seed objects.json`.
"""

from __future__ import annotations

import argparse
import builtins
import copy
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

JSON = dict[str, Any]


# --------------------------------------------------------------------------- resources


@dataclass(frozen=True)
class ResourceType:
    kind: str
    group: str  # "" = core
    version: str
    plural: str
    namespaced: bool = True
    has_generation: bool = False
    subresources: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:  # "deployments.apps", as in the real server's messages
        return f"{self.plural}.{self.group}" if self.group else self.plural


RESOURCES: tuple[ResourceType, ...] = (
    ResourceType("Deployment", "apps", "v1", "deployments", has_generation=True, subresources=("scale",)),
    ResourceType("Pod", "", "v1", "pods"),
    ResourceType("Node", "", "v1", "nodes", namespaced=False),
    ResourceType("HorizontalPodAutoscaler", "autoscaling", "v2", "horizontalpodautoscalers", has_generation=True),
    ResourceType("Event", "", "v1", "events"),
    ResourceType("ConfigMap", "", "v1", "configmaps"),
    ResourceType("Lease", "coordination.k8s.io", "v1", "leases"),
)
_BY_PATH = {(r.group, r.version, r.plural): r for r in RESOURCES}
_BY_NAME = {n.lower(): r for r in RESOURCES for n in (r.kind, r.plural)}


def resource_type(kind: str) -> ResourceType:
    """"Deployment", "deployments" or "deployment" (any case) -> its ResourceType."""
    rt = _BY_NAME.get(kind.lower()) or _BY_NAME.get(kind.lower() + "s")
    if rt is None:
        raise KeyError(f"unknown kind {kind!r}")
    return rt


# Path grammar: /api/v1[/namespaces/NS]/PLURAL[/NAME[/SUB]] or /apis/GROUP/VERSION[...]
_PATH = re.compile(
    r"^/(?:api/(?P<core_version>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$"
)

# Router table: (method, addresses one object, subresource) -> handler method name.
_ROUTES: dict[tuple[str, bool, str | None], str] = {
    ("GET", False, None): "_list",
    ("POST", False, None): "_create",
    ("GET", True, None): "_read",
    ("PUT", True, None): "_replace",
    ("PATCH", True, None): "_patch",
    ("DELETE", True, None): "_delete",
    ("GET", True, "scale"): "_read_scale",
    ("PUT", True, "scale"): "_replace_scale",
    ("PATCH", True, "scale"): "_patch_scale",
}
_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
    409: "Conflict", 410: "Expired", 415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests",
    500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout",
}


@dataclass
class Route:
    """A parsed request path, plus the query, the parsed body and its content type."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    sub: str | None
    query: dict[str, str] = field(default_factory=dict)
    body: Any = None
    ctype: str | None = None

    @property
    def resource(self) -> str:
        return f"{self.rt.plural}/{self.sub}" if self.sub else self.rt.plural

    @property
    def obj_name(self) -> str:  # single-object routes only
        assert self.name is not None
        return self.name


class ApiError(Exception):
    """Raised by handlers; rendered as a `Status` object."""

    def __init__(self, code: int, message: str, reason: str | None = None, details: JSON | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code, self.message = code, message
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.details, self.headers = details, headers or {}

    def status(self) -> JSON:
        body: JSON = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            body["details"] = self.details
        return body


def _not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(404, f'{rt.qualified} "{name}" not found', details={"name": name, "group": rt.group, "kind": rt.plural})


def _conflict(rt: ResourceType, name: str) -> ApiError:
    return ApiError(409, f'Operation cannot be fulfilled on {rt.qualified} "{name}": the object has been modified; '
                    "please apply your changes to the latest version and try again",
                    details={"name": name, "group": rt.group, "kind": rt.plural})


# --------------------------------------------------------------------------- faults, request log


@dataclass
class Fault:
    """A scripted misbehaviour for the requests matching `method` (None = any), `path_regex`
    (re.search on the path, query excluded) and `user_agent_regex` (re.search on the
    User-Agent, None = any client: one replica can be partitioned from a path while another
    reaches it). `times=None` = forever. In order: wait `delay_seconds` (interrupted when the
    server stops), call `before()` (e.g. `server.touch`), then answer `status` with a Status
    body and `headers` (or `body`, raw bytes, when given), or, when `status` is None, serve the
    request normally; then call `after()` (the request is done, the answer not sent yet)."""

    method: str | None
    path_regex: str
    status: int | None = 500
    times: int | None = 1
    headers: dict[str, str] = field(default_factory=dict)
    delay_seconds: float = 0.0
    message: str | None = None
    reason: str | None = None
    before: Callable[[], object] | None = None
    user_agent_regex: str | None = None
    body: bytes | None = None
    after: Callable[[], object] | None = None
    hits: int = 0

    def matches(self, method: str, path: str, user_agent: str = "") -> bool:
        live = self.times is None or self.hits < self.times
        return (live and (self.method is None or self.method == method) and re.search(self.path_regex, path) is not None
                and (self.user_agent_regex is None or re.search(self.user_agent_regex, user_agent) is not None))


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    content_type: str | None
    status: int = 0  # response status, set once answered
    user_agent: str = ""
    at: float = 0.0  # the server's clock when the request arrived


# --------------------------------------------------------------------------- patches, selectors


def merge_patch(target: Any, patch: Any, strategic: bool = False) -> Any:
    """RFC 7386 JSON merge patch; with `strategic`, lists of objects merge by name/type."""
    if not isinstance(patch, dict):
        if strategic and isinstance(patch, list) and isinstance(target, list):
            return _merge_lists(target, patch)
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value, strategic)
    return result


def _merge_lists(target: list[Any], patch: list[Any]) -> list[Any]:
    items = [x for x in target + patch if isinstance(x, dict)]
    key = next((k for k in ("name", "type") if items and all(k in x for x in items)), None)
    if key is None or len(items) != len(target) + len(patch):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target)
    for item in patch:
        index = next((i for i, x in enumerate(result) if x[key] == item[key]), None)
        if index is None:
            result.append(copy.deepcopy(item))
        else:
            result[index] = merge_patch(result[index], item, True)
    return result


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test)."""
    if not isinstance(ops, list):
        raise ApiError(400, "json patch: the body must be a list of operations")
    doc = copy.deepcopy(doc)

    def walk(pointer: str) -> tuple[Any, Any]:  # (container, key or index) of a JSON pointer
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]] or [""]
        node = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        return node, ((len(node) if last == "-" else int(last)) if isinstance(node, list) else last)

    def add(pointer: str, value: Any) -> None:
        parent, key = walk(pointer)
        parent.insert(key, value) if isinstance(parent, list) else parent.__setitem__(key, value)

    def remove(pointer: str) -> Any:
        parent, key = walk(pointer)
        return parent.pop(key)

    def get(pointer: str) -> Any:
        parent, key = walk(pointer)
        return copy.deepcopy(parent[key])

    for op in ops:
        try:
            kind, path = op["op"], op["path"]
            if kind in ("remove", "replace"):
                remove(path)
            if kind in ("add", "replace"):
                add(path, copy.deepcopy(op["value"]))
            elif kind in ("move", "copy"):
                add(path, remove(op["from"]) if kind == "move" else get(op["from"]))
            elif kind == "test" and get(path) != op["value"]:
                raise ApiError(422, f"json patch: test operation failed at {path}")
            elif kind not in ("remove", "test"):
                raise ApiError(400, f"json patch: unknown op {kind!r}")
        except (KeyError, IndexError, ValueError, TypeError, AttributeError) as exc:
            raise ApiError(422, f"json patch: cannot apply {op!r}: {exc!r}") from None
    return doc


_REQUIREMENT = re.compile(
    r"^\s*(?:(?P<not>!)\s*(?P<nkey>[^\s!=,()]+)|(?P<key>[^\s!=,()]+)\s*(?:(?P<op>==|=|!=)\s*(?P<value>[^\s,()]*)"
    r"|\s(?P<setop>in|notin)\s*\((?P<values>[^)]*)\))?)\s*$"
)


def _split_selector(text: str) -> list[str]:
    """Split on the commas that are not inside parentheses."""
    return [p for p in re.split(r",(?![^()]*\))", text) if p.strip()]


def _requirement(key: str, op: str, values: set[str]) -> Callable[[dict[str, str]], bool]:
    tests: dict[str, Callable[[dict[str, str]], bool]] = {
        "=": lambda labels: labels.get(key) in values, "!=": lambda labels: labels.get(key) not in values,
        "in": lambda labels: labels.get(key) in values, "notin": lambda labels: labels.get(key) not in values,
        "exists": lambda labels: key in labels, "!": lambda labels: key not in labels,
    }
    return tests[op]


def label_selector_matcher(text: str) -> Callable[[dict[str, str]], bool]:
    """Parse `a=b,c!=d,e in (x,y),f notin (z),g,!h` into a predicate over labels."""
    tests = []
    for part in _split_selector(text):
        m = _REQUIREMENT.match(part)
        if m is None:
            raise ApiError(400, f"unable to parse requirement: {part!r}")
        if m["not"]:
            tests.append(_requirement(m["nkey"], "!", set()))
        elif m["op"]:
            tests.append(_requirement(m["key"], "!=" if m["op"] == "!=" else "=", {m["value"]}))
        elif m["setop"]:
            tests.append(_requirement(m["key"], m["setop"], {v.strip() for v in m["values"].split(",") if v.strip()}))
        else:
            tests.append(_requirement(m["key"], "exists", set()))
    return lambda labels: all(t(labels) for t in tests)


def field_selector_matcher(text: str) -> Callable[[JSON], bool]:
    """`metadata.name=x,spec.nodeName!=,status.phase!=Failed` over dotted paths of the object."""
    terms = []
    for part in _split_selector(text):
        m = re.match(r"^\s*([\w.]+)\s*(==|=|!=)\s*(.*?)\s*$", part)
        if m is None:
            raise ApiError(400, f"invalid field selector: {part!r}")
        terms.append((m[1].split("."), m[3], m[2] == "!="))

    def value_of(obj: Any, path: list[str]) -> str:
        for step in path:
            obj = obj.get(step) if isinstance(obj, dict) else None
        return "" if obj is None else str(obj)

    return lambda obj: all((value_of(obj, path) == value) != negate for path, value, negate in terms)


def selector_string(selector: JSON) -> str:
    """A Deployment's spec.selector in query syntax (a Scale's status.selector)."""
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], ",".join(sorted(expr.get("values") or []))
        parts.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})",
                      "Exists": key, "DoesNotExist": f"!{key}"}[op])
    return ",".join(parts)


# --------------------------------------------------------------------------- the server


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins the handler threads
    block_on_close = True
    api: KubeApiServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # one request per connection: no idle keep-alive threads at stop
    timeout = 10.0
    server: _HTTPServer

    def _handle(self) -> None:
        self.server.api._dispatch(self)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


class KubeApiServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, simulate_deployment_controller: bool = True,
                 clock: Callable[[], float] = time.time, simulate_replicaset_controller: bool = False) -> None:
        self.host, self._port = host, port
        self.simulate_deployment_controller = simulate_deployment_controller
        self.simulate_replicaset_controller = simulate_replicaset_controller
        self.removed_pods: list[str] = []  # "namespace/name" of every pod removed on a scale-down, in order
        self.clock = clock
        self.bearer_tokens: set[str] | None = None  # None: no authentication
        self.requests: list[RecordedRequest] = []
        self.faults: list[Fault] = []
        self._objects: dict[tuple[str, str, str], JSON] = {}  # (plural, namespace or "", name) -> object
        self._rv = 0
        # paginated lists: continue token -> (the items still to serve, the list's resourceVersion);
        # a token can be used again (a retried page) until expire_continue_tokens()
        self._continuations: dict[str, tuple[list[JSON], str]] = {}
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle

    def start(self) -> KubeApiServer:
        self._httpd = _HTTPServer((self.host, self._port), _Handler)
        self._httpd.api = self
        self._stopping.clear()
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="kube-api-test-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in a fault delay
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._httpd = self._thread = None

    def __enter__(self) -> KubeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def write_kubeconfig(self, path: str | Path, namespace: str = "default") -> Path:
        """A kubeconfig (JSON, which is YAML) for plain http without auth; returns the path."""
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.url}}],
            "users": [{"name": "test", "user": {}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test", "namespace": namespace}}],
        }
        path = Path(path)
        path.write_text(json.dumps(config, indent=2))
        return path

    # ---- python API: objects

    def put(self, obj: JSON) -> JSON:
        """Create or replace (unconditionally) an object; keeps given uid/creationTimestamp/
        generation when present. Returns the stored copy."""
        rt = resource_type(obj["kind"])
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if rt.namespaced:
            meta.setdefault("namespace", "default")
        with self._lock:
            old = self._objects.get(self._key(rt, meta.get("namespace"), meta["name"]))
            return self._write(rt, obj, old, force=True)

    def seed(self, *objs: JSON) -> None:
        for obj in objs:
            self.put(obj)

    def get(self, kind: str, namespace: str | None, name: str) -> JSON | None:
        rt = resource_type(kind)
        with self._lock:
            obj = self._objects.get(self._key(rt, namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def list(self, kind: str, namespace: str | None = None) -> list[JSON]:
        rt = resource_type(kind)
        with self._lock:
            return [copy.deepcopy(o) for (plural, ns, _), o in sorted(self._objects.items())
                    if plural == rt.plural and (namespace is None or ns == namespace)]

    def delete(self, kind: str, namespace: str | None, name: str) -> bool:
        rt = resource_type(kind)
        with self._lock:
            return self._objects.pop(self._key(rt, namespace, name), None) is not None

    def update(self, kind: str, namespace: str | None, name: str, patch: JSON) -> JSON:
        """Apply a JSON merge patch as a new write (e.g. to move a pod's status along)."""
        rt = resource_type(kind)
        with self._lock:
            old = self._get_or_404(rt, namespace, name)
            return self._write(rt, merge_patch(old, patch), old, force=True)

    def touch(self, kind: str, namespace: str | None, name: str) -> str:
        """Bump an object's resourceVersion as a concurrent writer would; returns the new one."""
        rt = resource_type(kind)
        with self._lock:
            obj = self._get_or_404(rt, namespace, name)
            self._rv += 1
            obj["metadata"]["resourceVersion"] = str(self._rv)
            return str(self._rv)

    # ---- python API: faults and the request log

    def inject_fault(self, method: str | None = None, path_regex: str = ".*", status: int | None = 500,
                     times: int | None = 1, headers: dict[str, str] | None = None, delay_seconds: float = 0.0,
                     message: str | None = None, reason: str | None = None,
                     before: Callable[[], object] | None = None, user_agent_regex: str | None = None,
                     body: bytes | None = None, after: Callable[[], object] | None = None) -> Fault:
        fault = Fault(method.upper() if method else None, path_regex, status, times, dict(headers or {}),
                      delay_seconds, message, reason, before, user_agent_regex, body, after)
        with self._lock:
            self.faults.append(fault)
        return fault

    def inject_conflict(self, kind: str, namespace: str, name: str, method: str = "PATCH",
                        path_regex: str | None = None, times: int | None = 1) -> Fault:
        """Before the next `times` matching requests, touch the object (a concurrent writer)."""
        regex = path_regex or rf"/{re.escape(name)}(/[^/]+)?$"
        return self.inject_fault(method, regex, status=None, times=times,
                                 before=lambda: self.touch(kind, namespace, name))

    def clear_faults(self) -> None:
        with self._lock:
            self.faults.clear()

    def requests_matching(self, method: str | None = None, path_regex: str = ".*",
                          user_agent_regex: str | None = None) -> builtins.list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests
                    if (method is None or r.method == method.upper()) and re.search(path_regex, r.path)
                    and (user_agent_regex is None or re.search(user_agent_regex, r.user_agent))]

    def clear_requests(self) -> None:
        with self._lock:
            self.requests.clear()

    # ---- storage internals

    @staticmethod
    def _key(rt: ResourceType, namespace: str | None, name: str) -> tuple[str, str, str]:
        return (rt.plural, (namespace or "") if rt.namespaced else "", name)

    def _get_or_404(self, rt: ResourceType, namespace: str | None, name: str) -> JSON:
        obj = self._objects.get(self._key(rt, namespace, name))
        if obj is None:
            raise _not_found(rt, name)
        return obj

    def _now(self) -> str:
        return datetime.fromtimestamp(self.clock(), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _write(self, rt: ResourceType, new: JSON, old: JSON | None, *, force: bool = False) -> JSON:
        """Store `new` (replacing `old`); caller holds the lock and has checked preconditions."""
        new["apiVersion"], new["kind"] = rt.api_version, rt.kind
        meta = new.setdefault("metadata", {})
        if old is not None:
            for key in ("uid", "creationTimestamp", "namespace", "name"):
                if key in old["metadata"] and not (force and key in meta):
                    meta[key] = old["metadata"][key]
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", self._now())
        if not rt.namespaced:
            meta.pop("namespace", None)
        if rt.kind == "Deployment":
            new.setdefault("spec", {}).setdefault("replicas", 1)
        if rt.has_generation and not (force and "generation" in meta):
            generation = old["metadata"].get("generation", 1) if old is not None else 1
            if old is not None and old.get("spec") != new.get("spec"):
                generation += 1
            meta["generation"] = generation
        if old is not None and not force:
            meta["resourceVersion"] = old["metadata"]["resourceVersion"]
            if new == old:  # no-op update: the real server does not write either
                return copy.deepcopy(old)
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        self._objects[self._key(rt, meta.get("namespace"), meta["name"])] = new
        return copy.deepcopy(new)

    # ---- HTTP

    def _dispatch(self, h: _Handler) -> None:
        url = urlsplit(h.path)
        method, path = h.command, url.path
        query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        raw = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        content_type = (h.headers.get("Content-Type") or "").split(";")[0].strip() or None
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        user_agent = h.headers.get("User-Agent") or ""
        record = RecordedRequest(method, path, query, body, content_type, user_agent=user_agent, at=self.clock())
        with self._lock:
            self.requests.append(record)
            fault = next((f for f in self.faults if f.matches(method, path, user_agent)), None)
            if fault is not None:
                fault.hits += 1
        code: int = 200
        payload: JSON = {}
        headers: dict[str, str] = {}
        raw: bytes | None = None
        try:
            if fault is not None:
                if fault.delay_seconds and self._stopping.wait(fault.delay_seconds):
                    raise ApiError(503, "server is stopping")
                if fault.before is not None:
                    fault.before()
                if fault.status is not None:
                    if fault.body is not None:
                        code, raw, headers = fault.status, fault.body, dict(fault.headers)
                    else:
                        raise self._fault_error(fault, method, path)
            if raw is None:
                self._authenticate(h.headers.get("Authorization"))
                if isinstance(body, str):
                    raise ApiError(400, "the request body is not valid JSON")
                code, payload = self._route(method, path, query, body, content_type)
        except ApiError as exc:
            code, payload, headers = exc.code, exc.status(), exc.headers
        if fault is not None and fault.after is not None:
            fault.after()
        record.status = code
        data = raw if raw is not None else json.dumps(payload).encode()
        try:
            h.send_response(code)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                h.send_header(key, value)
            h.end_headers()
            h.wfile.write(data)
        except OSError:  # the client gave up (timeout): nothing to answer to
            pass

    def _authenticate(self, authorization: str | None) -> None:
        tokens = self.bearer_tokens
        if tokens is None:
            return
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or token.strip() not in tokens:
            raise ApiError(401, "Unauthorized")

    def _fault_error(self, fault: Fault, method: str, path: str) -> ApiError:
        code = fault.status or 500
        try:
            route = self._parse(path)
        except ApiError:
            route = None
        message = fault.message
        if message is None and code == 403 and route is not None:
            target = f'{route.rt.qualified} "{route.name}" ' if route.name else f"{route.rt.qualified} "
            verb = _VERBS.get(method, method.lower()) if route.name or method != "GET" else "list"
            scope = f' in the namespace "{route.namespace}"' if route.namespace else " at the cluster scope"
            message = (f'{target}is forbidden: User "system:serviceaccount:test:autoscaler" cannot {verb} '
                       f'resource "{route.resource}" in API group "{route.rt.group}"{scope}')
        details: JSON | None = None
        if code == 429 and "Retry-After" in fault.headers:
            details = {"retryAfterSeconds": int(float(fault.headers["Retry-After"]))}
        return ApiError(code, message or f"injected fault ({code})", fault.reason, details, fault.headers)

    def _parse(self, path: str) -> Route:
        missing = ApiError(404, "the server could not find the requested resource")
        m = _PATH.match(path)
        if m is None:
            raise missing
        group, version = ("", "v1") if m["core_version"] else (m["group"], m["version"])
        rt = _BY_PATH.get((group, version, m["plural"]))
        if rt is None or (m["ns"] is not None and not rt.namespaced) or (m["sub"] and m["sub"] not in rt.subresources):
            raise missing
        return Route(rt, m["ns"], m["name"], m["sub"])

    def _route(self, method: str, path: str, query: dict[str, str], body: Any,
               content_type: str | None) -> tuple[int, JSON]:
        route = self._parse(path)
        route.query, route.body, route.ctype = query, body, content_type
        handler = _ROUTES.get((method, route.name is not None, route.sub))
        if handler is None:
            raise ApiError(405, f"{method} is not supported on {path}")
        if route.rt.namespaced and route.namespace is None and method != "GET":
            raise ApiError(404, "the server could not find the requested resource")
        with self._lock:
            result: tuple[int, JSON] = getattr(self, handler)(route)
            return result

    # ---- handlers (called with the lock held)

    def expire_continue_tokens(self) -> None:
        """Every paginated list in progress loses its snapshot, as when etcd compacts past it: the
        next page asked for answers 410 Expired."""
        with self._lock:
            self._continuations.clear()

    def _list(self, route: Route) -> tuple[int, JSON]:
        """A list, paginated like the real server when `limit` is given: every page comes from the
        snapshot taken by the first (its resourceVersion), `metadata.continue` names the rest, and a
        continue token whose snapshot is gone answers 410 Expired."""
        token = route.query.get("continue", "")
        if token:
            if token not in self._continuations:
                raise ApiError(410, "The provided continue parameter is too old to display a consistent list "
                                    "result. You can start a new list without the continue parameter.", "Expired")
            items, rv = self._continuations[token]
        else:
            items, rv = self._matching(route), str(self._rv)
        limit = int(route.query.get("limit") or 0)
        meta: JSON = {"resourceVersion": rv}
        if 0 < limit < len(items):
            items, rest = items[:limit], items[limit:]
            token = uuid.uuid4().hex
            self._continuations[token] = (rest, rv)
            meta["continue"] = token
            if not route.query.get("labelSelector") and not route.query.get("fieldSelector"):
                meta["remainingItemCount"] = len(rest)  # the real server leaves it unset with a selector
        return 200, {"kind": f"{route.rt.kind}List", "apiVersion": route.rt.api_version, "metadata": meta,
                     "items": items}

    def _matching(self, route: Route) -> list[JSON]:
        labels = label_selector_matcher(route.query.get("labelSelector", ""))
        fields = field_selector_matcher(route.query.get("fieldSelector", ""))
        items = []
        for (plural, ns, _), obj in sorted(self._objects.items()):
            if plural != route.rt.plural or (route.namespace is not None and ns != route.namespace):
                continue
            if labels(obj["metadata"].get("labels") or {}) and fields(obj):
                item = copy.deepcopy(obj)
                item.pop("apiVersion", None)  # like the real server: no per-item TypeMeta in lists
                item.pop("kind", None)
                items.append(item)
        return items

    def _read(self, route: Route) -> tuple[int, JSON]:
        return 200, copy.deepcopy(self._get_or_404(route.rt, route.namespace, route.obj_name))

    def _check_body(self, route: Route) -> JSON:
        body = route.body
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        meta = body.setdefault("metadata", {})
        if route.namespace and meta.get("namespace") not in (None, "", route.namespace):
            raise ApiError(400, "the namespace of the provided object does not match the namespace sent on the request")
        if route.name and meta.get("name") not in (None, route.name):
            raise ApiError(400, "the name of the object does not match the name on the URL")
        if route.namespace:
            meta["namespace"] = route.namespace
        if route.name:
            meta["name"] = route.name
        return body

    def _create(self, route: Route) -> tuple[int, JSON]:
        obj = self._check_body(route)
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if not meta.get("name"):
            raise ApiError(422, "metadata.name: Required value: name or generateName is required", reason="Invalid")
        if self._key(route.rt, route.namespace, meta["name"]) in self._objects:
            raise ApiError(409, f'{route.rt.qualified} "{meta["name"]}" already exists', reason="AlreadyExists",
                           details={"name": meta["name"], "group": route.rt.group, "kind": route.rt.plural})
        for key in ("uid", "resourceVersion", "creationTimestamp", "generation"):
            meta.pop(key, None)
        return 201, self._write(route.rt, obj, None)

    def _precondition(self, route: Route, new: JSON, old: JSON) -> None:
        sent = (new.get("metadata") or {}).get("resourceVersion")
        if sent and sent != old["metadata"]["resourceVersion"]:
            raise _conflict(route.rt, old["metadata"]["name"])

    def _replace(self, route: Route) -> tuple[int, JSON]:
        obj = self._check_body(route)
        old = self._get_or_404(route.rt, route.namespace, route.obj_name)
        self._precondition(route, obj, old)
        return 200, self._write(route.rt, obj, old)

    def _apply_patch(self, target: JSON, route: Route) -> JSON:
        body, ctype = route.body, route.ctype
        if ctype == "application/json-patch+json":
            result = json_patch(target, body)
        elif ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            if not isinstance(body, dict):
                raise ApiError(400, "a merge patch must be a JSON object")
            result = merge_patch(target, body, strategic=ctype.startswith("application/strategic"))
        else:
            raise ApiError(415, f"the body of the request was in an unknown format - accepted media types include: "
                           f"application/json-patch+json, application/merge-patch+json, "
                           f"application/strategic-merge-patch+json (got {ctype})")
        if not isinstance(result, dict):
            raise ApiError(422, "the patched object is not a JSON object")
        return result

    def _patch(self, route: Route) -> tuple[int, JSON]:
        old = self._get_or_404(route.rt, route.namespace, route.obj_name)
        new = self._apply_patch(copy.deepcopy(old), route)
        self._precondition(route, new, old)
        new.setdefault("metadata", {})["name"] = route.name
        return 200, self._write(route.rt, new, old)

    def _delete(self, route: Route) -> tuple[int, JSON]:
        old = self._get_or_404(route.rt, route.namespace, route.obj_name)
        del self._objects[self._key(route.rt, route.namespace, route.obj_name)]
        return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                     "details": {"name": route.name, "group": route.rt.group, "kind": route.rt.plural,
                                 "uid": old["metadata"].get("uid")}}

    def _scale_of(self, dep: JSON) -> JSON:
        meta = dep["metadata"]
        return {
            "kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                         if k in meta},
            "spec": {"replicas": dep["spec"].get("replicas", 1)},
            "status": {"replicas": (dep.get("status") or {}).get("replicas", 0),
                       "selector": selector_string(dep["spec"].get("selector") or {})},
        }

    def _read_scale(self, route: Route) -> tuple[int, JSON]:
        return 200, self._scale_of(self._get_or_404(route.rt, route.namespace, route.obj_name))

    def _write_scale(self, route: Route, scale: JSON, dep: JSON) -> tuple[int, JSON]:
        self._precondition(route, scale, dep)
        uid = (scale.get("metadata") or {}).get("uid")
        if uid and uid != dep["metadata"].get("uid"):
            raise ApiError(409, f'Operation cannot be fulfilled on deployments.apps "{route.name}": precondition failed: '
                           f'UID in precondition: {uid}, UID in object meta: {dep["metadata"].get("uid")}',
                           details={"name": route.name, "group": "apps", "kind": "deployments"})
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise ApiError(422, f'Scale.autoscaling "{route.name}" is invalid: spec.replicas: Invalid value: '
                           f"{replicas!r}: must be greater than or equal to 0", reason="Invalid")
        new = copy.deepcopy(dep)
        new["spec"]["replicas"] = replicas
        if self.simulate_deployment_controller and replicas != dep["spec"].get("replicas"):
            generation = dep["metadata"].get("generation", 1) + 1
            new["metadata"]["generation"] = generation
            status = new.setdefault("status", {})
            status.update(observedGeneration=generation, replicas=replicas, updatedReplicas=replicas)
            for key in ("readyReplicas", "availableReplicas"):
                if key in status:
                    status[key] = min(status[key], replicas)
        written = self._write(route.rt, new, dep)
        if self.simulate_replicaset_controller and replicas < dep["spec"].get("replicas", 1):
            self._scale_down_pods(written, replicas)
        return 200, self._scale_of(written)

    def _scale_down_pods(self, dep: JSON, replicas: int) -> None:
        """Delete the Deployment's pods beyond `replicas`, in the ReplicaSet controller's order."""
        namespace = dep["metadata"]["namespace"]
        matches = label_selector_matcher(selector_string(dep["spec"].get("selector") or {}))
        pods = [p for (plural, ns, _), p in self._objects.items()
                if plural == "pods" and ns == namespace and not p["metadata"].get("deletionTimestamp")
                and matches(p["metadata"].get("labels") or {})]
        for victim in sorted(pods, key=replicaset_deletion_rank)[: max(0, len(pods) - replicas)]:
            name = victim["metadata"]["name"]
            del self._objects[("pods", namespace, name)]
            self._rv += 1  # a delete is a write
            self.removed_pods.append(f"{namespace}/{name}")

    def _replace_scale(self, route: Route) -> tuple[int, JSON]:
        dep = self._get_or_404(route.rt, route.namespace, route.obj_name)
        return self._write_scale(route, self._check_body(route), dep)

    def _patch_scale(self, route: Route) -> tuple[int, JSON]:
        dep = self._get_or_404(route.rt, route.namespace, route.obj_name)
        return self._write_scale(route, self._apply_patch(self._scale_of(dep), route), dep)


def _deletion_cost(pod: JSON) -> int:
    raw = ((pod["metadata"].get("annotations") or {}).get("controller.kubernetes.io/pod-deletion-cost"))
    try:
        return int(raw) if raw is not None else 0
    except ValueError:
        return 0


def replicaset_deletion_rank(pod: JSON) -> tuple[Any, ...]:
    """Sort key: the pod a ReplicaSet deletes first sorts first (`ActivePodsWithRanks.Less`,
    without the co-location rank, the log-scale ready-time buckets and the UID tie-break)."""
    status = pod.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    is_ready = ready is not None and ready.get("status") == "True"
    ready_since = _parse_rfc3339(ready.get("lastTransitionTime")) if is_ready and ready else 0.0
    restarts = max([int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or []] or [0])
    return (
        bool((pod.get("spec") or {}).get("nodeName")),  # unassigned first
        {"Pending": 0, "Unknown": 1, "Running": 2}.get(status.get("phase", "Pending"), 0),
        is_ready,  # not ready first
        _deletion_cost(pod),  # lower cost first
        -ready_since,  # ready more recently first
        -restarts,  # more restarts first
        -_parse_rfc3339(pod["metadata"].get("creationTimestamp")),  # newer first
    )


def _parse_rfc3339(text: Any) -> float:
    if not text:
        return 0.0
    return datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


# --------------------------------------------------------------------------- builders


GPU = "nvidia.com/gpu"


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _resources(gpus: int) -> JSON:
    amounts = {"cpu": "8", "memory": "64Gi"}
    if gpus:
        amounts[GPU] = str(gpus)
    return {"requests": dict(amounts), "limits": dict(amounts)}


def deployment(name: str, namespace: str = "default", *, replicas: int = 1, labels: dict[str, str] | None = None,
               gpus_per_pod: int = 1, node_selector: dict[str, str] | None = None,
               tolerations: Iterable[JSON] = (), annotations: dict[str, str] | None = None,
               ready_replicas: int | None = None, generation: int = 1, observed_generation: int | None = None,
               updated_replicas: int | None = None, status_replicas: int | None = None,
               available_replicas: int | None = None, uid: str | None = None) -> JSON:
    """A Deployment whose status, by default, is a finished rollout with all replicas ready."""
    selector = dict(labels or {"app": name})
    ready = replicas if ready_replicas is None else ready_replicas
    pod_spec: JSON = {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.6.0",
                                      "resources": _resources(gpus_per_pod)}]}
    if node_selector:
        pod_spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        pod_spec["tolerations"] = [dict(t) for t in tolerations]
    meta: JSON = {"name": name, "namespace": namespace, "generation": generation, "labels": dict(selector),
                  "annotations": dict(annotations or {})}
    if uid:
        meta["uid"] = uid
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
        "spec": {"replicas": replicas, "selector": {"matchLabels": selector},
                 "template": {"metadata": {"labels": dict(selector)}, "spec": pod_spec}},
        "status": {
            "observedGeneration": generation if observed_generation is None else observed_generation,
            "replicas": replicas if status_replicas is None else status_replicas,
            "updatedReplicas": replicas if updated_replicas is None else updated_replicas,
            "readyReplicas": ready,
            "availableReplicas": ready if available_replicas is None else available_replicas,
        },
    }


def _cond(type_: str, status: bool, at: float, reason: str | None = None, message: str | None = None) -> JSON:
    cond: JSON = {"type": type_, "status": "True" if status else "False", "lastProbeTime": None,
                  "lastTransitionTime": rfc3339(at)}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def pod(name: str, namespace: str = "default", *, labels: dict[str, str] | None = None, state: str = "ready",
        node_name: str | None = "gpu-node-1", gpus: int = 1, created_at: float | None = None,
        scheduled_at: float | None = None, started_at: float | None = None, ready_at: float | None = None,
        terminating: bool = False, phase: str | None = None) -> JSON:
    """A pod in `state`: "unschedulable" (PodScheduled=False/Unschedulable, no node), "pending"
    (not yet looked at by the scheduler), "scheduled" (bound, container creating), "loading"
    (container running, not ready) or "ready". Timestamps default to a plausible timeline."""
    if state not in ("unschedulable", "pending", "scheduled", "loading", "ready"):
        raise ValueError(f"unknown pod state {state!r}")
    created = time.time() - 600 if created_at is None else created_at
    scheduled = created + 2 if scheduled_at is None else scheduled_at
    started = scheduled + 30 if started_at is None else started_at
    readied = started + 120 if ready_at is None else ready_at
    bound = state in ("scheduled", "loading", "ready")
    running = state in ("loading", "ready")
    conditions: list[JSON] = []
    if state == "unschedulable":
        conditions.append(_cond("PodScheduled", False, created, "Unschedulable",
                                f"0/3 nodes are available: 3 Insufficient {GPU}. preemption: 0/3 nodes are available"))
    if bound:
        conditions = [_cond("PodReadyToStartContainers", True, started), _cond("Initialized", True, scheduled),
                      _cond("Ready", state == "ready", readied if state == "ready" else scheduled,
                            None if state == "ready" else "ContainersNotReady"),
                      _cond("ContainersReady", state == "ready", readied if state == "ready" else scheduled),
                      _cond("PodScheduled", True, scheduled)]
    container_state: JSON = ({"running": {"startedAt": rfc3339(started)}} if running
                             else {"waiting": {"reason": "ContainerCreating"}})
    status: JSON = {"phase": phase or ("Running" if running else "Pending"), "conditions": conditions,
                    "qosClass": "Guaranteed"}
    if bound:
        status["hostIP"] = "10.0.0.1"
        status["startTime"] = rfc3339(scheduled)
        status["containerStatuses"] = [{
            "name": "vllm", "image": "vllm/vllm-openai:v0.6.0", "ready": state == "ready", "started": running,
            "imageID": "docker.io/vllm/vllm-openai@sha256:" + "0" * 64 if running else "",
            "containerID": f"containerd://{uuid.uuid5(uuid.NAMESPACE_URL, name).hex}" if running else None,
            "restartCount": 0, "state": container_state}]
    meta: JSON = {"name": name, "namespace": namespace, "labels": dict(labels or {"app": name.rsplit("-", 2)[0]}),
                  "creationTimestamp": rfc3339(created)}
    if terminating:
        meta["deletionTimestamp"] = rfc3339(created + 1)
        meta["deletionGracePeriodSeconds"] = 30
    spec: JSON = {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.6.0", "resources": _resources(gpus)}],
                  "schedulerName": "default-scheduler"}
    if bound and node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def node(name: str, *, gpus: int = 8, labels: dict[str, str] | None = None, taints: Iterable[JSON] = (),
         unschedulable: bool = False, ready: bool = True) -> JSON:
    allocatable = {"cpu": "96", "memory": "1000Gi", "pods": "110"}
    if gpus:
        allocatable[GPU] = str(gpus)
    spec: JSON = {"taints": [dict(t) for t in taints]} if taints else {}
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": spec,
        "status": {"capacity": dict(allocatable), "allocatable": allocatable,
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                   "reason": "KubeletReady" if ready else "KubeletNotReady",
                                   "lastHeartbeatTime": rfc3339(time.time()),
                                   "lastTransitionTime": rfc3339(time.time() - 3600)}]},
    }


def hpa(name: str, namespace: str = "default", *, target_name: str, target_kind: str = "Deployment",
        min_replicas: int = 1, max_replicas: int = 10) -> JSON:
    return {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": target_kind, "name": target_name},
                 "minReplicas": min_replicas, "maxReplicas": max_replicas,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                                                               "target": {"type": "Utilization", "averageUtilization": 80}}}]},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve the Kubernetes API test server until interrupted.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seed", help="a JSON file holding a list of objects (or a v1 List) to load")
    parser.add_argument("--kubeconfig", help="write a kubeconfig pointing at the server to this path")
    args = parser.parse_args(argv)
    with KubeApiServer(port=args.port) as server:
        if args.seed:
            data = json.loads(Path(args.seed).read_text())
            server.seed(*(data["items"] if isinstance(data, dict) else data))
        if args.kubeconfig:
            server.write_kubeconfig(args.kubeconfig)
        print(f"serving the Kubernetes API test server on {server.url}", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
