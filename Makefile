# The documented way to do things. `make run` and `make test` bootstrap a local virtual
# environment (.venv) on first use, so a machine needs only Python 3.11 and make. It holds the
# development tools and the `agents` extra (CrewAI, LiteLLM), which the CrewAI baselines' tests
# need (EXTRAS=dev leaves the extra out; those tests are then skipped, saying so). Dependencies
# are compiled to bytecode at install: every agent, playbook module and test worker imports them
# afresh, and a process that may not write bytecode (PYTHONDONTWRITEBYTECODE) would otherwise
# compile the Kubernetes client's thousand modules on each import.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
ARGS   ?=
EXTRAS ?= dev,agents

.PHONY: run test test-all lint generate check-generated bench e2e clean venv upstream-snapshot

venv: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found; install Python 3.11 or pass PYTHON=..." >&2; exit 2; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip uv
	@$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[$(EXTRAS)]'
	@touch $(STAMP)

## The main job: benchmark the baseline agents over the catalog on the embedded simulator.
run: $(STAMP)
	$(BIN)/itbench run $(ARGS)

## The whole test suite (unit + integration; e2e needs kind and is skipped).
test: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check itbench tests agents benchmarks
	$(BIN)/ruff format --check itbench tests agents benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

generate: $(STAMP)
	$(BIN)/itbench crds generate --output-dir crds --chart-dir charts/itbench/crds --schema-dir schemas
	$(BIN)/python -m itbench.gateway.openapi docs/openapi.json
	$(BIN)/itbench scenarios bundle --output charts/itbench/files/catalog.yaml

## Regenerate the upstream snapshot of the pinned stack (itbench/stack/upstream/) from the pinned
## upstream releases: with UPSTREAM_MIRROR (a directory of git mirrors), or by cloning from GitHub.
UPSTREAM_MIRROR ?=
upstream-snapshot: $(STAMP)
	$(BIN)/python -m itbench.stack.regenerate $(if $(UPSTREAM_MIRROR),--mirror $(UPSTREAM_MIRROR),--clone)

check-generated: generate
	git diff --exit-code -- crds charts/itbench/crds charts/itbench/files schemas docs/openapi.json

bench: $(STAMP)
	$(BIN)/python -m benchmarks $(ARGS)

## Needs a running kind cluster (see .github/workflows/kind.yaml).
e2e: $(STAMP)
	$(BIN)/python -m pytest -m e2e -q tests/e2e $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info

## kind targets (need docker, kind, helm; used by .github/workflows/kind.yaml)
KIND_CLUSTER ?= itbench
IMAGE        ?= ghcr.io/itbench/itbench:dev

.PHONY: kind-up kind-load kind-install kind-down
kind-up:
	kind create cluster --name $(KIND_CLUSTER) --config deploy/kind/cluster.yaml

kind-load:
	docker build -t $(IMAGE) .
	kind load docker-image --name $(KIND_CLUSTER) $(IMAGE)

kind-install:
	helm upgrade --install itbench charts/itbench --namespace itbench-system --create-namespace \
	  --set image.repository=$(firstword $(subst :, ,$(IMAGE))) --set image.tag=dev --set image.pullPolicy=Never \
	  --wait --timeout 5m

kind-down:
	kind delete cluster --name $(KIND_CLUSTER)
