"""Which kernels ONNX Runtime ran: perf samples in libonnxruntime grouped by
4 KB page, each hot page's instructions classified (AMX, VNNI, AVX2 int8,
fp32 FMA). The library has no symbols, so the instructions tell the kernel.

    perf record -e cpu-clock -F 499 -o int8.perf \
        target/release/embed-throughput $G --chunks 256 --precision int8
    python3 bench/ort-kernels.py int8.perf ~/.cache/weft/onnxruntime-1.32.0/libonnxruntime.so.1.32.0

A page holding several kinds is counted as the first of: AMX, AVX-512 VNNI,
AVX-VNNI, vpmaddubsw, fp32 FMA.
"""
import collections, re, subprocess, sys, os
perf_file, lib = sys.argv[1], sys.argv[2]
out = subprocess.run(["perf", "report", "-i", perf_file, "--sort", "dso,sym", "--stdio"],
                     capture_output=True, text=True).stdout
pages, total = collections.Counter(), 0.0
for line in out.splitlines():
    m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[\.\]\s+(0x[0-9a-f]+)", line)
    if m and m.group(2).startswith("libonnxruntime"):
        pages[int(m.group(3), 16) // 4096 * 4096] += float(m.group(1))
    m2 = re.match(r"\s*([\d.]+)%", line)
    if m2: total += float(m2.group(1))
classes = {"AMX (tdpbusd)": r"\btdpbusd\b", "AVX-512 VNNI (vpdpbusd zmm)": r"\bvpdpbusds?\b.*zmm",
           "AVX-VNNI (vpdpbusd ymm)": r"\bvpdpbusds?\b.*ymm", "AVX2/AVX-512 int8 (vpmaddubsw)": r"\bvpmaddubsw\b",
           "fp32 FMA zmm": r"\bvfmadd\d+ps\b.*zmm", "fp32 FMA ymm": r"\bvfmadd\d+ps\b.*ymm"}
summary = collections.Counter()
print(f"libonnxruntime: {sum(pages.values()):.1f}% of samples")
for page, pct in pages.most_common(12):
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--start-address={page:#x}",
                          f"--stop-address={page + 4096:#x}", lib], capture_output=True, text=True).stdout
    found = [c for c, rx in classes.items() if re.search(rx, asm)]
    kind = found[0] if found else "other"
    summary[kind] += pct
    print(f"  {page:#010x} {pct:5.1f}%  {', '.join(found) or 'other'}")
print("by kind (hot pages):", dict(summary))
