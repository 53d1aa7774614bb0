#!/usr/bin/env bash
# One org-scale run (issue 32, item 8), reproducibly, on loopback.
#
#   bench/org-scale.sh [OUT]      (OUT default $TMPDIR/weft-org-scale, removed first;
#                                 BIN: the binaries, default target/release when built,
#                                 else target/debug; as root: sshd, /run/sshd)
#   MAX_CHECKOUT_BYTES=N bench/org-scale.sh OUT   crawl.max_checkout_bytes (the checkout cache's budget)
#   PACKAGES=list.txt bench/org-scale.sh OUT   a smaller corpus (e.g. for a smoke run)
#
# 1. corpus: the npm packages of bench/org-scale-packages.txt (`npm pack`,
#    cached in ~/.cache/weft/org-scale) as bare git repositories of one
#    commit; ~10% get a second, prepared commit (files changed, added,
#    removed) pushed before the nightly run;
# 2. served on loopback: most over HTTPS (git http-backend behind TLS, a
#    CA made by openssl), some over ssh (a throwaway sshd, a generated host
#    key and user key), a few private (HTTPS wanting Basic, the password
#    in crawl.git_credentials' password_file), one broken (a 404);
# 3. nats-server, one weft-chunker, one weft-embedder; weft-crawler
#    --manifest --concurrency 4 --json, SIGKILLed after ~30% and ~60% of
#    the sources and run again each time (it resumes), until the queues
#    drain; then the nightly commits and a second crawler run, until drained;
# 4. disk and memory sampled every 3 s; chunks embedded from the
#    embedder's /metrics; the catalog checked against `weft chunk` of each
#    repository's HEAD; the logs searched for the password and the key.
# Results in OUT/results.json (and the logs under OUT/logs).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-${TMPDIR:-/tmp}/weft-org-scale}
if [ -z "${BIN:-}" ]; then
  BIN=$HERE/../target/release
  [ -x "$BIN/weft-crawler" ] || BIN=$HERE/../target/debug
fi
PY="python3 $HERE/org-scale.py"
: "${WEFT_MODEL_DIR:?source the model env (WEFT_MODEL_DIR)}"
CONCURRENCY=${CONCURRENCY:-4}
PACKAGES=${PACKAGES:-$HERE/org-scale-packages.txt}

rm -rf "$OUT"
mkdir -p "$OUT"/{logs,tls,ssh,secrets,nats,data,checkouts}
LOGS=$OUT/logs
PIDS=()
cleanup() {
  touch "$OUT/stop-sampling"
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }

echo "== corpus"
$PY corpus --packages "$PACKAGES" --cache ~/.cache/weft/org-scale --out "$OUT/corpus"
REPOS=$OUT/corpus/repos
mapfile -t NAMES < <(python3 -c "import json; [print(k) for k in json.load(open('$OUT/corpus/plan.json'))]")

echo "== TLS: a CA and a certificate for localhost"
(
  cd "$OUT/tls"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=org-scale CA" \
    -keyout ca.key -out ca.pem -addext basicConstraints=critical,CA:TRUE 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr 2>/dev/null
  printf 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n' > ext.cnf
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
    -extfile ext.cnf -out server.pem 2>/dev/null
)
PASSWORD=$(openssl rand -hex 16)
printf '%s\n' "$PASSWORD" > "$OUT/secrets/password"
chmod 600 "$OUT/secrets/password"

HTTPS_PORT=$(free_port); PRIVATE_PORT=$(free_port); SSH_PORT=$(free_port)
NATS_PORT=$(free_port); NATS_MON=$(free_port)
M_CHUNKER=$(free_port); M_EMBEDDER=$(free_port); M_CRAWLER=$(free_port)

echo "== servers: https :$HTTPS_PORT, private https :$PRIVATE_PORT, ssh :$SSH_PORT, nats :$NATS_PORT"
# the private repositories live under their own root (the private origin)
PRIVATE=$OUT/corpus/private-repos
mkdir -p "$PRIVATE"
$PY serve --root "$REPOS" --port "$HTTPS_PORT" --cert "$OUT/tls/server.pem" --key "$OUT/tls/server.key" \
  --log "$LOGS/https-access.log" 2>"$LOGS/https.err" & PIDS+=($!)
$PY serve --root "$PRIVATE" --port "$PRIVATE_PORT" --cert "$OUT/tls/server.pem" \
  --key "$OUT/tls/server.key" --user alice --password-file "$OUT/secrets/password" \
  --log "$LOGS/private-access.log" 2>"$LOGS/private.err" & PIDS+=($!)

ssh-keygen -q -t ed25519 -N '' -C org-scale-host -f "$OUT/ssh/host_ed25519"
ssh-keygen -q -t ed25519 -N '' -C org-scale-user -f "$OUT/ssh/id_ed25519"
cp "$OUT/ssh/id_ed25519.pub" "$OUT/ssh/authorized_keys"
cat > "$OUT/ssh/sshd_config" <<EOF
Port $SSH_PORT
ListenAddress 127.0.0.1
HostKey $OUT/ssh/host_ed25519
AuthorizedKeysFile $OUT/ssh/authorized_keys
PidFile $OUT/ssh/sshd.pid
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
MaxStartups 64:30:128
MaxSessions 64
EOF
mkdir -p /run/sshd
/usr/sbin/sshd -D -e -f "$OUT/ssh/sshd_config" 2>"$LOGS/sshd.log" & PIDS+=($!)
echo "[127.0.0.1]:$SSH_PORT $(cut -d' ' -f1,2 "$OUT/ssh/host_ed25519.pub")" > "$OUT/ssh/known_hosts"

nats-server -js -sd "$OUT/nats" -p "$NATS_PORT" -a 127.0.0.1 -m "$NATS_MON" >"$LOGS/nats.log" 2>&1 & PIDS+=($!)
for port in $HTTPS_PORT $PRIVATE_PORT $SSH_PORT $NATS_PORT; do
  for _ in $(seq 100); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
done

echo "== manifest: ${#NAMES[@]} repositories + 1 broken"
USER_NAME=$(id -un)
{
  echo "# org-scale run: ${#NAMES[@]} npm packages as git repositories, and one broken"
  i=0
  for name in "${NAMES[@]}"; do
    if (( i % 8 == 5 )); then          # ssh
      url="ssh://$USER_NAME@127.0.0.1:$SSH_PORT$REPOS/$name.git"
    elif (( i % 25 == 7 )); then       # private https
      mv "$REPOS/$name.git" "$PRIVATE/$name.git"
      url="https://localhost:$PRIVATE_PORT/$name.git"
    else
      url="https://localhost:$HTTPS_PORT/$name.git"
    fi
    printf '\n[[sources]]\nsource = "%s"\nproject = "%s"\n' "$url" "$name"
    i=$((i + 1))
  done
  printf '\n[[sources]]\nsource = "https://localhost:%s/no-such-repository.git"\nproject = "broken"\n' "$HTTPS_PORT"
} > "$OUT/org.toml"
SOURCES=$(( ${#NAMES[@]} + 1 ))
echo "ssh: $(grep -c 'source = "ssh' "$OUT/org.toml"), private: $(grep -c ":$PRIVATE_PORT/" "$OUT/org.toml"), public https: $(grep -c ":$HTTPS_PORT/" "$OUT/org.toml") (1 broken)"

cat > "$OUT/weft.toml" <<EOF
[data]
dir = "$OUT/data"

[nats]
url = "nats://127.0.0.1:$NATS_PORT"

[crawl]
git_protocols = ["https", "ssh"]
allow_private_networks = ["127.0.0.1/32", "::1/128"]
git_ssh_key_file = "$OUT/ssh/id_ed25519"
git_known_hosts_file = "$OUT/ssh/known_hosts"
${MAX_CHECKOUT_BYTES:+max_checkout_bytes = $MAX_CHECKOUT_BYTES}

[[crawl.git_credentials]]
origin = "https://localhost:$PRIVATE_PORT"
username = "alice"
password_file = "$OUT/secrets/password"
EOF

export WEFT_LOG=${WEFT_LOG:-info,qdrant_edge=error}
export GIT_SSL_CAINFO=$OUT/tls/ca.pem   # the crawler's git trusts the loopback CA

$PY sample --out "$OUT/samples.jsonl" --stop-file "$OUT/stop-sampling" --interval 3 --root $$ \
  --dir "data=$OUT/data" --dir "checkouts=$OUT/checkouts" --dir "nats=$OUT/nats" & PIDS+=($!)

echo "== workers"
WEFT__TELEMETRY__METRICS_LISTEN=127.0.0.1:$M_CHUNKER "$BIN/weft-chunker" --config "$OUT/weft.toml" \
  >"$LOGS/chunker.out" 2>"$LOGS/chunker.log" & PIDS+=($!); CHUNKER=$!
WEFT__TELEMETRY__METRICS_LISTEN=127.0.0.1:$M_EMBEDDER "$BIN/weft-embedder" --config "$OUT/weft.toml" \
  --data-dir "$OUT/data" --model-dir "$WEFT_MODEL_DIR" \
  >"$LOGS/embedder.out" 2>"$LOGS/embedder.log" & PIDS+=($!); EMBEDDER=$!
for _ in $(seq 300); do curl -sf "http://127.0.0.1:$M_EMBEDDER/metrics" >/dev/null && break; sleep 0.2; done

metric() {  # metric NAME-AND-LABELS PORT: the value (0 when absent)
  curl -sf "http://127.0.0.1:$2/metrics" | awk -v m="$1" '$1 == m {print $2; f=1} END {if (!f) print 0}'
}
embedded() { metric 'weft_chunks_total{outcome="embedded",stage="embedder"}' "$M_EMBEDDER"; }
counters() {  # the embedder's counters now, as JSON
  curl -sf "http://127.0.0.1:$M_EMBEDDER/metrics" | awk '
    /^weft_(chunks|documents)_total\{.*stage="embedder"/ {
      match($1, /outcome="[a-z_]+"/); o = substr($1, RSTART + 9, RLENGTH - 10)
      k = ($1 ~ /^weft_chunks/ ? "chunks_" : "documents_") o
      printf "%s\"%s\": %s", (n++ ? ", " : "{"), k, $2 }
    END { print (n ? "}" : "{}") }'
}
done_lines() { grep -c '\] .*published, .*unchanged' "$1" 2>/dev/null || true; }

CRAWL=("$BIN/weft-crawler" --config "$OUT/weft.toml" --checkout-dir "$OUT/checkouts"
       --manifest "$OUT/org.toml" --concurrency "$CONCURRENCY" --json)
echo "crawler: ${CRAWL[*]}" > "$OUT/command.txt"

# crawl N KILL_AFTER: one attempt; SIGKILLed once KILL_AFTER sources ended (0: runs to its end)
crawl() {
  local n=$1 kill_after=$2
  WEFT__TELEMETRY__METRICS_LISTEN=127.0.0.1:$M_CRAWLER "${CRAWL[@]}" \
    >"$OUT/summary-$n.json" 2>"$LOGS/crawler-$n.log" &
  local pid=$!
  PIDS+=($pid)
  if (( kill_after > 0 )); then
    while kill -0 "$pid" 2>/dev/null; do
      if (( $(done_lines "$LOGS/crawler-$n.log") >= kill_after )); then
        kill -KILL "$pid"
        echo "attempt $n: SIGKILLed after $(done_lines "$LOGS/crawler-$n.log") sources ended" | tee -a "$OUT/events.txt"
        break
      fi
      sleep 0.1
    done
  fi
  local rc=0
  wait "$pid" || rc=$?
  echo "attempt $n: exit $rc, $(done_lines "$LOGS/crawler-$n.log") sources ended in this attempt" | tee -a "$OUT/events.txt"
}

drain() {  # waits until WEFT_DOCS and WEFT_CHUNKS are empty, twice in a row 2 s apart
  local zero=0
  while (( zero < 2 )); do
    kill -0 "$CHUNKER" && kill -0 "$EMBEDDER" || { echo "a worker died" >&2; exit 1; }
    local q
    q=$($PY jsz --monitor "http://127.0.0.1:$NATS_MON")
    if [[ $(jq '(.WEFT_DOCS // 0) + (.WEFT_CHUNKS // 0)' <<<"$q") == 0 ]]; then
      zero=$((zero + 1))
    else
      zero=0
    fi
    sleep 2
  done
}

gather() {  # gather RUN: catalog, generations, expected, check
  local run=$1
  $PY catalog --nats "127.0.0.1:$NATS_PORT" --out "$OUT/catalog-$run.json"
  "$BIN/weft-crawler" --config "$OUT/weft.toml" generations list --json \
    >"$OUT/generations-$run.json" 2>"$LOGS/generations-$run.log" || true
  $PY expected --corpus "$OUT/corpus" --weft "$BIN/weft" --out "$OUT/expected-$run.json"
  $PY check --expected "$OUT/expected-$run.json" --catalog "$OUT/catalog-$run.json" \
    --indexed "$OUT/generations-$run.json" > "$OUT/check-$run.json" || true
  jq -c '{documents_expected, documents_matched, catalog_records, chunks_expected, chunks_in_catalog, problems: (.problems | length)}' "$OUT/check-$run.json"
}

echo "== run 1: the first crawl, killed twice"
E0=$(embedded); counters > "$OUT/counters-0.json"
T1=$(now)
crawl 1a $(( SOURCES * 30 / 100 ))
crawl 1b $(( SOURCES * 30 / 100 ))
crawl 1c 0
T1_CRAWLED=$(now)
drain
T1_END=$(now)
E1=$(embedded); counters > "$OUT/counters-1.json"
gather 1

echo "== nightly: the second commits"
$PY nightly --out "$OUT/corpus"
sleep 5
echo "== run 2: the nightly crawl"
T2=$(now)
crawl 2 0
T2_CRAWLED=$(now)
drain
T2_END=$(now)
E2=$(embedded); counters > "$OUT/counters-2.json"
gather 2

curl -sf "http://127.0.0.1:$M_EMBEDDER/metrics" > "$OUT/embedder-metrics.txt" || true
curl -sf "http://127.0.0.1:$M_CHUNKER/metrics" > "$OUT/chunker-metrics.txt" || true
kill -TERM "$CHUNKER" "$EMBEDDER"; wait "$CHUNKER" "$EMBEDDER" || true
"$BIN/weft-crawler" --config "$OUT/weft.toml" generations list --json \
  >"$OUT/generations-final.json" 2>"$LOGS/generations-final.log" || true
"$BIN/weft" status --config "$OUT/weft.toml" --data-dir "$OUT/data" --json \
  >"$OUT/status-final.json" 2>"$LOGS/status-final.log" || true
touch "$OUT/stop-sampling"; sleep 4

echo "== secrets in the logs, summaries, checkouts' git config and the NATS store?"
KEYLINE=$(sed -n 2p "$OUT/ssh/id_ed25519")
LEAKS=$( (grep -rlF -e "$PASSWORD" -e "$KEYLINE" "$LOGS" "$OUT"/summary-*.json "$OUT/nats" "$OUT/data" \
  "$OUT/checkouts" 2>/dev/null || true) | grep -v '^$' || true)
echo "${LEAKS:-none}" > "$OUT/leaks.txt"

$PY peaks --samples "$OUT/samples.jsonl" --start "$T1" --end "$T1_END" > "$OUT/peaks-1.json"
$PY peaks --samples "$OUT/samples.jsonl" --start "$T2" --end "$T2_END" > "$OUT/peaks-2.json"
jq -n --arg t1 "$T1" --arg c1 "$T1_CRAWLED" --arg e1 "$T1_END" --arg t2 "$T2" --arg c2 "$T2_CRAWLED" --arg e2 "$T2_END" \
  --arg E0 "$E0" --arg E1 "$E1" --arg E2 "$E2" --arg sources "$SOURCES" \
  '{sources: ($sources|tonumber),
    run1: {wall_s: (($e1|tonumber) - ($t1|tonumber)), crawl_s: (($c1|tonumber) - ($t1|tonumber)), chunks_embedded: (($E1|tonumber) - ($E0|tonumber))},
    run2: {wall_s: (($e2|tonumber) - ($t2|tonumber)), crawl_s: (($c2|tonumber) - ($t2|tonumber)), chunks_embedded: (($E2|tonumber) - ($E1|tonumber))}}' \
  > "$OUT/results.json"
published() { jq -s '{attempts: length, published: ([.[].sources[].documents_published] | add),
  unchanged: ([.[].sources[].documents_unchanged] | add), deleted: ([.[].sources[].documents_deleted] | add),
  sources_crawled: ([.[].sources | length] | add), already_done: [.[].already_done | length],
  resumed: [.[].resumed], failed: [.[].failed[] | "\(.project): \(.error)"] | unique}' "$@"; }
# the killed attempts print no summary: their sources' lines in the log count
logged() { sed 's/\x1b\[[0-9;]*m//g' "$@" | grep -o '[0-9]* published, [0-9]* unchanged, [0-9]* deleted' |
  awk '{p += $1; u += $3; d += $5} END {printf "{\"published\": %d, \"unchanged\": %d, \"deleted\": %d}", p, u, d}'; }
published "$OUT"/summary-1?.json | jq --argjson l "$(logged "$LOGS"/crawler-1?.log)" '. + {every_attempt_logged: $l}' > "$OUT/published-1.json"
published "$OUT"/summary-2.json | jq --argjson l "$(logged "$LOGS"/crawler-2.log)" '. + {every_attempt_logged: $l}' > "$OUT/published-2.json"
cat "$OUT/published-1.json" "$OUT/published-2.json" "$OUT"/counters-?.json
cat "$OUT/results.json" "$OUT/peaks-1.json" "$OUT/peaks-2.json" "$OUT/events.txt"
echo "leaks: $(cat "$OUT/leaks.txt")"
