#!/usr/bin/env bash
# What each binary links: its number of packages (normal dependencies) and
# which of the heavy or job-specific ones are among them; then the rules of
# DESIGN §2 checked: the chunker links no store, embedder or model client,
# the query service no source walker and no grammar (exit 1 if broken).
# weft-all (the image's one binary) links all five by design: not listed.
#
#   bench/binary-deps.sh [REPO]     (default: this repository; tools/test.sh runs it)
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
heavy='^(qdrant-client|meilisearch-sdk|qdrant-edge|tantivy|ort|redb|ignore|scraper|async-nats|tonic|tree-sitter-[a-z-]+)$'
declare -A linked
printf '%-14s %8s  %s\n' binary packages 'heavy or job-specific packages linked'
for package in weft-cli weft-crawler weft-chunker weft-embedder weft-query; do
  names=$(cargo tree -p "$package" -e normal --prefix none --format '{p}' \
    | sed 's/ (\*)$//; s/ (proc-macro)$//' | awk '{print $1}' | sort -u)
  linked[$package]=$(grep -E "$heavy" <<<"$names" | sed 's/^tree-sitter-.*/tree-sitter-*/' | sort -u | tr '\n' ' ')
  printf '%-14s %8s  %s\n' "$package" "$(wc -l <<<"$names")" "${linked[$package]}"
done
broken=0
refuse() { # binary, pattern, what
  if grep -qE "$2" <<<"${linked[$1]// /$'\n'}"; then
    echo "RULE BROKEN: $1 links $3 ($(grep -oE "$2" <<<"${linked[$1]// /$'\n'}" | tr '\n' ' '))" >&2
    broken=1
  fi
}
refuse weft-chunker '^(qdrant-client|meilisearch-sdk|qdrant-edge|tantivy|ort|redb)$' 'a store, embedder or model client'
refuse weft-query '^(ignore|tree-sitter-\*)$' 'a source walker or a grammar'
exit $broken
