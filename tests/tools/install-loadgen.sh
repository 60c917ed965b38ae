#!/usr/bin/env bash
# Install MLPerf LoadGen (the PyPI wheel `mlcommons-loadgen`, pinned in tests/tools/versions.env) into a venv at
# ~/.cache/llmbench-tools/loadgen-<version>/venv, the oracle of launcher/tests/mlperf_oracle.rs:
#
#   bash tests/tools/install-loadgen.sh
#   bash tests/tools/install-loadgen.sh --print-python   # the venv's python (installed or not), installing nothing
#
# A second run finds the venv and returns at once. The tests use it through LLMBENCH_LOADGEN_PYTHON.
#
# Environment: LLMBENCH_TOOLS_CACHE (default ~/.cache/llmbench-tools).
set -euo pipefail
shopt -s inherit_errexit

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

cache="${LLMBENCH_TOOLS_CACHE:-$HOME/.cache/llmbench-tools}"
prefix="$cache/loadgen-$LOADGEN_VERSION"
python="$prefix/venv/bin/python"

if [[ "${1:-}" == "--print-python" ]]; then
    echo "$python"
    exit 0
fi

# The venv is complete only once LoadGen imports at the pinned version; a half-made one is made again.
if "$python" -c "import mlperf_loadgen, importlib.metadata as m; \
assert m.version('mlcommons-loadgen') == '$LOADGEN_VERSION'" 2>/dev/null; then
    exit 0
fi
rm -rf "$prefix/venv"
mkdir -p "$prefix"
python3 -m venv "$prefix/venv"
"$prefix/venv/bin/pip" install --quiet --disable-pip-version-check "mlcommons-loadgen==$LOADGEN_VERSION"
"$python" -c "import mlperf_loadgen"
echo "LoadGen $LOADGEN_VERSION in $prefix/venv" >&2
