#!/usr/bin/env bash
# What a branch overlay costs against a full index of the branch, and
# whether it ranks the same (bench/RESULTS.md, "Branches as overlays").
#
#   bench/branch-overlay.sh [CORPUS] [DEST]
#
# CORPUS: a shared eval corpus (default commons-io, its hard variant under
# ~/.cache/weft-eval, made by ../shared/eval/tools/prepare.sh). DEST
# (default /tmp/weft-branch-bench) is emptied first.
#
# 1. The corpus becomes a git repository; its default branch is indexed.
# 2. Branch `feature` edits 1% of the files (every 100th, sorted; every
#    fourth of those, from the second on, is deleted, the others get a few
#    lines appended) and
#    adds one. `weft index REPO --branch feature` indexes it as an overlay.
# 3. A checkout of `feature` is indexed whole into another data directory.
# 4. Time and chunks stored of 2 and 3 are printed, then branch-equality
#    runs the corpus's queries against both, vector-only and hybrid.
set -euo pipefail
corpus=${1:-commons-io}
dest=${2:-/tmp/weft-branch-bench}
root=$(cd "$(dirname "$0")/.." && pwd)
eval_dir=${WEFT_EVAL_DIR:-$HOME/.cache/weft-eval}
queries=$root/../shared/eval/queries/java.jsonl
grep -q "\"corpus\": \"$corpus\"" "$queries" || queries=$root/../shared/eval/queries/ts.jsonl
src=$eval_dir/nodoc/$corpus
[ -d "$src" ] || { echo "no corpus at $src: run ../shared/eval/tools/prepare.sh" >&2; exit 2; }
cargo build --quiet --workspace --bins
weft=$root/target/debug/weft
equality=$root/target/debug/branch-equality

rm -rf "$dest" && mkdir -p "$dest"
git init -q -b main "$dest/repo"
cp -r "$src/." "$dest/repo/"
git() { command git -C "$dest/repo" -c user.name=bench -c user.email=bench@example.invalid "$@"; }
git add -A && git commit -qm main
git checkout -qb feature
mapfile -t files < <(git ls-files | sort)
changed=0 deleted=0
for ((i = 0; i < ${#files[@]}; i += 100)); do
  f=${files[$i]}
  if (( (i / 100) % 4 == 1 )); then
    git rm -q "$f"; deleted=$((deleted + 1))
  else
    printf '\n// Changed on the branch: retries now back off exponentially,\n// with jitter, up to a configurable ceiling.\n' >> "$dest/repo/$f"
    changed=$((changed + 1))
  fi
done
printf '# Branch notes\n\nThis branch makes retries back off exponentially with jitter.\n' > "$dest/repo/BRANCH_NOTES.md"
git add -A && git commit -qm feature
git checkout -q main
echo "$corpus: ${#files[@]} files; the branch changes $changed, deletes $deleted, adds 1"

seconds() { local t0=$EPOCHREALTIME; "$@" > /dev/null; echo "$EPOCHREALTIME - $t0" | bc; }
stored() { WEFT_DATA_DIR=$1 "$weft" status --json | python3 -c "
import json, sys
for p in json.load(sys.stdin)['projects']:
    if p['name'] == sys.argv[1]: print(p['documents'], p['chunks'])" "$2"; }

export WEFT_DATA_DIR=$dest/overlay
t_main=$(seconds "$weft" index "file://$dest/repo" --project "$corpus")
du_before=$(du -sk "$dest/overlay/generations" | cut -f1)
t0=$EPOCHREALTIME
"$weft" index "file://$dest/repo" --project "$corpus" --branch feature --json > "$dest/overlay.json"
t_overlay=$(echo "$EPOCHREALTIME - $t0" | bc)
python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))['runs'][0]
g = json.load(open(sys.argv[1]))['generation']
print(f\"overlay run: {r['documents_seen']} documents read, {r['documents_indexed']} indexed, {r['chunks_written']} chunks written \"
      f\"({r['vectors_reused']} with stored vectors), {r['elapsed_ms']} ms in the run, {r['embedding_ms']} ms in the model \"
      f\"(its load included), {g['copied_bytes']} bytes of the live generation copied\")" "$dest/overlay.json"
du_after=$(du -sk "$dest/overlay/generations" | cut -f1)
command git clone -q -b feature "$dest/repo" "$dest/feature"
rm -rf "$dest/feature/.git"
export WEFT_DATA_DIR=$dest/full
t_full=$(seconds "$weft" index "$dest/feature" --project "$corpus-feature")

read -r main_docs main_chunks < <(stored "$dest/overlay" "$corpus")
read -r ov_docs ov_chunks < <(stored "$dest/overlay" "$corpus@feature")
read -r full_docs full_chunks < <(stored "$dest/full" "$corpus-feature")
python3 - "$t_main" "$t_overlay" "$t_full" "$ov_docs" "$ov_chunks" "$full_docs" "$full_chunks" "$main_chunks" "$du_before" "$du_after" <<'EOF'
import sys
t_main, t_ov, t_full = map(float, sys.argv[1:4])
ov_docs, ov_chunks, full_docs, full_chunks, main_chunks, du0, du1 = map(int, sys.argv[4:11])
print(f"index of main: {t_main:.1f} s, {main_chunks} chunks")
print(f"overlay of feature: {t_ov:.1f} s ({100 * t_ov / t_full:.1f}% of the full index's time), "
      f"{ov_docs} documents, {ov_chunks} chunks ({100 * ov_chunks / full_chunks:.2f}% of the full index's chunks)")
print(f"full index of feature: {t_full:.1f} s, {full_docs} documents, {full_chunks} chunks")
print(f"the data directory's generations on disk: {du0} KiB before the overlay, {du1} KiB after")
EOF
for mode in vector hybrid text; do
  "$equality" --overlay-dir "$dest/overlay" --overlay-project "$corpus@feature" \
    --full-dir "$dest/full" --full-project "$corpus-feature" \
    --queries "$queries" --corpus "$corpus" --mode "$mode"
done
