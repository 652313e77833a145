# echo-operator: the kopf operator (`echoctl operator`) that reconciles EchoDeployment resources.
#
# Build from the repository root:
#   docker build -f docker/operator.Dockerfile -t ghcr.io/echo-k8s/echo-operator:0.1.0 .
# With no registry and no network (`make images`): PYTHON_IMAGE=echo-base:bookworm and
# WHEELHOUSE=build/wheelhouse/operator (wheels built on the host), `docker build --network none`;
# without a wheelhouse (docker/wheelhouse is empty) pip installs from PyPI. No `# syntax=` line (it
# would pull a frontend image from a registry); BuildKit's built-in frontend reads this file.
#
# Base images are pinned by exact tag, not by digest (acceptable for this project; a registry
# mirror that pins digests is the place to freeze them). The official image's python is
# /usr/local/bin/python, Debian's (echo-base) /usr/bin/python: only `python` on PATH is used.
# Two stages: the build stage installs the package with its operator extra into a venv; the
# runtime stage copies only that venv.
#
# Probes: the chart (charts/echo-operator) runs it with --liveness=http://0.0.0.0:8080/healthz and a
# liveness probe on that path; metrics are served on :9090. The HEALTHCHECK below is for `docker run`.
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# A folder of wheels in the build context; when it holds any, pip installs from it alone (no index).
ARG WHEELHOUSE=docker/wheelhouse
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/echo
COPY ${WHEELHOUSE}/ /wheels/
COPY pyproject.toml README.md ./
COPY services/echo/__init__.py services/echo/__init__.py
COPY operator/echo_operator/__init__.py operator/echo_operator/__init__.py
RUN if ls /wheels/*.whl >/dev/null 2>&1; then export PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheels; fi \
    && /opt/echo/bin/pip install --no-cache-dir ".[operator]"
COPY services/echo services/echo
COPY operator/echo_operator operator/echo_operator
RUN if ls /wheels/*.whl >/dev/null 2>&1; then export PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheels; fi \
    && /opt/echo/bin/pip install --no-cache-dir --no-deps --force-reinstall . \
    && /opt/echo/bin/echoctl operator --help >/dev/null

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="echo-operator" \
      org.opencontainers.image.description="ECHO operator: reconciles EchoDeployment resources (kopf)" \
      org.opencontainers.image.source="https://github.com/echo-k8s/echo" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 echo \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin echo
COPY --from=build /opt/echo /opt/echo
ENV PATH=/opt/echo/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    ECHO_LOG_FORMAT=json
USER 10001:10001
EXPOSE 8080 9090
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]
ENTRYPOINT ["echoctl"]
CMD ["operator", "--all-namespaces", "--liveness=http://0.0.0.0:8080/healthz", "--metrics-port=9090"]
