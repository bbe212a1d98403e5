# syntax=docker/dockerfile:1
# vllm-queue-autoscaler controller image: `make image` (docker build -t vllm-queue-autoscaler:VERSION .)
#
# Two stages: the build stage installs the package and its dependencies into a virtualenv; the
# runtime stage copies only that virtualenv onto the same slim Python, and runs as a non-root
# user with no shell tools the controller does not need.
#
# Every Python package is hash-locked: requirements.lock (the runtime dependencies: exact
# versions, the sha256 of every file) and requirements-build.lock (setuptools, which builds our
# wheel); each file's header has the command that regenerates it.
#
# The base is pinned by digest: a tag moves, a digest names one image. This one is a real
# published digest of python:3.11-slim, taken from the Dockerfile of a public repository
# (github.com/alvarogaro/AGR-MVS, Dockerfile, commit 1f11c7a991e4aee222d0ec8fe06fe4c34a961d8f):
# this repository could not reach a container registry to read the current one. Refresh it (and
# pick up the base's security fixes) with tools/pin_base_image.sh, which reads the digest with
# `docker buildx imagetools inspect` or `crane digest` and rewrites the line below; or override it
# for one build: docker build --build-arg PYTHON_IMAGE=python:3.11-slim@sha256:<digest> .
ARG PYTHON_IMAGE=python:3.11-slim@sha256:39cecc9cde774f9209ad26a0ab2dc4f5d10ba92d2913a835cebea3b402af8e8b

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# The build tool in a virtualenv of its own: none of it reaches the image.
COPY requirements-build.lock ./
RUN python -m venv /opt/build \
 && /opt/build/bin/pip install --require-hashes -r requirements-build.lock
# The runtime dependencies first (a layer that changes only with the lock).
# Byte-compiled at install time: the runtime root filesystem is read-only.
COPY requirements.lock ./
RUN python -m venv /opt/vllm-queue-autoscaler \
 && /opt/vllm-queue-autoscaler/bin/pip install --require-hashes -r requirements.lock
# The package itself, without its dependencies (they are the locked ones above).
COPY pyproject.toml README.md LICENSE ./
COPY autoscaler ./autoscaler
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation -w /wheels . \
 && /opt/vllm-queue-autoscaler/bin/pip install --no-deps /wheels/*.whl \
 && /opt/vllm-queue-autoscaler/bin/pip check \
 && /opt/vllm-queue-autoscaler/bin/autoscaler --version

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="vllm-queue-autoscaler" \
      org.opencontainers.image.description="Autoscales vLLM Deployments on queue depth and KV-cache usage" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/vllm-queue-autoscaler /opt/vllm-queue-autoscaler
COPY LICENSE /usr/share/doc/vllm-queue-autoscaler/LICENSE
ENV PATH=/opt/vllm-queue-autoscaler/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Numeric, so that Kubernetes' runAsNonRoot can verify it (deploy/controller runs it as 65532).
USER 65532:65532
EXPOSE 9102
ENTRYPOINT ["autoscaler"]
CMD ["run"]
