#!/bin/bash
# Derive (query, target) pairs from every package fetched by fetch-sources.sh.
#
#   derive.sh [DEST]        (DEST defaults to ~/.cache/weft-train)
#
# For each package in DEST/sources.tsv it chooses the trees to derive from (globs
# below, relative to DEST/src/<registry>/<name>-<version>/), writes them as a
# [sources] selection to DEST/derived/configs/<name>.toml and runs
#
#   weft eval --derive PKGDIR DEST/derived/<name>.jsonl --name <name> --derive-only --json --config <that toml>
#
# which writes the query set and its hard copy <name>.hard/ beside it (doc comments
# blanked, asked headings masked; test/example/generated files are not asked about).
# With DTS_PAIRS=1, dts_pairs.py then adds, for npm packages, pairs whose doc is in a
# .d.ts and whose implementation is in the compiled .js beside it (a screen that did not
# pay: bench/RESULTS.md; off by default, so the built-in adapters' data stay as they
# are). Then the leakage guard drops every row whose query (case-folded, whitespace
# normalised) equals a query of the evaluation sets (shared/eval/queries/{java,ts,md}.jsonl);
# the unfiltered set is kept as <name>.jsonl.unfiltered.
#
# Writes DEST/derived/summary.tsv: registry name version lang code prose leak_dropped kept.
# Env: WEFT (binary, default target/debug/weft of this checkout), EVAL_QUERIES (dir of the eval sets, default ../shared/eval/queries beside the checkout), DTS_PAIRS (1: the .d.ts pairs above).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEST=${1:-$HOME/.cache/weft-train}
DEST=$(cd "$DEST" && pwd)
WEFT=${WEFT:-$HERE/../../target/debug/weft}
EVALQ=${EVAL_QUERIES:-$HERE/../../../shared/eval/queries}
OUT="$DEST/derived"
mkdir -p "$OUT/configs"
log() { echo "[derive] $*" >&2; }
slug() { local n=${1#@}; echo "${n//\//-}"; }

# The trees of a package: prints `include GLOB` / `exclude GLOB` lines and a
# `lang LANG` line (the code language of its pairs). Globs are globset globs
# matched against the path relative to the package dir (`*` crosses `/`).
# No `dist`/`build` skipping: some chosen trees live there.
spec() { # registry name
  case "$1" in
  debian)
    echo "lang java"
    case "$2" in
      lucene-solr) echo "include lucene/core/src/java/**/*.java" ;;   # its core module only
      antlr4) echo "include tool/src/**/*.java"; echo "include runtime/Java/src/**/*.java"
              echo "include doc/*.md" ;;
      jetty9) echo "include **/src/main/java/**/*.java"
              echo "exclude tests/**"; echo "exclude jetty-distribution/**"
              echo "include **/*.adoc"; echo "include jetty-documentation/**/*.md" ;;
      picocli) echo "include src/main/java/**/*.java"; echo "include picocli-*/src/main/java/**/*.java"
               echo "exclude picocli-examples/**"; echo "exclude picocli-annotation-processing-tests/**"
               echo "include docs/**/*.adoc"; echo "include docs/**/*.md" ;;
      jline3) echo "include */src/main/java/**/*.java"; echo "exclude demo/**" ;;
      *) echo "include **/src/main/java/**/*.java"; echo "include **/*.md"
         echo "include src/site/**/*.md" ;;
    esac ;;
  npm)
    echo "lang ts"
    echo "include **/*.md"
    case "$2" in
      ajv) echo "include lib/**/*.ts" ;;
      immer|prosemirror-*) echo "include src/**/*.ts" ;;
      # packages shipping only compiled JavaScript (+ .d.ts): one build, not its copies
      fp-ts|io-ts) echo "include es6/**/*.js" ;;
      date-fns) echo "include *.js"; echo "exclude fp/**"; echo "exclude locale/**"; echo "exclude **/*.cjs" ;;
      graphql) echo "include **/*.js"; echo "exclude __dev__/**" ;;
      kysely) echo "include dist/**/*.js"; echo "exclude dist/cjs/**" ;;
      typeorm) echo "include **/*.js"; echo "exclude browser/**"; echo "exclude cli*" ;;
      hono) echo "include dist/**/*.js"; echo "exclude dist/cjs/**" ;;
      pixi.js) echo "include lib/**/*.mjs" ;;
      drizzle-orm) echo "include **/*.js" ;;
      @apollo/client) echo "include **/*.js"; echo "exclude __cjs/**"; echo "exclude legacyEntryPoints/**"
                      echo "exclude **/*.production.js"; echo "exclude **/*.development.js" ;;
      socket.io) echo "include dist/**/*.js" ;;
      zustand) echo "include esm/**/*.mjs" ;;
      inversify) echo "include lib/esm/**/*.js" ;;
      yup) echo "include index.esm.js" ;;
      valibot) echo "include dist/index.mjs" ;;
      @codemirror/*) echo "include dist/index.js" ;;
      d3-*) echo "include src/**/*.js" ;;
    esac
    echo "exclude **/*.min.js"; echo "exclude **/*.d.ts" ;;
  pypi)
    echo "lang python"
    echo "include **/*.py"; echo "include docs/**/*.rst"; echo "include docs/**/*.md"
    echo "include doc/**/*.rst"; echo "include README.*"
    for x in 'tests/**' 'test/**' 'examples/**' docs/conf.py doc/build/conf.py setup.py noxfile.py \
             '**/_vendor/**' 'bench/**' 'typing-examples/**' 'extra/**' 't/**' 'doc/build/changelog/**'; do
      echo "exclude $x"; done ;;
  crates)
    echo "lang rust"
    echo "include src/**/*.rs"; echo "include **/*.md" ;;
  esac
}

printf 'registry\tname\tversion\tlang\tcode\tprose\tleak_dropped\tkept\n' >"$OUT/summary.tsv.tmp"
n=0; failed=()
while IFS=$'\t' read -r reg name ver lic sha; do
  [ "$reg" = registry ] && continue
  s=$(slug "$name")
  pkg="$DEST/src/$reg/$s-$ver"
  [ -d "$pkg" ] || { log "missing $pkg: run fetch-sources.sh"; failed+=("$name"); continue; }
  cfg="$OUT/configs/$s.toml"
  lang=java
  {
    echo "[sources]"
    echo 'skip_dirs = ["node_modules", "__pycache__", ".git", ".venv", "venv", "target"]'
    inc=(); exc=()
    while read -r kind glob; do
      case $kind in include) inc+=("\"$glob\"");; exclude) exc+=("\"$glob\"");; esac
    done < <(spec "$reg" "$name")
    (IFS=,; echo "include = [${inc[*]}]"; echo "exclude = [${exc[*]}]")
  } >"$cfg"
  lang=$(spec "$reg" "$name" | awk '$1=="lang"{print $2}')
  t0=$(date +%s%N)
  if ! (cd "$OUT" && nice -n 10 "$WEFT" eval --derive "$pkg" "$OUT/$s.jsonl" --name "$s" --derive-only --json \
        --config "$cfg" >"$OUT/$s.stats.json" 2>"$OUT/$s.err"); then
    log "FAILED $reg $name: $(tail -n 1 "$OUT/$s.err")"; failed+=("$name"); continue
  fi
  if [ "$reg" = npm ] && [ "${DTS_PAIRS:-0}" = 1 ]; then
    # Docs kept only in the .d.ts beside compiled JavaScript: declaration doc -> implementation.
    dts=$(python3 "$HERE/dts_pairs.py" "$pkg" "$OUT/$s.jsonl" "$OUT/$s.hard")
    log "npm $name: $dts more code pairs from .d.ts docs (dts_pairs.py)"
  fi
  mv "$OUT/$s.jsonl" "$OUT/$s.jsonl.unfiltered"
  read -r code prose dropped kept < <(python3 - "$OUT/$s.jsonl.unfiltered" "$OUT/$s.jsonl" "$EVALQ" <<'PY'
import sys, json, glob, os
src, dst, evald = sys.argv[1:4]
norm = lambda q: " ".join(q.casefold().split())
banned = set()
for f in ("java", "ts", "md"):
    with open(os.path.join(evald, f + ".jsonl"), encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                banned.add(norm(json.loads(line)["query"]))
code = prose = dropped = kept = 0
with open(src, encoding="utf-8") as fi, open(dst, "w", encoding="utf-8") as fo:
    for line in fi:
        if not line.strip():
            continue
        r = json.loads(line)
        if r.get("heading_path") is not None or r.get("kind") == "section":
            prose += 1
        else:
            code += 1
        if norm(r["query"]) in banned:
            dropped += 1
            continue
        fo.write(line if line.endswith("\n") else line + "\n")
        kept += 1
print(code, prose, dropped, kept)
PY
)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$reg" "$name" "$ver" "$lang" "$code" "$prose" "$dropped" "$kept" >>"$OUT/summary.tsv.tmp"
  log "$reg $name $ver: $code code + $prose prose pairs, $dropped dropped as leakage ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"
  n=$((n+1))
done <"$DEST/sources.tsv"
mv "$OUT/summary.tsv.tmp" "$OUT/summary.tsv"
awk -F'\t' 'NR>1{c+=$5; p+=$6; d+=$7; k+=$8} END{printf "[derive] done: %d code + %d prose pairs, %d dropped as leakage, %d kept\n", c, p, d, k}' "$OUT/summary.tsv" >&2
log "$n packages derived into $OUT${failed:+; failed: ${failed[*]}}"
