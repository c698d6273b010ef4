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

bash "$(dirname "$0")/apt-install.sh" install-browser "${PACKAGES[@]}"

test -x "$BROWSER"
echo "install-browser: installed $($BROWSER --version 2>/dev/null || echo chromium)"
