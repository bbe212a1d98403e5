"""The policies the simulator and the replay drive, behind one interface, and what they see.

* `view`       - `ClusterView`, what a policy sees each tick, and `view_observation`, the
                 `Observation` the live loop would build of it
* `interface`  - `Policy` (driven by the simulator), `ObservationPolicy` (by the replay too)
* `queue_lead` - ours: `autoscaler.policy.decide()`, as the others are driven
* `hpa`        - the Kubernetes HPA on `vllm:num_requests_waiting` (`hpa-queue`)
* `keda`, `hpa_cpu`, `kpa`, `aibrix`, `wva`, `ray_serve`, `static` - KEDA, HPA on CPU,
  Knative KPA, AIBrix APA, llm-d WVA, Ray Serve, a static fleet: one model each, with the
  source it follows in its docstring

The clairvoyant oracle reads the trace, so it lives with the simulator (`autoscaler.sim.oracle`).
"""
