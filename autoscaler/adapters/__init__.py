"""Adapters: one package per outside system (Kubernetes, Prometheus), each with its own error tree.
Nothing above this layer imports `kubernetes`, `prometheus_api_client` or `requests`."""
