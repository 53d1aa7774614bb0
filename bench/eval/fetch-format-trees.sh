#!/usr/bin/env bash
# Fetches three real documentation trees in reStructuredText and AsciiDoc
# through Debian's source packages, and derives their heading queries:
#
#   Django 3.2 (python-django: docs/, reST in .txt files)  -> django-docs
#   NumPy 1.24 (numpy: doc/source, .rst)                    -> numpy-docs
#   git 2.39   (git: Documentation, AsciiDoc in .txt files) -> git-docs
#
#   bench/eval/fetch-format-trees.sh [DEST]    (default: ~/.cache/weft-eval-formats)
#
# Writes DEST/src/<corpus> (the tree as users have it), DEST/masked/<corpus>
# (the hard variant: queried headings replaced by "Section N") and
# DEST/queries/formats.jsonl (all three corpora; corpus_root/hard_root are
# relative to DEST, as `weft eval --corpus-dir DEST` expects). Also keeps
# git's shell test scripts (DEST/src/git-sh) for the shell chunker's stats.
# Needs: apt-get (root), tar, xz, python3. A second run reuses the downloads.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEST=${1:-$HOME/.cache/weft-eval-formats}
mkdir -p "$DEST"/{apt/lists/partial,dl,src,queries}
cd "$DEST"
log() { echo "fetch-format-trees: $*" >&2; }

echo 'deb-src http://deb.debian.org/debian bookworm main' > apt/src.list
APTOPT=(-o Dir::Etc::SourceList="$DEST/apt/src.list" -o Dir::Etc::SourceParts=/nonexistent -o Dir::State::Lists="$DEST/apt/lists")
if [ ! -d src/django-docs ] || [ ! -d src/numpy-docs ] || [ ! -d src/git-docs ]; then
  log "apt-get update (deb-src lists)"
  apt-get "${APTOPT[@]}" update -qq
fi
fetch() { # PACKAGE CORPUS MEMBER-PATH [EXTRA-CORPUS EXTRA-PATTERN]
  local pkg=$1 corpus=$2 member=$3
  [ -d "src/$corpus" ] && return
  log "apt-get source $pkg ($member)"
  ( cd dl && ls "${pkg}"_*.orig.tar.* >/dev/null 2>&1 || apt-get "${APTOPT[@]}" source --download-only -qq "$pkg" 2>/dev/null )
  local tarball
  tarball=$(ls dl/"${pkg}"_*.orig.tar.* | head -n 1)
  mkdir -p "src/$corpus"
  tar -xf "$tarball" -C "src/$corpus" --strip-components=$(( $(tr -cd / <<<"$member" | wc -c) + 2 )) --wildcards "*/$member/*"
}
fetch python-django django-docs docs
# Debian's mirror here answers 404 for numpy's orig tarball; PyPI's sdist of
# the same release holds doc/source. pip downloads it, then fails to build
# its metadata (NumPy 1.24 does not build on this Python); the tarball stays
# in pip's unpack directory (--no-clean), from where it is taken.
if [ ! -d src/numpy-docs ]; then
  ( cd dl && apt-get "${APTOPT[@]}" source --download-only -qq numpy >/dev/null 2>&1 ) || true
  if ! ls dl/numpy_*.orig.tar.* >/dev/null 2>&1; then
    log "pip download numpy==1.24.2 (sdist, for doc/source)"
    pip download --no-deps --no-binary :all: --no-build-isolation --no-clean -q -d dl numpy==1.24.2 >/dev/null 2>&1 || true
    sdist=$(ls dl/numpy-1.24.2.tar.gz 2>/dev/null || find "${TMPDIR:-/tmp}" -maxdepth 2 -path '*pip-unpack-*' -name numpy-1.24.2.tar.gz 2>/dev/null | head -n 1)
    [ -n "$sdist" ] || { echo "fetch-format-trees: could not download numpy 1.24.2" >&2; exit 1; }
    cp "$sdist" dl/numpy_1.24.2.orig.tar.gz
  fi
fi
fetch numpy numpy-docs doc/source
fetch git git-docs Documentation
if [ ! -d src/git-sh ]; then
  mkdir -p src/git-sh
  tar -xf "$(ls dl/git_*.orig.tar.* | head -n 1)" -C src/git-sh --strip-components=1 --wildcards '*/t/*.sh'
fi

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
derive() { # CORPUS FORMAT EXTENSIONS...
  rm -rf "masked/$1"
  python3 "$HERE/derive_rst_adoc_queries.py" --name "$1" --format "$2" --root "src/$1" \
    --out "$tmp/$1.jsonl" --masked-out "masked/$1" --corpus-root "src/$1" --hard-root "masked/$1" \
    --ext "${@:3}"
}
derive django-docs rst .txt
derive numpy-docs rst .rst
derive git-docs adoc .txt .adoc
cat "$tmp"/django-docs.jsonl "$tmp"/numpy-docs.jsonl "$tmp"/git-docs.jsonl > queries/formats.jsonl
log "queries: $(wc -l < queries/formats.jsonl) in $DEST/queries/formats.jsonl"
echo "$DEST"
