#!/usr/bin/env bash
# The project's own Docker engine (Debian's docker.io 20.10), apart from the system's: every file it
# keeps lies under ECHO_NODE_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/echo-node):
#   run/docker.sock  the API socket        run/dockerd.pid  its pid    logs/dockerd.log  its log
#   docker-data/     images, containers (data-root)          docker-exec/  runtime state (exec-root)
#   daemon.json      its configuration (empty: /etc/docker/daemon.json is never read)
#
#   scripts/dockerd.sh start   # idempotent; waits until `docker version` answers
#   scripts/dockerd.sh stop    # by its pid (then its containerd and shims), SIGKILL after a timeout
#   scripts/dockerd.sh env     # the DOCKER_HOST line; exit status 1 when the daemon is not running
# start and env print `DOCKER_HOST=unix://...` as their last line (messages go to stderr).
#
# Network: images are only built here. The daemon writes no iptables rule and no NAT
# (--iptables=false --ip-masq=false), so a container's packets are never masqueraded onto the
# machine's outward interface, and scripts/netguard.sh install (run before the daemon starts)
# rejects whatever from the bridge would still leave by it. The daemon's own pulls go to a proxy on
# 127.0.0.1:9 (discard: nothing listens), so they fail at once and no registry traffic leaves.
# Publishing (-p 127.0.0.1:PORT:PORT) goes through docker-proxy, a userland proxy: it works
# without iptables.
#
# Containers and pods sit on the bridge ECHO_BRIDGE (default echo0, made by this script, removed by
# `stop` once no engine uses it) with the address ECHO_BIP (default 172.17.0.1/16, the pod range of
# scripts/netguard.sh).
# Missing docker.io/debootstrap/containernetworking-plugins are installed with apt-get (as root).
# ECHO_DOCKERD_FLAGS adds flags to dockerd (words split on spaces); ECHO_DOCKERD_STOP_TIMEOUT is how
# long `stop` waits before SIGKILL (default 30 s).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODE_DIR="${ECHO_NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/echo-node}"
SOCK="$NODE_DIR/run/docker.sock"
PIDFILE="$NODE_DIR/run/dockerd.pid"
LOG="$NODE_DIR/logs/dockerd.log"
EXEC_ROOT="$NODE_DIR/docker-exec"
DATA_ROOT="$NODE_DIR/docker-data"
BIP="${ECHO_BIP:-172.17.0.1/16}"
# The bridge is the project's own, made here (not docker0): a dockerd never deletes a bridge it did not
# create, so another engine on this machine — the system's, or a second one of these — stopping can
# never take the pods' addresses away.
BRIDGE="${ECHO_BRIDGE:-echo0}"
CONTAINERD_PIDFILE="$EXEC_ROOT/containerd/containerd.pid"
STOP_TIMEOUT="${ECHO_DOCKERD_STOP_TIMEOUT:-30}"
# Debian's client: it has BuildKit built in (a newer /usr/local/bin/docker may lack buildx).
DOCKER_CLI="${ECHO_DOCKER:-/usr/bin/docker}"
[[ -x "$DOCKER_CLI" ]] || DOCKER_CLI="$(command -v docker || echo docker)"

log() { echo "dockerd.sh: $*" >&2; }
die() {
  log "$*"
  exit 1
}
host_line() { echo "DOCKER_HOST=unix://$SOCK"; }

# The pid of our dockerd, if it is alive (a pid reused by another program does not count).
dockerd_pid() {
  local pid
  pid="$(cat "$PIDFILE" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == dockerd ]] || return 1
  echo "$pid"
}

answering() { DOCKER_HOST="unix://$SOCK" timeout 10 "$DOCKER_CLI" version >/dev/null 2>&1; }

ensure_packages() {
  local missing=()
  command -v dockerd >/dev/null || missing+=(docker.io)
  command -v debootstrap >/dev/null || [[ -x /usr/sbin/debootstrap ]] || missing+=(debootstrap)
  [[ -d /usr/lib/cni ]] || missing+=(containernetworking-plugins)
  [[ ${#missing[@]} -eq 0 ]] && return 0
  [[ "$(id -u)" -eq 0 ]] || die "missing ${missing[*]}: apt-get install -y --no-install-recommends docker.io debootstrap containernetworking-plugins (as root)"
  log "installing ${missing[*]} (apt-get)"
  local pkgs=(docker.io debootstrap containernetworking-plugins) norc=""
  export DEBIAN_FRONTEND=noninteractive
  # The package's own service is not ours: with no policy-rc.d yet, one that forbids starting
  # services during the install (Debian's mechanism), so that no system dockerd starts (with NAT).
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    norc=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' >"$norc"
    chmod 0755 "$norc"
  fi
  local rc=0
  apt-get install -y -q --no-install-recommends "${pkgs[@]}" >&2 ||
    { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends "${pkgs[@]}" >&2; } || rc=$?
  [[ -z "$norc" ]] || rm -f "$norc"
  [[ "$rc" -eq 0 ]] || die "apt-get install ${pkgs[*]} failed"
}

guard() {
  local netguard="$ROOT/scripts/netguard.sh"
  if [[ -x "$netguard" ]]; then
    "$netguard" install >&2 || die "scripts/netguard.sh install failed: dockerd is not started without the guard"
  else
    log "WARNING: $netguard not found: no network guard installed (containers still get no NAT: --iptables=false --ip-masq=false)"
  fi
}

bridge_up() {
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
    log "bridge $BRIDGE made ($BIP)"
  fi
  ip -4 addr show dev "$BRIDGE" | grep -qF "inet $BIP " || ip addr add "$BIP" dev "$BRIDGE"
  ip link set "$BRIDGE" up
}

# The bridge goes when no engine is left on it.
bridge_down() {
  local p
  for p in /proc/[0-9]*; do
    [[ "$(cat "$p/comm" 2>/dev/null)" == dockerd ]] || continue
    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "--bridge $BRIDGE " && return 0
  done
  ip link delete "$BRIDGE" 2>/dev/null || true
}

start() {
  local pid i
  if pid="$(dockerd_pid)"; then
    for i in $(seq 1 60); do
      if answering; then
        log "already running (pid $pid)"
        host_line
        return 0
      fi
      [[ $i -eq 1 ]] && log "dockerd $pid is up but not answering yet; waiting"
      sleep 0.5
    done
    die "dockerd $pid runs but does not answer on $SOCK (see $LOG; scripts/dockerd.sh stop)"
  fi
  ensure_packages
  local system_pid
  system_pid="$(cat /var/run/docker.pid 2>/dev/null || true)"
  if [[ "$system_pid" =~ ^[0-9]+$ ]] && kill -0 "$system_pid" 2>/dev/null; then
    log "WARNING: the system's dockerd (pid $system_pid) runs too (its own bridge and NAT rules; not used here)"
  fi
  guard
  mkdir -p "$NODE_DIR/run" "$DATA_ROOT" "$EXEC_ROOT" "$NODE_DIR/logs"
  [[ -s "$NODE_DIR/daemon.json" ]] || echo '{}' >"$NODE_DIR/daemon.json"
  rm -f "$SOCK" "$PIDFILE"
  local extra=()
  # shellcheck disable=SC2206  # word splitting is the point
  [[ -n "${ECHO_DOCKERD_FLAGS:-}" ]] && extra=(${ECHO_DOCKERD_FLAGS})
  bridge_up
  extra=(--bridge "$BRIDGE" "${extra[@]}")
  log "starting dockerd (state under $NODE_DIR, log $LOG)"
  # setsid: its own session, so that the caller's Ctrl-C or end does not take it down.
  env HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 http_proxy=http://127.0.0.1:9 \
    https_proxy=http://127.0.0.1:9 NO_PROXY= no_proxy= \
    setsid dockerd \
    --config-file "$NODE_DIR/daemon.json" \
    --host "unix://$SOCK" \
    --data-root "$DATA_ROOT" \
    --exec-root "$EXEC_ROOT" \
    --pidfile "$PIDFILE" \
    --exec-opt native.cgroupdriver=cgroupfs \
    --storage-driver overlay2 \
    --iptables=false --ip-masq=false \
    "${extra[@]}" </dev/null >>"$LOG" 2>&1 &
  local started=$!
  for i in $(seq 1 120); do
    if answering; then
      log "dockerd up (pid $(cat "$PIDFILE")) after $((i / 2)) s"
      host_line
      return 0
    fi
    kill -0 "$started" 2>/dev/null || {
      tail -n 30 "$LOG" >&2
      die "dockerd exited at start"
    }
    sleep 0.5
  done
  tail -n 30 "$LOG" >&2
  die "dockerd (pid $started) does not answer on $SOCK after 60 s (scripts/dockerd.sh stop)"
}

# Wait for a pid to end; SIGKILL it after the timeout. Returns 0 once it is gone.
stop_pid() {
  local pid="$1" name="$2" i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 $((STOP_TIMEOUT * 2))); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.5
  done
  log "$name (pid $pid) still running after ${STOP_TIMEOUT} s: SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for i in $(seq 1 20); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.5
  done
  log "$name (pid $pid) survives SIGKILL"
  return 1
}

# Whether a dockerd or containerd still runs on this state folder (one whose pidfile was lost).
uses_state() {
  local p
  for p in /proc/[0-9]*; do
    case "$(cat "$p/comm" 2>/dev/null)" in dockerd | containerd) ;; *) continue ;; esac
    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -e "$DATA_ROOT" -e "$EXEC_ROOT/" && return 0
  done
  return 1
}

stop() {
  local pid containerd="" p status=0
  containerd="$(cat "$CONTAINERD_PIDFILE" 2>/dev/null || true)"
  if pid="$(dockerd_pid)"; then
    log "stopping dockerd (pid $pid)"
    stop_pid "$pid" dockerd || status=1
  else
    log "dockerd is not running"
  fi
  # dockerd stops the containerd it started; one left behind (dockerd killed) is stopped by its pid.
  if [[ "$containerd" =~ ^[0-9]+$ ]] && [[ "$(cat "/proc/$containerd/comm" 2>/dev/null)" == containerd ]]; then
    stop_pid "$containerd" containerd || status=1
  fi
  # Containers that outlived a killed daemon: the shims of this state folder (their command line
  # names its containerd socket), each container's first process (a child of its shim), by pid.
  local shim child
  for p in /proc/[0-9]*; do
    [[ "$(cat "$p/comm" 2>/dev/null)" == containerd-shim* ]] || continue
    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF "$EXEC_ROOT/" || continue
    shim="${p#/proc/}"
    for child in /proc/[0-9]*; do
      grep -qx "PPid:[[:space:]]*$shim" "$child/status" 2>/dev/null || continue
      log "stopping leftover container process ${child#/proc/} (shim $shim)"
      STOP_TIMEOUT=10 stop_pid "${child#/proc/}" container || status=1
    done
    log "stopping leftover shim $shim"
    stop_pid "$shim" containerd-shim || status=1
  done
  # A killed daemon leaves its mounts (overlay layers, network namespaces, shm): unmount those below
  # its two folders, deepest first, once nothing of it runs.
  if [[ "$status" -eq 0 ]] && ! uses_state; then
    local mount
    awk -v data="$DATA_ROOT" -v exec="$EXEC_ROOT" '
      $5 == data || $5 == exec || index($5, data "/") == 1 || index($5, exec "/") == 1 { print $5 }
    ' /proc/self/mountinfo | sort -r | while read -r mount; do
      umount "$mount" 2>/dev/null || umount -l "$mount" 2>/dev/null || log "could not unmount $mount"
    done
  fi
  rm -f "$SOCK"
  [[ "$status" -eq 0 ]] && bridge_down
  return "$status"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  env)
    host_line
    if ! dockerd_pid >/dev/null || ! answering; then
      log "not running (scripts/dockerd.sh start)"
      exit 1
    fi
    ;;
  *)
    echo "usage: $0 start|stop|env" >&2
    exit 2
    ;;
esac
