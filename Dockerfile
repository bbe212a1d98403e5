# syntax=docker/dockerfile:1
# vllm-queue-autoscaler controller image: `make image` (docker build -t vllm-queue-autoscaler:VERSION .)
#
# Two stages: the build stage compiles the decision core with mypyc (setup.py, AUTOSCALER_MYPYC=1:
# 16 modules of autoscaler/policy as C extensions, `decide()` some 1.5x faster; docs/scale.md),
# builds the wheel and installs it with its dependencies into a virtualenv; the runtime stage
# copies only that virtualenv onto the slim Python, and runs as a non-root user with no shell
# tools the controller does not need. The build stage checks that the compiled modules are the
# ones imported, and the runtime stage checks it again on its own base.
#
# Every Python package is hash-locked: requirements.lock (the runtime dependencies: exact
# versions, the sha256 of every file) and requirements-build.lock (setuptools, which builds our
# wheel, and mypy with its dependencies: mypyc compiles); each file's header has the command that
# regenerates it. Neither setuptools nor mypy reaches the image: the compiled modules need only
# the shared library the wheel carries (autoscaler_policy__mypyc.*.so).
#
# Both bases are pinned by digest: a tag moves, a digest names one image. They must be one
# Python minor version (the extensions are built for its ABI) on one Debian release (built
# against its glibc): the build stage is the full image of the runtime's slim one, the same
# tag without "-slim", which has gcc and the Python headers (buildpack-deps). Both digests are
# real published ones, taken from the Dockerfiles of public repositories, because this
# repository could not reach a container registry to read the current ones:
#   runtime: python:3.11-slim@sha256:39cecc9c... from github.com/alvarogaro/AGR-MVS, Dockerfile,
#     commit 1f11c7a991e4aee222d0ec8fe06fe4c34a961d8f. It is Python 3.11.1 on Debian 11
#     (bullseye, glibc 2.31): an earlier version of github.com/jwnmulder/websockify-docker's
#     Dockerfile pins the same digest as python:3.11.1-slim-bullseye, which python:3.11-slim
#     named until 3.11.2 (February 2023).
#   build: python:3.11@sha256:b86507b0... from github.com/b4stien/serving-playground, Dockerfile,
#     a version other than commit e407c694315f228fbc00b1e033f9e6b3456f6689 (which has the tag
#     alone; the code index read holds that version's text, not its commit), where it is pinned
#     as python:3.11.1-bullseye: the same Python 3.11.1 on the same Debian 11, which python:3.11
#     named then.
# Refresh both at once (and pick up the bases' security fixes) with tools/pin_base_image.sh,
# which reads the digests of the slim tag and of its full image with `docker buildx imagetools
# inspect` or `crane digest` and rewrites the two lines below; or override them for one build:
# docker build --build-arg PYTHON_IMAGE=python:3.11-slim@sha256:<digest> \
#   --build-arg BUILD_IMAGE=python:3.11@sha256:<digest of the same day> .
ARG PYTHON_IMAGE=python:3.11-slim@sha256:39cecc9cde774f9209ad26a0ab2dc4f5d10ba92d2913a835cebea3b402af8e8b
ARG BUILD_IMAGE=python:3.11@sha256:b86507b0c9d182edf164752715e0016184f9972495e670a9218b036ec154529a

FROM ${BUILD_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# The runtime dependencies first (a layer that changes only with the lock).
# Byte-compiled at install time: the runtime root filesystem is read-only.
COPY requirements.lock ./
RUN python -m venv /opt/vllm-queue-autoscaler \
 && /opt/vllm-queue-autoscaler/bin/pip install --require-hashes -r requirements.lock
# The build tools in a virtualenv of their own, none of it reaches the image: the runtime
# dependencies again (mypyc type-checks the decision core, which reads pydantic and its mypy
# plugin), then setuptools and mypy. The two locks pin the packages they share alike
# (tests/test_release.py), so the second install changes none of the first's.
COPY requirements-build.lock ./
RUN python -m venv /opt/build \
 && /opt/build/bin/pip install --require-hashes -r requirements.lock \
 && /opt/build/bin/pip install --require-hashes -r requirements-build.lock
# The package itself, compiled, without its dependencies (they are the locked ones above).
COPY pyproject.toml setup.py README.md LICENSE ./
COPY autoscaler ./autoscaler
RUN AUTOSCALER_MYPYC=1 /opt/build/bin/pip wheel --no-deps --no-build-isolation -w /wheels . \
 && /opt/vllm-queue-autoscaler/bin/pip install --no-deps /wheels/*.whl \
 && /opt/vllm-queue-autoscaler/bin/pip check \
 && /opt/vllm-queue-autoscaler/bin/autoscaler --version \
 && /opt/vllm-queue-autoscaler/bin/python -I -c 'import autoscaler.policy as p, autoscaler.replay.fast_decode as f; assert len(p.COMPILED_MODULES) == 16 and f.__file__.endswith(".so"), (p.COMPILED_MODULES, f.__file__)'

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="vllm-queue-autoscaler" \
      org.opencontainers.image.description="Autoscales vLLM Deployments on queue depth and KV-cache usage" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/vllm-queue-autoscaler /opt/vllm-queue-autoscaler
COPY LICENSE /usr/share/doc/vllm-queue-autoscaler/LICENSE
ENV PATH=/opt/vllm-queue-autoscaler/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# The compiled decision core (and the recording reader's fast path) loads on this base too (its Python, its glibc).
RUN python -I -c 'import autoscaler.policy as p, autoscaler.replay.fast_decode as f; assert len(p.COMPILED_MODULES) == 16 and f.__file__.endswith(".so"), (p.COMPILED_MODULES, f.__file__)'
# Numeric, so that Kubernetes' runAsNonRoot can verify it (deploy/controller runs it as 65532).
USER 65532:65532
EXPOSE 9102
ENTRYPOINT ["autoscaler"]
CMD ["run"]
