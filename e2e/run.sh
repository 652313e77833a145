#!/usr/bin/env bash
# The e2e suite on kind (where Docker and a registry exist): the images of `make images`, a kind cluster
# from kind-config.yaml with those images and Qdrant's loaded, then the same pytest suite that
# `make test-cluster` runs on this repository's single-node tier (e2e/*.py, E2E_KUBECONFIG), with
# E2E_PLATFORM=kind: what only the single-node tier can check (its network guard, ClusterIPs reached
# from the host, the kubelet restarted) is skipped there with the reason.
#
#   E2E_KEEP=1        keep the cluster afterwards (kind delete cluster --name echo-e2e)
#   E2E_SKIP_BUILD=1  reuse the images already built
#   E2E_CLUSTER, E2E_NODE_IMAGE   the kind cluster's name and node image
set -euo pipefail
cd "$(dirname "$0")/.."

CLUSTER="${E2E_CLUSTER:-echo-e2e}"
NODE_IMAGE="${E2E_NODE_IMAGE:-}"
REGISTRY="ghcr.io/echo-k8s"
TAG="$(sed -n 's/^appVersion:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}.*/\1/p' charts/echo-operator/Chart.yaml)"
QDRANT_IMAGE="qdrant/qdrant:v1.13.6-unprivileged"
PYTHON="${PYTHON:-.venv/bin/python}"

die() { echo "e2e: $*" >&2; exit 1; }
command -v docker >/dev/null || die "docker is required (this suite cannot run without a Docker engine)"
docker info >/dev/null 2>&1 || die "docker is installed but no engine answers (is the daemon running?)"
command -v kind >/dev/null || die "kind is required: https://kind.sigs.k8s.io (v0.29 or later)"
[[ -x "$PYTHON" ]] || die "$PYTHON not found: run 'make install' first"
scripts/helm-tools.sh kubectl >/dev/null

KUBECONFIG_FILE="$(mktemp)"
cleanup() {
  local status=$?
  if [[ "${E2E_KEEP:-0}" == 1 ]]; then
    echo "e2e: keeping cluster $CLUSTER (kind delete cluster --name $CLUSTER)" >&2
  else
    kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
  fi
  rm -f "$KUBECONFIG_FILE"
  exit "$status"
}
trap cleanup EXIT

if [[ "${E2E_SKIP_BUILD:-0}" != 1 ]]; then
  make images IMAGE_REGISTRY="$REGISTRY" IMAGE_TAG="$TAG"
fi
docker pull -q "$QDRANT_IMAGE" >/dev/null

kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
kind create cluster --name "$CLUSTER" --config e2e/kind-config.yaml --wait 180s ${NODE_IMAGE:+--image "$NODE_IMAGE"}
for image in echo-operator echo echo-standalone echo-embedding echo-postgres; do
  kind load docker-image --name "$CLUSTER" "$REGISTRY/$image:$TAG"
done
kind load docker-image --name "$CLUSTER" "$QDRANT_IMAGE"
kind get kubeconfig --name "$CLUSTER" >"$KUBECONFIG_FILE"

E2E_KUBECONFIG="$KUBECONFIG_FILE" E2E_PLATFORM=kind "$PYTHON" -m pytest e2e --durations=0 "$@"
