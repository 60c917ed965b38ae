# syntax=docker/dockerfile:1
# One image, two binaries: `llmbench-operator` (the controller) and `llmbench` (the launcher the operator starts
# in every launcher pod, by default this very image at this very version).
#
#   docker build -t ghcr.io/llmbench/llmbench:0.1.0 .
#
# Without a container engine or a registry, `make image` assembles the same image (same user, entrypoint, command,
# paths and environment; tests/tests/image.rs compares the two) from the release binaries and Debian's packages.
#
# The builder is the toolchain the workspace is built and tested with (1.95); the dependencies in Cargo.lock need
# 1.89 at least (kube 5, serde-saphyr 2.1, uuid 1.29), which is the workspace's rust-version. Bookworm, so the
# binaries link against the same glibc (2.36) as the distroless cc-debian12 runtime below.
FROM docker.io/library/rust:1.95-bookworm AS builder
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p llmbench -p llmbench-operator \
    && mkdir -p /out \
    && cp target/release/llmbench target/release/llmbench-operator /out/

# The distroless debug variant adds busybox (/busybox), so a `launcher.debug` pod can `sleep` and be exec'd into;
# the image still runs as the nonroot user (65532) that the launcher pods and the chart require.
FROM gcr.io/distroless/cc-debian12:debug-nonroot
COPY --from=builder /out/llmbench /out/llmbench-operator /usr/local/bin/
USER 65532:65532
ENTRYPOINT []
CMD ["llmbench-operator", "run"]
