"""The fleet simulator: real traces through a calibrated vLLM fleet model.

Layers, each in its own module:

* `profile`  - a model/GPU profile (KV capacity, step-time model, lifecycle times), from YAML
* `engine`   - N vLLM replicas with continuous batching, vectorised over requests (numpy)
* `cluster`  - pods (lifecycle, billing), the GPU node pool, the router
* `traces`   - canonical per-request CSVs and ServeGen per-window rate traces
* `policies` - the policies by name, knob and sweep grid: ours (`queue-lead`) and the
               baselines (`autoscaler.baselines`), behind one interface
* `oracle`   - the clairvoyant lower bound
* `runner`   - one simulation: trace x profile x policy -> `RunResult`
* `scoreboard`, `sweep`, `plot` - tables, cost at 99 % attainment, figures

The simulator never imports the Kubernetes or Prometheus adapters: it drives the same pure
`autoscaler.policy.decide()` the live loop drives.
"""
