#!/bin/bash
# Trains weft's query adapters from nothing but the allow-listed packages, in
# one command (issue 34; the steps and their figures: README.md here).
#
#   tools/train/train.sh [DEST]      (DEST defaults to ~/.cache/weft-train)
#
# 1. fetch-sources.sh   the allow-list through the package registries
# 2. derive.sh          (query, target) pairs, as `weft eval --derive` makes them
# 3. sample.py          at most 300 code and 300 prose queries per package (seed 34)
# 4. mask_headings.py   every heading of the sampled prose masked, not only the asked ones
# 5. weft index         the sample, hard copy, into INDEX (default DEST/index)
# 6. train-candidates   what weft retrieves for each query, with the stored vectors
# 7. train_query_adapter.py   the map, fixed seed: DEST/weft-query-1.f32 (I + D)
#                             and DEST/weft-query-2.f32 (I + D/2)
# 8. train_query_encoder.py   the query encoder, fixed seed, PyTorch on CPU in
#                             DEST/venv-torch: DEST/all-MiniLM-L6-v2.query-encoder.safetensors
#                             (what one epoch changed in MiniLM's top two
#                             layers, f16; weft-query-4, `auto`'s choice,
#                             takes 0.35 of it, weft-query-3 0.5)
#
# Then copy DEST/weft-query-* to crates/adapters/embed-local/learned/ and
# rebuild. Needs the binaries weft and train-candidates (cargo build
# --workspace --bins; BIN, default target/debug) and the model
# (tools/fetch-model.sh, run here). A rerun reuses what is fetched and indexed.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
DEST=${1:-$HOME/.cache/weft-train}
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
BIN=${BIN:-$REPO/target/debug}
INDEX=${INDEX:-$DEST/index}
step() { echo "[train] $(date +%T) $*" >&2; }

for b in weft train-candidates; do
  [ -x "$BIN/$b" ] || { echo "train.sh: $BIN/$b is missing: cargo build --workspace --bins" >&2; exit 2; }
done
MODEL=$("$REPO/tools/fetch-model.sh" | tail -n 1)
export WEFT_MODEL_DIR=$MODEL
if [ ! -x "$DEST/venv/bin/python" ]; then
  python3 -m venv "$DEST/venv"
  "$DEST/venv/bin/pip" install -q --disable-pip-version-check numpy==2.4.6
fi
if [ ! -x "$DEST/venv-torch/bin/python" ]; then
  # PyTorch from PyPI (its CUDA dependencies come along; it runs on the CPU).
  python3 -m venv "$DEST/venv-torch"
  "$DEST/venv-torch/bin/pip" install -q --disable-pip-version-check \
    torch==2.15.0 tokenizers==0.23.3 safetensors==0.8.0 numpy==2.4.6
fi

step "1/8 fetch";   "$HERE/fetch-sources.sh" "$DEST"
step "2/8 derive";  WEFT="$BIN/weft" "$HERE/derive.sh" "$DEST"
step "3/8 sample";  python3 "$HERE/sample.py" "$DEST" --max-bytes 200000
step "4/8 mask";    python3 "$HERE/mask_headings.py" "$DEST"
step "5/8 index";   "$BIN/weft" index --config "$DEST/sample/weft.toml" --data-dir "$INDEX" \
                      --project weft-train-hard "$DEST/sample/tree"
step "6/8 candidates"; "$BIN/train-candidates" "$DEST/sample/queries.jsonl" --data-dir "$INDEX" --out "$DEST/cands"
step "7/8 train";   "$DEST/venv/bin/python" "$HERE/train_query_adapter.py" "$DEST/cands" --final \
                      --out "$DEST/weft-query-1.f32" --shrunk-out "$DEST/weft-query-2.f32" --shrink 0.5
step "8/8 train the query encoder (~3-8 min)"
"$DEST/venv-torch/bin/python" "$HERE/train_query_encoder.py" "$DEST/cands" --model-dir "$MODEL" \
  --layers 2 --epochs 1 --lr 5e-5 --final --threads 2 \
  --out "$DEST/query-encoder-delta.safetensors" --ship-out "$DEST/all-MiniLM-L6-v2.query-encoder.safetensors"
for f in weft-query-1.f32 weft-query-2.f32 all-MiniLM-L6-v2.query-encoder.safetensors; do
  sha256sum "$DEST/$f" "$REPO/crates/adapters/embed-local/learned/$f"
done
