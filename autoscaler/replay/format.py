"""The recording file: `vqa-recording` version 4, gzip-compressed JSON lines, one file. Version 1
files (no SLO signals) are still read: their pods have None for the version 2 fields; version 2
files (bucket bounds written with every histogram) and version 3 files (rates and timestamps
written in full) read as before.

Line 1, the header (a JSON object):

    {"format": "vqa-recording", "version": 4,
     "target": {"namespace": "llm", "deployment": "qwen"},
     "step_seconds": 15.0, "start": 1764700000.0, "end": 1764786400.0,
     "metadata": {...free-form provenance, see below...}}

Then one line per evaluation step, in time order (`t` = start + k * step_seconds):

    {"t": 1764700000.0, "spec": 3, "ready": 3, "rollout": false,
     "pods": [["qwen-0", true, null, [4.0, 1764699999.2], 8.0, 0.61, "vllm:kv_cache_usage_perc",
               1.6, 1764690000.0, 1764690002.0, 1764690300.0]],
     "demand": {"requests_per_second": 4.8, "prompt_tokens_per_second": 3100.0,
                "generation_tokens_per_second": 900.0}}

* `spec` / `ready`: the Deployment's spec and ready replicas at that step (null = unknown);
  `rollout`: a rollout of a new template was in progress.
* `pods`: one array per pod of the target, sorted by name, fields in this order (`POD_FIELDS`):
  name, ready, stage, waiting, running, kv, kv_metric, completed, created, scheduled,
  ready_at, then (version 2, left out when all five are null) prompt_tokens,
  generation_tokens (per second, `[value, sample_timestamp]`), ttft, tpot, queue_time.
  Arrays rather than objects keep a 30-day file small and quick to read.
* a latency histogram (ttft, tpot, queue_time) is `[bounds, rates, sample_timestamp]` or null:
  `bounds` the finite bucket bounds `le`, ascending, 0 .. 1e9; `rates` one more (the last for
  +Inf), the cumulative requests per second within each bound (`LatencyHistogram`), each a
  number 0 .. 1e15 or "NaN"; at most 64 buckets with +Inf. E.g. `[[0.5, 1.0], [2.0, 6.0, 8.0],
  1764699999.2]`. Version 3: a layout (list of bounds) is written in full the first time the
  file has it; the first `MAX_LAYOUTS` layouts so written are numbered 0, 1, ... in file order,
  and a later histogram with those bounds may give the number instead: `[0, [2.0, 6.0, 8.0],
  1764700014.2]` (version 2 repeated ~20 bounds per histogram, 3 histograms a pod, every step).
  Version 4, the same for the rates: the trailing rates equal to the one before them are left
  out (the reader repeats the last one written up to the layout's length: `[0, [2.0, 6.0],
  ...]` is rates 2, 6, 6 for two bounds); a rate vector written in full is numbered 0, 1, ...
  in file order (the first `MAX_RATE_VECTORS` distinct ones, except those holding "NaN" or
  -0.0, which equal nothing or 0.0), and a later histogram with the same rates may give the
  number instead: `[0, 3, 1764700014.2]`. A number that names nothing written before is an
  error naming the histogram and the numbers allowed.
* version 4: a signal or histogram whose sample timestamp is that of the one before it in the
  pod's array (fields in order) is written without it: a bare value `8.0` for `[8.0,
  1764699999.2]`, `[bounds, rates]` for a histogram; one before it in the array must have it.
* each signal is `[value, sample_timestamp]` (or a bare value, above) exactly as a live
  `PrometheusSource.fetch()` at `t` reads it (same PromQL, evaluated at `t`), or null when the
  pod had no series. Values NaN, +Inf, -Inf are written as the strings "NaN", "+Inf", "-Inf"
  (strict JSON).
* `ready` of a pod: Ready condition (kube-state-metrics) or, without kube-state-metrics, the
  presence of a vLLM series; `stage` is null (serving or going away) or one of
  `unschedulable`, `scheduled`, `loading` for a pod on its way.
* `demand` (optional): fleet rates used to rebuild the demand; absent keys = not recorded.
  Histogram buckets go under `demand["prompt_tokens_buckets"]` / `["generation_tokens_buckets"]`
  as `{le: per-second rate}`.

Last line, the trailer: `{"end": true, "steps": N}`. A file without it was cut short.

Limits of a file read (docs/limits.md): a line holds at most 64 MiB (decompressed: a 1 MB gzip
bomb of one line is refused at 64 MiB, not grown to 2 GB), at most 1,000 blank lines, JSON nested
at most 100 deep; times (`t`, `start`, `end`, sample timestamps, pod times) are Unix seconds from
0 to 253402300799 (year 9999), `step_seconds` 0.001 .. 86400, a finite signal value or demand
rate within +/-1e15 (NaN and +/-Inf as above), histogram bounds `le` 0 .. 1e9 or "+Inf"; at
most `MAX_LAYOUTS` numbered layouts and `MAX_RATE_VECTORS` numbered rate vectors a file.
A plain Prometheus export (one JSON document) holds at most 256 MiB.

Metadata keys written by `autoscaler record`: `recorded_at`, `prometheus` (URL, credentials
redacted), `pod_regex`, `rate_window_seconds`, `readiness_source` ("kube_pod_status_ready" or
"vllm_series"), `spec_source` ("kube_deployment_spec_replicas" or "ready_pods"),
`startup_source`, `notes` (list of strings). Readers ignore unknown metadata keys; any other
change of meaning bumps `version`.
"""

from __future__ import annotations

import gc
import gzip
import io
import json
import math
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, NamedTuple

from autoscaler.config.atomic import atomic_path
from autoscaler.config.bounded import MAX_DEPTH, MiB, LimitError, check_depth, depth_error, describe_size
from autoscaler.policy.types import LatencyHistogram, MetricSample, PodStage, fast_init


def _stdlib_loads(line: bytes) -> Any:
    return json.loads(line.decode("utf-8"))


_fast_loads: Callable[[bytes], Any] | None
try:  # a C JSON parser that reads bytes: 3-5x faster than json.loads on a month of steps
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - orjson is a dependency; the stdlib reads the same, slower
    _fast_loads = _stdlib_loads

FORMAT_NAME: Final = "vqa-recording"
FORMAT_VERSION: Final = 4
READ_VERSIONS: Final = (1, 2, 3, 4)

SIGNAL_KEYS: Final = ("waiting", "running", "kv", "completed")

MAX_LINE_BYTES: Final = 64 * MiB
MAX_EXPORT_BYTES: Final = 256 * MiB
MAX_BLANK_LINES: Final = 1_000
MAX_TIMESTAMP: Final = 253_402_300_799.0
"""9999-12-31T23:59:59Z: the last second a date can show (later ones overflowed the report)."""
MAX_VALUE: Final = 1e15
"""A finite signal value or demand rate (two of 1e308 summed to inf and crashed a policy)."""
MAX_LE: Final = 1e9
MAX_BUCKETS: Final = 64
"""Buckets of one recorded latency histogram, +Inf included (the adapter's cap)."""
MAX_LAYOUTS: Final = 1_000
"""Bucket layouts of one file that get a number (version 3); later ones are written in full."""
MAX_RATE_VECTORS: Final = 65_536
"""Histogram rate vectors of one file that get a number (version 4); later ones are written in full."""
STEP_SECONDS_RANGE: Final = (0.001, 86_400.0)


_STAGES: Final = {s.value: s for s in PodStage}


class RecordingError(Exception):
    """A recording that cannot be read: truncated, corrupt, other version, missing a series."""


class BucketLayouts:
    """The bucket layouts of one file being read (version 3): each distinct list of finite
    bounds written in full is numbered 0, 1, ... in file order (the first `MAX_LAYOUTS` of
    them), and a later histogram may name that number instead. Also what makes the histograms
    of a file share one bounds tuple per layout (any version), so that the decision core
    recognises it without a comparison.

    Version 4 numbers rate vectors the same way (`add_rates`, the first `MAX_RATE_VECTORS`
    distinct ones written in full, see `numbered_rates`): equal vectors are then one tuple."""

    __slots__ = ("by_bounds", "hists", "numbers", "ordered", "rates_by_value", "rates_ordered", "vectors")

    def __init__(self, numbers: bool, vectors: bool = False) -> None:
        self.numbers = numbers  # whether the file may name a layout by its number (version >= 3)
        self.vectors = vectors  # whether it may name a rate vector, or leave out a repeated tail (version >= 4)
        self.by_bounds: dict[tuple[float, ...], tuple[float, ...]] = {}  # finite bounds -> with +Inf
        self.ordered: list[tuple[float, ...]] = []
        self.rates_by_value: dict[tuple[float, ...], tuple[float, ...]] = {}
        self.rates_ordered: list[tuple[float, ...]] = []
        self.hists: dict[tuple[int, int, float], LatencyHistogram] = {}  # the fast path's (autoscaler.replay.fast_decode)

    def add_rates(self, rates: tuple[float, ...]) -> tuple[float, ...]:
        """The rate vector read in full (padded), numbered if the writer numbered it: the one
        tuple already numbered when equal, else numbered if `numbered_rates` and room is left.
        Idempotent: a line decoded twice (fast path, then the reference) numbers nothing twice."""
        if not self.vectors or not numbered_rates(rates):
            return rates
        known = self.rates_by_value.get(rates)
        if known is not None:
            return known
        if len(self.rates_ordered) < MAX_RATE_VECTORS:
            self.rates_by_value[rates] = rates
            self.rates_ordered.append(rates)
        return rates

    def add(self, finite: tuple[float, ...]) -> tuple[float, ...]:
        """The bounds with +Inf for these finite ones, numbered if new and room is left."""
        full = self.by_bounds.get(finite)
        if full is None:
            full = (*finite, math.inf)
            if len(self.ordered) < MAX_LAYOUTS:
                self.by_bounds[finite] = full
                self.ordered.append(full)
        return full


# --------------------------------------------------------------------------- values


class RecordedPod(NamedTuple):
    """One pod of the target at one step (a NamedTuple: cheap to build, 170k steps a month)."""

    name: str
    ready: bool
    stage: PodStage | None = None
    waiting: MetricSample | None = None
    running: MetricSample | None = None
    kv: MetricSample | None = None
    kv_metric: str | None = None
    completed: MetricSample | None = None
    created: float | None = None
    scheduled: float | None = None
    ready_at: float | None = None
    # version 2: the SLO signals (None in a version 1 file)
    prompt_tokens: MetricSample | None = None
    generation_tokens: MetricSample | None = None
    ttft: LatencyHistogram | None = None
    tpot: LatencyHistogram | None = None
    queue_time: LatencyHistogram | None = None


@fast_init
@dataclass(frozen=True)
class Step:
    """Everything recorded at one evaluation instant `t`."""

    t: float
    spec: int | None
    ready: int | None = None
    rollout: bool = False
    pods: tuple[RecordedPod, ...] = ()
    demand: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Header:
    namespace: str
    deployment: str
    step_seconds: float
    start: float
    end: float
    metadata: dict[str, Any] = field(default_factory=dict)
    version: int = FORMAT_VERSION  # of the file read; a file is always written in FORMAT_VERSION

    @property
    def target(self) -> str:
        return f"{self.namespace}/{self.deployment}"


@dataclass(frozen=True)
class Recording:
    header: Header
    steps: tuple[Step, ...]


# --------------------------------------------------------------------------- encoding


def _num(value: float) -> float | str:
    """A value as written: NaN and +/-Inf as strings; a finite value beyond +/-MAX_VALUE (a
    counter glitch in a rate) as "NaN", which the reader takes (unusable, so a hold) where it
    would refuse the whole file over the number."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return value if -MAX_VALUE <= value <= MAX_VALUE else "NaN"


_SPECIAL: Final = {"NaN": math.nan, "+Inf": math.inf, "Inf": math.inf, "-Inf": -math.inf}


def _short(raw: Any) -> str:
    """repr of a value read, cut to 80 characters (a message stays one short line)."""
    text = repr(raw) if not isinstance(raw, dict | list) or len(raw) < 20 else f"<{type(raw).__name__} of {len(raw)}>"
    return text if len(text) <= 80 else text[:77] + "..."


def _float(raw: Any, where: str) -> float:
    if isinstance(raw, str) and raw in _SPECIAL:
        return _SPECIAL[raw]
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise RecordingError(f"{where}: expected a number, got {_short(raw)}")
    try:
        return float(raw)
    except OverflowError:  # an integer beyond float range
        raise RecordingError(f"{where}: {_short(raw)} is out of range") from None


def _value(raw: Any, where: str) -> float:
    """A signal value or demand rate: NaN, +/-Inf, or finite within +/-MAX_VALUE."""
    v = _float(raw, where)
    if math.isfinite(v) and not -MAX_VALUE <= v <= MAX_VALUE:
        raise RecordingError(f"{where}: {_short(raw)} is out of range (allowed: NaN, +/-Inf or within +/-{MAX_VALUE:g})")
    return v


def _time(raw: Any, where: str) -> float:
    """Unix seconds 0 .. MAX_TIMESTAMP (year 9999)."""
    t = _float(raw, where)
    if not 0.0 <= t <= MAX_TIMESTAMP:
        raise RecordingError(f"{where}: {_short(raw)} is out of range (allowed: Unix seconds 0 .. "
                             f"{MAX_TIMESTAMP:.0f}, year 9999)")
    return t


def _sample(s: MetricSample | None) -> list[float | str] | None:
    return None if s is None else [_num(s.value), s.timestamp]


POD_FIELDS_V1: Final = ("name", "ready", "stage", "waiting", "running", "kv", "kv_metric", "completed",
                         "created", "scheduled", "ready_at")
SLO_FIELDS: Final = ("prompt_tokens", "generation_tokens", "ttft", "tpot", "queue_time")
POD_FIELDS: Final = POD_FIELDS_V1 + SLO_FIELDS


def numbered_rates(rates: tuple[Any, ...]) -> bool:
    """Whether a rate vector may get a number (version 4), on the writer's side (values as
    written) and the reader's alike: every value a number (no NaN, which equals nothing) and
    no -0.0 (which a dict key confuses with 0.0)."""
    if "NaN" in rates:
        return False
    total = sum(rates)
    if total != total:
        return False
    return not (0.0 in rates and any(r == 0.0 and math.copysign(1.0, r) < 0.0 for r in rates))


def _same(a: Any, b: Any) -> bool:
    """Two written rates that read back as the same value (0.0 and -0.0 do not)."""
    return type(a) is type(b) and a == b and (a != 0 or math.copysign(1.0, a) == math.copysign(1.0, b))


def _trimmed(written: list[Any]) -> list[Any]:
    """Version 4: the trailing values equal to the one before them left out (the reader pads
    the vector to the layout's length with the last value written)."""
    n = len(written)
    while n > 1 and _same(written[n - 1], written[n - 2]):
        n -= 1
    return written[:n]


def _rate(value: float) -> float | str:
    """A bucket rate as written: a number 0 .. MAX_VALUE, else "NaN" (its health is NAN either way)."""
    return value if 0.0 <= value <= MAX_VALUE else "NaN"


def _histogram(h: LatencyHistogram | None, layouts: dict[tuple[float, ...], int] | None = None,
               vectors: dict[tuple[Any, ...], int] | None = None) -> list[Any] | None:
    """`[finite bounds, rates (one more: +Inf), timestamp]`; null for what no reader would take
    (bounds not ascending within 0 .. MAX_LE ending at +Inf, more than MAX_BUCKETS, lengths differ).
    With `layouts` (the file's, version 3): the bounds written in full once, then by number.
    With `vectors` (the file's, version 4): the rates likewise, and their repeated tail left out."""
    if h is None:
        return None
    bounds, rates = h.upper_bounds, h.cumulative_per_second
    finite = bounds[:-1]
    if (not bounds or bounds[-1] != math.inf or len(bounds) != len(rates) or len(bounds) > MAX_BUCKETS
            or not all(0.0 <= b <= MAX_LE for b in finite) or any(b2 <= b1 for b1, b2 in zip(finite, finite[1:]))
            or not 0.0 <= h.timestamp <= MAX_TIMESTAMP):
        return None
    written: Any = [_rate(r) for r in rates]
    if vectors is not None:
        values = tuple(written)
        if numbered_rates(values):
            number = vectors.get(values)
            if number is not None:
                written = number
            else:
                if len(vectors) < MAX_RATE_VECTORS:
                    vectors[values] = len(vectors)
                written = _trimmed(written)
        else:
            written = _trimmed(written)
    if layouts is not None:
        key = tuple(finite)
        number = layouts.get(key)
        if number is not None:
            return [number, written, h.timestamp]
        if len(layouts) < MAX_LAYOUTS:
            layouts[key] = len(layouts)
    return [list(finite), written, h.timestamp]


def _pod_entry(p: RecordedPod, layouts: dict[tuple[float, ...], int] | None = None,
               vectors: dict[tuple[Any, ...], int] | None = None) -> list[Any]:
    """A pod's array: the 11 fields of version 1, then the 5 SLO fields unless all are null.
    With `vectors` (version 4), a sample or histogram with the timestamp of the one before it in
    the entry is written without it: a bare value, `[bounds, rates]`."""
    if vectors is not None:
        return _pod_entry_v4(p, layouts, vectors)
    entry = [p.name, p.ready, p.stage.value if p.stage else None, _sample(p.waiting), _sample(p.running),
             _sample(p.kv), p.kv_metric, _sample(p.completed), p.created, p.scheduled, p.ready_at]
    if (p.prompt_tokens or p.generation_tokens or p.ttft or p.tpot or p.queue_time) is not None:
        entry += [_sample(p.prompt_tokens), _sample(p.generation_tokens), _histogram(p.ttft, layouts, vectors),
                  _histogram(p.tpot, layouts, vectors), _histogram(p.queue_time, layouts, vectors)]
    return entry


def _pod_entry_v4(p: RecordedPod, layouts: dict[tuple[float, ...], int] | None,
                  vectors: dict[tuple[Any, ...], int]) -> list[Any]:
    prev: float | None = None

    def sample(s: MetricSample | None) -> Any:
        nonlocal prev
        if s is None:
            return None
        if s.timestamp == prev and s.timestamp != 0.0:  # 0.0 may be -0.0: written as it is
            return _num(s.value)
        prev = s.timestamp
        return [_num(s.value), s.timestamp]

    def histogram(h: LatencyHistogram | None) -> Any:
        nonlocal prev
        out = _histogram(h, layouts, vectors)
        if out is not None:
            if out[2] == prev and out[2] != 0.0:
                return out[:2]
            prev = out[2]
        return out

    entry = [p.name, p.ready, p.stage.value if p.stage else None, sample(p.waiting), sample(p.running),
             sample(p.kv), p.kv_metric, sample(p.completed), p.created, p.scheduled, p.ready_at]
    if (p.prompt_tokens or p.generation_tokens or p.ttft or p.tpot or p.queue_time) is not None:
        entry += [sample(p.prompt_tokens), sample(p.generation_tokens), histogram(p.ttft), histogram(p.tpot),
                  histogram(p.queue_time)]
    return entry


def encode_step(step: Step, layouts: dict[tuple[float, ...], int] | None = None,
                vectors: dict[tuple[Any, ...], int] | None = None) -> dict[str, Any]:
    """A step's line; `layouts`: the bucket layouts of the file written so far (numbered in
    order; updated), or None to write every histogram's bounds in full; `vectors` the same for
    rate vectors (version 4), or None to write every histogram's rates in full."""
    pods = [_pod_entry(p, layouts, vectors) for p in step.pods]
    out: dict[str, Any] = {"t": step.t, "spec": step.spec, "ready": step.ready, "rollout": step.rollout, "pods": pods}
    if step.demand:
        out["demand"] = {k: (_num(v) if isinstance(v, float) else v) for k, v in step.demand.items()}
    return out


def encode_header(header: Header) -> dict[str, Any]:
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "target": {"namespace": header.namespace, "deployment": header.deployment},
        "step_seconds": header.step_seconds,
        "start": header.start,
        "end": header.end,
        "metadata": header.metadata,
    }


def _dumps(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"), allow_nan=False)


def write_recording(path: str | Path, header: Header, steps: Iterable[Step]) -> int:
    """Write the file atomically (to a temporary file in the same folder, fsync, rename over
    `path`: killed mid-write, the previous file stays whole); returns the number of steps."""
    n = 0
    layouts: dict[tuple[float, ...], int] = {}
    vectors: dict[tuple[Any, ...], int] = {}
    final = Path(path)
    with atomic_path(final) as tmp, open(tmp, "wb") as raw, gzip.GzipFile(
        filename=str(final), mode="wb", compresslevel=6, fileobj=raw  # the gzip header names `path`, as before
    ) as gz, io.TextIOWrapper(gz, encoding="utf-8") as fh:
        fh.write(_dumps(encode_header(header)) + "\n")
        for step in steps:
            fh.write(_dumps(encode_step(step, layouts, vectors)) + "\n")
            n += 1
        fh.write(_dumps({"end": True, "steps": n}) + "\n")
    return n


# --------------------------------------------------------------------------- decoding


def _decode_sample(raw: Any, where: str) -> MetricSample | None:
    if raw is None:
        return None
    try:
        v, ts = raw  # float() reads the strings "NaN", "+Inf", "-Inf" too
        if (isinstance(v, str) and v not in _SPECIAL) or isinstance(v, bool) or isinstance(ts, str | bool):
            raise ValueError(v)  # `true` is no number, nor is a time written as a string
        value, stamp = float(v), float(ts)
    except (TypeError, ValueError, OverflowError):
        raise RecordingError(f"{where}: expected [value, timestamp] or null, got {_short(raw)}") from None
    if math.isfinite(value) and not -MAX_VALUE <= value <= MAX_VALUE or not 0.0 <= stamp <= MAX_TIMESTAMP:
        raise RecordingError(f"{where}: sample {_short(raw)} is out of range (allowed: a value NaN, +/-Inf or within "
                             f"+/-{MAX_VALUE:g}; a timestamp in Unix seconds 0 .. {MAX_TIMESTAMP:.0f})")
    return MetricSample(value, stamp)


def _opt_time(raw: Any, where: str) -> float | None:
    if raw is None:
        return None
    if isinstance(raw, str | bool):
        raise TypeError(raw)
    try:
        t = float(raw)
    except (TypeError, ValueError, OverflowError):
        raise TypeError(raw) from None
    if not 0.0 <= t <= MAX_TIMESTAMP:
        raise RecordingError(f"{where}: {_short(raw)} is out of range (allowed: Unix seconds 0 .. "
                             f"{MAX_TIMESTAMP:.0f}, year 9999)")
    return t


def _demand(raw: dict[Any, Any], where: str) -> dict[str, Any]:
    """The `demand` object: numbers are rates (`_value`); `*_buckets` maps `le` (a number
    0 .. MAX_LE, or "+Inf") to a rate; any other object is kept as read, nested at most MAX_DEPTH."""
    out: dict[str, Any] = {}
    for k, v in raw.items():
        at = f"{where}.demand.{k}"
        if isinstance(v, str | int | float):
            out[k] = _value(v, at)
            continue
        if isinstance(v, dict | list):
            try:
                check_depth(v, at, start=2)  # in the step line's object and its demand object
            except LimitError as exc:
                raise RecordingError(str(exc)) from None
        if isinstance(v, dict) and str(k).endswith("_buckets"):
            for le, rate in v.items():
                if not _le_ok(le):
                    raise RecordingError(f"{at}: bucket bound {_short(le)} (allowed: a number 0 .. {MAX_LE:g} or \"+Inf\")")
                _float(rate, f"{at}.{le}")
        out[k] = v
    return out


_LE_SEEN: set[str] = set()


def _le_ok(le: Any) -> bool:
    """A histogram bucket bound: "+Inf"/"Inf" or a number 0 .. MAX_LE (as a string key)."""
    if le in _LE_SEEN:
        return True
    if not isinstance(le, str):
        return False
    if le not in ("+Inf", "Inf"):
        try:
            bound = float(le)
        except ValueError:
            return False
        if not 0.0 <= bound <= MAX_LE:
            return False
    if len(_LE_SEEN) < 4096:
        _LE_SEEN.add(le)
    return True


def _opt_float(raw: Any, where: str) -> float | None:
    return None if raw is None else _float(raw, where)


MAX_REPLICAS: Final = 2**31 - 1
"""A Deployment's replicas are an int32 in the Kubernetes API."""


def _opt_int(raw: Any, where: str) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float) or (isinstance(raw, float) and not math.isfinite(raw)) \
            or raw != int(raw) or not 0 <= raw <= MAX_REPLICAS:
        raise RecordingError(f"{where}: expected a replica count (0 .. {MAX_REPLICAS}), got {_short(raw)}")
    return int(raw)


def _decode_histogram(raw: Any, where: str, layouts: BucketLayouts | None = None,
                      version: int = FORMAT_VERSION) -> LatencyHistogram | None:
    """`[finite bounds, rates, timestamp]` (see `_histogram`), in version 3 also `[layout
    number, rates, timestamp]`, in version 4 also a rate vector number for the rates or the
    rates without their repeated tail, or null; RecordingError otherwise."""
    if raw is None:
        return None
    v4 = version >= 4
    numbered = layouts is not None and layouts.numbers and isinstance(raw, list) and len(raw) == 3 and type(
        raw[0]) is int
    rates_numbered = v4 and isinstance(raw, list) and len(raw) == 3 and type(raw[1]) is int
    if not isinstance(raw, list) or len(raw) != 3 or not (numbered or isinstance(raw[0], list)) or not (
            rates_numbered or isinstance(raw[1], list)):
        what = "[bounds or layout number, rates, timestamp]" if layouts is not None and layouts.numbers else (
            "[bounds, rates, timestamp]")
        if v4:
            what = "[bounds or layout number, rates or rate vector number, timestamp]"
        raise RecordingError(f"{where}: expected a histogram {what} or null, got {_short(raw)}")
    if rates_numbered:
        vectors = layouts.rates_ordered if layouts is not None else []
        number = raw[1]
        if not 0 <= number < len(vectors):
            allowed = f"0 .. {len(vectors) - 1}" if vectors else "none so far"
            raise RecordingError(f"{where}: histogram rate vector {number} (allowed: the number of a rate vector "
                                 f"written in full before, {allowed})")
        shared = vectors[number]
        raw = [raw[0], list(shared), raw[2]]
    elif v4 and not numbered and 0 < len(raw[1]) < len(raw[0]) + 1:
        raw = [raw[0], raw[1] + [raw[1][-1]] * (len(raw[0]) + 1 - len(raw[1])), raw[2]]
    if numbered:
        assert layouts is not None
        number, rates_raw, ts = raw
        if not 0 <= number < len(layouts.ordered):
            raise RecordingError(f"{where}: histogram bucket layout {number} (allowed: the number of a layout "
                                 f"written in full before, 0 .. {len(layouts.ordered) - 1})")
        raw = [list(layouts.ordered[number][:-1]), rates_raw, ts]
        if v4 and not rates_numbered and 0 < len(rates_raw) < len(raw[0]) + 1:
            raw[1] = rates_raw + [rates_raw[-1]] * (len(raw[0]) + 1 - len(rates_raw))
    bounds_raw, rates_raw, ts = raw
    if len(bounds_raw) >= MAX_BUCKETS or len(rates_raw) != len(bounds_raw) + 1:
        raise RecordingError(f"{where}: histogram of {len(bounds_raw)} bounds and {len(rates_raw)} rates (allowed: "
                             f"at most {MAX_BUCKETS - 1} finite bounds, and one rate more than bounds for +Inf)")
    bounds = tuple(_float(b, f"{where} histogram bound") for b in bounds_raw)
    if not all(0.0 <= b <= MAX_LE for b in bounds) or any(b2 <= b1 for b1, b2 in zip(bounds, bounds[1:])):
        raise RecordingError(f"{where}: histogram bounds {_short(bounds_raw)} (allowed: ascending numbers 0 .. "
                             f"{MAX_LE:g})")
    rates = tuple(_float(r, f"{where} histogram rate") for r in rates_raw)
    if not all(0.0 <= r <= MAX_VALUE or r != r for r in rates):
        raise RecordingError(f"{where}: histogram rates {_short(rates_raw)} (allowed: NaN or numbers 0 .. "
                             f"{MAX_VALUE:g})")
    full = (*bounds, math.inf) if layouts is None else layouts.add(bounds)
    if rates_numbered:
        rates = shared
    elif layouts is not None:
        rates = layouts.add_rates(rates)
    return LatencyHistogram(full, rates, _time(ts, f"{where} histogram timestamp"))


def _decode_pod(p: Any, where: str, i: int, version: int, layouts: BucketLayouts | None = None) -> RecordedPod:
    """One pod array: the 11 fields of version 1, and in version 2 optionally the 5 SLO fields.
    KeyError, TypeError or ValueError on a malformed entry; RecordingError on a value out of range."""
    if not isinstance(p, list) or not (len(p) == len(POD_FIELDS_V1) or version >= 2 and len(p) == len(POD_FIELDS)):
        raise TypeError(p)
    name, ready, stage_raw, w, r, kv, kv_metric, c, created, scheduled, ready_at = p[:11]
    if not isinstance(name, str) or not isinstance(ready, bool) or not (kv_metric is None or isinstance(kv_metric, str)):
        raise TypeError(name)
    at = f"{where} pods[{i}]"
    prev: list[float] = []  # version 4: the timestamp of the entry's last sample or histogram

    def sample(raw: Any, at: str) -> MetricSample | None:
        if version >= 4 and raw is not None and not isinstance(raw, list):  # a bare value
            if not prev:
                raise RecordingError(f"{at}: a value without its timestamp, {_short(raw)}, before any sample with "
                                     "one (allowed: [value, timestamp] first in a pod entry)")
            raw = [raw, prev[0]]
        s = _decode_sample(raw, at)
        if s is not None:
            prev[:] = [s.timestamp]
        return s

    def histogram(raw: Any, at: str) -> LatencyHistogram | None:
        if version >= 4 and isinstance(raw, list) and len(raw) == 2:  # without its timestamp
            if not prev:
                raise RecordingError(f"{at}: a histogram without its timestamp before any sample with one "
                                     "(allowed: [bounds, rates, timestamp] first in a pod entry)")
            raw = [*raw, prev[0]]
        h = _decode_histogram(raw, at, layouts, version)
        if h is not None:
            prev[:] = [h.timestamp]
        return h

    waiting, running, kv_s, completed = sample(w, where), sample(r, where), sample(kv, where), sample(c, where)
    slo: tuple[Any, ...] = (None,) * 5
    if len(p) > 11:
        pt, gt, ttft, tpot, qt = p[11:]
        slo = (sample(pt, at), sample(gt, at), histogram(ttft, f"{at} ttft"), histogram(tpot, f"{at} tpot"),
               histogram(qt, f"{at} queue_time"))
    return RecordedPod(
        name,
        ready,
        _STAGES[stage_raw] if stage_raw is not None else None,
        waiting,
        running,
        kv_s,
        kv_metric,
        completed,
        _opt_time(created, f"{where} pods[{i}] created"),
        _opt_time(scheduled, f"{where} pods[{i}] scheduled"),
        _opt_time(ready_at, f"{where} pods[{i}] ready_at"),
        *slo,
    )


def decode_step(doc: Any, where: str, version: int = FORMAT_VERSION, layouts: BucketLayouts | None = None) -> Step:
    """One step line; `layouts`: the file's bucket layouts so far (version 3 may name them)."""
    if not isinstance(doc, dict):
        raise RecordingError(f"{where}: not a JSON object")
    if "t" not in doc:
        raise RecordingError(f"{where}: no 't'")
    pods_raw = doc.get("pods", [])
    if not isinstance(pods_raw, list):
        raise RecordingError(f"{where}: 'pods' is not a list")
    pods = []
    for i, p in enumerate(pods_raw):
        try:
            pods.append(_decode_pod(p, where, i, version, layouts))
        except (KeyError, TypeError, ValueError):
            extra = f" (+ optionally {', '.join(SLO_FIELDS)})" if version >= 2 else ""
            raise RecordingError(f"{where} pods[{i}]: not a valid pod entry ({len(POD_FIELDS_V1)} fields: "
                                 f"{', '.join(POD_FIELDS_V1)}{extra})") from None
    names = [p.name for p in pods]
    if len(set(names)) != len(names):  # replayed, its load would count twice
        twice = sorted({n for n in names if names.count(n) > 1})
        raise RecordingError(f"{where}: pod {twice[0]!r} is listed twice")
    demand_raw = doc.get("demand") or {}
    if not isinstance(demand_raw, dict):
        raise RecordingError(f"{where}: 'demand' is not an object")
    demand = _demand(demand_raw, where)
    return Step(
        t=_time(doc["t"], f"{where}.t"),
        spec=_opt_int(doc.get("spec"), f"{where}.spec"),
        ready=_opt_int(doc.get("ready"), f"{where}.ready"),
        rollout=_flag(doc.get("rollout", False), f"{where}.rollout"),
        pods=tuple(pods),
        demand=demand,
    )


def _flag(value: Any, where: str) -> bool:
    """A JSON boolean; anything else (`"false"`, 0, null) is refused: read as Python reads it,
    the string "false" was a rollout in progress."""
    if not isinstance(value, bool):
        raise RecordingError(f"{where} = {str(value)[:40]!r}: not true or false")
    return value


def decode_header(doc: Any, source: str) -> Header:
    if not isinstance(doc, dict):
        raise RecordingError(f"{source}: the first line is not a JSON object")
    if doc.get("format") != FORMAT_NAME:
        raise RecordingError(f"{source}: not a {FORMAT_NAME} file (format={doc.get('format')!r})")
    version = doc.get("version")
    if isinstance(version, bool) or version not in READ_VERSIONS:  # 1.0 was read as 1 before version 2
        raise RecordingError(
            f"{source}: {FORMAT_NAME} version {version!r} is not supported (this autoscaler reads versions "
            f"{', '.join(map(str, READ_VERSIONS))})"
        )
    target = doc.get("target")
    if not isinstance(target, dict) or not isinstance(target.get("namespace"), str) or not isinstance(
        target.get("deployment"), str
    ):
        raise RecordingError(f"{source}: header has no target namespace/deployment")
    step = _float(doc.get("step_seconds"), f"{source} header step_seconds")
    if not step > 0:
        raise RecordingError(f"{source}: header step_seconds must be > 0, got {step!r}")
    lo, hi = STEP_SECONDS_RANGE
    if not lo <= step <= hi:
        raise RecordingError(f"{source}: header step_seconds = {step!r} is out of range (allowed: {lo:g} .. {hi:g})")
    metadata = doc.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise RecordingError(f"{source}: header metadata is not an object")
    try:
        check_depth(metadata, f"{source}: header metadata", start=1)
    except LimitError as exc:
        raise RecordingError(str(exc)) from None
    return Header(
        namespace=target["namespace"],
        deployment=target["deployment"],
        step_seconds=step,
        start=_time(doc.get("start"), f"{source} header start"),
        end=_time(doc.get("end"), f"{source} header end"),
        metadata=metadata,
        version=int(version),
    )


# --------------------------------------------------------------------------- reading


def _lines(fh: IO[Any] | io.BufferedIOBase, source: str, limit: int = MAX_LINE_BYTES, first_limit: int | None = None
           ) -> Iterator[tuple[int, Any]]:
    """(line number, line) of `fh`, each line at most `limit` long (line 1: `first_limit`); a
    longer line is never read whole: a gzip bomb of one line is refused when the limit is reached."""
    readline = fh.readline
    lineno = 0
    try:
        while True:
            size_limit = first_limit if lineno == 0 and first_limit is not None else limit
            line = readline(size_limit + 1)
            if not line:
                return
            lineno += 1
            if len(line) > size_limit:
                size = describe_size(size_limit)
                raise RecordingError(f"{source}: line {lineno} is longer than {size} (allowed: at most {size} a line)")
            yield lineno, line
    except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
        raise RecordingError(f"{source}: truncated or corrupt gzip stream ({exc})") from None
    except UnicodeDecodeError:
        raise RecordingError(f"{source}: not UTF-8 text") from None


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


@contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector: reading a month builds millions of small acyclic
    objects that each collection pass would rescan. Reference counting still frees
    everything; the collector resumes on exit.

    On exit, what was built is moved to the oldest generation (`gc.freeze()` then
    `gc.unfreeze()`: two list splices) rather than left for the next young-generation pass to
    walk (~0.5 s for the 1.7 million objects of a month's recording): it is long-lived data.
    Not done when something else has frozen objects (a pre-fork server), which unfreezing
    would undo."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


class ExportText(NamedTuple):
    """A file that is not a recording but one JSON document: a plain Prometheus query_range export,
    converted by `autoscaler.replay.prom_export` (see `autoscaler.replay.reader.read_recording`)."""

    text: str
    source: str


FastDecoder = Callable[[dict[str, Any], int, "BucketLayouts"], Callable[[dict[str, Any], bytes], "Step | None"]]
"""`fast_decoder(cache, version, layouts)`: a line's fast decoder (`autoscaler.replay.fast_decode`)."""


def read_native(path: str | Path, fast_decoder: FastDecoder | None = None) -> Recording | ExportText:
    """Read and validate a recording; a file that is one JSON document instead comes back as its
    text. Raises `RecordingError` with a one-line message. With `fast_decoder` (what
    `autoscaler.replay.reader` passes), the common lines are decoded by it and every other
    line by `decode_step`; without, every line by `decode_step`: the same steps, slower."""
    with no_gc():
        return _read_recording(path, fast_decoder)


def _open(p: Path, gz: bool, source: str) -> io.BufferedIOBase:
    try:
        if gz:  # lines split by a C BufferedReader, not GzipFile's Python-level readline()
            return io.BufferedReader(gzip.GzipFile(p, "rb"), 1 << 16)
        return open(p, "rb")  # noqa: SIM115
    except OSError as exc:  # pragma: no cover - checked by _is_gzip just before
        raise RecordingError(f"{source}: cannot open: {exc}") from None


def _read_export(p: Path, gz: bool, source: str) -> ExportText:
    """The whole file as text (universal newlines, as `json` reads it): a query_range export."""
    try:
        fh: IO[str] = gzip.open(p, "rt", encoding="utf-8") if gz else open(p, encoding="utf-8")  # noqa: SIM115
    except OSError as exc:  # pragma: no cover - read once already
        raise RecordingError(f"{source}: cannot open: {exc}") from None
    with fh:
        parts, size = [], 0
        for _, line in _lines(fh, source, MAX_EXPORT_BYTES):
            size += len(line)
            if size > MAX_EXPORT_BYTES:
                limit = describe_size(MAX_EXPORT_BYTES)
                raise RecordingError(f"{source}: a Prometheus export larger than {limit} (allowed: at most {limit})")
            parts.append(line)
    return ExportText("".join(parts), source)


def _read_recording(path: str | Path, fast_decoder: FastDecoder | None = None) -> Recording | ExportText:
    p = Path(path)
    source = str(path)
    try:
        gz = _is_gzip(p)
    except OSError as exc:
        raise RecordingError(f"{source}: cannot open: {exc.strerror or exc}") from None
    with _open(p, gz, source) as fh:  # bytes: orjson parses UTF-8 itself
        try:  # line 1 of a one-line Prometheus export may be as long as the export
            json_like = fh.peek(64)[:64].lstrip()[:1] in (b"{", b"[")  # type: ignore[attr-defined]
        except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
            raise RecordingError(f"{source}: truncated or corrupt gzip stream ({exc})") from None
        lines: Iterator[tuple[int, bytes]] = _lines(fh, source, first_limit=MAX_EXPORT_BYTES if json_like else None)
        first = next(lines, None)
        if first is None:
            raise RecordingError(f"{source}: empty file")
        try:
            text = first[1].decode("utf-8").strip()
        except UnicodeDecodeError:
            raise RecordingError(f"{source}: not UTF-8 text") from None
        try:
            first_doc: Any = json.loads(text)
        except ValueError:  # not JSON (JSONDecodeError), or an integer of more than 4,300 digits
            first_doc = None
        except RecursionError:  # ~1,000 levels: the parser's own limit
            raise RecordingError(str(depth_error(f"{source}: line 1"))) from None
        if not (isinstance(first_doc, dict) and "format" in first_doc):
            if text.startswith(("{", "[")):
                # not our header: a plain Prometheus query_range export (one JSON document)
                fh.close()
                return _read_export(p, gz, source)
            raise RecordingError(f"{source}: line 1 is not JSON (not a {FORMAT_NAME} file)")
        header = decode_header(first_doc, source)
        steps: list[Step] = []
        append = steps.append
        last_t = -math.inf
        trailer: dict[str, Any] | None = None
        cache: dict[Any, MetricSample] = {}
        version = header.version
        layouts = BucketLayouts(numbers=version >= 3, vectors=version >= 4)
        fast_loads = _fast_loads if fast_decoder is not None else None
        fast_step = fast_decoder(cache, version, layouts) if fast_decoder is not None else None
        blank = 0
        for lineno, raw in lines:
            step: Step | None = None
            if fast_loads is not None and fast_step is not None and trailer is None:
                try:
                    doc = fast_loads(raw)
                except ValueError:
                    doc = None
                if type(doc) is dict and doc.get("end") is not True and raw.endswith(b"\n"):
                    step = fast_step(doc, raw)
            if step is None:  # the reference path: anything unusual, the trailer, every error
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise RecordingError(f"{source}: not UTF-8 text") from None
                if not line.strip():
                    blank += 1
                    if blank > MAX_BLANK_LINES:  # a stream of newlines (a gzip bomb) is no recording
                        raise RecordingError(f"{source}: line {lineno}: more than {MAX_BLANK_LINES:,} blank lines "
                                             f"(allowed: at most {MAX_BLANK_LINES:,})")
                    continue
                if trailer is not None:
                    raise RecordingError(f"{source}: line {lineno}: data after the end marker")
                if not line.endswith("\n"):
                    raise RecordingError(f"{source}: truncated at line {lineno} (no end marker)")
                try:
                    doc = json.loads(line)
                except json.JSONDecodeError:
                    raise RecordingError(f"{source}: line {lineno} is not JSON (corrupt or truncated)") from None
                except ValueError as exc:  # an integer of more than 4,300 digits
                    raise RecordingError(f"{source}: line {lineno}: {str(exc).split(';')[0]}") from None
                except RecursionError:  # ~1,000 levels: the parser's own limit
                    raise RecordingError(str(depth_error(f"{source}: line {lineno}"))) from None
                if isinstance(doc, dict) and doc.get("end") is True:
                    trailer = doc
                    continue
                step = decode_step(doc, f"{source}: line {lineno}", version, layouts)
            if steps and step.t <= last_t:
                raise RecordingError(f"{source}: line {lineno}: step t={step.t} is not after the previous one")
            last_t = step.t
            append(step)
    if trailer is None:
        raise RecordingError(f"{source}: truncated: no end marker after {len(steps)} steps")
    if trailer.get("steps") != len(steps):
        raise RecordingError(f"{source}: end marker says {trailer.get('steps')!r} steps, file has {len(steps)}")
    check_grid(header, steps, source)
    return Recording(header=header, steps=tuple(steps))


def check_grid(header: Header, steps: list[Step], source: str) -> None:
    """The steps are where the header says: the first at `start`, the last at `end`, each at
    start + k x step_seconds (to a millisecond; gaps allowed). A header that disagrees made
    the replay's GPU-hours (step x ticks) and times wrong without a word.

    Worked example: start 100, end 130, step 15, steps at 100, 115, 130: fine; at 100, 110:
    refused (110 is not on the grid)."""
    if not steps:
        return
    tol = 1e-3
    for name, t, want in (("start", steps[0].t, header.start), ("end", steps[-1].t, header.end)):
        if abs(t - want) > tol:
            raise RecordingError(f"{source}: header {name} = {want!r}, but the {'first' if name == 'start' else 'last'} "
                                 f"step is at t = {t!r}")
    for step in steps:
        k = (step.t - header.start) / header.step_seconds
        if abs(k - round(k)) * header.step_seconds > tol:
            raise RecordingError(f"{source}: step t = {step.t!r} is not on the header's grid (start {header.start!r} "
                                 f"+ k x step_seconds {header.step_seconds:g})")
