#!/bin/bash
# Fetch every package of sources.txt through its registry and unpack it.
#
#   fetch-sources.sh [DEST]        (DEST defaults to ~/.cache/weft-train)
#
# Writes
#   DEST/dl/<registry>/...                      the downloaded archives (kept; re-runs skip them)
#   DEST/src/<registry>/<name>-<version>/       each package unpacked (scoped npm names: @a/b -> a-b)
#   DEST/sources.tsv                            registry, name, version, licence, sha256 of the archive
#
# Debian packages come from a private deb-src list and apt lists directory under
# DEST (the approach of shared/eval/tools/prepare.sh): no root apt configuration is
# touched. npm via `npm pack`, PyPI sdists via `pip download --no-binary :all:`,
# crates via static.crates.io. Idempotent: what is downloaded or unpacked is skipped.
# Needs: apt-get, npm, pip (python3), curl, tar, xz.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEST=${1:-$HOME/.cache/weft-train}
LIST=${SOURCES:-$HERE/sources.txt}
mkdir -p "$DEST"/{apt/lists/partial,dl/debian,dl/npm,dl/pypi,dl/crates,src}
DEST=$(cd "$DEST" && pwd)
log() { echo "[fetch] $*" >&2; }

slug() { local n=${1#@}; echo "${n//\//-}"; }

# The Debian mirror this machine's apt already uses, as a deb-src line (bookworm).
MIRROR=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
[ -n "$MIRROR" ] || MIRROR=$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$MIRROR" ] || MIRROR=http://deb.debian.org/debian
echo "deb-src $MIRROR bookworm main" >"$DEST/apt/src.list"
APTOPT=(-o "Dir::Etc::SourceList=$DEST/apt/src.list" -o Dir::Etc::SourceParts=/nonexistent
        -o "Dir::State::Lists=$DEST/apt/lists")
APT_UPDATED=

# Licence of the archive just unpacked, by registry (read from the unpacked tree,
# or for Debian from debian/copyright).
licence() { # registry dir [copyright-file]
  python3 - "$@" <<'PY'
import sys, os, re, json, glob
reg, d = sys.argv[1], sys.argv[2]
def out(s):
    print(re.sub(r"\s+", " ", (s or "unknown")).strip() or "unknown"); sys.exit(0)
if reg == "debian":
    path = sys.argv[3] if len(sys.argv) > 3 else os.path.join(d, "debian/copyright")
    try:
        text = open(path, encoding="utf-8", errors="replace").read()
    except OSError:
        out("unknown")
    for stanza in re.split(r"\n\s*\n", text):
        if re.search(r"^Files:\s*\*\s*$", stanza, re.M):
            m = re.search(r"^License:[ \t]*(\S.*)$", stanza, re.M)
            if m: out(m.group(1))
    out("unknown (debian/copyright not machine-readable)")
if reg == "debian-upstream":
    # debian/copyright unavailable (its .debian.tar missing at the mirror): the
    # upstream licence file, marked as such
    for f in sorted(glob.glob(os.path.join(d, "*"))):
        if re.match(r"(LICEN[CS]E|COPYING)", os.path.basename(f), re.I) and os.path.isfile(f):
            t = open(f, encoding="utf-8", errors="replace").read(4000)
            for pat, name in ((r"Apache License,?\s+Version 2\.0", "Apache-2.0"), (r"MIT License|Permission is hereby granted, free of charge", "MIT"),
                              (r"Eclipse Public License", "EPL"), (r"Redistribution and use in source and binary forms", "BSD")):
                if re.search(pat, t): out(name + " (upstream " + os.path.basename(f) + "; no debian/copyright)")
    out("unknown (no debian/copyright)")
if reg == "npm":
    try:
        lic = json.load(open(os.path.join(d, "package.json"))).get("license")
    except Exception:
        lic = None
    if isinstance(lic, dict): lic = lic.get("type")
    out(lic)
if reg == "pypi":
    try:
        text = open(os.path.join(d, "PKG-INFO"), encoding="utf-8", errors="replace").read()
    except OSError:
        out("unknown")
    head = text.split("\n\n", 1)[0]
    for key in ("License-Expression", "License"):
        m = re.search(r"^%s:[ \t]*(\S.*)$" % key, head, re.M)
        if m and m.group(1).strip() not in ("UNKNOWN", ""):
            out(m.group(1).strip().splitlines()[0])
    m = re.findall(r"^Classifier: License :: (?:OSI Approved :: )?(.+)$", head, re.M)
    out("; ".join(m) if m else None)
if reg == "crates":
    try:
        text = open(os.path.join(d, "Cargo.toml"), encoding="utf-8").read()
    except OSError:
        out("unknown")
    m = re.search(r'^license\s*=\s*"([^"]*)"', text, re.M)
    out(m.group(1) if m else None)
out(None)
PY
}

unpack() { # archive dir
  local f=$1 dir=$2
  [ -d "$dir" ] && return 0
  mkdir -p "$dir.tmp" && rm -rf "$dir.tmp"/* || return 1
  case "$f" in
    *.zip) (cd "$dir.tmp" && python3 -m zipfile -e "$f" .) || return 1
           local top=("$dir.tmp"/*)
           if [ ${#top[@]} -eq 1 ] && [ -d "${top[0]}" ]; then mv "${top[0]}" "$dir" && rmdir "$dir.tmp"; else mv "$dir.tmp" "$dir"; fi
           return 0 ;;
    *) tar -xf "$f" -C "$dir.tmp" --strip-components=1 || { rm -rf "$dir.tmp"; return 1; } ;;
  esac
  mv "$dir.tmp" "$dir"
}

declare -A DONE
ok=0; failed=0; skipped=0
TSV="$DEST/sources.tsv.tmp"
printf 'registry\tname\tversion\tlicence\tsha256\n' >"$TSV"
FAILED=()

while read -r reg name ver rest; do
  case "$reg" in ''|'#'*) continue ;; esac
  s=$(slug "$name")
  dir="$DEST/src/$reg/$s-$ver"
  archive=""; cfile=""
  case "$reg" in
  debian)
    up=${ver#*:}                       # no epoch in file names
    [[ "$up" == *-* ]] && up=${up%-*}  # upstream version (native packages keep theirs)
    pat() { ls "$DEST/dl/debian/${name}_$1".orig.tar.* "$DEST/dl/debian/${name}_$1".tar.* 2>/dev/null | grep -v '\.debian\.tar' | head -n 1; }
    archive=$(pat "$up")
    if [ -z "$archive" ]; then
      if [ -z "$APT_UPDATED" ]; then
        log "apt-get update (private lists in $DEST/apt)"
        apt-get "${APTOPT[@]}" update -qq 2>/dev/null || log "WARN apt-get update reported errors"
        APT_UPDATED=1
      fi
      log "debian $name=$ver: downloading"
      (cd "$DEST/dl/debian" && apt-get "${APTOPT[@]}" source --download-only -qq "$name=$ver" >/dev/null 2>&1)
      archive=$(pat "$up")
    else
      log "debian $name=$ver: have $(basename "$archive")"; skipped=$((skipped+1))
    fi
    debtar=$(ls "$DEST/dl/debian/${name}_${ver#*:}".debian.tar.* 2>/dev/null | head -n 1)
    if [ -n "$debtar" ]; then
      mkdir -p "$DEST/dl/debian/copyright"
      cfile="$DEST/dl/debian/copyright/$name"
      [ -s "$cfile" ] || tar -xOf "$debtar" debian/copyright >"$cfile" 2>/dev/null
    fi
    ;;
  npm)
    archive="$DEST/dl/npm/$s-$ver.tgz"
    if [ -s "$archive" ]; then
      log "npm $name@$ver: have it"; skipped=$((skipped+1))
    else
      log "npm $name@$ver: downloading"
      got=$(cd "$DEST/dl/npm" && npm pack "$name@$ver" --silent 2>/dev/null | tail -n 1)
      [ -n "$got" ] && [ "$DEST/dl/npm/$got" != "$archive" ] && mv "$DEST/dl/npm/$got" "$archive"
      [ -s "$archive" ] || archive=""
    fi
    ;;
  pypi)
    find_sdist() { ls "$DEST/dl/pypi/" 2>/dev/null | grep -iE "^${name//-/[-_.]}-${ver//./\\.}\.(tar\.gz|zip)$" | head -n 1; }
    f=$(find_sdist)
    if [ -n "$f" ]; then
      log "pypi $name==$ver: have $f"; skipped=$((skipped+1))
    else
      log "pypi $name==$ver: downloading sdist"
      pip download "$name==$ver" --no-binary :all: --no-deps -d "$DEST/dl/pypi" -q >/dev/null 2>&1
      f=$(find_sdist)
    fi
    [ -n "$f" ] && archive="$DEST/dl/pypi/$f"
    ;;
  crates)
    archive="$DEST/dl/crates/$name-$ver.crate"
    if [ -s "$archive" ]; then
      log "crates $name $ver: have it"; skipped=$((skipped+1))
    else
      log "crates $name $ver: downloading"
      curl -fsSL "https://static.crates.io/crates/$name/$name-$ver.crate" -o "$archive.part" && mv "$archive.part" "$archive"
      [ -s "$archive" ] || { rm -f "$archive.part"; archive=""; }
    fi
    ;;
  *) log "unknown registry '$reg' for $name: skipped"; continue ;;
  esac

  if [ -z "$archive" ] || [ ! -s "$archive" ]; then
    log "FAILED $reg $name $ver: nothing downloaded"; failed=$((failed+1)); FAILED+=("$reg:$name"); continue
  fi
  if ! unpack "$archive" "$dir"; then
    log "FAILED $reg $name $ver: could not unpack $(basename "$archive")"; failed=$((failed+1)); FAILED+=("$reg:$name"); continue
  fi
  if [ "$reg" = debian ] && [ ! -s "$cfile" ] && [ ! -f "$dir/debian/copyright" ]; then
    lic=$(licence debian-upstream "$dir")
  else
    lic=$(licence "$reg" "$dir" ${cfile:+"$cfile"})
  fi
  sha=$(sha256sum "$archive" | cut -d' ' -f1)
  printf '%s\t%s\t%s\t%s\t%s\n' "$reg" "$name" "$ver" "$lic" "$sha" >>"$TSV"
  ok=$((ok+1))
done <"$LIST"

mv "$TSV" "$DEST/sources.tsv"
log "done: $ok packages in $DEST/src ($skipped already downloaded), $failed failed${FAILED:+: ${FAILED[*]}}"
log "archives: $(du -sh "$DEST/dl" | cut -f1), unpacked: $(du -sh "$DEST/src" | cut -f1); table: $DEST/sources.tsv"
[ "$failed" -eq 0 ]
