# One image, two binaries: `llmbench-operator` (the controller) and `llmbench` (the launcher the operator starts
# in every launcher pod, by default this very image at this very version).
#
# CI does not build this image (no container engine runs there); build it yourself:
#   docker build -t ghcr.io/llmbench/llmbench:0.1.0 .

FROM docker.io/library/rust:1.89-bookworm AS builder
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
