#!/bin/bash
# Trains weft's query adapter from nothing but the allow-listed packages, in
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
#                             and DEST/weft-query-2.f32 (I + D/2, `auto`'s choice)
#
# Then copy DEST/weft-query-*.f32 to crates/adapters/embed-local/learned/ and
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

step "1/7 fetch";   "$HERE/fetch-sources.sh" "$DEST"
step "2/7 derive";  WEFT="$BIN/weft" "$HERE/derive.sh" "$DEST"
step "3/7 sample";  python3 "$HERE/sample.py" "$DEST" --max-bytes 200000
step "4/7 mask";    python3 "$HERE/mask_headings.py" "$DEST"
step "5/7 index";   "$BIN/weft" index --config "$DEST/sample/weft.toml" --data-dir "$INDEX" \
                      --project weft-train-hard "$DEST/sample/tree"
step "6/7 candidates"; "$BIN/train-candidates" "$DEST/sample/queries.jsonl" --data-dir "$INDEX" --out "$DEST/cands"
step "7/7 train";   "$DEST/venv/bin/python" "$HERE/train_query_adapter.py" "$DEST/cands" --final \
                      --out "$DEST/weft-query-1.f32" --shrunk-out "$DEST/weft-query-2.f32" --shrink 0.5
for n in 1 2; do
  sha256sum "$DEST/weft-query-$n.f32" "$REPO/crates/adapters/embed-local/learned/weft-query-$n.f32"
done
