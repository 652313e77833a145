# syntax=docker/dockerfile:1.7
# echo: the ECHO runtime, one image for both roles (the operator sets the command of each):
#   echo-hooks      echoctl serve --host 0.0.0.0   (the default; Pipelines server on :9099)
#   echo-distiller  echoctl worker                 (job workers; metrics on :9101)
#
# Build from the repository root:
#   docker build -f docker/services.Dockerfile -t ghcr.io/echo-k8s/echo:0.1.0 .
#
# Base images are pinned by exact tag, not by digest (acceptable for this project; a registry
# mirror that pins digests is the place to freeze them). Two stages: the build stage installs the
# package and its dependencies into a venv; the runtime stage copies only that venv.
#
# Probes (Kubernetes ignores HEALTHCHECK; the operator sets them on each Deployment):
#   hooks:  startup + liveness GET /healthz, readiness GET /readyz on port 9099
#   worker: no HTTP endpoint but /metrics on 9101; its liveness is the process itself
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/echo
# The package metadata first, so that a code change does not invalidate the dependency layer.
COPY pyproject.toml README.md ./
COPY services/echo/__init__.py services/echo/__init__.py
COPY operator/echo_operator/__init__.py operator/echo_operator/__init__.py
RUN /opt/echo/bin/pip install --no-cache-dir ".[services]"
COPY services/echo services/echo
COPY operator/echo_operator operator/echo_operator
RUN /opt/echo/bin/pip install --no-cache-dir --no-deps --force-reinstall . \
    && /opt/echo/bin/echoctl --version

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="echo" \
      org.opencontainers.image.description="ECHO runtime: echo-hooks (echoctl serve) and echo-distiller (echoctl worker)" \
      org.opencontainers.image.source="https://github.com/echo-k8s/echo" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 echo \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/echo --no-create-home \
       --shell /usr/sbin/nologin echo \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/echo
COPY --from=build /opt/echo /opt/echo
# The root filesystem is read-only in the cluster: state goes to /var/lib/echo and /tmp (volumes).
ENV PATH=/opt/echo/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    ECHO_DATA_DIR=/var/lib/echo \
    ECHO_HOST=0.0.0.0 \
    ECHO_PORT=9099 \
    ECHO_LOG_FORMAT=json
WORKDIR /var/lib/echo
USER 10001:10001
EXPOSE 9099 9101
ENTRYPOINT ["echoctl"]
CMD ["serve", "--host", "0.0.0.0"]
