#!/usr/bin/env bash
# How close `weft index --dry-run` comes to the run that follows it
# (bench/RESULTS.md "weft index --dry-run against the real run"): in a fresh
# data directory, the first corpus is indexed to measure this machine's
# throughput; then for each further corpus, a dry run and the real run, and
# one line of chunks, tokens and seconds, estimated against measured.
#
#   bench/dry-run-accuracy.sh WEFT CALIBRATION_DIR DIR...
#   e.g. bench/dry-run-accuracy.sh target/release/weft \
#          ~/.cache/weft-eval/src/jsoup/src/main/java \
#          ~/.cache/weft-eval/src/commons-io/src/main/java \
#          ~/.cache/weft-eval/npm/pkgs/reduxjs-toolkit-2.14.0/src \
#          ~/.cache/weft-eval/masked/nodejs-18-api
#
# Needs the model (tools/fetch-model.sh) and python3. Writes only under a
# temporary directory, removed at the end.
set -euo pipefail
weft=$1
calibration=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export WEFT_DATA_DIR=$work/data
"$weft" index "$calibration" --json >"$work/calibration.json"
python3 - "$work/calibration.json" <<'EOF'
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
print(f"calibration: {run['project']}: {run['chunks_written'] - run['vectors_reused']} chunks, "
      f"{run['tokens_embedded']} tokens in {run['embedding_ms'] / 1000:.1f} s of embedding")
EOF
printf '%-28s %9s %9s %11s %11s %8s %8s %7s\n' corpus "chunks" "(run)" tokens "(run)" "est s" "run s" "time err"
for dir in "$@"; do
    "$weft" index "$dir" --dry-run --json >"$work/estimate.json"
    "$weft" index "$dir" --json >"$work/run.json"
    python3 - "$work/estimate.json" "$work/run.json" <<'EOF'
import json, sys
estimate = json.load(open(sys.argv[1]))["estimate"]
run = json.load(open(sys.argv[2]))["runs"][0]
chunks = run["chunks_written"] - run["vectors_reused"]
seconds = run["embedding_ms"] / 1000
error = 100 * (estimate["seconds"] - seconds) / seconds if seconds else float("nan")
print(f"{run['project'][:28]:<28} {estimate['chunks_to_embed']:>9} {chunks:>9} "
      f"{estimate['tokens_to_embed']:>11} {run['tokens_embedded']:>11} "
      f"{estimate['seconds']:>8.1f} {seconds:>8.1f} {error:>+6.1f}%")
EOF
done
