"""vllm-queue-autoscaler: scale vLLM Deployments on queue depth and KV-cache pressure."""

__version__ = "0.1.0"
