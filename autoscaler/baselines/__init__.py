"""The policies the simulator and the replay drive, behind one interface, and what they see.

* `view`       - `ClusterView`, what a policy sees each tick, and `view_observation`, the
                 `Observation` the live loop would build of it
* `interface`  - `Policy` (driven by the simulator), `ObservationPolicy` (by the replay too)
* `queue_lead` - ours: `autoscaler.policy.decide()`, as the others are driven
* `hpa`        - the Kubernetes HPA on a Pods metric: waiting + running (`hpa`) or waiting
                 alone (the replay's `hpa-queue`); also the Object / External metric arithmetic
* `hpa_waiting` - `hpa-waiting`, vLLM production-stack's example HPA (Object metric, Value target)
* `keda`, `kpa`, `ray_serve`, `aibrix`, `wva`, `static`, `hpa_cpu` - KEDA, Knative KPA, Ray
  Serve, AIBrix APA, llm-d WVA (saturation V2), a static fleet, HPA on CPU (not on the
  scoreboard): one model each, with the source it follows in its docstring (docs/baselines.md)
* `window`     - time windows in seconds (averages, maxima), whatever the simulator's tick

The clairvoyant oracle reads the trace, so it lives with the simulator (`autoscaler.sim.oracle`).
"""
