#!/usr/bin/env bash
# How often curl reads no answer at all from a gRPC call the query service
# refuses for want of a key (the container smoke's no-key check retries
# such a try). `weft serve` over a one-file index, with a keys file; N
# unary Search calls without a key, by the smoke's own curl command; prints
# each outcome's count: the grpc-status read, or "none" with curl's error.
#
#   bench/grpc-no-key.sh [N] [WEFT]   (default 300, target/debug/weft)
set -euo pipefail
n=${1:-300}
weft=${2:-target/debug/weft}
[ -x "$weft" ] || { echo "bench/grpc-no-key.sh: $weft is not built (cargo build --workspace --bins)" >&2; exit 1; }
work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir "$work/src"
printf '# Rate limiter\n\nA token bucket hands out permits.\n' >"$work/src/a.md"
"$weft" index "$work/src" --data-dir "$work/data" --json >/dev/null
"$weft" keys new --id bench --project '*' --json |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["entry_toml"], end="")' >"$work/keys.toml"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
WEFT__QUERY__API_KEYS_FILE="$work/keys.toml" "$weft" serve --data-dir "$work/data" --listen "127.0.0.1:$port" \
  >"$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
  grep -q "^listening on" "$work/serve.log" && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
  sleep 0.1
done
# SearchRequest {query: "token"}, framed (a 5-byte header, then the message).
python3 -c 'import sys; m = bytes.fromhex("0a05746f6b656e"); sys.stdout.buffer.write(b"\0" + len(m).to_bytes(4, "big") + m)' >"$work/request"
for _ in $(seq 1 "$n"); do
  status=$({ curl -sS --max-time 20 --http2-prior-knowledge -X POST -H 'content-type: application/grpc' -H 'te: trailers' \
    --data-binary @"$work/request" -D - -o /dev/null "http://127.0.0.1:$port/weft.v1.QueryService/Search" 2>"$work/err" || true; } |
    tr -d '\r' | sed -n 's/^grpc-status: //p')
  if [ -n "$status" ]; then echo "grpc-status $status"; else echo "none: $(head -n 1 "$work/err")"; fi
done | sort | uniq -c
echo "$n calls without a key; $(curl --version | head -n 1 | cut -d' ' -f1-2)"
