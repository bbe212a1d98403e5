#!/bin/sh
# Pin the Dockerfile's two base images to the digests their tags point at now:
#
#   tools/pin_base_image.sh                  # python:3.11-slim (the runtime tag in the Dockerfile)
#   tools/pin_base_image.sh python:3.11-slim-bookworm   # or name the runtime's slim tag
#
# The runtime stage runs on the slim tag (ARG PYTHON_IMAGE); the build stage, which compiles the
# decision core with mypyc, on the full image of the same tag without "-slim" (ARG BUILD_IMAGE:
# python:3.11-slim -> python:3.11), which has gcc and the Python headers. Read at the same moment,
# the two are one Python release on one Debian release: the extensions built in one load in
# the other. Reads the digest of each multi-platform index with `docker buildx imagetools
# inspect` (Docker with buildx) or `crane digest` (go-containerregistry), whichever is installed,
# and rewrites the `ARG PYTHON_IMAGE=` and `ARG BUILD_IMAGE=` lines of the Dockerfile, both or
# neither. Needs registry access; review the diff, rebuild (`make image`) and run the tests
# before committing it.
set -eu

cd "$(dirname "$0")/.."
current=$(sed -n 's/^ARG PYTHON_IMAGE=//p' Dockerfile)
current_build=$(sed -n 's/^ARG BUILD_IMAGE=//p' Dockerfile)
tag=${1:-${current%%@*}}

case "$tag" in
    *-slim*) build_tag=$(printf '%s\n' "$tag" | sed 's/-slim//') ;;
    *) echo "pin_base_image.sh: $tag is not a slim tag (the build stage is its full image, without \"-slim\")" >&2; exit 2 ;;
esac

if command -v docker >/dev/null 2>&1 && docker buildx version >/dev/null 2>&1; then
    # The first `Digest:` line is the index (all platforms), before the per-platform manifests.
    read_digest() { docker buildx imagetools inspect "$1" | sed -n 's/^Digest: *//p' | head -n 1; }
elif command -v crane >/dev/null 2>&1; then
    read_digest() { crane digest "$1"; }
else
    echo "pin_base_image.sh: needs docker buildx or crane on PATH" >&2
    exit 2
fi

check() {
    case "$2" in
        sha256:????????????????????????????????????????????????????????????????) ;;
        *) echo "pin_base_image.sh: no sha256 digest read for $1 (got '$2')" >&2; exit 1 ;;
    esac
}
digest=$(read_digest "$tag" || true)
check "$tag" "$digest"
build_digest=$(read_digest "$build_tag" || true)
check "$build_tag" "$build_digest"

sed -i.bak -e "s|^ARG PYTHON_IMAGE=.*|ARG PYTHON_IMAGE=$tag@$digest|" \
    -e "s|^ARG BUILD_IMAGE=.*|ARG BUILD_IMAGE=$build_tag@$build_digest|" Dockerfile && rm -f Dockerfile.bak
echo "Dockerfile: ARG PYTHON_IMAGE=$tag@$digest (was $current)"
echo "Dockerfile: ARG BUILD_IMAGE=$build_tag@$build_digest (was $current_build)"
echo "Update the comment above those lines: the digests now come from the registry, $(date -u +%Y-%m-%d)."
