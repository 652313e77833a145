#!/usr/bin/env bash
# The network guard of the single-node tier: every address the containers and the cluster use stays on
# this machine. One iptables chain, ECHO-GUARD, jumped to first from OUTPUT and FORWARD, rejects every
# packet that would leave by any interface but loopback and the pods' bridge when it is addressed to the
# pod or service range, or comes from the pod range. A packet to an unused ClusterIP (no kube-proxy rule
# rewrites it) would otherwise follow the default route out of the machine; here it is rejected locally.
#
#   install   add the chain and its two jumps, first in OUTPUT and FORWARD (idempotent); run before
#             dockerd or any node process starts, and again once kube-proxy has added its rules
#   remove    delete them
#   check     exit 0 when the chain and both jumps are in place, 1 otherwise (says which is missing)
#   probe     connect to an unused address of the service range: prints "rejected" when the guard
#             refused it locally (ECONNREFUSED at once, the chain's counter grew), exits 1 otherwise
#
# Ranges: ECHO_POD_CIDR (default 172.17.0.0/16, the bridge of scripts/dockerd.sh) and
# ECHO_SERVICE_CIDR (default 10.0.0.0/24, the apiserver's --service-cluster-ip-range).
set -euo pipefail

CHAIN=ECHO-GUARD
POD_CIDR=${ECHO_POD_CIDR:-172.17.0.0/16}
SERVICE_CIDR=${ECHO_SERVICE_CIDR:-10.0.0.0/24}
BRIDGE=${ECHO_BRIDGE:-echo0}
# An address of the service range that no Service is given (the apiserver allocates from the bottom).
UNUSED_SERVICE_IP=${ECHO_UNUSED_SERVICE_IP:-10.0.0.250}

log() { echo "netguard: $*" >&2; }

need_iptables() {
  command -v iptables >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends iptables >&2
}

install() {
  need_iptables
  iptables -w -N "$CHAIN" 2>/dev/null || iptables -w -F "$CHAIN"
  iptables -w -A "$CHAIN" -o lo -j RETURN
  # A packet the host sends to a ClusterIP is rewritten by kube-proxy (nat OUTPUT) before this chain
  # sees it, but OUTPUT's -o still names the interface of the first route (the default one): judge it
  # by where it was rewritten to. To a pod or the node (the pod range) or loopback: it stays here;
  # anywhere else (an Endpoints object naming an outside address): rejected.
  local rewritten=(-m conntrack --ctstate DNAT --ctorigdst "$SERVICE_CIDR")
  iptables -w -A "$CHAIN" "${rewritten[@]}" -d "$POD_CIDR" -j RETURN
  iptables -w -A "$CHAIN" "${rewritten[@]}" -d 127.0.0.0/8 -j RETURN
  iptables -w -A "$CHAIN" "${rewritten[@]}" -j REJECT
  iptables -w -A "$CHAIN" -o "$BRIDGE" -j RETURN
  iptables -w -A "$CHAIN" -d "$SERVICE_CIDR" -j REJECT
  iptables -w -A "$CHAIN" -d "$POD_CIDR" -j REJECT
  iptables -w -A "$CHAIN" -s "$POD_CIDR" -j REJECT
  local hook
  # First in both hooks, also after kube-proxy prepended its own jumps (KUBE-FORWARD accepts marked
  # packets): install again after it starts, and the guard moves back to the top.
  for hook in OUTPUT FORWARD; do
    while iptables -w -C "$hook" -j "$CHAIN" 2>/dev/null; do iptables -w -D "$hook" -j "$CHAIN"; done
    iptables -w -I "$hook" 1 -j "$CHAIN"
  done
  log "installed: nothing to $SERVICE_CIDR or $POD_CIDR, nothing from $POD_CIDR, leaves but by lo or $BRIDGE"
}

remove() {
  command -v iptables >/dev/null || return 0
  local hook
  for hook in OUTPUT FORWARD; do
    while iptables -w -C "$hook" -j "$CHAIN" 2>/dev/null; do iptables -w -D "$hook" -j "$CHAIN"; done
  done
  iptables -w -F "$CHAIN" 2>/dev/null || true
  iptables -w -X "$CHAIN" 2>/dev/null || true
  log "removed"
}

check() {
  command -v iptables >/dev/null || { log "iptables is not installed"; return 1; }
  iptables -w -S "$CHAIN" >/dev/null 2>&1 || { log "chain $CHAIN is missing"; return 1; }
  local hook first
  for hook in OUTPUT FORWARD; do
    first=$(iptables -w -S "$hook" | sed -n 2p)
    [[ "$first" == "-A $hook -j $CHAIN" ]] || { log "$CHAIN is not the first rule of $hook"; return 1; }
  done
  iptables -w -S "$CHAIN" | grep -q -- "-d $SERVICE_CIDR -j REJECT" || { log "no rule for $SERVICE_CIDR"; return 1; }
  iptables -w -S "$CHAIN" | grep -q -- "-d $POD_CIDR -j REJECT" || { log "no rule for $POD_CIDR"; return 1; }
}

rejected_packets() {
  iptables -w -L "$CHAIN" -n -v -x | awk -v cidr="$SERVICE_CIDR" '$3 == "REJECT" && $9 == cidr { print $1 }'
}

probe() {
  check
  local before after outcome
  before=$(rejected_packets)
  outcome=$(python3 - "$UNUSED_SERVICE_IP" <<'PY'
import socket, sys, time
started = time.monotonic()
try:
    socket.create_connection((sys.argv[1], 80), timeout=5).close()
    print("connected")
except ConnectionRefusedError:
    print(f"refused {time.monotonic() - started:.3f}")
except OSError as error:
    print(f"error {type(error).__name__}")
PY
)
  after=$(rejected_packets)
  if [[ "$outcome" == refused* && "$after" -gt "$before" ]]; then
    echo "rejected: $UNUSED_SERVICE_IP:80 refused locally in ${outcome#refused }s; $CHAIN counted $((after - before)) packet(s)"
    return 0
  fi
  echo "NOT rejected by the guard: $UNUSED_SERVICE_IP:80 -> $outcome (counter $before -> $after)"
  return 1
}

case "${1:-}" in
  install) install ;;
  remove) remove ;;
  check) check && log "in place" ;;
  probe) probe ;;
  *) log "usage: $0 install | remove | check | probe"; exit 2 ;;
esac
