# llmbench — build, test and generate. `make test` is what CI runs (.ci/run).
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: all build release test unit lint fmt crds toolchain clean

all: build

build:
	$(CARGO) build --workspace --all-targets

release:
	$(CARGO) build --workspace --release

## test: everything CI checks — formatting, clippy, the generated CRDs, and every test, end-to-end ones included
## (the first run builds the control-plane tools into ~/.cache/llmbench-tools; later runs reuse them), then a smoke
## run of the benchmark driver on the debug build so `make bench` cannot rot.
test: lint e2e-tools
	$(CARGO) test --workspace --all-targets
	@BENCH_BUILD=debug bash bench/run.sh --smoke >target/bench-smoke.md 2>&1 \
		|| { cat target/bench-smoke.md; echo "bench smoke failed"; exit 1; }

unit:
	$(CARGO) test --workspace --lib

lint: toolchain
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

## crds: regenerate crds/*.yaml from the API types (a test fails while they are stale).
crds:
	$(CARGO) run -q -p llmbench-api --bin crdgen -- crds

# rustfmt and clippy ship as rustup components; a fresh toolchain may lack them.
toolchain:
	@command -v rustup >/dev/null && rustup component add rustfmt clippy >/dev/null 2>&1 || true

clean:
	$(CARGO) clean

.PHONY: bench bench-smoke

## bench: llmbench vs guidellm and inference-perf on the same `llmbench sim`, four scenarios, minutes long; writes
## bench/results/<date>-<host>.md (see bench/README.md). Peers are installed from PyPI into ~/.cache/llmbench-bench.
bench: ; bash bench/run.sh

## bench-smoke: the same driver, llmbench only, a few seconds per scenario (CI runs it so the bench cannot rot).
bench-smoke: ; bash bench/run.sh --smoke

.PHONY: e2e-tools e2e

## e2e-tools: build etcd, kube-apiserver, kubectl, helm and llm-d-inference-sim into ~/.cache/llmbench-tools (once).
e2e-tools: ; bash tests/tools/build-tools.sh

## e2e: the end-to-end tests against a real etcd + kube-apiserver (LLMBENCH_E2E=0 skips them).
e2e: e2e-tools ; $(CARGO) test -p llmbench-e2e
