"""Models of other autoscalers (HPA, KEDA, Knative KPA, AIBrix APA, WVA, Ray Serve, a static
fleet), used by both the simulator and the replay."""
