#!/usr/bin/env python3
"""The helper of bench/org-scale.sh (issue 32, item 8: one org-scale run).

Subcommands (standard library only):

  corpus    npm tarballs -> bare git repositories of one commit (v1), with a
            second commit (the nightly change) prepared for ~10% of them
  nightly   pushes the prepared second commits into the bare repositories
  serve     git http-backend (CGI) behind TLS on loopback, optionally wanting
            HTTP Basic (the private repositories)
  sample    samples disk (du) and memory (/proc) of the run every few seconds
  peaks     the peaks of a sample file between two times
  jsz       the messages in weft's work-queue streams (NATS monitoring port)
  catalog   dumps the catalog (the NATS key-value bucket) as JSON
  expected  what the chunkers make of each repository's HEAD (weft chunk)
  check     the catalog against the expected documents and chunk counts
"""

import argparse
import base64
import http.server
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tarfile
import time
import urllib.request

GIT_ENV = {
    "GIT_AUTHOR_NAME": "org-scale",
    "GIT_AUTHOR_EMAIL": "org-scale@example.invalid",
    "GIT_COMMITTER_NAME": "org-scale",
    "GIT_COMMITTER_EMAIL": "org-scale@example.invalid",
}


def git(*args, cwd=None, date="2026-11-01T00:00:00Z"):
    env = dict(os.environ, **GIT_ENV, GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    out = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"git {' '.join(args)} in {cwd}: {out.stderr}")
    return out.stdout


def repo_name(npm_name):
    return npm_name.replace("@", "").replace("/", "-")


def packages(path):
    for line in open(path):
        line = line.strip()
        if line and not line.startswith("#"):
            name, version = line.split()
            yield name, version


def is_text(path):
    with open(path, "rb") as f:
        head = f.read(8192)
    return b"\0" not in head


# --- corpus -----------------------------------------------------------------

def cmd_corpus(a):
    os.makedirs(a.cache, exist_ok=True)
    work_root = os.path.join(a.out, "work")
    bare_root = os.path.join(a.out, "repos")
    shutil.rmtree(a.out, ignore_errors=True)
    os.makedirs(work_root)
    os.makedirs(bare_root)
    plan = {}
    for i, (name, version) in enumerate(packages(a.packages)):
        tgz = os.path.join(a.cache, f"{repo_name(name)}-{version}.tgz")
        if not os.path.exists(tgz):
            subprocess.run(["npm", "pack", f"{name}@{version}", "--silent",
                            "--pack-destination", a.cache], check=True,
                           stdout=subprocess.DEVNULL)
        repo = repo_name(name)
        work = os.path.join(work_root, repo)
        with tarfile.open(tgz) as t:
            top = t.getnames()[0].split("/")[0]
            t.extractall(work + ".x", filter="data")
        shutil.move(os.path.join(work + ".x", top), work)
        shutil.rmtree(work + ".x")
        files = sorted(
            os.path.relpath(os.path.join(d, f), work)
            for d, _, fs in os.walk(work) for f in fs
        )
        texts = [f for f in files if is_text(os.path.join(work, f))]
        changed = i % 10 == 3  # ~10% get a nightly change
        entry = {"name": name, "version": version, "repo": repo, "nightly": None}
        held = None
        if changed:
            lower = {f: f.lower() for f in texts}
            readme = next((f for f in texts if lower[f].startswith("readme")), None)
            license_ = next((f for f in texts if lower[f].startswith("licen")), None)
            code = sorted((f for f in texts if re.search(r"\.(c|m)?js$", f) and "/" not in f),
                          key=lambda f: -os.path.getsize(os.path.join(work, f)))
            code = code[0] if code else None
            rest = [f for f in texts if f not in (readme, license_, code, "package.json")]
            held = max(rest, key=lambda f: os.path.getsize(os.path.join(work, f))) if rest else None
            entry["nightly"] = {"modify": [f for f in (readme, code) if f],
                                "add": held, "remove": license_}
        # v1: the package minus the file the nightly commit adds
        git("init", "-q", "-b", "main", cwd=work)
        if held:
            os.rename(os.path.join(work, held), os.path.join(a.out, f"{repo}.held"))
        git("add", "-A", cwd=work)
        git("commit", "-q", "-m", f"{name} {version} (v1)", cwd=work)
        bare = os.path.join(bare_root, f"{repo}.git")
        git("clone", "-q", "--bare", work, bare)
        git("config", "uploadpack.allowFilter", "true", cwd=bare)
        git("config", "http.receivepack", "false", cwd=bare)
        if changed:
            n = entry["nightly"]
            if held:
                dest = os.path.join(work, held)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                os.rename(os.path.join(a.out, f"{repo}.held"), dest)
            for f in n["modify"]:
                with open(os.path.join(work, f), "a") as out:
                    if f.lower().startswith("readme"):
                        out.write(f"\n\n## Nightly notes\n\nThe nightly build of {name} checks"
                                  f" every option again and reports what changed since {version}.\n")
                    else:
                        ident = re.sub(r"[^A-Za-z0-9]", "_", repo)
                        out.write(f"\n\n/**\n * Nightly helper of {name}: trims and lowercases a value.\n"
                                  f" */\nfunction nightly_{ident}(value) {{\n"
                                  f"  return String(value).trim().toLowerCase();\n}}\n")
            if n["remove"]:
                os.remove(os.path.join(work, n["remove"]))
            git("add", "-A", cwd=work)
            git("commit", "-q", "-m", f"{name}: the nightly change (v2)", cwd=work,
                date="2026-11-02T00:00:00Z")
        plan[repo] = entry
    json.dump(plan, open(os.path.join(a.out, "plan.json"), "w"), indent=1)
    print(f"{len(plan)} repositories, {sum(1 for e in plan.values() if e['nightly'])} with a nightly change")


def bare_of(corpus, repo):
    """The bare repository of `repo`: repos/ (public, ssh) or private-repos/."""
    for d in ("repos", "private-repos"):
        path = os.path.join(corpus, d, f"{repo}.git")
        if os.path.exists(path):
            return path
    sys.exit(f"no bare repository of {repo}")


def cmd_nightly(a):
    plan = json.load(open(os.path.join(a.out, "plan.json")))
    n = 0
    for repo, e in plan.items():
        if e["nightly"]:
            work = os.path.join(a.out, "work", repo)
            git("push", "-q", bare_of(a.out, repo), "main:main", cwd=work)
            n += 1
    print(f"pushed the nightly commit of {n} repositories")


# --- serve ------------------------------------------------------------------

BACKEND = "/usr/lib/git-core/git-http-backend"


def make_handler(root, auth, log):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # the access log: never the Authorization header
            log.write("%s %s\n" % (time.strftime("%H:%M:%S"), fmt % args))
            log.flush()

        def body(self):
            if "content-length" in self.headers:
                return self.rfile.read(int(self.headers["content-length"]))
            if self.headers.get("transfer-encoding", "").lower() == "chunked":
                data = b""
                while True:
                    size = int(self.rfile.readline().strip().split(b";")[0], 16)
                    chunk = self.rfile.read(size + 2)
                    if size == 0:
                        return data
                    data += chunk[:size]
            return b""

        def handle_any(self):
            body = self.body()
            if auth and self.headers.get("authorization") != auth:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            path, _, query = self.path.partition("?")
            env = {
                "GIT_PROJECT_ROOT": root, "GIT_HTTP_EXPORT_ALL": "1",
                "REQUEST_METHOD": self.command, "PATH_INFO": path, "QUERY_STRING": query,
                "CONTENT_LENGTH": str(len(body)), "REMOTE_ADDR": "127.0.0.1",
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            }
            if auth:
                env["REMOTE_USER"] = "alice"
            for h, v in (("content-type", "CONTENT_TYPE"), ("git-protocol", "GIT_PROTOCOL"),
                         ("content-encoding", "HTTP_CONTENT_ENCODING")):
                if h in self.headers:
                    env[v] = self.headers[h]
            out = subprocess.run([BACKEND], input=body, env=env, capture_output=True).stdout
            sep = out.find(b"\r\n\r\n")
            gap = 4
            if sep < 0:
                sep, gap = out.find(b"\n\n"), 2
            head, payload = out[:sep].decode("latin-1"), out[sep + gap:]
            status, headers = 200, []
            for line in head.splitlines():
                k, _, v = line.partition(":")
                if k.lower() == "status":
                    status = int(v.strip().split()[0])
                elif k:
                    headers.append((k, v.strip()))
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = handle_any

    return Handler


def cmd_serve(a):
    auth = None
    if a.user:
        password = open(a.password_file).read().strip()
        auth = "Basic " + base64.b64encode(f"{a.user}:{password}".encode()).decode()
    log = open(a.log, "a")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", a.port), make_handler(a.root, auth, log))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    server.serve_forever()


# --- sample / peaks -----------------------------------------------------------

def du_kib(path):
    if not os.path.exists(path):
        return 0
    out = subprocess.run(["du", "-sk", path], capture_output=True, text=True).stdout
    return int(out.split()[0]) if out else 0


def ancestors(pid):
    """The pids above `pid` (its parent, its parent's parent, ...)."""
    out = []
    while pid > 1:
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            break
        pid = int(stat[stat.rindex(")") + 2:].split()[1])
        out.append(pid)
    return out


def proc_mem(root):
    """name -> (VmRSS KiB, VmHWM KiB), each the largest of the processes of
    that name below `root` (the run's script: other work on the machine may
    run processes of the same names)."""
    names = ("weft-crawler", "weft-chunker", "weft-embedder", "nats-server", "sshd")
    seen = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            status = open(f"/proc/{pid}/status").read()
        except OSError:
            continue
        m = re.search(r"^Name:\s*(\S+)", status, re.M)
        name = m.group(1) if m else ""
        if name not in names or root not in ancestors(int(pid)):
            continue
        rss = re.search(r"^VmRSS:\s*(\d+)", status, re.M)
        hwm = re.search(r"^VmHWM:\s*(\d+)", status, re.M)
        if not rss:
            continue
        r, h = seen.get(name, (0, 0))
        seen[name] = (max(r, int(rss.group(1))), max(h, int(hwm.group(1))))
    return seen


def cmd_sample(a):
    dirs = dict(d.split("=", 1) for d in a.dir)
    with open(a.out, "a") as out:
        while not os.path.exists(a.stop_file):
            sample = {"t": time.time(), "disk_kib": {k: du_kib(v) for k, v in dirs.items()},
                      "mem_kib": {k: {"rss": r, "hwm": h} for k, (r, h) in proc_mem(a.root).items()},
                      "load": float(open("/proc/loadavg").read().split()[0])}
            out.write(json.dumps(sample) + "\n")
            out.flush()
            time.sleep(a.interval)


def cmd_peaks(a):
    disk, rss, hwm, load = {}, {}, {}, []
    for line in open(a.samples):
        s = json.loads(line)
        if not (a.start <= s["t"] <= a.end):
            continue
        load.append(s.get("load", 0))
        for k, v in s["disk_kib"].items():
            disk[k] = max(disk.get(k, 0), v)
        for k, v in s["mem_kib"].items():
            rss[k] = max(rss.get(k, 0), v["rss"])
            hwm[k] = max(hwm.get(k, 0), v["hwm"])
    load = {"min": min(load), "mean": round(sum(load) / len(load), 2), "max": max(load)} if load else {}
    print(json.dumps({"disk_kib": disk, "rss_kib": rss, "hwm_kib": hwm, "load1": load}))


# --- NATS ---------------------------------------------------------------------

def cmd_jsz(a):
    with urllib.request.urlopen(f"{a.monitor}/jsz?streams=true") as r:
        jsz = json.load(r)
    streams = {}
    for acc in jsz.get("account_details", []):
        for d in acc.get("stream_detail", []):
            streams[d["name"]] = d["state"]["messages"]
    print(json.dumps(streams))


class Nats:
    """A minimal NATS client: request/reply over one inbox."""

    def __init__(self, host, port):
        self.s = socket.create_connection((host, port))
        self.f = self.s.makefile("rb")
        self.f.readline()  # INFO
        self.s.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\n'
                       b"PING\r\nSUB _INBOX.orgscale 1\r\n")
        while self.f.readline().strip() != b"PONG":
            pass

    def request(self, subject, payload):
        data = json.dumps(payload).encode()
        self.s.sendall(b"PUB %s _INBOX.orgscale %d\r\n%s\r\n" % (subject.encode(), len(data), data))
        while True:
            line = self.f.readline()
            if line.startswith(b"PING"):
                self.s.sendall(b"PONG\r\n")
            elif line.startswith(b"MSG"):
                n = int(line.split()[-1])
                body = self.f.read(n + 2)[:n]
                return json.loads(body)
            elif line.startswith(b"HMSG"):
                n = int(line.split()[-1])
                self.f.read(n + 2)  # a no-responders status
                raise RuntimeError(f"no responder for {subject}")
            elif line.startswith(b"-ERR"):
                raise RuntimeError(line.decode())


def cmd_catalog(a):
    host, port = a.nats.rsplit(":", 1)
    nc = Nats(host, int(port))
    stream = f"KV_{a.bucket}"
    prefix = f"$KV.{a.bucket}.doc."
    docs = []
    seq = 1
    while True:
        r = nc.request(f"$JS.API.STREAM.MSG.GET.{stream}",
                       {"seq": seq, "next_by_subj": f"$KV.{a.bucket}.>"})
        if "error" in r:
            break
        m = r["message"]
        seq = m["seq"] + 1
        hdrs = base64.b64decode(m.get("hdrs", "") or b"").decode()
        if "KV-Operation" in hdrs and ("DEL" in hdrs or "PURGE" in hdrs):
            continue
        if not m["subject"].startswith(prefix):
            continue
        rec = json.loads(base64.b64decode(m.get("data", "") or b""))
        docs.append({"key": m["subject"][len(prefix):], "project": rec["project"], "uri": rec["uri"],
                     "chunk_count": rec["chunk_count"], "content_hash": rec["content_hash"]})
    json.dump(docs, open(a.out, "w"))
    print(f"{len(docs)} document records, {sum(d['chunk_count'] for d in docs)} chunks")


# --- expected / check -----------------------------------------------------------

def cmd_expected(a):
    plan = json.load(open(os.path.join(a.corpus, "plan.json")))
    expected = {}
    tmp = os.path.join(a.corpus, "expected-tree")
    for repo in plan:
        if a.projects and repo not in a.projects.split(","):
            continue
        shutil.rmtree(tmp, ignore_errors=True)
        git("clone", "-q", bare_of(a.corpus, repo), tmp)
        out = subprocess.run([a.weft, "chunk", tmp, "--project", repo, "--json"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"weft chunk {repo}: {out.stderr}")
        d = json.loads(out.stdout)
        files = {f["uri"]: len(f["chunks"]) for f in d["files"]}
        skipped = {s["uri"]: s.get("reason", "") for s in d.get("skipped", [])}
        head = git("rev-parse", "HEAD", cwd=tmp).strip()
        expected[repo] = {"head": head, "files": files, "skipped": skipped}
    shutil.rmtree(tmp, ignore_errors=True)
    json.dump(expected, open(a.out, "w"), indent=0)
    print(f"{len(expected)} repositories, {sum(len(e['files']) for e in expected.values())} documents,"
          f" {sum(sum(e['files'].values()) for e in expected.values())} chunks,"
          f" {sum(len(e['skipped']) for e in expected.values())} skipped files")


def cmd_check(a):
    expected = json.load(open(a.expected))
    docs = json.load(open(a.catalog))
    by = {}
    for d in docs:
        by.setdefault((d["project"], d["uri"]), []).append(d)
    problems = []
    matched = 0
    for repo, e in expected.items():
        for uri, n in e["files"].items():
            got = by.pop((repo, uri), [])
            if not got:
                problems.append(f"lost: {repo}/{uri} ({n} chunks expected, no record)")
            elif len(got) > 1:
                problems.append(f"twice: {repo}/{uri}: {len(got)} records")
            elif got[0]["chunk_count"] != n:
                problems.append(f"count: {repo}/{uri}: {got[0]['chunk_count']} chunks recorded, {n} expected")
            else:
                matched += 1
        for uri in e["skipped"]:
            got = by.pop((repo, uri), [])
            if got and got[0]["chunk_count"] != 0:
                problems.append(f"skipped file with chunks: {repo}/{uri}")
    for (project, uri), got in sorted(by.items()):
        problems.append(f"extra: {project}/{uri} ({got[0]['chunk_count']} chunks), not in the source")
    total_expected = sum(sum(e["files"].values()) for e in expected.values())
    total_catalog = sum(d["chunk_count"] for d in docs)
    result = {
        "repositories": len(expected),
        "documents_expected": sum(len(e["files"]) for e in expected.values()),
        "documents_matched": matched,
        "catalog_records": len(docs),
        "chunks_expected": total_expected,
        "chunks_in_catalog": total_catalog,
        "problems": problems,
    }
    if a.indexed:
        gens = json.load(open(a.indexed))
        result["generations_list"] = gens
    print(json.dumps(result, indent=1))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("corpus")
    c.add_argument("--packages", required=True)
    c.add_argument("--cache", required=True)
    c.add_argument("--out", required=True)
    c = sub.add_parser("nightly")
    c.add_argument("--out", required=True)
    c = sub.add_parser("serve")
    c.add_argument("--root", required=True)
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--cert", required=True)
    c.add_argument("--key", required=True)
    c.add_argument("--user")
    c.add_argument("--password-file")
    c.add_argument("--log", required=True)
    c = sub.add_parser("sample")
    c.add_argument("--out", required=True)
    c.add_argument("--dir", action="append", default=[])
    c.add_argument("--interval", type=float, default=3)
    c.add_argument("--stop-file", required=True)
    c.add_argument("--root", type=int, required=True, help="only processes below this pid")
    c = sub.add_parser("peaks")
    c.add_argument("--samples", required=True)
    c.add_argument("--start", type=float, required=True)
    c.add_argument("--end", type=float, required=True)
    c = sub.add_parser("jsz")
    c.add_argument("--monitor", required=True)
    c = sub.add_parser("catalog")
    c.add_argument("--nats", required=True)
    c.add_argument("--bucket", default="weft-catalog")
    c.add_argument("--out", required=True)
    c = sub.add_parser("expected")
    c.add_argument("--corpus", required=True)
    c.add_argument("--weft", required=True)
    c.add_argument("--projects")
    c.add_argument("--out", required=True)
    c = sub.add_parser("check")
    c.add_argument("--expected", required=True)
    c.add_argument("--catalog", required=True)
    c.add_argument("--indexed")
    a = p.parse_args()
    globals()["cmd_" + a.cmd](a)


if __name__ == "__main__":
    main()
