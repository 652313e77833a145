#!/usr/bin/env bash
# `make test-cluster`: the single-node cluster up (scripts/cluster.sh), the images run (tests/cluster),
# the e2e suite against the cluster, the cluster down — always, also when `up` or a test fails (an
# EXIT trap set before anything starts). The images come from `make images`.
# E2E_KEEP=1 keeps the cluster up afterwards (then `make cluster-down`).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS=0
finish() {
  local status=$?
  if [[ "${E2E_KEEP:-0}" != 1 ]]; then scripts/cluster.sh down || status=1; fi
  echo "test-cluster: done after ${SECONDS} s (exit $status)" >&2
  exit "$status"
}
trap finish EXIT
kubeconfig=$(scripts/cluster.sh up | tail -n1)
echo "test-cluster: cluster up after ${SECONDS} s" >&2
.venv/bin/pytest tests/cluster -p no:cacheprovider
echo "test-cluster: images checked after ${SECONDS} s" >&2
E2E_KUBECONFIG=$kubeconfig E2E_PLATFORM=node .venv/bin/pytest e2e --durations=0 -p no:cacheprovider "$@"
