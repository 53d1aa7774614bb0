#!/usr/bin/env bash
# Fetches a few real, public code and documentation packages through the
# package registries, for the chunker's real-code invariant test.
#
#   tools/fetch-real-corpora.sh [DEST]     (default: ~/.cache/weft-test-corpora)
#
# Prints the corpus directories, ':'-separated, on its last line: the value of
# WEFT_REAL_CORPUS_DIRS. Downloads are cached in DEST; a second run is quick.
# Needs: npm, pip, apt-get (root, for the Debian source packages), tar, xz.
set -euo pipefail
DEST=${1:-$HOME/.cache/weft-test-corpora}
mkdir -p "$DEST"/{npm,deb,apt/lists/partial,py}
cd "$DEST"
log() { echo "fetch-real-corpora: $*" >&2; }

# TypeScript, JavaScript and .d.ts: npm packages (their published sources).
for spec in effect@4.1.0 zod@4.6.7 rxjs@7.8.2; do
  name=${spec%@*}
  if [ ! -d "npm/$name" ]; then
    log "npm pack $spec"
    tgz=$(cd npm && npm pack "$spec" --silent 2>/dev/null | tail -n 1)
    mkdir -p "npm/$name" && tar xzf "npm/$tgz" -C "npm/$name" --strip-components=1 && rm -f "npm/$tgz"
  fi
done

# Java and Markdown: Debian source packages (guava; Node.js 18 API docs),
# C (libyaml) and C++ (fmtlib), through a private apt list so that the
# system's apt configuration is untouched.
if [ ! -d deb/guava ] || [ ! -d deb/nodejs-doc-api ] || [ ! -d deb/libyaml ] || [ ! -d deb/fmtlib ]; then
  echo 'deb-src http://deb.debian.org/debian bookworm main' > apt/src.list
  APTOPT=(-o Dir::Etc::SourceList="$DEST/apt/src.list" -o Dir::Etc::SourceParts=/nonexistent -o Dir::State::Lists="$DEST/apt/lists")
  log "apt-get update (deb-src lists)"
  apt-get "${APTOPT[@]}" update -qq
  ( cd deb
    if [ ! -d guava ]; then
      log "apt-get source guava-libraries"
      apt-get "${APTOPT[@]}" source --download-only -qq guava-libraries 2>/dev/null
      mkdir -p guava && tar -xf guava-libraries_*.orig.tar.* -C guava --strip-components=1 && rm -f guava-libraries_*
    fi
    if [ ! -d nodejs-doc-api ]; then
      log "apt-get source nodejs (doc/api only)"
      apt-get "${APTOPT[@]}" source --download-only -qq nodejs 2>/dev/null
      mkdir -p nodejs-doc-api
      tar -xf nodejs_*.orig.tar.xz -C nodejs-doc-api --strip-components=3 --wildcards '*/doc/api/*'
      rm -f nodejs_*
    fi
    for src in libyaml fmtlib; do
      if [ ! -d "$src" ]; then
        log "apt-get source $src"
        apt-get "${APTOPT[@]}" source --download-only -qq "$src" 2>/dev/null
        mkdir -p "$src" && tar -xf "${src}"_*.orig.tar.* -C "$src" --strip-components=1 && rm -f "${src}"_*
      fi
    done )
fi

# Ruby, PHP and shell: Debian binary packages that ship their sources.
for pkg in ruby-rack php-monolog shunit2; do
  if [ ! -d "deb/$pkg" ]; then
    log "apt-get download $pkg"
    ( cd deb && apt-get download -qq "$pkg" 2>/dev/null \
        || { apt-get update -qq && apt-get download -qq "$pkg"; } )
    mkdir -p "deb/$pkg" && dpkg-deb -x deb/"$pkg"_*.deb "deb/$pkg" && rm -f deb/"$pkg"_*.deb
  fi
done

# Go: a Debian -dev package ships Go sources.
if [ ! -d deb/cobra ]; then
  log "apt-get download golang-github-spf13-cobra-dev"
  ( cd deb && apt-get download -qq golang-github-spf13-cobra-dev 2>/dev/null \
      || { apt-get update -qq && apt-get download -qq golang-github-spf13-cobra-dev; } )
  mkdir -p deb/cobra && dpkg-deb -x deb/golang-github-spf13-cobra-dev_*.deb deb/cobra && rm -f deb/*.deb
fi

# C#: the pythonnet source distribution holds its C# runtime.
if [ ! -d py/pythonnet ]; then
  log "pip download pythonnet (sdist)"
  pip download --no-deps --no-binary :all: -q -d py pythonnet==3.0.5
  mkdir -p py/pythonnet && tar -xzf py/pythonnet-3.0.5.tar.gz -C py/pythonnet --strip-components=1 && rm -f py/pythonnet-*.tar.gz
fi

# Kotlin: an npm package with an Android library in Kotlin.
if [ ! -d npm/react-native-screens ]; then
  log "npm pack react-native-screens@4.30.1"
  tgz=$(cd npm && npm pack react-native-screens@4.30.1 --silent 2>/dev/null | tail -n 1)
  mkdir -p npm/react-native-screens && tar xzf "npm/$tgz" -C npm/react-native-screens --strip-components=1 && rm -f "npm/$tgz"
fi

# Python: a wheel from PyPI holds its sources.
if [ ! -d py/requests ]; then
  log "pip download requests"
  pip download --no-deps -q -d py requests==2.32.3
  mkdir -p py/requests && python3 -m zipfile -e py/requests-2.32.3-py3-none-any.whl py/requests && rm -f py/*.whl
fi

dirs="$DEST/npm/effect/src:$DEST/npm/zod:$DEST/npm/rxjs:$DEST/deb/guava/guava/src:$DEST/deb/nodejs-doc-api:$DEST/deb/cobra/usr/share/gocode:$DEST/py/requests"
dirs="$dirs:$DEST/deb/libyaml:$DEST/deb/fmtlib:$DEST/py/pythonnet/src/runtime:$DEST/deb/ruby-rack/usr:$DEST/deb/php-monolog/usr/share/php:$DEST/deb/shunit2/usr:$DEST/npm/react-native-screens/android/src"
# Rust: crates cargo has downloaded for this workspace (regex-syntax, serde_json, ignore).
registry=${CARGO_HOME:-$HOME/.cargo}/registry/src
for crate in "$registry"/*/regex-syntax-0.* "$registry"/*/serde_json-1.* "$registry"/*/ignore-0.*; do
  [ -d "$crate/src" ] && dirs="$dirs:$crate/src"
done
echo "$dirs"
