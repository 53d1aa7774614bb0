"""What N concurrent oversized Search requests cost the query server.

Sends N (default 16) Search requests of ~15.3 MB at once (900k strings in
`projects`, issue 33's attack) to a running `weft serve` / `weft-query`,
with or without an API key, and prints each answer's code, the time, and
the server's resident memory before and at its peak (sampled every 50 ms
from /proc/PID/status).

    python3 -m venv /tmp/grpcvenv && /tmp/grpcvenv/bin/pip install grpcio
    WEFT__QUERY__API_KEYS_FILE=keys.toml weft serve --listen 127.0.0.1:47051 &
    /tmp/grpcvenv/bin/python bench/oversized-requests.py 127.0.0.1:47051 $! [N] [API_KEY]

Without a key, the server should refuse every request from its headers
(UNAUTHENTICATED) without reading the message. With a key and
`WEFT__QUERY__MAX_REQUEST_BYTES` above the message's size, the messages
are read and decoded: that cost is what an unauthenticated caller could
impose before issue 33.
"""

import sys
import threading
import time

import grpc


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    addr, pid = sys.argv[1], int(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    key = sys.argv[4] if len(sys.argv) > 4 else None
    s = b"0123456789abcde"
    # field 1 (query) "q", then field 2 (projects, repeated string) 900k times
    body = b"\x0a\x01q" + (b"\x12" + bytes([len(s)]) + s) * 900_000
    channel = grpc.insecure_channel(addr, options=[("grpc.max_send_message_length", 64 << 20)])
    call = channel.unary_unary(
        "/weft.v1.QueryService/Search", request_serializer=None, response_deserializer=None
    )
    metadata = [("authorization", f"Bearer {key}")] if key else None
    before = rss_kib(pid)
    peak = [before]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_kib(pid))
            time.sleep(0.05)

    answers = []

    def send():
        t = time.time()
        try:
            call(body, timeout=60, metadata=metadata)
            answers.append(("OK", time.time() - t))
        except grpc.RpcError as e:
            answers.append((e.code().name, time.time() - t))

    sampler = threading.Thread(target=sample)
    sampler.start()
    senders = [threading.Thread(target=send) for _ in range(n)]
    started = time.time()
    for t in senders:
        t.start()
    for t in senders:
        t.join()
    elapsed = time.time() - started
    time.sleep(0.5)
    done.set()
    sampler.join()
    print(f"{n} requests of {len(body)} bytes, {'with' if key else 'without'} a key")
    for code in sorted({a[0] for a in answers}):
        times = [a[1] for a in answers if a[0] == code]
        print(f"  {code}: {len(times)}, slowest {max(times):.3f} s")
    print(f"  all answered in {elapsed:.3f} s")
    print(f"  server RSS {before / 1024:.1f} MiB before, {peak[0] / 1024:.1f} MiB at its peak")


if __name__ == "__main__":
    main()
