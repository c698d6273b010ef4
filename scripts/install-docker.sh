#!/usr/bin/env bash
# Installs what `make test-docker` needs beyond Python: Debian's Docker engine (docker.io), its
# docker-compose (1.29) and debootstrap (the local base image where no registry is reachable).
# Does nothing when they are on PATH. The engine's own service is not started: the tests start
# `dockerd` themselves where none answers, and stop it after (streams/dev/docker/engine.py).
set -euo pipefail

PACKAGES=(docker.io docker-compose debootstrap)

if command -v dockerd >/dev/null && command -v docker-compose >/dev/null \
    && command -v debootstrap >/dev/null; then
    echo "install-docker: docker.io, docker-compose and debootstrap already installed"
    exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
    echo "install-docker: ${PACKAGES[*]} are missing and installing them needs root" >&2
    echo "  run: sudo $0" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# Keep maintainer scripts from starting services (invoke-rc.d honours policy-rc.d).
POLICY=/usr/sbin/policy-rc.d
OWN_POLICY=0
if [[ ! -e $POLICY ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$POLICY"
    chmod 755 "$POLICY"
    OWN_POLICY=1
fi
cleanup() { if [[ $OWN_POLICY -eq 1 ]]; then rm -f "$POLICY"; fi; }
trap cleanup EXIT

if ! apt-cache show "${PACKAGES[@]}" >/dev/null 2>&1; then
    apt-get update -q
fi
apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"
echo "install-docker: installed $(dockerd --version), $(docker-compose version --short)"
