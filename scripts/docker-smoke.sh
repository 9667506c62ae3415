#!/usr/bin/env bash
# Build the service image and prove it serves: start it, wait for /healthz, run the image's own
# HEALTHCHECK, check it runs as a non-root user and that migrations were applied at start.
# Uses podman (no Docker engine needed): scripts/docker-smoke.sh [IMAGE_TAG]
# Base images cannot be pulled everywhere: BASE_IMAGE defaults to a local debootstrap-built one
# (scripts/make-base-image.sh, from signed Debian packages; DEBIAN_SNAPSHOT pins them); where
# pulling works, set BASE_IMAGE=python:3.11-slim-bookworm@sha256:DIGEST (see SECURITY.md).
set -euo pipefail
cd "$(dirname "$0")/.."
tag="${1:-cpci-service:smoke}"
base="${BASE_IMAGE:-localhost/cpci-base:bookworm}"
name="cpci-smoke-$$"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"

if [[ "$base" == localhost/cpci-base:* ]]; then
  scripts/make-base-image.sh "${base#localhost/}"
fi
build_args=(--format docker --isolation=chroot --build-arg "BASE_IMAGE=$base" -t "$tag")
ca=/etc/ssl/certs/ca-certificates.crt   # a TLS-intercepting proxy's CA, where there is one
if [[ -f "$ca" ]]; then
  build_args+=(--build-arg "PIP_CERT=$ca" -v "$ca:$ca:ro")
fi
echo "building $tag on $base ..."
podman build --quiet "${build_args[@]}" . >/dev/null

cleanup() { podman rm --force "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT
podman run --detach --name "$name" --runtime runc --network host \
  --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --health-interval disable \
  --env "CPCI_PORT=$port" "$tag" >/dev/null 2>&1

deadline=$((SECONDS + 60))
until body="$(curl --silent --fail "http://127.0.0.1:$port/healthz")"; do
  if (( SECONDS > deadline )) || [[ "$(podman inspect --format '{{.State.Running}}' "$name")" != true ]]; then
    echo "FAIL: /healthz did not answer within 60 s; container log:" >&2
    podman logs "$name" >&2 || true
    exit 1
  fi
  sleep 0.5
done
echo "/healthz: $body"
podman healthcheck run "$name" >/dev/null 2>&1 || { echo "FAIL: the image's HEALTHCHECK failed" >&2; exit 1; }
echo "HEALTHCHECK: healthy"
user="$(podman exec "$name" id -u)"
[[ "$user" != 0 ]] || { echo "FAIL: the service runs as root" >&2; exit 1; }
echo "runs as uid $user"
podman exec "$name" cpci db current | grep -q "up to date" || { echo "FAIL: migrations not applied" >&2; exit 1; }
echo "migrations applied at start: $(podman exec "$name" cpci db current)"
if podman exec "$name" python3 -c "import torch" 2>/dev/null; then
  echo "FAIL: torch is in the service image" >&2
  exit 1
fi
echo "no torch in the image; smoke test passed"
