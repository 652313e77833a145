#!/usr/bin/env bash
# A real single-node Kubernetes v1.20.2 on this machine: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet (dockershim, on the dockerd of scripts/dockerd.sh), kube-proxy (iptables), a
# cluster DNS (dnsmasq fed by scripts/cluster_dns.py) and a volume provisioner (scripts/cluster_storage.py:
# the default StorageClass `standard`, hostPath volumes under the state folder).
# Binaries: scripts/kube-apiserver.sh build (built once, cached).
#
#   up           the network guard first (scripts/netguard.sh install + probe), then every part; waits for
#                the node to be Ready and the default ServiceAccount; prints the kubeconfig path last
#   down         stops every part by the pid it recorded, removes the pods' containers, kube-proxy's
#                rules and the guard, and puts back the two sysctls it changed
#   kubeconfig   prints the kubeconfig path (exit 1 when the cluster is not up)
#   restart-kubelet  stops the kubelet and starts it again (a fault test: its pods must keep running)
#
# State: ${ECHO_NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/echo-node}/cluster (made anew by each `up`).
# Host changes, all undone by `down`: the ECHO-GUARD iptables chain, kube-proxy's KUBE-* chains,
# net.ipv4.ip_forward=1 (pods reach Services through the host) and net.ipv4.conf.all.route_localnet=1
# (kube-proxy sets it); /var/log/pods, /var/log/containers and /var/lib/kubelet/device-plugins (made by
# the kubelet) are left.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NODE_DIR=${ECHO_NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/echo-node}
STATE=$NODE_DIR/cluster
export ECHO_KUBE_CACHE=${ECHO_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/echo-kube-apiserver}
BIN=$ECHO_KUBE_CACHE/bin
POD_CIDR=${ECHO_POD_CIDR:-172.17.0.0/16}
SERVICE_CIDR=${ECHO_SERVICE_CIDR:-10.0.0.0/24}
NODE_IP=${ECHO_NODE_IP:-172.17.0.1}  # the pods' bridge: pods reach the apiserver and the DNS here
DOMAIN=cluster.local
PARTS=(volumes dns-records dnsmasq kube-proxy kubelet scheduler controller-manager)

log() { echo "cluster: $*" >&2; }

# kubectl from `make tools` (tools/bin), else the one on PATH.
KUBECTL=$HERE/../tools/bin/kubectl
[[ -x "$KUBECTL" ]] || KUBECTL=kubectl
kubectl() { "$KUBECTL" "$@"; }

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

running() { [[ -f "$STATE/$1.pid" ]] && kill -0 "$(cat "$STATE/$1.pid")" 2>/dev/null; }

# The kubelet reaches itself, and the apiserver reaches it for logs/exec/port-forward, by the node's name:
# the host's name when it resolves to loopback, else "localhost"; the kubelet listens on 127.0.0.1.
node_name() {
  local name
  name=$(hostname)
  getent hosts "$name" | grep -q '^127\.' && echo "$name" || echo localhost
}

start_part() {
  local name="$1"; shift
  nohup "$@" >"$STATE/$name.log" 2>&1 &
  echo $! >"$STATE/$name.pid"
}

save_sysctl() {
  local key="$1" value="$2" file="/proc/sys/${1//.//}"
  [[ -f "$STATE/sysctl.$key" ]] || cat "$file" >"$STATE/sysctl.$key"
  echo "$value" >"$file"
}

restore_sysctls() {
  local saved key
  for saved in "$STATE"/sysctl.*; do
    [[ -f "$saved" ]] || continue
    key=${saved##*/sysctl.}
    cat "$saved" >"/proc/sys/${key//.//}" && rm -f "$saved"
  done
}

wait_for() {
  local what="$1" seconds="$2"; shift 2
  local started=$SECONDS
  until "$@" >/dev/null 2>&1; do
    local part
    for part in "${PARTS[@]}"; do
      [[ ! -f "$STATE/$part.pid" ]] || running "$part" || { log "$part exited; its log:"; tail -25 "$STATE/$part.log" >&2; return 1; }
    done
    (( SECONDS - started < seconds )) || { log "$what: not after ${seconds} s"; return 1; }
    sleep 1
  done
  log "$what after $((SECONDS - started)) s"
}

# What the tier runs beside the cluster's own binaries (Debian's packages; CI's machine is new).
ensure_packages() {
  local missing=()
  command -v dnsmasq >/dev/null || missing+=(dnsmasq-base)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v conntrack >/dev/null || missing+=(conntrack)
  command -v findmnt >/dev/null || missing+=(util-linux)
  [[ ${#missing[@]} -eq 0 ]] && return 0
  log "installing ${missing[*]} (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 ||
    { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; }
}

up() {
  if [[ -f "$STATE/kubeconfig" ]] && running kubelet; then
    log "already up"; echo "$STATE/kubeconfig"; return 0
  fi
  local t0=$SECONDS
  ensure_packages
  # 1. The guard, before anything of the cluster starts, and proof that it holds.
  ECHO_POD_CIDR=$POD_CIDR ECHO_SERVICE_CIDR=$SERVICE_CIDR "$HERE/netguard.sh" install
  ECHO_POD_CIDR=$POD_CIDR ECHO_SERVICE_CIDR=$SERVICE_CIDR "$HERE/netguard.sh" probe >&2
  # 2. Binaries (built once, cached) and the container engine.
  "$HERE/kube-apiserver.sh" path >/dev/null 2>&1 || "$HERE/kube-apiserver.sh" build >/dev/null
  local docker_host=${DOCKER_HOST:-}
  if [[ -z "$docker_host" ]]; then
    "$HERE/dockerd.sh" env >/dev/null 2>&1 || : >"$NODE_DIR/cluster.started-dockerd"
    docker_host=$("$HERE/dockerd.sh" start | tail -n1)
    docker_host=${docker_host#DOCKER_HOST=}
  fi
  echo "$docker_host" >"$NODE_DIR/cluster.docker-host"
  DOCKER_HOST=$docker_host docker image inspect echo-pause:local >/dev/null 2>&1 \
    || { log "no echo-pause:local image: run make images first"; return 1; }

  unmount_kubelet
  rm -rf "$STATE"; mkdir -p "$STATE/kubelet" "$STATE/dockershim" "$STATE/volume-plugins" "$STATE/dns"
  STATE=$(cd "$STATE" && pwd)
  save_sysctl net.ipv4.ip_forward 1
  # 3. Control plane: the pods' bridge address so pods reach it, ServiceAccount tokens on.
  local kubeconfig
  kubeconfig=$(KUBE_BIND_ADDRESS=$NODE_IP KUBE_SERVICE_CIDR=$SERVICE_CIDR KUBE_SERVICE_ACCOUNTS=1 \
    "$HERE/kube-apiserver.sh" start "$STATE/apiserver")
  ln -sf "$kubeconfig" "$STATE/kubeconfig"
  export KUBECONFIG=$kubeconfig
  local name
  name=$(node_name)

  start_part controller-manager "$BIN/kube-controller-manager" --kubeconfig "$KUBECONFIG" \
    --authentication-kubeconfig "$KUBECONFIG" --authorization-kubeconfig "$KUBECONFIG" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port "$(free_port)" --port 0 \
    --service-account-private-key-file "$STATE/apiserver/sa.key" \
    --root-ca-file "$STATE/apiserver/certs/apiserver.crt" --use-service-account-credentials=true \
    --service-cluster-ip-range "$SERVICE_CIDR" --controllers '*' \
    --flex-volume-plugin-dir "$STATE/volume-plugins"
  start_part scheduler "$BIN/kube-scheduler" --kubeconfig "$KUBECONFIG" \
    --authentication-kubeconfig "$KUBECONFIG" --authorization-kubeconfig "$KUBECONFIG" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port "$(free_port)" --port 0

  # 4. The node.
  start_kubelet
  # 5. Services: kube-proxy in iptables mode; --masquerade-all so that a pod reaching a Service backed by
  # a pod on the same bridge gets its reply through the host (no br_netfilter needed). conntrack sizes
  # are left as the host has them (0 = do not touch).
  save_sysctl net.ipv4.conf.all.route_localnet "$(cat /proc/sys/net/ipv4/conf/all/route_localnet)"
  start_part kube-proxy "$BIN/kube-proxy" --kubeconfig "$KUBECONFIG" --hostname-override "$name" \
    --proxy-mode iptables --masquerade-all --cluster-cidr "$POD_CIDR" \
    --conntrack-max-per-core 0 --conntrack-tcp-timeout-established 0 --conntrack-tcp-timeout-close-wait 0 \
    --bind-address 127.0.0.1 --healthz-bind-address "127.0.0.1:$(free_port)" \
    --metrics-bind-address "127.0.0.1:$(free_port)"
  # kube-proxy prepends its jumps to OUTPUT and FORWARD (KUBE-FORWARD accepts what it marked): once they
  # are there, the guard goes back in front of them.
  wait_for "kube-proxy's rules" 60 iptables -w -C FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
  ECHO_POD_CIDR=$POD_CIDR ECHO_SERVICE_CIDR=$SERVICE_CIDR "$HERE/netguard.sh" install
  # 6. Cluster DNS: names under cluster.local only, nothing forwarded anywhere (--no-resolv, no server).
  : >"$STATE/dns/hosts"
  start_part dns-records python3 "$HERE/cluster_dns.py" "$KUBECONFIG" "$STATE/dns/hosts" "$DOMAIN"
  start_part dnsmasq dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts \
    --bind-interfaces --listen-address="$NODE_IP" --port=53 --hostsdir="$STATE/dns" \
    --local="/$DOMAIN/" --domain-needed --bogus-priv --user=root --pid-file="$STATE/dnsmasq.own.pid" --log-facility=-

  # 7. Volumes: a default StorageClass whose claims get hostPath volumes under $STATE/volumes.
  start_part volumes python3 "$HERE/cluster_storage.py" "$KUBECONFIG" "$STATE/volumes"

  wait_for "node $name Ready" 180 node_ready "$name"
  wait_for "ServiceAccount default/default" 60 kubectl get serviceaccount default -n default
  wait_for "StorageClass standard" 30 kubectl get storageclass standard
  wait_for "Service kubernetes in the DNS" 30 grep -q " kubernetes.default.svc.$DOMAIN\$" "$STATE/dns/hosts"
  log "up in $((SECONDS - t0)) s"
  echo "$STATE/kubeconfig"
}

# The kubelet, also alone (`restart-kubelet`: the pods it runs keep running while it is away).
# Images are never pulled: image GC off, since a removed image could not come back.
start_kubelet() {
  local kubeconfig="$STATE/kubeconfig" sock
  sock=$(cat "$NODE_DIR/cluster.docker-host")
  start_part kubelet "$BIN/kubelet" --kubeconfig "$kubeconfig" \
    --hostname-override "$(node_name)" --node-ip "$NODE_IP" --address 127.0.0.1 --port 10250 \
    --read-only-port 0 --healthz-bind-address 127.0.0.1 --healthz-port "$(free_port)" \
    --root-dir "$STATE/kubelet" --cert-dir "$STATE/kubelet/pki" \
    --experimental-dockershim-root-directory "$STATE/dockershim" --volume-plugin-dir "$STATE/volume-plugins" \
    --container-runtime docker --docker-endpoint "$sock" \
    --pod-infra-container-image echo-pause:local \
    --cluster-dns "$NODE_IP" --cluster-domain "$DOMAIN" \
    --cgroup-driver cgroupfs --cgroups-per-qos=false --enforce-node-allocatable '' \
    --fail-swap-on=false --make-iptables-util-chains=false --oom-score-adj 0 \
    --image-gc-high-threshold 100 --image-gc-low-threshold 99 --eviction-hard 'memory.available<100Mi' \
    --v 1
}

restart_kubelet() {
  running kubelet || { log "the kubelet is not running"; return 1; }
  local t0=$SECONDS
  stop_part kubelet
  export KUBECONFIG=$STATE/kubeconfig
  start_kubelet
  # Ready may not even have flipped: wait for the kubelet's own server (logs, exec, port-forward).
  wait_for "kubelet serving on 127.0.0.1:10250" 120 bash -c 'exec 3<>/dev/tcp/127.0.0.1/10250'
  wait_for "kubelet back, node Ready" 120 node_ready "$(node_name)"
  log "kubelet restarted in $((SECONDS - t0)) s"
}

node_ready() {
  [[ "$(kubectl get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]
}

unmount_kubelet() {
  findmnt -rn -o TARGET | grep "^$STATE/kubelet" | sort -r | xargs -r -n1 umount 2>/dev/null || true
}

stop_part() {
  local name="$1" pid
  [[ -f "$STATE/$name.pid" ]] || return 0
  pid=$(cat "$STATE/$name.pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$STATE/$name.pid"
}

down() {
  [[ -d "$STATE" ]] || { log "not up"; return 0; }
  local part
  for part in "${PARTS[@]}"; do stop_part "$part"; done
  # The pods' containers outlive the kubelet (dockershim names them k8s_*), then the kubelet's mounts
  # (Secrets are tmpfs under the kubelet's pods/).
  local docker_host
  docker_host=$(cat "$NODE_DIR/cluster.docker-host" 2>/dev/null || true)
  if [[ -n "$docker_host" ]]; then
    DOCKER_HOST=$docker_host docker ps -aq --filter name=k8s_ \
      | xargs -r env DOCKER_HOST="$docker_host" docker rm -f >/dev/null 2>&1 || true
  fi
  unmount_kubelet
  [[ -x "$BIN/kube-proxy" ]] && "$BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
  [[ -d "$STATE/apiserver" ]] && "$HERE/kube-apiserver.sh" stop "$STATE/apiserver"
  restore_sysctls
  rm -f "$STATE/kubeconfig"
  # The dockerd goes with the cluster when `up` started it; one started before (make images) stays,
  # and so does the guard that protects its containers.
  if [[ -f "$NODE_DIR/cluster.started-dockerd" ]]; then
    "$HERE/dockerd.sh" stop || true
    rm -f "$NODE_DIR/cluster.started-dockerd"
    "$HERE/netguard.sh" remove
  fi
  log "down"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  kubeconfig) [[ -f "$STATE/kubeconfig" ]] && running kubelet && echo "$STATE/kubeconfig" ;;
  restart-kubelet) restart_kubelet ;;
  *) log "usage: $0 up | down | kubeconfig | restart-kubelet"; exit 2 ;;
esac
