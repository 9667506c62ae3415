#!/usr/bin/env bash
# Build a local Debian bookworm base image (Python 3.11 with venv) with debootstrap, for hosts that
# cannot pull base images. Usage: scripts/make-base-image.sh [IMAGE_NAME]   (default cpci-base:bookworm)
# Needs root, debootstrap, debian-archive-keyring and podman
# (apt-get install podman buildah runc debootstrap debian-archive-keyring).
#
# What goes in is Debian's, checked: debootstrap verifies the suite's signed Release file against
# the Debian archive keyring (it refuses to run unchecked here) and every package against the
# hashes that file signs. Which versions go in is the mirror's at the time of the build, unless
# DEBIAN_SNAPSHOT names a snapshot.debian.org timestamp (e.g. 20261201T000000Z): the archive as it
# was then, the same packages on every build. Either way the image lists its packages and their
# versions in /etc/cpci-base-packages.txt and its labels name the mirror and snapshot.
# An existing image is reused only if this script, the mirror and the snapshot are the same.
set -euo pipefail
image="${1:-cpci-base:bookworm}"
snapshot="${DEBIAN_SNAPSHOT:-}"
keyring="${DEBIAN_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}"
if [[ -n "$snapshot" ]]; then
  mirror="https://snapshot.debian.org/archive/debian/$snapshot"
else
  mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
fi
made_by="$(sha256sum "$0" | cut -c1-16) $mirror"
if podman image exists "$image" \
  && [[ "$(podman image inspect --format '{{index .Labels "cpci.base.made-by"}}' "$image")" == "$made_by" ]]; then
  echo "base image $image already exists (made by this script from $mirror)"
  exit 0
fi
if [[ ! -s "$keyring" ]]; then
  echo "no Debian archive keyring at $keyring: install debian-archive-keyring (or set" \
    "DEBIAN_KEYRING), so the packages are checked against Debian's signature" >&2
  exit 1
fi
rootfs="$(mktemp -d)"
trap 'rm -rf "$rootfs"' EXIT
echo "debootstrap bookworm into $rootfs (from $mirror, checked with $keyring) ..."
debootstrap --variant=minbase --keyring="$keyring" --include=python3,python3-venv,ca-certificates \
  bookworm "$rootfs" "$mirror" >/dev/null
chroot "$rootfs" dpkg-query --show --showformat '${Package}=${Version}\n' \
  | sort > "$rootfs/etc/cpci-base-packages.txt"
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
tar -C "$rootfs" -c . | podman import \
  --change 'CMD ["/bin/bash"]' \
  --change "LABEL cpci.base.made-by=\"$made_by\"" \
  --change "LABEL cpci.base.debian-snapshot=\"${snapshot:-none: the mirror at build time}\"" \
  - "$image" >/dev/null
echo "base image $image ready: $(grep -c . "$rootfs/etc/cpci-base-packages.txt") packages," \
  "$(grep '^python3.11=' "$rootfs/etc/cpci-base-packages.txt")"
