#!/usr/bin/env bash
# Installs what `make test-docker` needs beyond Python: Debian's Docker engine (docker.io), its
# docker-compose (1.29) and debootstrap (the local base image where no registry is reachable).
# Does nothing when they are on PATH. The engine's own service is not started: the tests start
# `dockerd` themselves where none answers, and stop it after (streams/dev/docker/engine.py).
set -euo pipefail

if command -v dockerd >/dev/null && command -v docker-compose >/dev/null \
    && command -v debootstrap >/dev/null; then
    echo "install-docker: docker.io, docker-compose and debootstrap already installed"
    exit 0
fi

bash "$(dirname "$0")/apt-install.sh" install-docker docker.io docker-compose debootstrap
echo "install-docker: installed $(dockerd --version), $(docker-compose version --short)"
