"""Pure parsing of Prometheus' HTTP API answers (instant vectors, matrices, error bodies) and the
splitting of long range queries under Prometheus' point limit."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from autoscaler.adapters.prometheus.errors import (
    PrometheusBadResponse,
    PrometheusQueryError,
)
from autoscaler.policy.types import LatencyHistogram, MetricSample

_BODY_EXCERPT: Final = 300

Sample = tuple[dict[str, str], float, float]
"""(labels, value, timestamp) of one instant-vector element, as Prometheus answered it."""

Series = tuple[dict[str, str], list[tuple[float, float]]]
"""(labels, [(timestamp, value), ...]) of one range-vector (matrix) element."""

MAX_POINTS_PER_SERIES: Final = 11_000  # Prometheus refuses a query_range with more points per series


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class PodMetrics:
    """The signals of one pod; `None` = no series for the pod."""

    waiting: MetricSample | None
    running: MetricSample | None
    kv_cache_usage: MetricSample | None
    kv_metric_name: str | None  # KV_METRIC, KV_METRIC_LEGACY, or None when kv_cache_usage is None
    # requests/s the pod finishes: rate(vllm:request_success_total[window]) summed over engines
    # and finished reasons; timestamp = its latest counter sample
    completed_per_second: MetricSample | None = None
    # tokens/s the pod processes: rate(vllm:prompt_tokens_total[window]) and
    # rate(vllm:generation_tokens_total[window]) summed over engines
    prompt_tokens_per_second: MetricSample | None = None
    generation_tokens_per_second: MetricSample | None = None
    # latency histograms over the window (bucket rates summed over engines): time to first
    # token; per-request TPOT (vllm:request_time_per_output_token_seconds, else the per-token
    # vllm:time_per_output_token_seconds of vLLM < 0.11); time in the queue
    ttft: LatencyHistogram | None = None
    tpot: LatencyHistogram | None = None
    queue_time: LatencyHistogram | None = None


# --------------------------------------------------------------------------- pure parsing

# What Go's strconv.FormatFloat(v, 'f' | 'e' | 'g', -1, 64) and Prometheus produce.
_FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_SPECIAL_VALUES: Final[Mapping[str, float]] = {
    "NaN": math.nan,
    "+Inf": math.inf,
    "Inf": math.inf,
    "-Inf": -math.inf,
}


def _parse_value(raw: Any, where: str) -> float:
    if not isinstance(raw, str):
        raise PrometheusBadResponse(f"{where}: sample value must be a string, got {raw!r}")
    special = _SPECIAL_VALUES.get(raw)
    if special is not None:
        return special
    if not _FLOAT_RE.match(raw):
        raise PrometheusBadResponse(f"{where}: sample value {raw!r} is not a number")
    return float(raw)


def _parse_timestamp(raw: Any, where: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise PrometheusBadResponse(f"{where}: sample timestamp must be a number, got {raw!r}")
    ts = float(raw)
    if not math.isfinite(ts):
        raise PrometheusBadResponse(f"{where}: sample timestamp {raw!r} is not finite")
    return ts


def _result_items(body: Any, result_type: str, what: str) -> list[tuple[str, dict[str, Any], dict[str, str]]]:
    """The common envelope of `/api/v1/query` and `/api/v1/query_range` answers: status,
    data, resultType (a missing one is taken as `result_type`), result list, each element an
    object with a string-to-string `metric`. Returns (where, element, metric) per element."""
    if not isinstance(body, dict):
        raise PrometheusBadResponse(f"answer is not a JSON object: {type(body).__name__}")
    status = body.get("status")
    if status != "success":
        error_type = body.get("errorType")
        error = body.get("error")
        raise PrometheusBadResponse(
            f"Prometheus answered status={status!r}: {error_type}: {error}",
            error_type=error_type if isinstance(error_type, str) else None,
            error=error if isinstance(error, str) else None,
        )
    data = body.get("data")
    if not isinstance(data, dict):
        raise PrometheusBadResponse("answer has no 'data' object")
    got = data.get("resultType", result_type)
    if got != result_type:
        raise PrometheusBadResponse(f"expected {what}, got resultType={got!r}")
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusBadResponse("answer has no 'data.result' list")
    items = []
    for i, item in enumerate(result):
        where = f"result[{i}]"
        if not isinstance(item, dict):
            raise PrometheusBadResponse(f"{where} is not an object")
        metric = item.get("metric")
        if not isinstance(metric, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metric.items()
        ):
            raise PrometheusBadResponse(f"{where}: 'metric' must map strings to strings")
        items.append((where, item, metric))
    return items


def parse_vector(body: Any) -> list[Sample]:
    """Parse a decoded `/api/v1/query` answer that must be an instant vector.

    Returns `(labels, value, timestamp)` per element, in the server's order; `timestamp` is
    whatever the server put next to the value (for an instant query: the evaluation time).
    Strict: raises `PrometheusBadResponse` on status != "success" (with the server's
    errorType/error), a non-vector result, a missing/ill-typed field, or a value that is
    not a number (NaN, +Inf, -Inf are numbers). A missing `resultType` is accepted when the
    elements are vector-shaped (some proxies and docs trim it). Pure; never does I/O.
    """
    out: list[Sample] = []
    for where, item, metric in _result_items(body, "vector", "an instant vector"):
        pair = item.get("value")
        if not isinstance(pair, list) or len(pair) != 2:
            raise PrometheusBadResponse(f"{where}: 'value' must be a [timestamp, \"value\"] pair")
        ts = _parse_timestamp(pair[0], where)
        value = _parse_value(pair[1], where)
        out.append((dict(metric), value, ts))
    return out


def parse_matrix(body: Any) -> list[Series]:
    """Parse a decoded `/api/v1/query_range` answer that must be a range vector (matrix).

    Returns `(labels, [(timestamp, value), ...])` per series, in the server's order. Strict
    like `parse_vector`: status != "success", another resultType, a missing or ill-typed field,
    or a value that is not a number raise `PrometheusBadResponse`. Pure.
    """
    out: list[Series] = []
    for where, item, metric in _result_items(body, "matrix", "a range vector"):
        values = item.get("values")
        if not isinstance(values, list):
            raise PrometheusBadResponse(f"{where}: 'values' must be a list of [timestamp, \"value\"] pairs")
        points: list[tuple[float, float]] = []
        for j, pair in enumerate(values):
            if not isinstance(pair, list) or len(pair) != 2:
                raise PrometheusBadResponse(f"{where}.values[{j}]: must be a [timestamp, \"value\"] pair")
            points.append((_parse_timestamp(pair[0], where), _parse_value(pair[1], where)))
        out.append((dict(metric), points))
    return out


def split_range(
    start: float, end: float, step_seconds: float, max_points: int = MAX_POINTS_PER_SERIES
) -> list[tuple[float, float]]:
    """Split [start, end] into sub-ranges of at most `max_points` evaluation steps each.

    Every sub-range starts and ends on the grid `start + k * step_seconds`, and consecutive
    sub-ranges do not share a step, so the concatenated answers hold each step exactly once.
    Pure; raises ValueError on a non-positive step, end < start or max_points < 1.
    """
    if not (math.isfinite(start) and math.isfinite(end) and math.isfinite(step_seconds)):
        raise ValueError("start, end and step must be finite")
    if step_seconds <= 0:
        raise ValueError(f"step must be > 0, got {step_seconds!r}")
    if end < start:
        raise ValueError(f"end {end!r} is before start {start!r}")
    if max_points < 1:
        raise ValueError(f"max_points must be >= 1, got {max_points!r}")
    n_steps = int(math.floor((end - start) / step_seconds + 1e-9)) + 1
    chunks: list[tuple[float, float]] = []
    first = 0
    while first < n_steps:
        last = min(first + max_points, n_steps) - 1
        chunks.append((start + first * step_seconds, start + last * step_seconds))
        first = last + 1
    return chunks


def decode_response(status_code: int, body: bytes) -> Any:
    """Turn an HTTP answer of `/api/v1/query` into decoded JSON, or raise a typed error.

    Non-200: `PrometheusQueryError` for 400/422, else `PrometheusBadResponse`; both carry the
    status code and the server's errorType/error when the body is Prometheus' JSON. 200 with
    a body that is not JSON: `PrometheusBadResponse`. Pure.
    """
    doc: Any
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: "[[[[..." nested too deep
        doc = None
    if status_code != 200:
        error_type = error = None
        if isinstance(doc, dict):
            et, er = doc.get("errorType"), doc.get("error")
            error_type = et if isinstance(et, str) else None
            error = er if isinstance(er, str) else None
        if error_type is not None or error is not None:
            detail = f"{error_type}: {error}"
        else:
            detail = f"body {body[:_BODY_EXCERPT]!r}"
        cls = PrometheusQueryError if status_code in (400, 422) else PrometheusBadResponse
        raise cls(
            f"Prometheus answered HTTP {status_code}: {detail}",
            status_code=status_code,
            error_type=error_type,
            error=error,
        )
    if doc is None:
        raise PrometheusBadResponse(
            f"Prometheus answered HTTP 200 with a body that is not JSON: {body[:_BODY_EXCERPT]!r}"
        )
    return doc
