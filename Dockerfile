# syntax=docker/dockerfile:1
# weft: one image with every binary (weft, weft-crawler, weft-chunker,
# weft-embedder, weft-query), run as a non-root user.
#
#   docker build -t weft:dev .
#
# The build stage runs the command CI runs (`cargo build --release --locked
# --bins`); the runtime stage adds git (the crawler clones repositories) and
# the CA certificates (HTTPS sources, embedding APIs, stores). The apt pins
# are Debian bookworm's current versions: when a security update replaces
# one, `apt-cache policy git ca-certificates` in a bookworm container gives
# the new version (deploy/README.md).

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# The registry and target caches speed up rebuilds (BuildKit); the binaries
# are copied out of the cached target directory.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bins \
 && mkdir /out \
 && cp target/release/weft target/release/weft-crawler target/release/weft-chunker \
       target/release/weft-embedder target/release/weft-query /out/

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates=20230311+deb12u1 \
      git=1:2.39.5-0+deb12u3 \
      openssh-client=1:9.2p1-2+deb12u10 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 weft \
 && useradd --system --uid 10001 --gid weft --home-dir /var/lib/weft --no-create-home weft
COPY --from=build /out/ /usr/local/bin/
# Writable places are volumes in Kubernetes (the root filesystem is read-only
# there): the data directory (git checkouts of the crawler) and /tmp.
ENV WEFT_DATA_DIR=/var/lib/weft \
    HOME=/tmp
WORKDIR /etc/weft
USER 10001:10001
EXPOSE 50051 9090
CMD ["weft", "--help"]
