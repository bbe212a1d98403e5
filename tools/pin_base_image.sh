#!/bin/sh
# Pin the Dockerfile's base image to the digest its tag points at now:
#
#   tools/pin_base_image.sh                  # python:3.11-slim (the tag in the Dockerfile)
#   tools/pin_base_image.sh python:3.11-slim # or name the tag
#
# Reads the digest of the multi-platform index with `docker buildx imagetools inspect` (Docker
# with buildx) or `crane digest` (go-containerregistry), whichever is installed, and rewrites the
# `ARG PYTHON_IMAGE=` line of the Dockerfile. Needs registry access; review the diff, rebuild
# (`make image`) and run the tests before committing it.
set -eu

cd "$(dirname "$0")/.."
current=$(sed -n 's/^ARG PYTHON_IMAGE=//p' Dockerfile)
tag=${1:-${current%%@*}}

if command -v docker >/dev/null 2>&1 && docker buildx version >/dev/null 2>&1; then
    # The first `Digest:` line is the index (all platforms), before the per-platform manifests.
    digest=$(docker buildx imagetools inspect "$tag" | sed -n 's/^Digest: *//p' | head -n 1)
elif command -v crane >/dev/null 2>&1; then
    digest=$(crane digest "$tag")
else
    echo "pin_base_image.sh: needs docker buildx or crane on PATH" >&2
    exit 2
fi

case "$digest" in
    sha256:????????????????????????????????????????????????????????????????) ;;
    *) echo "pin_base_image.sh: no sha256 digest read for $tag (got '$digest')" >&2; exit 1 ;;
esac

sed -i.bak "s|^ARG PYTHON_IMAGE=.*|ARG PYTHON_IMAGE=$tag@$digest|" Dockerfile && rm -f Dockerfile.bak
echo "Dockerfile: ARG PYTHON_IMAGE=$tag@$digest (was $current)"
echo "Update the comment above that line: the digest now comes from the registry, $(date -u +%Y-%m-%d)."
