#!/usr/bin/env bash
# apt-install.sh WHO PACKAGE...: installs Debian packages for the tests, as root, without
# starting their services (a policy-rc.d that forbids it, when the machine has none). WHO names
# the calling script in messages. `apt-get update` only when the index does not know a package.
set -euo pipefail

who=$1
shift
packages=("$@")

if [[ $(id -u) -ne 0 ]]; then
    echo "$who: ${packages[*]} missing, and installing them needs root" >&2
    echo "  run: sudo bash $(dirname "$0")/$who.sh" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive

# invoke-rc.d honours policy-rc.d; exit code 101 is "action forbidden".
POLICY=/usr/sbin/policy-rc.d
OWN_POLICY=0
if [[ ! -e $POLICY ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$POLICY"
    chmod 755 "$POLICY"
    OWN_POLICY=1
fi
cleanup() { if [[ $OWN_POLICY -eq 1 ]]; then rm -f "$POLICY"; fi; }
trap cleanup EXIT

if ! apt-cache show "${packages[@]}" >/dev/null 2>&1; then
    apt-get update -q
fi
apt-get install -y -q --no-install-recommends "${packages[@]}"
