#!/usr/bin/env bash
# Install, from Debian's packages and only when missing, what the real node of the end-to-end tests
# (tests/src/node.rs) and the offline image build (image/build.sh) need: containerd, runc, the CNI plugins,
# iptables (kube-proxy and the bridge plugin's masquerading) and umoci; and Chromium, the headless browser of the
# dashboard's test (tests/tests/dashboard_browser.rs). Needs root, as the node itself does.
set -euo pipefail

# program-or-file:package
wanted=(
    containerd:containerd
    runc:runc
    ctr:containerd
    /usr/lib/cni/bridge:containernetworking-plugins
    iptables:iptables
    umoci:umoci
    nsenter:util-linux
    chromium:chromium
)

missing=()
for pair in "${wanted[@]}"; do
    what="${pair%%:*}" package="${pair##*:}"
    if [[ "$what" == /* ]]; then
        [[ -e "$what" ]] && continue
    else
        command -v "$what" >/dev/null && continue
    fi
    [[ " ${missing[*]} " == *" $package "* ]] || missing+=("$package")
done

if ((${#missing[@]} == 0)); then
    echo "node packages: all present"
    exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
    echo "node packages missing (${missing[*]}); install them as root: apt-get install ${missing[*]}" >&2
    exit 1
fi
echo "installing ${missing[*]} from Debian's packages ..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 \
    || { apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; }
echo "node packages: installed ${missing[*]}"
