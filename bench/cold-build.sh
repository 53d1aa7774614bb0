#!/usr/bin/env bash
# A cold release build of one commit, as a new user pays it (bench/RESULTS.md
# "Cold release build"): the commit's tree exported to a fresh directory,
# `cargo build --release --locked --bins --timings` (or TARGETS) into a fresh target
# directory, timed by /usr/bin/time -v, the load sampled every 15 s (on a
# shared machine, CPU seconds are the comparable figure, not wall time),
# then the slowest build units from cargo's timing report.
#
#   bench/cold-build.sh LABEL COMMIT [TARGETS...]   # e.g. bench/cold-build.sh before 3510010
#
# TARGETS are cargo's target selection, `--bins` unless given (`--bin weft`
# is what the README's first command, `cargo run --release --bin weft`,
# compiles).
#
# Writes /tmp/cold/LABEL/ (time.txt, load.txt, build.log, cargo-timings/) and
# leaves the target directory in /tmp/cold/target-LABEL (delete it after: GBs).
# Crates already in ~/.cargo/registry are not downloaded again.
set -euo pipefail
label=$1
commit=$2
shift 2
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(--bins)
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
src=/tmp/cold/src-$label
dir=/tmp/cold/target-$label
out=/tmp/cold/$label
rm -rf "$dir" "$src" "$out"
mkdir -p "$out" "$src"
git -C "$repo" archive "$commit" | tar -x -C "$src"
cd "$src"
(while sleep 15; do echo "$(date +%s) $(cut -d' ' -f1-3 /proc/loadavg)"; done) >"$out/load.txt" &
sampler=$!
trap 'kill $sampler 2>/dev/null || true' EXIT
rc=0
CARGO_TARGET_DIR=$dir /usr/bin/time -v -o "$out/time.txt" \
    cargo build --release --locked "${targets[@]}" --timings >"$out/build.log" 2>&1 || rc=$?
cp -r "$dir/cargo-timings" "$out/" 2>/dev/null || true
rm -rf "$src"
grep -E "User time|System time|Elapsed|Maximum resident" "$out/time.txt"
awk '{s += $2; n++} END {if (n) printf "mean load (1 min) during the build: %.1f\n", s / n}' "$out/load.txt"
du -sh "$dir"
python3 "$repo/bench/cold-units.py" "$out"
exit $rc
