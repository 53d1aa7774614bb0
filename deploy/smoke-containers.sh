#!/usr/bin/env bash
# The runtime image in a real container engine: builds it from the
# Dockerfile with the binaries of the test build (target/debug, stripped),
# runs every binary in it as the manifests run them, and runs the
# distributed end-to-end test (e2e/tests/pipeline.rs) against containers.
#
#   deploy/smoke-containers.sh          (tools/test.sh runs it after cargo test)
#
#   1. engine: Debian's docker.io (dockerd 20.10), started when it is not
#      running with --bridge=none --iptables=false: no bridge, no NAT; every
#      container uses the host network (--network host).
#   2. base image: debian:bookworm-slim when present, else made offline from
#      `debootstrap --variant=minbase bookworm` (the tarball is cached in
#      ~/.cache/weft) and `docker import`; nothing is pulled from a registry.
#   3. images, from the repository's Dockerfile (BuildKit, built-in frontend):
#      weft:smoke (target runtime) and weft:smoke-local-model (target
#      local-model: ONNX Runtime and all-MiniLM-L6-v2 baked in), both with
#      --build-arg BINARIES=prebuilt (target/debug's weft-all, stripped) and
#      the model from ~/.cache/weft (MODEL=prebuilt-model); and
#      weft-smoke/nats-server (Debian's nats-server 2.9, uid 10001).
#   4. containers: each binary as uid 10001 with a read-only root file
#      system, no capability, no-new-privileges and exactly the volumes of
#      the manifests (deploy/k8s/base): --version and --help of each;
#      weft-chunker, weft-embedder and weft-query started against NATS with
#      the manifests' weft.toml and checked (/metrics, gRPC health).
#   5. e2e: wrappers that run each binary (and nats-server) in its container
#      (WEFT_E2E_BIN_DIR, WEFT_NATS_SERVER); a SIGKILLed wrapper takes its
#      container with it (checked); then the pipeline test, run as uid 10001.
#
# Needs root (dockerd, debootstrap; re-runs itself with sudo otherwise).
# Environment: CARGO_TARGET_DIR (target), WEFT_SMOKE_PIPELINE_TEST (the
# pipeline test executable; else `cargo test --workspace --no-run` names
# it), WEFT_SMOKE_KEEP=1 keeps the scratch directory.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
if [ "$(id -u)" != 0 ]; then
  exec sudo -E "$0" "$@"
fi

started=$SECONDS
phase_started=$SECONDS
phase_name=""
timings=()
phase() {
  if [ -n "$phase_name" ]; then
    timings+=("$(printf '%-12s %4ds' "$phase_name" $((SECONDS - phase_started)))")
  fi
  phase_name=$1
  phase_started=$SECONDS
  printf '\n== smoke-containers: %s: %s  (at %ds)\n' "$1" "$2" $((SECONDS - started))
}
died=0
die() {
  echo "smoke-containers: FAILED in step '$phase_name': $*" >&2
  died=1
  exit 1
}

target=${CARGO_TARGET_DIR:-$repo/target}
bins=$target/debug
cache=$HOME/.cache/weft
programs=(weft weft-crawler weft-chunker weft-embedder weft-query)
image=weft:smoke
image_model=weft:smoke-local-model
image_nats=weft-smoke/nats-server:2.9
base_image=debian:bookworm-slim
model_name=all-MiniLM-L6-v2
ort_version=$(sed -n 's/^ORT_VERSION=//p' tools/fetch-model.sh)
uid=10001

run_id=$$-$(date +%s)
work=$(mktemp -d /tmp/weft-smoke.XXXXXX)
chmod 755 "$work"
cleanup() {
  local rc=$?
  local ids
  ids=$(docker ps -aq --filter "label=weft-smoke=$run_id" 2>/dev/null || true)
  if [ -n "$ids" ]; then
    # shellcheck disable=SC2086
    docker rm -f $ids >/dev/null 2>&1 || true
  fi
  if [ "${WEFT_SMOKE_KEEP:-0}" = 1 ]; then
    echo "smoke-containers: kept $work" >&2
  else
    rm -rf "$work"
  fi
  if [ "$rc" != 0 ] && [ "$died" = 0 ] && [ -n "$phase_name" ]; then
    echo "smoke-containers: FAILED in step '$phase_name' (exit $rc)" >&2
  fi
}
trap cleanup EXIT

apt_install() {
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# Whether something accepts connections on 127.0.0.1:PORT.
listening() { timeout 2 bash -c ">/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# --- 1. the engine ------------------------------------------------------------
phase engine "dockerd (docker.io), no bridge, host network only"
if ! command -v dockerd >/dev/null; then
  apt_install docker.io || die "apt-get install docker.io"
fi
if ! docker info >/dev/null 2>&1; then
  log=$cache/dockerd.log
  mkdir -p "$cache"
  setsid dockerd --bridge=none --iptables=false --ip-masq=false >"$log" 2>&1 </dev/null &
  for _ in $(seq 1 120); do
    docker info >/dev/null 2>&1 && break
    sleep 0.5
  done
  docker info >/dev/null 2>&1 || die "dockerd did not start (log: $log): $(tail -n 5 "$log")"
  echo "started dockerd --bridge=none --iptables=false --ip-masq=false (log: $log)"
fi
if docker network inspect bridge >/dev/null 2>&1; then
  die "dockerd runs with a bridge network: restart it with --bridge=none --iptables=false (containers here use the host network only)"
fi
echo "dockerd $(docker version --format '{{.Server.Version}}'), networks: $(docker network ls --format '{{.Name}}' | tr '\n' ' ')"
# BuildKit: `docker buildx` when the client has it, else a client that has
# BuildKit built in (Debian's docker 20.10 CLI, DOCKER_BUILDKIT=1). The
# legacy builder cannot build this Dockerfile (RUN --mount) and builds every
# stage before the target, the cargo stage included.
build=()
for client in docker /usr/bin/docker; do
  command -v "$client" >/dev/null || continue
  if "$client" buildx version >/dev/null 2>&1; then
    build=("$client" buildx build --load)
    break
  fi
  version=$("$client" version --format '{{.Client.Version}}' 2>/dev/null || echo 0)
  if [ "${version%%.*}" -lt 23 ] 2>/dev/null; then
    build=(env DOCKER_BUILDKIT=1 "$client" build)
    break
  fi
done
[ ${#build[@]} -gt 0 ] || die "no docker client with BuildKit (docker buildx, or Debian's docker.io CLI)"
echo "builder: ${build[*]}"

# --- 2. the base image ----------------------------------------------------------
phase base "$base_image (offline: debootstrap, docker import)"
# The image this script makes is labelled with the version of how it makes
# it (a pulled debian:bookworm-slim has no such label and is used as it is).
base_version=2
made=none
if labels=$(docker image inspect -f '{{json .Config.Labels}}' "$base_image" 2>/dev/null); then
  made=$(python3 -c 'import json, sys; print((json.loads(sys.argv[1]) or {}).get("weft.smoke-base", ""))' "$labels")
fi
if [ "$made" = "" ] || [ "$made" = "$base_version" ]; then
  echo "$base_image present: $(docker image inspect -f '{{.Id}} {{.Created}}' "$base_image")"
else
  tarball=$cache/debootstrap-bookworm-minbase-v$base_version.tar
  if [ ! -s "$tarball" ]; then
    command -v debootstrap >/dev/null || apt_install debootstrap || die "apt-get install debootstrap"
    rootfs=$work/rootfs
    debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 ||
      die "debootstrap: $(tail -n 5 "$work/debootstrap.log")"
    # As debian:bookworm-slim is: the updates and security suites, no
    # documentation, manual pages or locales installed, no apt lists.
    rm -f "$rootfs/etc/apt/sources.list"
    cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    # apt keeps no package or cache file in a layer (debian:*-slim's docker-clean).
    cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
    echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
    echo 'Acquire::GzipIndexes "true";' >"$rootfs/etc/apt/apt.conf.d/docker-gzip-indexes"
    echo 'APT::AutoRemove::SuggestsImportant "false";' >"$rootfs/etc/apt/apt.conf.d/docker-autoremove-suggests"
    cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF
    find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    rm -rf "$rootfs"/usr/share/{man,groff,info,lintian,linda,locale}/* \
      "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
      "$rootfs"/var/log/* "$rootfs"/tmp/*
    mkdir -p "$cache"
    tar -C "$rootfs" --numeric-owner -cf "$tarball.part" . && mv "$tarball.part" "$tarball"
    rm -rf "$rootfs"
    echo "debootstrap: $(du -h "$tarball" | cut -f1) cached in $tarball"
  else
    echo "reusing $tarball"
  fi
  docker import -c 'CMD ["bash"]' -c "LABEL weft.smoke-base=$base_version" "$tarball" "$base_image" >/dev/null || die "docker import $tarball"
  echo "imported $base_image"
fi

# --- 3. the images --------------------------------------------------------------
phase images "$image, $image_model (Dockerfile, prebuilt binaries), $image_nats"
ctx=$work/context
mkdir -p "$ctx/bin" "$ctx/model"
# The image's one binary, weft-all (each program is a link to it).
[ -x "$bins/weft-all" ] || die "$bins/weft-all is missing: run cargo test --workspace (or cargo build --workspace --bins) first"
strip -o "$ctx/bin/weft-all" "$bins/weft-all"
# The build's mtime: an unchanged binary hits BuildKit's cache (same image).
touch -r "$bins/weft-all" "$ctx/bin/weft-all"
model_dir=${WEFT_MODEL_DIR:-$cache/models/$model_name}
ort_lib=${WEFT_ORT_LIB:-$cache/onnxruntime-$ort_version/libonnxruntime.so.$ort_version}
if [ ! -f "$model_dir/model.safetensors" ] || [ ! -f "$ort_lib" ]; then
  WEFT_ORT_LIB=$ort_lib tools/fetch-model.sh "$model_dir" >/dev/null || die "tools/fetch-model.sh"
fi
cp -rp "$model_dir" "$ctx/model/$model_name"
cp -p "$ort_lib" "$ctx/model/libonnxruntime.so"
# The Dockerfile as it is but for its first line, `# syntax=docker/dockerfile:1`:
# that directive makes BuildKit pull its frontend image from Docker Hub,
# which this machine cannot reach; dockerd's built-in frontend builds the
# same file (RUN --mount included).
dockerfile=$work/Dockerfile
sed '1{/^# syntax=/d}' Dockerfile >"$dockerfile"
build_image() { # target tag (the image it replaces is removed)
  local before
  before=$(docker image inspect -f '{{.Id}}' "$2" 2>/dev/null || true)
  if ! "${build[@]}" --network host -f "$dockerfile" --target "$1" -t "$2" \
    --build-arg BINARIES=prebuilt --build-arg MODEL=prebuilt-model "$ctx" >"$work/build-$1.log" 2>&1; then
    tail -n 30 "$work/build-$1.log" >&2
    die "docker build --target $1"
  fi
  if [ -n "$before" ] && [ "$before" != "$(docker image inspect -f '{{.Id}}' "$2")" ]; then
    docker rmi "$before" >/dev/null 2>&1 || true
  fi
  echo "built $2 (--target $1)"
}
build_image runtime "$image"
build_image local-model "$image_model"
# nats-server for the e2e test: Debian's, from the same base, non-root (uid
# 10001 like weft's: it writes the test's store directory).
cat >"$work/nats.Dockerfile" <<EOF
FROM $base_image
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nats-server=2.9.10-1+b3 \\
 && rm -rf /var/lib/apt/lists/* \\
 && groupadd --system --gid $uid nats-smoke \\
 && useradd --system --uid $uid --gid $uid --no-create-home nats-smoke
USER $uid:$uid
ENTRYPOINT ["nats-server"]
EOF
if ! "${build[@]}" --network host -t "$image_nats" - <"$work/nats.Dockerfile" >"$work/build-nats.log" 2>&1; then
  tail -n 30 "$work/build-nats.log" >&2
  die "docker build $image_nats"
fi
echo "built $image_nats"
# Each new binary leaves its layers in BuildKit's cache: keep it small on a
# machine that runs this often.
docker builder prune -f --keep-storage 2gb >/dev/null 2>&1 || true
docker run --rm --network host --read-only --cap-drop ALL --security-opt no-new-privileges \
  --label "weft-smoke=$run_id" "$image_nats" --version || die "nats-server --version in $image_nats"

# --- 4. each binary as the manifests run it ----------------------------------
phase containers "each binary as uid $uid, read-only, the manifests' volumes"
# The volumes of deploy/k8s/base for each program (the `weft` CLI: those of
# a crawl job without the git credentials): config read-only, the data
# directory, /tmp (emptyDir: a tmpfs of the manifest's size limit), the
# query's API keys and the crawl jobs' git credentials read-only.
volumes() { # program config-dir auth-dir git-dir data-dir
  local program=$1 config=$2 auth=$3 git=$4 data=$5
  local v=(-v "$config:/etc/weft:ro")
  case $program in
    weft-chunker) v+=(--tmpfs /tmp:rw,nosuid,nodev,size=64m) ;;
    weft-embedder) v+=(-v "$data:/var/lib/weft" --tmpfs /tmp:rw,nosuid,nodev,size=64m) ;;
    weft-query) v+=(-v "$data:/var/lib/weft" --tmpfs /tmp:rw,nosuid,nodev,size=64m -v "$auth:/etc/weft-auth:ro") ;;
    weft-crawler) v+=(-v "$data:/var/lib/weft" --tmpfs /tmp:rw,nosuid,nodev,size=256m -v "$git:/etc/weft-git:ro") ;;
    weft) v+=(-v "$data:/var/lib/weft" --tmpfs /tmp:rw,nosuid,nodev,size=256m) ;;
    *) return 1 ;;
  esac
  printf '%s\n' "${v[@]}"
}
hardening=(--network host --read-only --cap-drop ALL --security-opt no-new-privileges)
hardened=("${hardening[@]}" --label "weft-smoke=$run_id")
config=$work/config auth=$work/auth git=$work/git
mkdir -p "$config" "$auth" "$git"
cp deploy/k8s/base/weft.toml deploy/k8s/base/org.toml "$config/"
for p in "${programs[@]}"; do
  mkdir -p "$work/data-$p"
  chown "$uid:$uid" "$work/data-$p"
done
chmod -R a+rX "$config" "$auth" "$git"
in_container() { # image program args...
  local img=$1 program=$2
  shift 2
  local v
  mapfile -t v < <(volumes "$program" "$config" "$auth" "$git" "$work/data-$program")
  docker run --rm "${hardened[@]}" "${v[@]}" "$img" "$program" "$@"
}
# The user, the read-only root and the writable volumes, seen from inside.
for p in "${programs[@]}"; do
  mapfile -t v < <(volumes "$p" "$config" "$auth" "$git" "$work/data-$p")
  seen=$(docker run --rm "${hardened[@]}" "${v[@]}" --entrypoint sh "$image" -c '
    id -u; id -g
    touch /usr/local/bin/x 2>/dev/null && echo "root file system writable"
    touch /tmp/x || echo "/tmp not writable"
    if [ -d /var/lib/weft ] && grep -q " /var/lib/weft " /proc/mounts; then touch /var/lib/weft/x || echo "/var/lib/weft not writable"; fi
    touch /etc/weft/x 2>/dev/null && echo "/etc/weft writable"
    grep -E "^CapEff" /proc/self/status
    true') || die "$p: the probe container failed"
  [ "$seen" = "$(printf '%s\n%s\nCapEff:\t0000000000000000' $uid $uid)" ] || die "$p's container: $seen"
done
echo "uid/gid $uid, root file system read-only, /tmp and /var/lib/weft writable, /etc/weft read-only, no capability: as the manifests"
for img in "$image" "$image_model"; do
  for p in "${programs[@]}"; do
    out=$(in_container "$img" "$p" --version 2>&1) || die "$p --version in $img: $out"
    in_container "$img" "$p" --help >/dev/null 2>&1 || die "$p --help in $img"
    printf '  %-24s %-14s --version: %s; --help: ok\n' "$img" "$p" "$out"
  done
done

# Long-running: NATS, then weft-chunker (the plain image) and weft-embedder
# (the local-model image), with the manifests' weft.toml (stores embedded,
# provider = "local"); a crawl job indexes a small tree through them; then
# weft-query (local-model) over the embedder's data directory (embedded
# stores: the query side reads the files the embedder writes) answers a
# search with its API key.
nats_port=$(free_port)
mkdir -p "$work/nats-store"
chown "$uid:$uid" "$work/nats-store"
docker run -d --name "weft-smoke-$run_id-nats" "${hardened[@]}" --tmpfs /tmp:rw,size=64m \
  -v "$work/nats-store:$work/nats-store" "$image_nats" \
  -js -a 127.0.0.1 -p "$nats_port" -sd "$work/nats-store" >/dev/null || die "start nats-server"
for _ in $(seq 1 100); do
  listening "$nats_port" && break
  sleep 0.2
done
listening "$nats_port" || die "nats-server: not listening on $nats_port: $(docker logs "weft-smoke-$run_id-nats" 2>&1 | tail -n 5)"
key_json=$(in_container "$image" weft keys new --id smoke --project '*' --json) || die "weft keys new"
python3 -c 'import json,sys; print(json.load(sys.stdin)["entry_toml"], end="")' <<<"$key_json" >"$auth/keys.toml"
api_key=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])' <<<"$key_json")
chmod a+r "$auth/keys.toml"
declare -A metrics_port
service_env=(-e "WEFT__NATS__URL=nats://127.0.0.1:$nats_port" -e WEFT__STORES__VECTOR=embedded
  -e WEFT__STORES__TEXT=embedded -e WEFT__EMBEDDING__PROVIDER=local -e WEFT_LOG=info)
query_port=$(free_port)
start_service() { # program image data-dir
  local v port
  port=$(free_port)
  metrics_port[$1]=$port
  mapfile -t v < <(volumes "$1" "$config" "$auth" "$git" "$3")
  docker run -d --name "weft-smoke-$run_id-$1" "${hardened[@]}" "${v[@]}" "${service_env[@]}" \
    -e "WEFT__TELEMETRY__METRICS_LISTEN=127.0.0.1:$port" -e "WEFT__QUERY__LISTEN=127.0.0.1:$query_port" \
    "$2" "$1" --config /etc/weft/weft.toml >/dev/null || die "docker run $1"
}
metrics() { curl -fsS --max-time 2 "http://127.0.0.1:${metrics_port[$1]}/metrics" 2>/dev/null; }
# A unary gRPC call by hand over h2c (a 5-byte frame header, then the
# message); prints the response's bytes in hex.
grpc_call() { # method message-hex [header...]
  local method=$1 hex=$2
  shift 2
  local headers=()
  for h in "$@"; do headers+=(-H "$h"); done
  python3 -c 'import sys; m = bytes.fromhex(sys.argv[1]); sys.stdout.buffer.write(b"\0" + len(m).to_bytes(4, "big") + m)' "$hex" >"$work/grpc-request"
  # An answer that ends the stream before the request's body is sent makes
  # curl exit non-zero (RST_STREAM); what it received is what counts.
  { curl -sS --max-time 20 --http2-prior-knowledge -X POST -H 'content-type: application/grpc' -H 'te: trailers' \
    "${headers[@]}" --data-binary @"$work/grpc-request" "http://127.0.0.1:$query_port/$method" 2>/dev/null || true; } |
    od -An -tx1 | tr -d ' \n'
}
wait_ready() { # program: /metrics answers (weft-query: and gRPC health says SERVING)
  local name=weft-smoke-$run_id-$1 ready="" user ro
  for _ in $(seq 1 300); do
    [ "$(docker inspect -f '{{.State.Running}}' "$name" 2>/dev/null)" = true ] ||
      die "$1 exited: $(docker logs "$name" 2>&1 | tail -n 20)"
    if metrics "$1" >/dev/null; then
      ready=/metrics
      if [ "$1" = weft-query ]; then
        # grpc.health.v1.Health/Check (service ""): {status: SERVING} = 0801.
        [ "$(grpc_call grpc.health.v1.Health/Check "")" = 00000000020801 ] && ready="/metrics, gRPC health SERVING" || ready=""
      fi
    fi
    [ -n "$ready" ] && break
    sleep 0.2
  done
  [ -n "$ready" ] || die "$1: not ready in 60 s: $(docker logs "$name" 2>&1 | tail -n 20)"
  user=$(docker top "$name" -o pid,uid,args | awk 'NR == 2 { print $2 }')
  ro=$(docker inspect -f 'read-only root {{.HostConfig.ReadonlyRootfs}}, cap-drop {{.HostConfig.CapDrop}}, {{.HostConfig.SecurityOpt}}' "$name")
  [ "$user" = "$uid" ] || die "$1 runs as uid $user"
  printf '  %-14s uid %s, %s: ready (%s)\n' "$1" "$user" "$ro" "$ready"
}
start_service weft-chunker "$image" "$work/data-weft-chunker"
start_service weft-embedder "$image_model" "$work/data-weft-embedder"
wait_ready weft-chunker
wait_ready weft-embedder
# A crawl job (the plain image) over a small tree, mounted read-only.
corpus=$work/corpus
mkdir -p "$corpus/docs"
printf '# Rate limiter\n\nThe token bucket hands out permits at a fixed rate; callers over the rate wait for a permit.\n' >"$corpus/docs/rate-limiter.md"
printf '# Widgets\n\nA widget counts events of one kind and reports the total.\n' >"$corpus/docs/widgets.md"
# The same tree as a git repository too: the image's git (without perl)
# clones it, partially, into the data directory, and it is diffed.
repo=$work/repo.git
git init -q --bare "$repo"
git -C "$repo" config uploadpack.allowFilter true
(
  cd "$corpus" && git init -q -b main . && git add -A &&
    git -c user.name=smoke -c user.email=smoke@example.org commit -qm smoke && git push -q "$repo" main
) || die "a git repository for the crawl"
git -C "$repo" symbolic-ref HEAD refs/heads/main
rm -rf "$corpus/.git"
chmod -R a+rX "$corpus" "$repo"
# Owned by the container's user, as a git server's repositories are its own
# (git refuses to serve a repository of another owner).
chown -R "$uid:$uid" "$repo"
mapfile -t v < <(volumes weft-crawler "$config" "$auth" "$git" "$work/data-weft-crawler")
summary=$(docker run --rm "${hardened[@]}" "${v[@]}" "${service_env[@]}" -v "$corpus:/srv/corpus:ro" \
  -v "$repo:/srv/repo.git:ro" -e WEFT__CRAWL__GIT_PROTOCOLS=https,ssh,file \
  "$image" weft-crawler /srv/corpus file:///srv/repo.git --json 2>"$work/crawl.log") ||
  die "weft-crawler: $(tail -n 20 "$work/crawl.log")"
published=$(python3 -c 'import json,sys; print(sum(s["documents_published"] for s in json.load(sys.stdin)["sources"]))' <<<"$summary")
[ "$published" = 4 ] || die "weft-crawler published $published documents, not 4 (2 of the tree, 2 of the repository): $summary"
[ -d "$work/data-weft-crawler/sources/repo/.git" ] || die "no checkout of the repository in the data directory: $(ls -R "$work/data-weft-crawler" | head)"
echo "  weft-crawler   published $published documents of a tree and a git clone (uid $uid, read-only, exited 0)"
for _ in $(seq 1 300); do
  indexed=$(metrics weft-embedder | sed -n 's/^weft_documents_total{outcome="indexed",stage="embedder"} //p')
  [ "${indexed:-0}" -ge 4 ] 2>/dev/null && break
  sleep 0.2
done
[ "${indexed:-0}" -ge 4 ] 2>/dev/null || die "the embedder did not index the 4 documents in 60 s: $(docker logs "weft-smoke-$run_id-weft-embedder" 2>&1 | tail -n 20)"
echo "  weft-embedder  indexed $indexed documents"
start_service weft-query "$image_model" "$work/data-weft-embedder"
wait_ready weft-query
# weft.v1.QueryService/Search {query: "token bucket permits"} with the key:
# the answer names docs/rate-limiter.md.
question='token bucket permits'
query_hex=$(printf '%s' "$question" | od -An -tx1 | tr -d ' \n')
answer=$(grpc_call weft.v1.QueryService/Search "0a$(printf '%02x' ${#question})$query_hex" "authorization: Bearer $api_key")
uri_hex=$(printf 'docs/rate-limiter.md' | od -An -tx1 | tr -d ' \n')
case $answer in
  *"$uri_hex"*) echo "  weft-query     Search over gRPC with the API key: docs/rate-limiter.md found" ;;
  *) die "weft-query's Search did not name docs/rate-limiter.md (response: ${answer:0:200}): $(docker logs "weft-smoke-$run_id-weft-query" 2>&1 | tail -n 20)" ;;
esac
# Without a key: the interceptor answers from the headers, before the
# message is read, and the server then resets the stream it no longer
# reads (RST_STREAM), which races curl's sending of the message. curl 7.88
# then sometimes writes no headers at all and exits 92 ("Stream error in
# the HTTP/2 framing layer"), for 10 and 23 of 300 calls in two runs of
# bench/grpc-no-key.sh (a local `weft serve` with a keys file). So a try
# that reads no grpc-status is tried again (up to 10), and any status read
# must be 16.
unauthorized="" tries=0
while [ -z "$unauthorized" ] && [ "$tries" -lt 10 ]; do
  tries=$((tries + 1))
  unauthorized=$({ curl -sS --max-time 20 --http2-prior-knowledge -X POST -H 'content-type: application/grpc' -H 'te: trailers' \
    --data-binary @"$work/grpc-request" -D - -o /dev/null "http://127.0.0.1:$query_port/weft.v1.QueryService/Search" 2>"$work/unauthorized.err" || true; } |
    tr -d '\r' | sed -n 's/^grpc-status: //p')
done
[ "$unauthorized" = 16 ] || die "weft-query answered a Search without a key (grpc-status ${unauthorized:-none} after $tries tries, not 16 UNAUTHENTICATED; curl: $(tail -n 3 "$work/unauthorized.err"))"
echo "  weft-query     without a key: UNAUTHENTICATED (try $tries of at most 10; curl loses some answers, see above)"
for p in weft-query weft-embedder weft-chunker; do
  docker stop -t 30 "weft-smoke-$run_id-$p" >/dev/null
  code=$(docker inspect -f '{{.State.ExitCode}}' "weft-smoke-$run_id-$p")
  [ "$code" = 0 ] || die "$p exited with $code after SIGTERM: $(docker logs "weft-smoke-$run_id-$p" 2>&1 | tail -n 20)"
  docker rm "weft-smoke-$run_id-$p" >/dev/null
done
echo "  each stopped cleanly on SIGTERM (exit 0)"

# --- 5. the e2e test against containers -------------------------------------
phase e2e "e2e/tests/pipeline.rs with every service and nats-server in a container"
wrappers=$work/bin
# Where the local-model image has the model (its WEFT_MODEL_DIR): the test
# passes WEFT_MODEL_DIR on to the services; no such path on this machine, so
# nothing is mounted over it.
model_in_image=$(docker image inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$image_model" | sed -n 's/^WEFT_MODEL_DIR=//p')
[ -n "$model_in_image" ] || die "$image_model sets no WEFT_MODEL_DIR"
e2e_config=$work/e2e-config
mkdir -p "$wrappers" "$e2e_config" "$work/e2e-data" "$work/home" "$work/tmp"
chown "$uid:$uid" "$work/e2e-data" "$work/home" "$work/tmp"
# One wrapper per program: `docker run` of the image with the manifests'
# volumes (an empty configuration: the test configures by WEFT_* variables),
# every WEFT_* variable of its environment, and each absolute path that
# exists among those variables' values and its arguments mounted at the
# same place (WEFT_MODEL_DIR and WEFT_ORT_LIB read-only). A watcher kills
# the container when the wrapper (then the docker client) dies: a SIGKILLed
# docker client leaves its container running.
write_wrapper() { # name image command volume-args... (command: "" for the image's entrypoint)
  local program=$1 img=$2 command=$3
  shift 3
  {
    echo '#!/usr/bin/env bash'
    echo "# $program in $img, for the e2e tests (written by deploy/smoke-containers.sh)."
    echo 'set -euo pipefail'
    printf 'run=%q image=%q program=%q command=(%s)\n' "$run_id" "$img" "$program" "$command"
    printf 'args=(--rm --name "weft-smoke-$run-$program-$$" --label "weft-smoke=$run"'
    printf ' %q' "${hardening[@]}" "$@"
    echo ')'
    cat <<'EOF'
declare -A mounted=()
mount_path() { # path [ro]: an existing absolute path, at the same place
  local path=$1 mode=${2:-rw}
  case $path in /*) ;; *) return 0 ;; esac
  [ -e "$path" ] && [ -z "${mounted[$path]:-}" ] || return 0
  mounted[$path]=1
  args+=(-v "$path:$path:$mode")
}
for var in $(compgen -e); do
  case $var in
    WEFT_MODEL_DIR | WEFT_ORT_LIB) args+=(-e "$var"); mount_path "${!var}" ro ;;
    WEFT_*) args+=(-e "$var"); mount_path "${!var}" ;;
    RUST_BACKTRACE | RUST_LIB_BACKTRACE) args+=(-e "$var") ;;
  esac
done
for arg in "$@"; do
  mount_path "$arg"
  case $arg in --*=/*) mount_path "${arg#*=}" ;; esac
done
parent=$$
(
  while kill -0 "$parent" 2>/dev/null; do sleep 0.1; done
  docker kill "weft-smoke-$run-$program-$parent" >/dev/null 2>&1 || true
) </dev/null >/dev/null 2>&1 &
exec docker run "${args[@]}" "$image" "${command[@]}" "$@"
EOF
  } >"$wrappers/$program"
  chmod 755 "$wrappers/$program"
}
for p in "${programs[@]}"; do
  mapfile -t v < <(volumes "$p" "$e2e_config" "$auth" "$git" "$work/e2e-data")
  write_wrapper "$p" "$image_model" "$p" "${v[@]}"
done
write_wrapper nats-server "$image_nats" "" --tmpfs /tmp:rw,size=64m

# A SIGKILLed wrapper: its container goes too.
WEFT__NATS__URL=nats://127.0.0.1:$nats_port WEFT__TELEMETRY__METRICS_LISTEN=127.0.0.1:0 \
  WEFT__STORES__VECTOR=embedded WEFT__STORES__TEXT=embedded WEFT_DATA_DIR=$work/e2e-data \
  "$wrappers/weft-chunker" >/dev/null 2>"$work/kill-check.log" &
wrapper_pid=$!
for _ in $(seq 1 100); do
  [ -n "$(docker ps -q --filter "name=weft-smoke-$run_id-weft-chunker-$wrapper_pid")" ] && break
  sleep 0.1
done
[ -n "$(docker ps -q --filter "name=weft-smoke-$run_id-weft-chunker-$wrapper_pid")" ] ||
  die "the wrapper's container did not start: $(cat "$work/kill-check.log")"
sleep 1
kill -KILL "$wrapper_pid"
wait "$wrapper_pid" 2>/dev/null || true
killed_at=$SECONDS
for _ in $(seq 1 100); do
  [ -z "$(docker ps -aq --filter "name=weft-smoke-$run_id-weft-chunker-$wrapper_pid")" ] && break
  sleep 0.1
done
[ -z "$(docker ps -aq --filter "name=weft-smoke-$run_id-weft-chunker-$wrapper_pid")" ] ||
  die "a SIGKILLed wrapper's container still runs"
echo "  a SIGKILLed wrapper's container is gone within $((SECONDS - killed_at + 1)) s"
docker rm -f "weft-smoke-$run_id-nats" >/dev/null

# The test executable: the one cargo test built (cargo test --workspace
# --no-run builds nothing after cargo test --workspace and names it).
exe=${WEFT_SMOKE_PIPELINE_TEST:-}
if [ -z "$exe" ]; then
  exe=$(cargo test --workspace --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and "weft-e2e" in m.get("package_id", "") \
            and m["target"]["name"] == "pipeline" and "test" in m["target"]["kind"] and m.get("executable"):
        print(m["executable"])
') || die "cargo test --workspace --no-run"
fi
[ -x "$exe" ] || die "no pipeline test executable (${exe:-none})"
echo "  test executable: $exe"
# Run as uid 10001 like the containers: the directories the test makes are
# then theirs too (in the cluster: fsGroup). It reaches dockerd through the
# socket's group.
cp "$exe" "$work/pipeline-test"
chmod 755 "$work/pipeline-test"
socket_gid=$(stat -c %g /var/run/docker.sock)
e2e_started=$SECONDS
e2e_since=$(date +%s)
if ! (cd "$work/tmp" && env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$work/home" TMPDIR="$work/tmp" \
  RUST_BACKTRACE=1 WEFT_E2E_BIN_DIR="$wrappers" WEFT_NATS_SERVER="$wrappers/nats-server" \
  WEFT_MODEL_DIR="$model_in_image" \
  setpriv --reuid "$uid" --regid "$uid" --groups "$socket_gid" --inh-caps=-all \
  timeout 900 "$work/pipeline-test" --exact crawl_chunk_embed_query_with_crashes_changes_and_poison --nocapture \
  >"$work/e2e.log" 2>&1); then
  tail -n 80 "$work/e2e.log" >&2
  die "the pipeline test failed against the containers"
fi
e2e_result=$(grep -E '^test result:' "$work/e2e.log" | tail -n 1)
# What ran in containers: the containers the test's wrappers started.
started_containers=$(docker events --since "$e2e_since" --until "$(date +%s)" --filter "label=weft-smoke=$run_id" \
  --filter event=start --format '{{.Actor.Attributes.name}}' |
  sed -E "s/^weft-smoke-$run_id-(.*)-[0-9]+\$/\1/" | sort | uniq -c | awk '{ printf "%s %s×%s", (NR > 1 ? "," : ""), $2, $1 }')
[ -n "$started_containers" ] || die "the test started no container: did it use the wrappers?"
echo "  containers the test started:$started_containers"
grep -E '^(killed|stores hold)' "$work/e2e.log" | sed 's/^/  /'
echo "  $e2e_result ($((SECONDS - e2e_started)) s)"
# The test SIGKILLs the wrappers it still runs when it ends: their watchers
# take the containers down in the next moments.
for _ in $(seq 1 150); do
  [ -z "$(docker ps -aq --filter "label=weft-smoke=$run_id")" ] && break
  sleep 0.1
done
[ -z "$(docker ps -aq --filter "label=weft-smoke=$run_id")" ] || die "containers left running after the test: $(docker ps -a --filter "label=weft-smoke=$run_id" --format '{{.Names}}' | tr '\n' ' ')"

# --- 6. summary -------------------------------------------------------------------
phase summary "sizes and timings"
mb() { echo $((($1 + 500000) / 1000000)); }
for img in "$base_image" "$image" "$image_model" "$image_nats"; do
  printf '  image %-32s %5s MB\n' "$img" "$(mb "$(docker image inspect -f '{{.Size}}' "$img")")"
done
echo "  layers of $image_model (docker history):"
docker history --no-trunc --format '{{.Size}}\t{{.CreatedBy}}' "$image_model" | awk -F'\t' '$1 != "0B" { printf "    %8s  %s\n", $1, substr($2, 1, 70) }'
printf '  %-14s %5s MB stripped (target/debug: %s MB)\n' weft-all \
  "$(mb "$(stat -c %s "$ctx/bin/weft-all")")" "$(mb "$(stat -c %s "$bins/weft-all")")"
# The release image stays under 250 MB (issue 32). This one holds the test
# build's weft-all, which is larger than the release build's (122 MB
# against 111 MB stripped, measured 2026-11-27: an image of 247 MB here, 235
# MB with the release binary): under 261 MB here is under 250 MB there.
size=$(docker image inspect -f '{{.Size}}' "$image")
[ "$size" -lt 261000000 ] || die "$image is $(mb "$size") MB with the test build's binary: the release image would be over 250 MB"
phase done "timings"
printf '  %s\n' "${timings[@]}"
echo "smoke-containers: passed in $((SECONDS - started)) s: images built, each binary started as uid $uid read-only, e2e pipeline test: $e2e_result"
