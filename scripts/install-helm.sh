#!/usr/bin/env bash
# Builds Helm (the chart tests in tests/deploy render deploy/helm/tidemark with it) from the Go
# module proxy into a per-user cache outside the clone, so a fresh clone on the same machine
# reuses it:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/tidemark/tools/helm-<version>/helm
# The version is scripts/helm-version (tests/support/helm.py reads the same file). Does nothing
# when that binary is already there. The build takes about 5 minutes on 2 cores.
# Needs Go (`go` on PATH or /usr/local/go/bin/go).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VERSION=$(tr -d '[:space:]' <"$HERE/helm-version")
DEST_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/tidemark/tools/helm-$VERSION"
DEST="$DEST_DIR/helm"

if [[ -x $DEST ]]; then
    echo "install-helm: helm $VERSION already built at $DEST"
    exit 0
fi

GO=$(command -v go || true)
if [[ -z $GO && -x /usr/local/go/bin/go ]]; then
    GO=/usr/local/go/bin/go
fi
if [[ -z $GO ]]; then
    echo "install-helm: Go is needed to build helm $VERSION and was not found" >&2
    echo "  install Go (https://go.dev/dl/), then run: $0" >&2
    exit 1
fi

mkdir -p "$DEST_DIR"
# Build into a temporary GOBIN and move the binary in place only when it is complete, so an
# interrupted build never leaves a half-written helm that the next run would take as done.
TMP=$(mktemp -d "$DEST_DIR/.build.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

echo "install-helm: building helm $VERSION with $("$GO" version | cut -d' ' -f3) (go install helm.sh/helm/v4/cmd/helm@$VERSION); this takes about 5 minutes"
START=$(date +%s)
# The version stamp is what helm's own release build sets (its Makefile's LDFLAGS): without it
# `helm version` says only v4.3. -v prints each package as it is compiled: a line every 100 of them shows the build's
# progress; the whole output is kept, and shown when the build fails.
if ! GOBIN="$TMP" CGO_ENABLED=0 nice -n 10 "$GO" install -v \
    -ldflags "-X helm.sh/helm/v4/internal/version.version=$VERSION" "helm.sh/helm/v4/cmd/helm@$VERSION" 2>&1 |
    tee "$TMP/build.log" |
    awk '{ n++; if (n % 100 == 0) { printf "install-helm: %d packages compiled (%s)\n", n, $0; fflush() } }
         END { printf "install-helm: %d packages compiled\n", n }'; then
    echo "install-helm: building helm $VERSION failed; the end of its output:" >&2
    tail -n 30 "$TMP/build.log" >&2
    exit 1
fi
test -x "$TMP/helm"
mv "$TMP/helm" "$DEST"
echo "install-helm: built $("$DEST" version --short) at $DEST in $(($(date +%s) - START)) s"
