"""Read vLLM's per-pod load signals from Prometheus. The only module that talks to Prometheus.

One `fetch()` sends a fixed number of instant queries (`QUERIES_PER_FETCH` = 10), whatever
the number of namespaces, Deployments or pods: one per signal, each returning, per
(namespace, pod), the aggregated value *and* the timestamp of the underlying samples. The
value/timestamp pair comes from one query (tagged with the `vqa_field` label via
`label_replace` and joined with `or`), so both are evaluated at the same instant.

Aggregation, per metric `M` and selector `S = M{namespace=~"^(?:ns1|ns2)$"}`:

* `E = max by (namespace, pod, engine) (S)`: one series per data-parallel engine. The `max`
  collapses duplicated series of the same engine (two scrape jobs, or a ServiceMonitor plus
  a PodMonitor, differ only in `job`/`instance`/`endpoint`...). vLLM before 0.8 has no
  `engine` label: grouping by a missing label groups by its empty value, so this still works.
  PromQL's `max` ignores a NaN if another duplicate has a number.
* waiting / running: `sum by (namespace, pod) (E)`: the engines of one pod add up. A NaN
  engine makes the sum NaN (as it should: the decision core classifies it).
* KV-cache usage: the max over engines, except that a pod with any NaN engine yields NaN
  (PromQL's `max` would hide it): `(max by (namespace, pod) (E) unless on (namespace, pod)
  (E != E)) or sum by (namespace, pod) (E != E)`. `vllm:kv_cache_usage_perc` (vLLM >=
  0.9.2) is preferred per pod; a pod without it falls back to `vllm:gpu_cache_usage_perc`
  (removed in 0.12). The choice is by *presence*, not by health: a pod exporting both
  names (0.9.2-0.10) always gets the new one, even if its value is NaN.
* completed requests per second: `sum by (namespace, pod) (max by (namespace, pod, engine,
  finished_reason) (rate(vllm:request_success_total{...}[60s])))`, all finished reasons
  (stop, length, abort, ...) since each one frees a batch slot. The window is
  `rate_window_seconds`. Caveat (Prometheus' extrapolation): for a counter younger than the
  window, `rate()` divides the increase by the whole window, so a pod that started less
  than a window ago is under-reported; a counter with a single sample in the window has no
  rate at all (the pod gets None).
* prompt / generation tokens per second: the same with `vllm:prompt_tokens_total` and
  `vllm:generation_tokens_total`, grouped by (namespace, pod, engine).
* latency histograms (`HISTOGRAMS`: TTFT, TPOT, queue time), one query per histogram:
  `sum by (namespace, pod, le) (max by (namespace, pod, engine, le) (rate(F_bucket{...}[60s])))`,
  the bucket rates per pod (cumulative, per second), read into a `LatencyHistogram` per pod
  (`le` as "+Inf", "1", "1.0", "2.5e+00"...); timestamp: that of the `+Inf` bucket, as below.
  TPOT is `vllm:request_time_per_output_token_seconds` (per request, vLLM >= 0.11), else per
  pod `vllm:time_per_output_token_seconds` (per token, older): `A or on (namespace, pod) (B
  unless on (namespace, pod) timestamp(A))`, still one query. A pod whose buckets are no
  histogram (an `le` that is not a bound, no `+Inf`, more than `MAX_HISTOGRAM_BUCKETS` = 64)
  gets None; NaN or decreasing rates are kept (`LatencyHistogram.health()` says NAN).
* sample timestamp: `min by (namespace, pod) (max by (namespace, pod, engine)
  (timestamp(S)))` (also by `finished_reason` for the counter): the freshest duplicate of
  each engine, then the oldest engine of the pod. An instant query's own result timestamp
  is the evaluation time, useless to detect stale data, hence `timestamp()` on the raw
  selector.

Result semantics: a pod without any series of a metric has `None` for that signal (never 0);
so does a pod with only a value or only a timestamp (see `_per_pod`).
NaN/+Inf/-Inf are returned as float NaN/inf. Series without a `namespace` or `pod` label are
skipped (they cannot be attributed to a pod). Two result series for the same (namespace, pod,
field) cannot come from a real Prometheus (the query aggregates by exactly these labels); if
a proxy returns that, `fetch` raises `PrometheusBadResponse` rather than pick one.

HTTP: `prometheus_api_client.PrometheusConnect` does the requests. Its built-in urllib3
retries (3, with real 1 s+ sleeps, on 500/502/503/504) are disabled; tenacity retries with
an injectable `sleep`, and wraps only the HTTP call (not the parsing). Retried: connection
errors, timeouts, HTTP 5xx. Not retried: 4xx (400/422 mean the query is wrong), TLS
errors, non-JSON 200 answers, parse errors.
"""

from autoscaler.adapters.prometheus.client import PrometheusSource
from autoscaler.adapters.prometheus.errors import (
    PrometheusBadResponse,
    PrometheusError,
    PrometheusQueryError,
    PrometheusUnavailable,
)
from autoscaler.adapters.prometheus.parsing import (
    MAX_POINTS_PER_SERIES,
    PodMetrics,
    Sample,
    Series,
    decode_response,
    parse_matrix,
    parse_vector,
    split_range,
)
from autoscaler.adapters.prometheus.queries import (
    COMPLETED_METRIC,
    FIELD_LABEL,
    GENERATION_TOKENS_METRIC,
    HISTOGRAMS,
    KV_METRIC,
    KV_METRIC_LEGACY,
    MAX_HISTOGRAM_BUCKETS,
    PER_TOKEN_FAMILIES,
    PROMPT_TOKENS_METRIC,
    QUERIES_PER_FETCH,
    QUEUE_TIME_METRIC,
    RUNNING_METRIC,
    SIGNALS,
    TPOT_METRIC,
    TPOT_METRIC_LEGACY,
    TTFT_METRIC,
    UNIT_LABEL,
    WAITING_METRIC,
    build_queries,
    build_target_queries,
    histogram_from_buckets,
    per_request,
)

__all__ = [
    "WAITING_METRIC",
    "RUNNING_METRIC",
    "KV_METRIC",
    "KV_METRIC_LEGACY",
    "COMPLETED_METRIC",
    "PROMPT_TOKENS_METRIC",
    "GENERATION_TOKENS_METRIC",
    "TTFT_METRIC",
    "TPOT_METRIC",
    "TPOT_METRIC_LEGACY",
    "QUEUE_TIME_METRIC",
    "MAX_HISTOGRAM_BUCKETS",
    "FIELD_LABEL",
    "UNIT_LABEL",
    "PER_TOKEN_FAMILIES",
    "per_request",
    "SIGNALS",
    "HISTOGRAMS",
    "QUERIES_PER_FETCH",
    "PodMetrics",
    "PrometheusError",
    "PrometheusUnavailable",
    "PrometheusBadResponse",
    "PrometheusQueryError",
    "Sample",
    "parse_vector",
    "decode_response",
    "build_queries",
    "PrometheusSource",
    "MAX_POINTS_PER_SERIES",
    "Series",
    "parse_matrix",
    "split_range",
    "build_target_queries",
    "histogram_from_buckets",
]
