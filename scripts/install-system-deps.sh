#!/usr/bin/env bash
# Installs the system packages Tidemark's tests need: Debian's `prometheus`
# (it ships both `prometheus` and `promtool`). Does nothing when they are already
# on PATH. The package's own service is never left running: the tests start their
# own Prometheus on a free port, and a system daemon on :9090 would only get in the way.
set -euo pipefail

PACKAGES=(prometheus)

missing() {
    command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 && return 1
    return 0
}

if ! missing; then
    echo "install-system-deps: prometheus and promtool already installed"
    exit 0
fi

bash "$(dirname "$0")/apt-install.sh" install-system-deps "${PACKAGES[@]}"

# The package enables its unit for the next boot; this install is for the tests, so
# switch that off too. If a daemon started anyway (systemd as PID 1 ignoring
# policy-rc.d), stop it.
if [[ -d /run/systemd/system ]]; then
    systemctl disable --now prometheus.service >/dev/null 2>&1 || true
else
    # Without systemd running, `systemctl disable` still edits the unit links offline.
    systemctl disable prometheus.service >/dev/null 2>&1 || true
    if [[ -x /etc/init.d/prometheus ]]; then
        /etc/init.d/prometheus stop >/dev/null 2>&1 || true
    fi
fi
if pgrep -u prometheus -x prometheus >/dev/null 2>&1; then
    echo "install-system-deps: warning: a system prometheus daemon is running" >&2
fi

command -v prometheus >/dev/null && command -v promtool >/dev/null
echo "install-system-deps: installed $(prometheus --version 2>&1 | head -n1)"
