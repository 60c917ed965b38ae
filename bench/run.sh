#!/usr/bin/env bash
# `make bench` (and `make bench-smoke` with --smoke): build llmbench in release mode, install the peer harnesses
# from PyPI into cached venvs, build vLLM's Rust vllm-bench from shared/peers into the cache, build the offline
# tokenizer, then hand over to bench.py, which runs the scenarios. The smoke run skips every peer.
#
#   bench/run.sh [--smoke] [bench.py options, e.g. --only ceiling,timing --clients llmbench,aiperf,vllm-bench]
#
# Caches live in ~/.cache/llmbench-bench (LLMBENCH_BENCH_CACHE): one venv per tool and version, vllm-bench's source
# and binary per upstream commit, and the tokenizer.
# A peer that fails to install is recorded with the reason and shows up as such in the tables.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
cache=${LLMBENCH_BENCH_CACHE:-$HOME/.cache/llmbench-bench}
cargo=${CARGO:-cargo}
# Peer versions: the newest on PyPI when this was written (see bench/README.md to move them).
GUIDELLM_VERSION=${GUIDELLM_VERSION:-0.8.1}
INFERENCE_PERF_VERSION=${INFERENCE_PERF_VERSION:-0.7.0}
# vllm brings `vllm bench serve`; its wheel pulls CUDA torch (several GB), installed once like the others.
# 0.33.0 asks for a certifi (>= 2026.10.19) that the package registry here does not have yet.
VLLM_VERSION=${VLLM_VERSION:-0.32.0}
# NVIDIA's AIPerf (the successor of genai-perf).
AIPERF_VERSION=${AIPERF_VERSION:-0.13.0}
# vLLM's Rust benchmark client: third-party source kept beside the repo (shared/peers/vllm-bench, see its SOURCE.md),
# built only into the cache, never into the project.
VLLM_BENCH_SRC=${VLLM_BENCH_SRC:-$repo/../shared/peers/vllm-bench}
# MLCommons' endpoints load generator (`inference-endpoint`; not on PyPI): installed from its git source at this
# commit, with its PyPI dependencies. ENDPOINTS_GIT is a clone (a bare one will do) of github.com/mlcommons/endpoints
# holding that commit; by default the mirror the project's tools fetch into.
ENDPOINTS_REV=${ENDPOINTS_REV:-ea3327530376fef63d706f4105612e17c2c80a8d}
ENDPOINTS_GIT=${ENDPOINTS_GIT:-$repo/../.mirror/mlcommons+endpoints/repo}
TOKENIZER_REV=v1

smoke=0
[[ ${1:-} == --smoke ]] && smoke=1
# --clients a,b (passed on to bench.py) also limits which peers are installed.
wanted=""
args=("$@")
for i in "${!args[@]}"; do
    case ${args[$i]} in
        --clients) wanted=${args[$((i + 1))]:-} ;;
        --clients=*) wanted=${args[$i]#--clients=} ;;
    esac
done
want() { [[ -z $wanted || ,$wanted, == *,$1,* ]]; }

mkdir -p "$cache"
# BENCH_BUILD=debug reuses the test build (make test's smoke run); figures from it mean nothing.
build=${BENCH_BUILD:-release}
echo "== building llmbench ($build)" >&2
if [[ $build == debug ]]; then
    (cd "$repo" && $cargo build -q -p llmbench) || { echo "cargo build failed" >&2; exit 1; }
else
    (cd "$repo" && $cargo build --release -q -p llmbench) || { echo "cargo build failed" >&2; exit 1; }
fi
llmbench="${CARGO_TARGET_DIR:-$repo/target}/$build/llmbench"
# More sockets than streams: the scale scenario opens 10 000 connections on each side of loopback.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

if (( smoke )); then
    exec python3 "$here/bench.py" --llmbench "$llmbench" --tokenizer builtin "$@"
fi

# A Python >= 3.12 for inference-perf (and guidellm): the first that exists.
find_python() {
    local candidate
    for candidate in "${BENCH_PYTHON:-}" python3.13 python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3 \
                     "$HOME"/.pyenv/versions/3.13*/bin/python3 python3; do
        [[ -n $candidate ]] && command -v "$candidate" >/dev/null 2>&1 || continue
        if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
            command -v "$candidate"; return 0
        fi
    done
    return 1
}

# ensure_venv TOOL VERSION EXTRA_PIP_ARGS... -> prints the venv dir; leaves TOOL-VERSION.failed with the reason.
ensure_venv() {
    local tool=$1 version=$2; shift 2
    local dir="$cache/$tool-$version"
    if [[ -x $dir/bin/$tool ]]; then echo "$dir"; return 0; fi
    rm -rf "$dir" "$dir.tmp" "$dir.failed"
    # Installed sizes (vllm and guidellm pull CUDA torch); refuse rather than fill the disk, with a margin for the run.
    local need_gb free_gb
    case $tool in vllm) need_gb=9 ;; guidellm) need_gb=7 ;; *) need_gb=2 ;; esac
    free_gb=$(df -Pk "$cache" | awk 'NR == 2 { print int($4 / 1048576) }')
    if (( free_gb < need_gb + ${BENCH_DISK_MARGIN_GB:-3} )); then
        echo "not installed: needs about $need_gb GB, $free_gb GB free in $cache (margin ${BENCH_DISK_MARGIN_GB:-3} GB)" \
            > "$dir.failed"
        return 1
    fi
    local python
    if ! python=$(find_python); then
        echo "no Python >= 3.12 found (set BENCH_PYTHON)" > "$dir.failed"; return 1
    fi
    echo "== installing $tool $version from PyPI into $dir (once)" >&2
    if "$python" -m venv "$dir.tmp" >"$cache/$tool-$version.log" 2>&1 &&
       "$dir.tmp/bin/pip" install --disable-pip-version-check --no-cache-dir -q "$@" "$tool==$version" \
           >>"$cache/$tool-$version.log" 2>&1 &&
       [[ -x $dir.tmp/bin/$tool ]]; then
        # venvs are not relocatable: the scripts name the .tmp path, so rebuild the names by moving and fixing.
        mv "$dir.tmp" "$dir"
        grep -rlI --null "$dir.tmp" "$dir/bin" | xargs -0 -r sed -i "s#$dir.tmp#$dir#g"
        echo "$dir"
    else
        echo "pip install failed: $(tail -n 1 "$cache/$tool-$version.log")" > "$dir.failed"
        rm -rf "$dir.tmp"
        return 1
    fi
}

# vllm_bench_rev -> the upstream vLLM commit SOURCE.md names (the cache key), or nothing.
vllm_bench_rev() {
    sed -n 's/.*Upstream state:[^`]*`\([0-9a-f]\{40\}\)`.*/\1/p' "$VLLM_BENCH_SRC/SOURCE.md" 2>/dev/null | head -n 1
}

# ensure_vllm_bench REV -> prints the vllm-bench binary; leaves vllm-bench-REV.failed with the reason. The source is
# copied into the cache once (vllm-bench-src-REV) and built there with its own target dir (vllm-bench-target-REV),
# with its own Cargo.lock; nothing of it enters the project's workspace or target/.
ensure_vllm_bench() {
    local rev=$1 short=${1:0:12}
    local src="$cache/vllm-bench-src-$short" target="$cache/vllm-bench-target-$short"
    local bin="$target/release/vllm-bench" log="$cache/vllm-bench-$short.log" failed="$cache/vllm-bench-$short.failed"
    if [[ -x $bin ]]; then echo "$bin"; return 0; fi
    rm -f "$failed"
    if [[ ! -f $src/Cargo.toml ]]; then
        rm -rf "$src" "$src.tmp"
        mkdir -p "$src.tmp" &&
            tar -C "$VLLM_BENCH_SRC" --exclude=./target -cf - . | tar -C "$src.tmp" -xf - &&
            mv "$src.tmp" "$src" || { echo "copying $VLLM_BENCH_SRC failed" > "$failed"; return 1; }
    fi
    echo "== building vllm-bench ${short} into $target (once)" >&2
    local started=$SECONDS
    if (cd "$src" && CARGO_TARGET_DIR="$target" $cargo build --release --locked -p vllm-bench) >"$log" 2>&1 &&
       [[ -x $bin ]]; then
        echo "== vllm-bench built in $((SECONDS - started)) s" >&2
        # Keep the binary, drop the intermediate artefacts (≈ 0.5 GB).
        rm -rf "$target/release/deps" "$target/release/build" "$target/release/.fingerprint" \
            "$target/release/incremental" "$target/release/examples"
        echo "$bin"
    else
        echo "cargo build failed: $(grep -m 1 '^error' "$log" || tail -n 1 "$log")" > "$failed"
        return 1
    fi
}

# ensure_endpoints REV -> prints the endpoints venv; leaves endpoints-REV.failed with the reason. The commit's tree
# is copied out of ENDPOINTS_GIT (`git archive`), pip-installed with its pinned PyPI dependencies (≈ 0.7 GB,
# transformers without torch) into endpoints-REV/, and the copied tree removed.
ensure_endpoints() {
    local rev=$1 short=${1:0:12}
    local dir="$cache/endpoints-$short" log="$cache/endpoints-$short.log" failed="$cache/endpoints-$short.failed"
    if [[ -x $dir/bin/inference-endpoint ]]; then echo "$dir"; return 0; fi
    rm -rf "$dir" "$dir.tmp" "$dir.src" "$failed"
    local free_gb
    free_gb=$(df -Pk "$cache" | awk 'NR == 2 { print int($4 / 1048576) }')
    if (( free_gb < 2 + ${BENCH_DISK_MARGIN_GB:-3} )); then
        echo "not installed: needs about 2 GB, $free_gb GB free in $cache (margin ${BENCH_DISK_MARGIN_GB:-3} GB)" \
            > "$failed"
        return 1
    fi
    if ! git --git-dir="$ENDPOINTS_GIT" cat-file -e "$rev^{commit}" 2>/dev/null; then
        echo "no source: commit $short not in ENDPOINTS_GIT=$ENDPOINTS_GIT (a clone of github.com/mlcommons/endpoints)" \
            > "$failed"
        return 1
    fi
    local python
    if ! python=$(find_python); then
        echo "no Python >= 3.12 found (set BENCH_PYTHON)" > "$failed"; return 1
    fi
    echo "== installing MLCommons endpoints $short from its source into $dir (once)" >&2
    mkdir -p "$dir.src"
    if git --git-dir="$ENDPOINTS_GIT" archive "$rev" | tar -x -C "$dir.src" &&
       "$python" -m venv "$dir.tmp" >"$log" 2>&1 &&
       "$dir.tmp/bin/pip" install --disable-pip-version-check --no-cache-dir -q "$dir.src" >>"$log" 2>&1 &&
       [[ -x $dir.tmp/bin/inference-endpoint ]]; then
        mv "$dir.tmp" "$dir"
        grep -rlI --null "$dir.tmp" "$dir/bin" | xargs -0 -r sed -i "s#$dir.tmp#$dir#g"
        rm -rf "$dir.src"
        echo "$dir"
    else
        echo "pip install failed: $(tail -n 1 "$log")" > "$failed"
        rm -rf "$dir.tmp" "$dir.src"
        return 1
    fi
}

# guidellm pulls torch: take the CPU-only wheel when its index answers, else whatever PyPI has.
torch_index=()
if curl -fsS -m 5 -o /dev/null https://download.pytorch.org/whl/cpu/ 2>/dev/null; then
    torch_index=(--extra-index-url https://download.pytorch.org/whl/cpu)
fi

peers="$cache/peers.json"
{
    echo "{"
    sep=""
    for spec in "inference-perf:$INFERENCE_PERF_VERSION" "guidellm:$GUIDELLM_VERSION" "vllm:$VLLM_VERSION" \
                "aiperf:$AIPERF_VERSION"; do
        tool=${spec%%:*} version=${spec#*:}
        want "$tool" || continue
        extra=()
        [[ $tool == guidellm ]] && extra=("${torch_index[@]}")
        if dir=$(ensure_venv "$tool" "$version" "${extra[@]}"); then
            printf '%s "%s": {"version": "%s", "bin": "%s"}' "$sep" "$tool" "$version" "$dir/bin/$tool"
        else
            reason=$(tr '"\\' "'/" < "$cache/$tool-$version.failed")
            printf '%s "%s": {"version": "%s", "error": "%s"}' "$sep" "$tool" "$version" "$reason"
        fi
        sep=","
    done
    if want vllm-bench; then
        rev=$(vllm_bench_rev)
        if [[ -z $rev ]]; then
            printf '%s "vllm-bench": {"version": "?", "error": "no source at %s (see its SOURCE.md)"}' "$sep" \
                "$VLLM_BENCH_SRC"
        elif bin=$(ensure_vllm_bench "$rev"); then
            printf '%s "vllm-bench": {"version": "%s", "bin": "%s"}' "$sep" "${rev:0:12}" "$bin"
        else
            reason=$(tr '"\\' "'/" < "$cache/vllm-bench-${rev:0:12}.failed")
            printf '%s "vllm-bench": {"version": "%s", "error": "%s"}' "$sep" "${rev:0:12}" "$reason"
        fi
        sep=","
    fi
    if want endpoints; then
        short=${ENDPOINTS_REV:0:12}
        if dir=$(ensure_endpoints "$ENDPOINTS_REV"); then
            printf '%s "endpoints": {"version": "%s", "bin": "%s"}' "$sep" "$short" "$dir/bin/inference-endpoint"
        else
            reason=$(tr '"\\' "'/" < "$cache/endpoints-$short.failed")
            printf '%s "endpoints": {"version": "%s", "error": "%s"}' "$sep" "$short" "$reason"
        fi
        sep=","
    fi
    echo "}"
} > "$peers"

# The tokenizer every client loads offline; built with the `tokenizers` package of a peer venv.
tokenizer="$cache/tokenizer-$TOKENIZER_REV"
if [[ ! -f $tokenizer/tokenizer_config.json ]]; then
    builder=""
    for venv in "$cache/inference-perf-$INFERENCE_PERF_VERSION" "$cache/guidellm-$GUIDELLM_VERSION" \
                "$cache/aiperf-$AIPERF_VERSION" "$cache/vllm-$VLLM_VERSION" "$cache/endpoints-${ENDPOINTS_REV:0:12}"; do
        [[ -x $venv/bin/python ]] && "$venv/bin/python" -c 'import tokenizers' 2>/dev/null && builder=$venv/bin/python && break
    done
    if [[ -z $builder ]]; then
        echo "no venv with the tokenizers package to build the tokenizer; run the smoke bench instead" >&2; exit 1
    fi
    "$builder" "$here/make_tokenizer.py" "$tokenizer.tmp" && rm -rf "$tokenizer" && mv "$tokenizer.tmp" "$tokenizer"
fi

exec python3 "$here/bench.py" --llmbench "$llmbench" --tokenizer "$tokenizer" --peers "$peers" "$@"
