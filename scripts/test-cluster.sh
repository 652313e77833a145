#!/usr/bin/env bash
# `make test-cluster`: the single-node cluster up (scripts/cluster.sh), the e2e suite against it, the
# cluster down — always, also when a test fails (an EXIT trap). The images come from `make images`.
# E2E_KEEP=1 keeps the cluster up afterwards (then `make cluster-down`).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS=0
kubeconfig=$(scripts/cluster.sh up | tail -n1)
echo "test-cluster: cluster up after ${SECONDS} s" >&2
finish() {
  local status=$?
  if [[ "${E2E_KEEP:-0}" != 1 ]]; then scripts/cluster.sh down || status=1; fi
  echo "test-cluster: done after ${SECONDS} s (exit $status)" >&2
  exit "$status"
}
trap finish EXIT
.venv/bin/pytest tests/cluster -p no:cacheprovider
E2E_KUBECONFIG=$kubeconfig E2E_PLATFORM=node .venv/bin/pytest e2e --durations=0 -p no:cacheprovider "$@"
