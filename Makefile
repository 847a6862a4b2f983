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

.PHONY: controlplane run test validity-full lint generate check-generated bench compiled e2e clean venv upstream-snapshot

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

## The whole test suite (unit + integration, the real control plane built first when missing;
# e2e needs kind and is skipped). Bytecode is written
# even where PYTHONDONTWRITEBYTECODE is set: pytest then rewrites each test module's asserts once,
# not in every worker on every run, and the agents, workers and operators the tests start import
# this project compiled. Three workers on two cores: many tests wait on real clocks (a served
# twin, Prometheus, rollouts), and the third worker runs while they wait.
test: $(STAMP) controlplane
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n 3 -q $(ARGS)

## The real Kubernetes control plane of tests/integration/kube (kube-apiserver, etcd,
# kube-controller-manager, kube-scheduler, KWOK and Helm from the Go modules pinned in
# deploy/controlplane/): built once per machine and pin into ~/.cache/itbench/controlplane/
# (ITBENCH_CONTROLPLANE_CACHE), about 550 MB, with Go's own caches beside it (docs/testing.md).
controlplane: $(STAMP)
	@$(BIN)/python tests/kube_controlplane.py build

## The validity checks over the whole catalog, beside `make test`'s representative samples: every
# cheap strategy held to its ceilings on every scenario of both splits, and the runner's oracle and
# null runs over every scenario (tens of minutes on two cores; the CI's validity job runs it).
validity-full: $(STAMP)
	ITBENCH_VALIDITY_FULL=1 ITBENCH_FULL_CATALOG=1 PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n 2 -q \
		tests/integration/test_validity_cli.py tests/integration/test_run.py $(ARGS)

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

## The compiled build (itbench/compiled.py): the twin's hot modules compiled with mypyc into a
# copy of the packages; a run put on it with PYTHONPATH imports them first. Rebuilt only when a
# source changed. `make bench` runs on it, or on the sources (saying so) without a C compiler.
COMPILED ?= build/compiled
compiled: $(STAMP)
	$(BIN)/python -m itbench.compiled $(COMPILED)

bench: $(STAMP)
	@$(BIN)/python -m itbench.compiled $(COMPILED) || echo "make bench: no compiled build; benchmarking the sources" >&2
	PYTHONPATH=$(COMPILED):. $(BIN)/python -P -m benchmarks $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info

## A kind cluster, the pinned stack and the platform on it, end to end (.github/workflows/kind.yaml
## runs these in order; docs/install.md has the same on any cluster). Each target runs locally up
## to the step that needs a cluster: tests/integration/test_make_targets.py runs them so.
KIND          ?= kind
KIND_CLUSTER  ?= itbench
KIND_IMAGE    ?=
IMAGE         ?= ghcr.io/itbench/itbench:dev
HOST_IMAGE    ?= ghcr.io/itbench/rhel9-host:9.6
SUDO          ?= sudo

.PHONY: kind-host kind-up kind-load kind-install kind-down stack-collection stack-vars stack-up \
	stack-down e2e-artefacts

## The host's inotify limits and Chaos Mesh's kernel modules (kind's nodes share its kernel).
kind-host:
	$(SUDO) deploy/kind/host.sh apply

## 1 control plane + 2 workers; fails first, saying what to fix, on a host without the settings.
kind-up:
	deploy/kind/host.sh check
	$(KIND) create cluster --name $(KIND_CLUSTER) --config deploy/kind/cluster.yaml \
	  $(if $(KIND_IMAGE),--image $(KIND_IMAGE)) --wait 5m

## The platform's image, and the UBI 9 image of the RHEL9 class's evidence Pods.
kind-load:
	docker build -t $(IMAGE) .
	$(KIND) load docker-image --name $(KIND_CLUSTER) $(IMAGE)
	docker build -t $(HOST_IMAGE) deploy/rhel9-host
	$(KIND) load docker-image --name $(KIND_CLUSTER) $(HOST_IMAGE)

kind-install:
	helm upgrade --install itbench charts/itbench --namespace itbench-system --create-namespace \
	  --set image.repository=$(firstword $(subst :, ,$(IMAGE))) --set image.tag=dev --set image.pullPolicy=Never \
	  --set ownCluster.cisoEvaluator.hostImage=$(HOST_IMAGE) \
	  --wait --timeout 5m

kind-down:
	$(KIND) delete cluster --name $(KIND_CLUSTER)

# The stack playbooks run against the current context of this kubeconfig, with the
# kubernetes.core collection at its pinned version (installed into COLLECTIONS_DIR when missing).
KUBECONFIG_FILE    ?= $(firstword $(subst :, ,$(or $(KUBECONFIG),$(HOME)/.kube/config)))
COLLECTIONS_DIR    ?= $(HOME)/.ansible/collections
COLLECTION_VERSION := $(shell sed -n 's/^ *collectionVersion: *//p' itbench/stack/pins.yaml)
STACK_VARS         ?= build/stack-vars.json
ANSIBLE_FLAGS      ?=
ANSIBLE_ENV         = ANSIBLE_COLLECTIONS_PATH=$(COLLECTIONS_DIR) PATH="$(CURDIR)/$(BIN):$$PATH"

stack-collection: $(STAMP)
	$(BIN)/ansible-galaxy collection install "kubernetes.core:==$(COLLECTION_VERSION)" -p $(COLLECTIONS_DIR)

stack-vars: $(STAMP)
	@mkdir -p $(dir $(STACK_VARS))
	$(BIN)/python deploy/stack/vars.py --kubeconfig $(KUBECONFIG_FILE) --output $(STACK_VARS)

## The pinned stack (itbench/stack/pins.yaml): shop, observability, Chaos Mesh, OpenCost.
stack-up: stack-collection stack-vars
	$(ANSIBLE_ENV) $(BIN)/ansible-playbook itbench/environments/kube/playbooks/stack/install.yaml \
	  -e @$(STACK_VARS) $(ANSIBLE_FLAGS)

stack-down: stack-collection stack-vars
	$(ANSIBLE_ENV) $(BIN)/ansible-playbook deploy/stack/uninstall.yaml -e @$(STACK_VARS) $(ANSIBLE_FLAGS)

## The e2e tests (tests/e2e) against the current context: the chart installed, the stack up.
E2E_ARTEFACTS ?= build/e2e
e2e: $(STAMP)
	@mkdir -p $(E2E_ARTEFACTS)
	ITBENCH_E2E_ARTEFACTS=$(CURDIR)/$(E2E_ARTEFACTS) $(BIN)/python -m pytest -m e2e -q tests/e2e $(ARGS)

## What a failed or finished e2e run leaves to read: objects, logs, reports, resource use.
e2e-artefacts:
	@mkdir -p $(E2E_ARTEFACTS)
	-kubectl get nodes -o wide > $(E2E_ARTEFACTS)/nodes.txt 2>&1
	-kubectl get benchmarkruns,trials,scenarios,agentsubmissions -A -o yaml > $(E2E_ARTEFACTS)/itbench-objects.yaml 2>&1
	-kubectl get pods -A -o wide > $(E2E_ARTEFACTS)/pods.txt 2>&1
	-kubectl get events -A --sort-by=.lastTimestamp > $(E2E_ARTEFACTS)/events.txt 2>&1
	-kubectl -n itbench-system logs deploy/itbench --tail=-1 > $(E2E_ARTEFACTS)/operator.log 2>&1
	-kubectl top nodes > $(E2E_ARTEFACTS)/top-nodes.txt 2>&1
	-kubectl top pods -A --sort-by=memory > $(E2E_ARTEFACTS)/top-pods.txt 2>&1
	-kubectl describe nodes > $(E2E_ARTEFACTS)/nodes-described.txt 2>&1
	-kubectl get pods -A -o custom-columns='NAMESPACE:.metadata.namespace,POD:.metadata.name,CPU_REQUESTS:.spec.containers[*].resources.requests.cpu,MEMORY_REQUESTS:.spec.containers[*].resources.requests.memory,MEMORY_LIMITS:.spec.containers[*].resources.limits.memory' > $(E2E_ARTEFACTS)/requests.txt 2>&1
