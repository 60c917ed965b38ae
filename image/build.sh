#!/usr/bin/env bash
# Build llmbench's container image without a container engine and without pulling a base image: the same image the
# Dockerfile describes, assembled with umoci into an OCI archive from the release binaries and a base made of
# Debian's packages (what distroless cc-debian12:debug-nonroot is made of: glibc, libgcc, CA certificates, netbase
# and a busybox under /busybox). The Dockerfile is for users with a registry; this is for CI and air-gapped nodes.
#
#   bash image/build.sh                    # target/image/llmbench-<version>.oci.tar (+ the OCI layout beside it)
#   IMAGE_PROFILE=debug bash image/build.sh   # the debug binaries (what `make test` loads into its node: no release build)
#   bash image/build.sh --pause            # the pod sandbox image for the e2e node, cached in ~/.cache/llmbench-tools
#
# Import:  ctr -n k8s.io images import --base-name ghcr.io/llmbench/llmbench target/image/llmbench-<version>.oci.tar
#          podman load -i target/image/llmbench-<version>.oci.tar   (or skopeo copy oci-archive:... docker://...)
#
# tests/tests/image.rs compares what this script produces with the Dockerfile's final stage (user, entrypoint,
# command, paths, environment), so the two definitions cannot drift. Needs: umoci, dpkg-deb, apt-get (Debian's
# packages: `apt-get install umoci`); the packages of the base are downloaded once into the tools cache.
set -euo pipefail
shopt -s inherit_errexit

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${LLMBENCH_TOOLS_CACHE:-$HOME/.cache/llmbench-tools}"

# --- What the Dockerfile's final stage says; tests/tests/image.rs checks these against it. ---------------------------
IMAGE_REPOSITORY=ghcr.io/llmbench/llmbench
IMAGE_USER=65532:65532
IMAGE_HOME=/home/nonroot
IMAGE_BIN_DIR=/usr/local/bin
IMAGE_CMD=(llmbench-operator run)
IMAGE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/busybox
IMAGE_SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
# The Debian packages of the base (the binaries need glibc and libgcc_s; `ldd target/release/llmbench`).
BASE_PACKAGES=(libc6 libgcc-s1 ca-certificates netbase busybox-static)

# Imported as llmbench.local/pause:3.10 (tests/src/node.rs: PAUSE_IMAGE).
PAUSE_TAG=3.10

need() { command -v "$1" >/dev/null || { echo "$1 is not installed: $2" >&2; exit 1; }; }

# Download the base's .deb files once into the cache (named by package and version, so a new version is a new file).
fetch_debs() {
    local dir="$cache/image-base/debs"
    mkdir -p "$dir"
    local pkg version file
    for pkg in "${BASE_PACKAGES[@]}"; do
        version="$(apt-cache policy "$pkg" | sed -n 's/^ *Candidate: //p')"
        if [[ -z "$version" || "$version" == "(none)" ]]; then
            apt-get update -qq >&2
            version="$(apt-cache policy "$pkg" | sed -n 's/^ *Candidate: //p')"
        fi
        [[ -n "$version" && "$version" != "(none)" ]] || { echo "no Debian package $pkg" >&2; exit 1; }
        # apt names the file itself (the architecture may be `all`).
        file="$(compgen -G "$dir/${pkg}_${version//:/%3a}_*.deb" | head -1 || true)"
        if [[ -z "$file" ]]; then
            (cd "$dir" && apt-get download -qq -o APT::Sandbox::User=root "$pkg=$version" >&2)
            file="$(compgen -G "$dir/${pkg}_${version//:/%3a}_*.deb" | head -1)"
        fi
        echo "$file"
    done
}

# An OCI layout $1 holding one image tagged $2 whose single layer is the directory $3, configured by the rest
# (umoci config flags). The repository name is given at import (`ctr images import --base-name`, `podman load`).
# Root only: umoci keeps the ownership of what it unpacks.
assemble() {
    local layout="$1" tag="$2" rootfs="$3"
    shift 3
    rm -rf "$layout"
    local bundle
    bundle="$(mktemp -d)"
    umoci init --layout "$layout"
    umoci new --image "$layout:$tag"
    umoci unpack --image "$layout:$tag" "$bundle/b" >/dev/null
    cp -a "$rootfs/." "$bundle/b/rootfs/"
    umoci repack --image "$layout:$tag" --history.created_by "llmbench image/build.sh" "$bundle/b"
    umoci config --image "$layout:$tag" --os linux --architecture amd64 "$@"
    umoci gc --layout "$layout"
    rm -rf "$bundle"
}

build_pause() {
    local dir="$cache/pause-$PAUSE_TAG"
    local archive="$dir/pause.oci.tar"
    if [[ -s "$archive" && "$archive" -nt "$root/image/pause.c" ]]; then
        echo "$archive"
        return
    fi
    need gcc "the pause binary is C"
    need umoci "apt-get install umoci"
    mkdir -p "$dir"
    local rootfs
    rootfs="$(mktemp -d)"
    gcc -Os -static -s -o "$rootfs/pause" "$root/image/pause.c"
    assemble "$dir/oci" "$PAUSE_TAG" "$rootfs" \
        --config.user 65535:65535 --config.entrypoint /pause
    rm -rf "$rootfs"
    tar -C "$dir/oci" -cf "$archive.partial" .
    mv "$archive.partial" "$archive"
    echo "$archive"
}

build_image() {
    need umoci "apt-get install umoci"
    need dpkg-deb "it unpacks the base's Debian packages"
    local profile="${IMAGE_PROFILE:-release}" out="${IMAGE_OUT:-$root/target/image}"
    local version
    version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)"
    [[ -n "$version" ]] || { echo "no workspace version in Cargo.toml" >&2; exit 1; }

    local flags=(--locked -p llmbench -p llmbench-operator)
    [[ "$profile" == release ]] && flags+=(--release)
    (cd "$root" && cargo build "${flags[@]}" >&2)
    # Where cargo put them: CARGO_TARGET_DIR when set (a shared target directory), else the workspace's.
    local bin="${CARGO_TARGET_DIR:-$root/target}/$profile"

    local rootfs
    rootfs="$(mktemp -d)"
    trap 'rm -rf "$rootfs"' RETURN
    local deb
    for deb in $(fetch_debs); do dpkg-deb -x "$deb" "$rootfs"; done
    # What distroless drops too: documentation (but the copyright files), manuals, locales.
    find "$rootfs/usr/share/doc" -type f ! -name copyright -delete 2>/dev/null || true
    rm -rf "$rootfs/usr/share/man" "$rootfs/usr/share/locale" "$rootfs/usr/share/lintian" "$rootfs/usr/share/info"

    # busybox under /busybox with one link per applet, as in the distroless debug images.
    mkdir -p "$rootfs/busybox"
    mv "$rootfs/bin/busybox" "$rootfs/busybox/busybox"
    local applet
    for applet in $("$rootfs/busybox/busybox" --list); do
        [[ "$applet" == busybox ]] || ln -sf busybox "$rootfs/busybox/$applet"
    done
    # The CA bundle update-ca-certificates would write (no maintainer scripts run in an unpacked base).
    mkdir -p "$rootfs/etc/ssl/certs"
    cat "$rootfs"/usr/share/ca-certificates/*/*.crt >"$rootfs$IMAGE_SSL_CERT_FILE"

    local uid="${IMAGE_USER%%:*}" gid="${IMAGE_USER##*:}"
    cat >"$rootfs/etc/passwd" <<EOF
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:$uid:$gid:nonroot:$IMAGE_HOME:/sbin/nologin
EOF
    cat >"$rootfs/etc/group" <<EOF
root:x:0:
nobody:x:65534:
nonroot:x:$gid:
EOF
    mkdir -p "$rootfs$IMAGE_HOME" "$rootfs/tmp" "$rootfs/root" "$rootfs$IMAGE_BIN_DIR"
    chown "$uid:$gid" "$rootfs$IMAGE_HOME"
    chmod 0700 "$rootfs/root"
    chmod 1777 "$rootfs/tmp"
    install -m 0755 "$bin/llmbench" "$bin/llmbench-operator" "$rootfs$IMAGE_BIN_DIR/"

    mkdir -p "$out"
    local cmd_flags=() c
    for c in "${IMAGE_CMD[@]}"; do cmd_flags+=(--config.cmd "$c"); done
    assemble "$out/oci" "$version" "$rootfs" \
        --config.user "$IMAGE_USER" \
        --config.workingdir "$IMAGE_HOME" \
        --config.env "PATH=$IMAGE_PATH" \
        --config.env "SSL_CERT_FILE=$IMAGE_SSL_CERT_FILE" \
        --clear=config.entrypoint \
        "${cmd_flags[@]}" \
        --config.label "org.opencontainers.image.source=https://github.com/llmbench/llmbench" \
        --config.label "org.opencontainers.image.version=$version" \
        --config.label "dev.llmbench.profile=$profile"
    local archive="$out/llmbench-$version.oci.tar"
    tar -C "$out/oci" -cf "$archive.partial" .
    mv "$archive.partial" "$archive"
    echo "$IMAGE_REPOSITORY:$version $archive ($profile binaries, $(du -h "$archive" | cut -f1))" >&2
    echo "$archive"
}

case "${1:-}" in
--pause) build_pause ;;
"") build_image ;;
-h | --help) sed -n '2,17p' "$0" ;;
*) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
esac
