# syntax=docker/dockerfile:1
# vllm-queue-autoscaler controller image: `make image` (docker build -t vllm-queue-autoscaler:VERSION .)
#
# Two stages: the build stage installs the package and its dependencies into a virtualenv; the
# runtime stage copies only that virtualenv onto the same slim Python, and runs as a non-root
# user with no shell tools the controller does not need. The base is pinned by version; pin it
# by digest too in your registry (python:3.11.11-slim-bookworm@sha256:...).
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/vllm-queue-autoscaler
WORKDIR /src
COPY pyproject.toml README.md ./
COPY autoscaler ./autoscaler
# Byte-compiled at install time: the runtime root filesystem is read-only.
RUN /opt/vllm-queue-autoscaler/bin/pip install . \
 && /opt/vllm-queue-autoscaler/bin/autoscaler --version

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="vllm-queue-autoscaler" \
      org.opencontainers.image.description="Autoscales vLLM Deployments on queue depth and KV-cache usage" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/vllm-queue-autoscaler /opt/vllm-queue-autoscaler
ENV PATH=/opt/vllm-queue-autoscaler/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Numeric, so that Kubernetes' runAsNonRoot can verify it (deploy/controller runs it as 65532).
USER 65532:65532
EXPOSE 9102
ENTRYPOINT ["autoscaler"]
CMD ["run"]
