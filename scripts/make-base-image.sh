#!/usr/bin/env bash
# Build a local Debian bookworm base image (Python 3.11 with venv) with debootstrap, for hosts that
# cannot pull base images. Usage: scripts/make-base-image.sh [IMAGE_NAME]   (default cpci-base:bookworm)
# Needs root, debootstrap and podman (apt-get install podman buildah runc debootstrap).
set -euo pipefail
image="${1:-cpci-base:bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
if podman image exists "$image"; then
  echo "base image $image already exists"
  exit 0
fi
rootfs="$(mktemp -d)"
trap 'rm -rf "$rootfs"' EXIT
echo "debootstrap bookworm into $rootfs (from $mirror) ..."
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
  bookworm "$rootfs" "$mirror" >/dev/null
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
tar -C "$rootfs" -c . | podman import --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
echo "base image $image ready"
