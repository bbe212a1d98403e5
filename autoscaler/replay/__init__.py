"""What-if replay against recorded metrics: `autoscaler record` and `autoscaler replay`.

* `format`     - the `vqa-recording` v1 file (gzip JSON lines), reader and writer
* `recorder`   - range queries -> recording (through `PrometheusSource.query_range`)
* `prom_export`- a plain Prometheus query_range JSON export -> recording
* `open_loop`  - recorded observations through `decide()` (or the HPA baseline,
                 `autoscaler.baselines.hpa`), tick by tick
* `synthetic`  - toy-fleet recordings for tests and the benchmark
* `report`     - tables, JSON, PNG plot
"""
