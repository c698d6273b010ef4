#!/usr/bin/env bash
# Installs Debian's `chromium` for the status page's real-browser test
# (tests/dashboard/test_browser.py drives /usr/bin/chromium with Playwright).
# Does nothing when /usr/bin/chromium is already there. Playwright's own browser
# download (`playwright install`) is never used: this machine's network is closed to it.
set -euo pipefail

BROWSER=/usr/bin/chromium
PACKAGES=(chromium)

if [[ -x $BROWSER ]]; then
    echo "install-browser: $($BROWSER --version 2>/dev/null || echo chromium) already installed"
    exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
    echo "install-browser: $BROWSER is missing and installing it needs root" >&2
    echo "  run: sudo $0" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive

# `apt-get update` only when the package index does not know the package yet.
if ! apt-cache show "${PACKAGES[@]}" >/dev/null 2>&1; then
    apt-get update -q
fi
apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"

test -x "$BROWSER"
echo "install-browser: installed $($BROWSER --version 2>/dev/null || echo chromium)"
