"""The fast path of the recording reader: a line's `Step` decoded with few checks and
allocations, or None, and the line is decoded by `format.decode_step` instead.

`autoscaler.replay.reader` passes `fast_decoder` to `format.read_native`. It is a module of
its own so that the opt-in compiled build (`make compiled`, setup.py) compiles it with the
decision core while the reference decoding, which names every error, stays pure Python: any
surprise here (a type mypyc did not expect raises TypeError) only sends the line to the
reference path. tests/replay/test_fast_read.py checks that both read the same, in both builds.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, Final

from autoscaler.policy.types import LatencyHistogram, MetricSample
from autoscaler.replay.format import (
    _LE_SEEN,
    _SPECIAL,
    _STAGES,
    FORMAT_VERSION,
    MAX_BUCKETS,
    MAX_LE,
    MAX_REPLICAS,
    MAX_TIMESTAMP,
    MAX_VALUE,
    BucketLayouts,
    RecordedPod,
    Step,
)

# A month at 15 s is 172,800 steps and millions of samples: `decode_step` would spend
# most of the read checking and building them one by one. `fast_decoder`'s steps read the common case
# (every value of the type the writer writes) with fewer checks and allocations, and gives up
# (returns None) on anything else: the caller then decodes that line with the stdlib JSON
# parser and `decode_step`, exactly as before, so an unusual but valid line reads the same and
# an invalid one fails with the same message. What it does differently:
#
# * equal samples are one object: `MetricSample` is immutable, and within a step the pods'
#   samples share their timestamp and often their value (0 on an idle fleet), and between
#   scrapes a sample repeats from step to step; interning cuts the allocations ~10x;
# * `RecordedPod` is built without its Python-level constructor, `Step` with `fast_init`'s.
#
# Where orjson's document could differ from json.loads' it is read the slow way: integers of
# 20 digits or more (orjson makes them floats) where they would be kept as read. -0.0 equals
# 0.0 as a dict key: a sample of value -0.0 (or timestamp 0) is never interned, and a sample
# interned with value 0.0 is not reused for a -0.0.

_HUGE_INT: Final = re.compile(rb"\d{20}")
# -0, -0.0, -0e1, -0.5 (not "qwen-00001"), or -1e-400 (underflows to -0.0): one regex, one pass over
# the line (a search for "e-" and "E-" before a second regex cost twice the time, 0.35 s a month)
_MAYBE_NEG_ZERO: Final = re.compile(rb"-(?:0[.,\]}eE \t\r\n]|[0-9.]+[eE]-)").search
_SAMPLE_CACHE_MAX: Final = 65_536
_new_tuple = tuple.__new__
_isinf = math.isinf
_copysign = math.copysign


def _new_sample(v: Any, ts: Any, cache: dict[Any, MetricSample]) -> MetricSample:
    """A sample not interned yet: checked as `_decode_sample` checks it (ValueError or TypeError
    if not valid), built, and interned under (v, ts) unless -0.0 could be mistaken for 0.0."""
    if (type(v) is str and v not in _SPECIAL) or type(v) is bool or not (type(ts) is float or type(ts) is int):
        raise ValueError(v)  # `true` or a time written as a string: the reference path names it
    value = float(v)
    stamp = float(ts)
    if not (-MAX_VALUE <= value <= MAX_VALUE or value != value or _isinf(value)) or not 0.0 <= stamp <= MAX_TIMESTAMP:
        raise ValueError(v)  # out of range: `_decode_sample` says which
    s = MetricSample(value, stamp)
    if stamp != 0.0 and (value != 0.0 or _copysign(1.0, value) > 0.0):
        if len(cache) >= _SAMPLE_CACHE_MAX:
            cache.clear()
        cache[v, ts] = s
    return s


class _NotFast(Exception):
    """A version 2 pod entry the fast path leaves to `decode_step`."""


_FLOAT_TYPE: Final = {float}


def _fast_histogram(raw: Any, layouts: BucketLayouts) -> LatencyHistogram | None:
    """The histogram of a well-formed `[bounds, rates, timestamp]` of floats, or in version 3
    `[layout number, rates, timestamp]` (the bounds shared: one tuple per layout), in version 4
    with a rate vector number or rates without their repeated tail, else `_NotFast`. In version
    4 a histogram of a numbered layout and numbered rates is one object per timestamp (pods of
    one step on equal load, a series between scrapes)."""
    if raw is None:
        return None
    b, r, ts = raw
    if type(ts) is not float or not 0.0 <= ts <= MAX_TIMESTAMP:
        raise _NotFast
    if type(r) is int and type(b) is int:  # version 4, both numbered
        return layouts.hists.get((b, r, ts)) or _numbered_histogram(b, r, ts, layouts)
    if type(b) is int:
        if not layouts.numbers or not 0 <= b < len(layouts.ordered):
            raise _NotFast
        bounds = layouts.ordered[b]
    elif type(b) is not list or b and set(map(type, b)) != _FLOAT_TYPE:
        raise _NotFast
    else:
        key = tuple(b)
        known = layouts.by_bounds.get(key)
        if known is None:
            if len(key) >= MAX_BUCKETS or not (not key or 0.0 <= key[0] and key[-1] <= MAX_LE) or any(
                    y <= x for x, y in zip(key, key[1:])):
                raise _NotFast
            known = layouts.add(key)
        bounds = known
    if type(r) is int:
        if not layouts.vectors or not 0 <= r < len(layouts.rates_ordered):
            raise _NotFast
        rates = layouts.rates_ordered[r]
        if len(rates) != len(bounds):
            raise _NotFast
        return LatencyHistogram(bounds, rates, ts)
    if type(r) is not list or set(map(type, r)) != _FLOAT_TYPE or not (0.0 <= min(r) and max(r) <= MAX_VALUE):
        raise _NotFast
    n = len(bounds)
    if len(r) == n:
        rates = tuple(r)
    elif layouts.vectors and len(r) < n:  # version 4: the repeated tail left out (r is not empty)
        rates = (*r, *(r[-1],) * (n - len(r)))
    else:
        raise _NotFast
    if layouts.vectors:
        rates = layouts.add_rates(rates)
    return LatencyHistogram(bounds, rates, ts)


_HIST_CACHE_MAX: Final = 65_536


def _numbered_histogram(b: int, r: int, ts: float, layouts: BucketLayouts) -> LatencyHistogram:
    """The histogram `[layout number, rate vector number, timestamp]` (version 4) not read yet
    at this timestamp, else `_NotFast`; interned (`_fast_histogram`)."""
    if (not 0.0 <= ts <= MAX_TIMESTAMP or not layouts.numbers or not 0 <= b < len(layouts.ordered)
            or not layouts.vectors or not 0 <= r < len(layouts.rates_ordered)):
        raise _NotFast
    bounds, rates = layouts.ordered[b], layouts.rates_ordered[r]
    if len(rates) != len(bounds):
        raise _NotFast
    h = LatencyHistogram(bounds, rates, ts)
    if ts != 0.0:  # -0.0 and 0.0 are one dict key: never interned
        hists = layouts.hists
        if len(hists) >= _HIST_CACHE_MAX:
            hists.clear()
        hists[b, r, ts] = h
    return h


def _fast_step(doc: dict[str, Any], line: bytes, cache: dict[Any, MetricSample], version: int = FORMAT_VERSION,
               layouts: BucketLayouts | None = None) -> Step | None:
    """The step of a well-formed line, or None: decode it with `decode_step` instead (see
    `_fast_decoder`, which a file's read makes once)."""
    return fast_decoder(cache, version, layouts)(doc, line)


def fast_decoder(cache: dict[Any, MetricSample], version: int = FORMAT_VERSION, layouts: BucketLayouts | None = None
                  ) -> Callable[[dict[str, Any], bytes], Step | None]:
    """`step(doc, line)`: the step of a well-formed line of a file of this version, or None:
    decode it with `decode_step` instead. What every line needs is bound once, here.

    The samples `[v, ts]` are interned inline (a call each would cost a tenth of the read): the
    cached sample of `(v, ts)`, else `_new_sample`. A line that may hold a -0.0 (equal to 0.0 as
    a cache key: a number that starts with "-0", or a negative one with a negative exponent) is
    left to the reference path."""
    get = cache.get
    stages = _STAGES
    max_ts = MAX_TIMESTAMP
    max_value = MAX_VALUE
    max_replicas = MAX_REPLICAS
    new_sample = _new_sample
    histogram = _fast_histogram
    numbered_histogram = _numbered_histogram
    new_pod = _new_tuple
    pod_type = RecordedPod
    new_step = Step
    maybe_neg_zero = _MAYBE_NEG_ZERO
    slo_ok = version >= 2 and layouts is not None
    bare = version >= 4
    lay = layouts if layouts is not None else BucketLayouts(numbers=False)
    hget = lay.hists.get

    def step(doc: dict[str, Any], line: bytes) -> Step | None:
        try:
            t = doc["t"]
            spec = doc.get("spec")
            ready = doc.get("ready")
            rollout = doc.get("rollout", False)
            pods_raw = doc.get("pods", [])
            if (
                type(t) is not float
                or not 0.0 <= t <= max_ts
                or not (spec is None or (type(spec) is int and 0 <= spec <= max_replicas))
                or not (ready is None or (type(ready) is int and 0 <= ready <= max_replicas))
                or not (rollout is False or rollout is True)
                or type(pods_raw) is not list
            ):
                return None
            if maybe_neg_zero(line):
                return None  # a -0.0 maybe, which equals 0.0 as a cache key: the reference path reads it
            pods: list[RecordedPod] = []
            append = pods.append
            for p in pods_raw:
                if len(p) == 16:  # a version 2 pod with its SLO fields
                    if not slo_ok:
                        return None
                    name, pod_ready, stage, w, r, kv, kv_metric, c, created, scheduled, ready_at, pt, gt, ttft, tpot, qt = p
                else:
                    name, pod_ready, stage, w, r, kv, kv_metric, c, created, scheduled, ready_at = p
                    pt = gt = ttft = tpot = qt = None
                if (
                    type(name) is not str
                    or not (pod_ready is True or pod_ready is False)
                    or not (kv_metric is None or type(kv_metric) is str)
                ):
                    return None
                if stage is not None:
                    stage = stages[stage]
                ts = None  # the timestamp of the last sample or histogram of this entry
                v = last = None  # the value and sample of the last sample
                fields: list[Any] = []
                for x in (w, r, kv, c, pt, gt):  # inline, not a call a field: this loop is the read's hot path
                    if x is not None:
                        if type(x) is list:
                            v, ts = x
                            if type(v) is bool:  # equal to 1 or 0 as a cache key: never a sample
                                return None
                        elif not bare:
                            return None
                        elif type(x) is float and x == v:  # version 4: the value before, the same sample
                            fields.append(last)
                            continue
                        elif type(x) is bool:
                            return None
                        else:  # version 4: a bare value has the timestamp of the sample before
                            v = x
                        x = last = get((v, ts)) or new_sample(v, ts, cache)
                    fields.append(x)
                w, r, kv, c, pt, gt = fields
                hists: list[Any] = []
                for h in (ttft, tpot, qt):
                    if h is not None:
                        if bare and len(h) == 2:  # version 4: the timestamp of the sample before
                            hb, hr = h
                        else:
                            hb, hr, ts = h
                        if type(hr) is int and type(hb) is int and type(ts) is float:  # version 4, both numbered
                            h = hget((hb, hr, ts)) or numbered_histogram(hb, hr, ts, lay)
                        else:
                            h = histogram([hb, hr, ts], lay)
                        ts = h.timestamp
                    hists.append(h)
                ttft, tpot, qt = hists
                if created is not None and (type(created) is not float or not 0.0 <= created <= max_ts):
                    if type(created) is not int:  # a string or a bool: the reference path refuses it
                        return None
                    created = float(created)
                    if not 0.0 <= created <= max_ts:
                        return None
                if scheduled is not None and (type(scheduled) is not float or not 0.0 <= scheduled <= max_ts):
                    if type(scheduled) is not int:  # a string or a bool: the reference path refuses it
                        return None
                    scheduled = float(scheduled)
                    if not 0.0 <= scheduled <= max_ts:
                        return None
                if ready_at is not None and (type(ready_at) is not float or not 0.0 <= ready_at <= max_ts):
                    if type(ready_at) is not int:  # a string or a bool: the reference path refuses it
                        return None
                    ready_at = float(ready_at)
                    if not 0.0 <= ready_at <= max_ts:
                        return None
                append(new_pod(pod_type, (name, pod_ready, stage, w, r, kv, kv_metric, c, created, scheduled, ready_at,
                                          pt, gt, ttft, tpot, qt)))
            if len({p.name for p in pods}) != len(pods):
                return None  # a pod twice: the reference path refuses it
            demand_raw = doc.get("demand") or {}
            if type(demand_raw) is not dict:
                return None
            demand: dict[str, Any] = {}
            for key, v in demand_raw.items():
                tv = type(v)
                if tv is float and -max_value <= v <= max_value:
                    demand[key] = v
                elif tv is int and -max_value <= v <= max_value:
                    demand[key] = float(v)
                elif tv is dict and not _HUGE_INT.search(line) and all(type(x) is float for x in v.values()) and all(
                        le in _LE_SEEN for le in v):
                    demand[key] = v  # e.g. histogram buckets, kept as read
                else:
                    return None
        except (KeyError, TypeError, ValueError, _NotFast):
            return None
        return new_step(t, spec, ready, rollout, tuple(pods), demand)

    return step
