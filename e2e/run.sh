#!/usr/bin/env bash
# The kind e2e suite: images -> kind -> chart -> PostgreSQL + fake Gemini -> a CPU-only EchoDeployment
# -> Ready -> one chat through the hooks Service -> teardown. Needs Docker and kind (see README.md).
#
#   make e2e                     # or: e2e/run.sh
#   E2E_KEEP=1 e2e/run.sh        # keep the cluster afterwards (kubectl --context kind-echo-e2e ...)
#   E2E_SKIP_BUILD=1 e2e/run.sh  # reuse the :e2e images already in the local Docker
#
# Every wait has a timeout; on any failure the state of the cluster (objects, events, logs) is
# written to e2e/artifacts/ before the cluster is deleted.
set -euo pipefail
cd "$(dirname "$0")/.."

CLUSTER="${E2E_CLUSTER:-echo-e2e}"
CONTEXT="kind-$CLUSTER"
NODE_IMAGE="${E2E_NODE_IMAGE:-}"
KEEP="${E2E_KEEP:-0}"
SKIP_BUILD="${E2E_SKIP_BUILD:-0}"
REGISTRY="ghcr.io/echo-k8s"
TAG="e2e"
OPERATOR_NS="echo-system"
TENANT_NS="echo-e2e"
TENANT="e2e"
LOCAL_PORT="${E2E_PORT:-19099}"
READY_TIMEOUT="${E2E_READY_TIMEOUT:-15m}"
# Third-party images preloaded into the nodes (the tenant's pullPolicy is Never).
QDRANT_IMAGE="qdrant/qdrant:v1.13.6-unprivileged"
POSTGRES_IMAGE="postgres:16.9-bookworm"
ARTIFACTS="e2e/artifacts"
PYTHON="${PYTHON:-.venv/bin/python}"

log() { printf '\n=== %s  %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
  echo "e2e: $*" >&2
  exit 1
}

# -- prerequisites ---------------------------------------------------------------------------------
command -v docker >/dev/null || die "docker is required (this suite cannot run without a Docker engine)"
docker info >/dev/null 2>&1 || die "docker is installed but no engine answers (is the daemon running?)"
command -v kind >/dev/null || die "kind is required: https://kind.sigs.k8s.io (v0.29 or later)"
HELM="$(scripts/helm-tools.sh helm)"
KUBECTL="$(scripts/helm-tools.sh kubectl)"
[[ -x "$PYTHON" ]] || die "$PYTHON not found: run 'make install' first (the chat test uses pytest and httpx)"
k() { "$KUBECTL" --context "$CONTEXT" "$@"; }

PORT_FORWARD_PID=""
collect() {
  mkdir -p "$ARTIFACTS"
  log "collecting diagnostics into $ARTIFACTS/"
  k get all,echodeployments,configmaps,secrets,networkpolicies,pdb -A -o wide >"$ARTIFACTS/objects.txt" 2>&1 || true
  k get events -A --sort-by=.lastTimestamp >"$ARTIFACTS/events.txt" 2>&1 || true
  k -n "$TENANT_NS" describe echodeployment "$TENANT" >"$ARTIFACTS/echodeployment.txt" 2>&1 || true
  k -n "$TENANT_NS" get echodeployment "$TENANT" -o yaml >>"$ARTIFACTS/echodeployment.txt" 2>&1 || true
  for ns in "$OPERATOR_NS" "$TENANT_NS"; do
    for pod in $(k -n "$ns" get pods -o name 2>/dev/null); do
      k -n "$ns" logs "$pod" --all-containers --prefix --tail=500 >"$ARTIFACTS/${ns}_${pod#pod/}.log" 2>&1 || true
      k -n "$ns" describe "$pod" >"$ARTIFACTS/${ns}_${pod#pod/}.describe.txt" 2>&1 || true
    done
  done
}
cleanup() {
  local status=$?
  [[ -n "$PORT_FORWARD_PID" ]] && kill "$PORT_FORWARD_PID" 2>/dev/null || true
  if [[ $status -ne 0 ]]; then
    collect
    echo "e2e: FAILED (exit $status); diagnostics in $ARTIFACTS/" >&2
  fi
  if [[ "$KEEP" == 1 ]]; then
    echo "e2e: keeping cluster $CLUSTER (kind delete cluster --name $CLUSTER)" >&2
  else
    kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
  fi
  exit $status
}
trap cleanup EXIT

# -- images ----------------------------------------------------------------------------------------
if [[ "$SKIP_BUILD" != 1 ]]; then
  log "building the images (tag $TAG; embedding: CPU torch + all-MiniLM-L6-v2 baked in)"
  make images IMAGE_REGISTRY="$REGISTRY" IMAGE_TAG="$TAG" \
    EMBEDDING_MODEL=sentence-transformers/all-MiniLM-L6-v2 \
    TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
fi
docker pull -q "$QDRANT_IMAGE" >/dev/null
docker pull -q "$POSTGRES_IMAGE" >/dev/null

# -- cluster ---------------------------------------------------------------------------------------
log "creating kind cluster $CLUSTER"
kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
kind create cluster --name "$CLUSTER" --config e2e/kind-config.yaml --wait 180s ${NODE_IMAGE:+--image "$NODE_IMAGE"}
for image in "$REGISTRY/echo-operator:$TAG" "$REGISTRY/echo:$TAG" "$REGISTRY/echo-embedding:$TAG" \
  "$QDRANT_IMAGE" "$POSTGRES_IMAGE"; do
  kind load docker-image --name "$CLUSTER" "$image"
done

# -- operator --------------------------------------------------------------------------------------
log "installing the chart (CRD from crds/, operator, RBAC)"
"$HELM" --kube-context "$CONTEXT" install echo-operator charts/echo-operator \
  --namespace "$OPERATOR_NS" --create-namespace \
  --set image.repository="$REGISTRY/echo-operator" --set image.tag="$TAG" --set image.pullPolicy=Never \
  --set operator.logLevel=DEBUG --wait --timeout 5m
k wait --for=condition=Established crd/echodeployments.echo.dev --timeout=60s
# The upgrade path the chart README documents: CRDs first, server-side, then helm upgrade.
k apply --server-side -f charts/echo-operator/crds/
"$HELM" --kube-context "$CONTEXT" upgrade echo-operator charts/echo-operator --namespace "$OPERATOR_NS" \
  --reuse-values --wait --timeout 5m

# -- tenant dependencies ---------------------------------------------------------------------------
log "PostgreSQL 16 and the fake Gemini in $TENANT_NS"
k create namespace "$TENANT_NS"
k -n "$TENANT_NS" apply -f e2e/manifests/postgres.yaml
k -n "$TENANT_NS" create configmap fake-gemini-code \
  --from-file=gemini_server.py=tests/fakes/gemini_server.py \
  --from-file=fake_gemini_main.py=e2e/fake_gemini_main.py
k -n "$TENANT_NS" apply -f e2e/manifests/fake-gemini.yaml
k -n "$TENANT_NS" rollout status deployment/postgres --timeout=180s
k -n "$TENANT_NS" rollout status deployment/fake-gemini --timeout=180s

# -- the EchoDeployment ----------------------------------------------------------------------------
log "applying EchoDeployment $TENANT_NS/$TENANT and waiting for Ready (up to $READY_TIMEOUT)"
k -n "$TENANT_NS" apply -f e2e/manifests/echodeployment.yaml
k -n "$TENANT_NS" wait --for=condition=Ready "echodeployment/$TENANT" --timeout="$READY_TIMEOUT"
k -n "$TENANT_NS" get echodeployment "$TENANT" -o wide
endpoint="$(k -n "$TENANT_NS" get echodeployment "$TENANT" -o jsonpath='{.status.hooksEndpoint}')"
[[ "$endpoint" == "http://$TENANT-hooks.$TENANT_NS.svc:9099" ]] || die "status.hooksEndpoint is '$endpoint'"

# -- a chat through the hooks Service --------------------------------------------------------------
log "port-forward service/$TENANT-hooks -> 127.0.0.1:$LOCAL_PORT, then the chat test"
k -n "$TENANT_NS" port-forward "service/$TENANT-hooks" "$LOCAL_PORT:9099" >"${TMPDIR:-/tmp}/echo-e2e-pf.log" 2>&1 &
PORT_FORWARD_PID=$!
for _ in $(seq 1 30); do
  curl -fsS "http://127.0.0.1:$LOCAL_PORT/healthz" >/dev/null 2>&1 && break
  sleep 1
done
curl -fsS "http://127.0.0.1:$LOCAL_PORT/healthz" >/dev/null || die "the port-forward never answered"
api_key="$(k -n "$TENANT_NS" get secret "$TENANT-api-key" -o jsonpath='{.data.api-key}' | base64 -d)"
[[ -n "$api_key" ]] || die "the operator did not generate Secret $TENANT-api-key"
# The Pipelines protocol by hand first (what Open WebUI calls), then the full test.
# (whole output kept before `head`: under pipefail, head closing the pipe early would fail the step)
models="$(curl -fsS -H "Authorization: Bearer $api_key" "http://127.0.0.1:$LOCAL_PORT/models" | "$PYTHON" -m json.tool)"
head -n 20 <<<"$models"
E2E_HOOKS_URL="http://127.0.0.1:$LOCAL_PORT" E2E_API_KEY="$api_key" \
  "$PYTHON" -m pytest e2e/test_chat.py -v -p no:cacheprovider -o addopts="" --timeout 120

# -- teardown --------------------------------------------------------------------------------------
log "deleting the EchoDeployment: the operator's finalizer must let go and the children must go"
kill "$PORT_FORWARD_PID" 2>/dev/null || true
PORT_FORWARD_PID=""
k -n "$TENANT_NS" delete echodeployment "$TENANT" --timeout=180s
k -n "$TENANT_NS" wait --for=delete "deployment/$TENANT-hooks" "deployment/$TENANT-distiller" \
  "deployment/$TENANT-embedding" --timeout=180s
"$HELM" --kube-context "$CONTEXT" uninstall echo-operator --namespace "$OPERATOR_NS" --wait --timeout 3m
log "e2e passed"
