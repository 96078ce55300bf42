#!/usr/bin/env bash
# Builds the worker image from the repository's Dockerfile for real (podman, chroot isolation) and runs
# `ferret demo` in a RUN step of a second image built on it: the image installs, starts a worker and serves
# jobs. No registry serves base images here, so the base is a local stand-in for python:3.11-slim-bookworm
# (Debian bookworm's python3 by mmdebstrap: ../shared/tools/stand-in-python-base.sh), made once per machine.
# `podman run` does not work on these machines, hence the RUN step. Usage: ops/image/check-image.sh [SHARED_DIR]
set -euo pipefail
trap 'echo "check-image: line $LINENO failed (exit $?): $BASH_COMMAND"' ERR
cd "$(dirname "$0")/../.."
shared="${1:-../shared}"
export DEBIAN_FRONTEND=noninteractive
command -v podman >/dev/null && command -v mmdebstrap >/dev/null \
  || { apt-get update -qq; apt-get install -y -qq podman mmdebstrap >/dev/null; }
if ! podman image exists docker.io/library/python:3.11-slim-bookworm; then
  bash "$shared/tools/stand-in-python-base.sh"
fi
podman build --quiet --format docker --isolation chroot --pull=never -t localhost/ferret:check . >/dev/null
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat > "$work/Containerfile" <<'CF'
FROM localhost/ferret:check
RUN ferret demo --sample everyday \
    && python -c "import importlib.util as u; assert u.find_spec('worker') is None and u.find_spec('producer') is None"
CF
# --no-cache: the demo must run on every check; a layer cached by an earlier check on this machine would
# pass the build without running it (and leave no demo output to read).
podman build --no-cache --format docker --isolation chroot --pull=never -t localhost/ferret-demo:check "$work" >"$work/demo.log" 2>&1 \
  || { tail -60 "$work/demo.log"; exit 1; }
grep -q "stopped the workers and the embedded Redis." "$work/demo.log" \
  || { echo "check-image: the demo did not say it stopped its workers; its build's log ends:"; tail -60 "$work/demo.log"; exit 1; }
echo "image: built from the Dockerfile; in it, ferret demo: $(grep -o 'all [0-9]* jobs answered in [0-9.]*s' "$work/demo.log")"
