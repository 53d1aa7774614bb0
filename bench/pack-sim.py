#!/usr/bin/env python3
"""Re-packs the responses `eval-sweep --pack … --dump-spans FILE` wrote, to
compare packing orders without rebuilding weft (bench/RESULTS.md, "Answer in
context, every hit whole and its neighbours after").

    python3 bench/pack-sim.py FILE [CORPUS_ROOT]

A re-implementation of crates/core/src/retrieval/pack.rs's hits-first pass 1
(each matched chunk with the rest of its split unit, "X (Part i/n)", whole or
not at all, by relevance / tokens^e) and pass 2 (neighbours by score), with
an approximate token count (content chars/4 plus an estimated header): its
answer-in-context figures are a little under the packer's. It prints the
packer's own figures from FILE ("real"), then each relevance aggregate (best
score, noisy-or, root of squares, sum of a group's hit scores) and exponent,
then the best 1 or 2 units packed first whatever their size. With
CORPUS_ROOT (the corpus as indexed, e.g. ~/.cache/weft-eval/masked/nodejs-18-api)
it first prints the targets' sizes.
"""
import json, sys, re, math, collections
PART = re.compile(r'^(.*) \(Part (\d+)/(\d+)\)$')
def match(uri, path): return uri == path or uri.endswith('/' + path)
def unit_of(sec):
    m = PART.match(sec)
    return (m.group(1), int(m.group(2))) if m else None
def load(path):
    return [json.loads(l) for l in open(path)]
def cost(d, s, a, b):
    ch = s['chunks'][a:b+1]
    chars = sum(c['chars'] for c in ch) + (b - a) * 2
    hdr = 40 + len(d['uri']) // 4 + max(len(c['section']) for c in ch) // 4
    return math.ceil(chars / 4) + hdr
def cores(s):
    pcs = s['chunks']; out = []
    def cont(i, j):
        pi, pj = unit_of(pcs[i]['section']), unit_of(pcs[j]['section'])
        if not pi or not pj or pi[0] != pj[0]: return False
        return pj[1] == pi[1] + 1 if j > i else pj[1] + 1 == pi[1]
    for i, c in enumerate(pcs):
        if not c['matched']: continue
        a = b = i
        while a > 0 and cont(a, a-1): a -= 1
        while b + 1 < len(pcs) and cont(b, b+1): b += 1
        if (a, b) not in out: out.append((a, b))
    return out
def rel(s, a, b, agg):
    sc = [c['score'] for c in s['chunks'][a:b+1] if c['matched']]
    if not sc: return max(c['score'] for c in s['chunks'][a:b+1])
    if agg == 'max': return max(sc)
    if agg == 'nor':
        p = 1.0
        for x in sc: p *= 1 - min(max(x, 0), 0.999)
        return 1 - p
    if agg == 'sum': return sum(sc)
    if agg == 'sqrt': return math.sqrt(sum(x*x for x in sc))
def pack(q, budget, agg='max', exp=0.25, first=0):
    """Pass 1 by relevance / tokens^exp, after the `first` most relevant
    units whatever their size; then pass 2."""
    items, raw = [], {}
    for di, d in enumerate(q['documents']):
        for si, s in enumerate(d['spans']):
            for a, b in cores(s):
                c = cost(d, s, a, b)
                r = rel(s, a, b, agg)
                raw[(di, si, a, b)] = r
                items.append((r / c ** exp, di, si, a, b))
    items.sort(key=lambda x: (-x[0], x[1], x[2], x[3]))
    if first:
        top = sorted(items, key=lambda x: (-raw[x[1:]], x[1], x[2], x[3]))[:first]
        items = top + [x for x in items if x not in top]
    chosen = collections.defaultdict(list)  # (di,si) -> ranges
    rem = budget
    def tot(d, s, rs): return sum(cost(d, s, a, b) for a, b in rs)
    def merged(rs):
        rs = sorted(rs); out = []
        for a, b in rs:
            if out and a <= out[-1][1] + 1: out[-1] = (out[-1][0], max(out[-1][1], b))
            else: out.append((a, b))
        return out
    for k, di, si, a, b in items:
        if rem < 24: break
        d = q['documents'][di]; s = d['spans'][si]
        cur = chosen[(di, si)]; nxt = merged(cur + [(a, b)])
        add = tot(d, s, nxt) - tot(d, s, cur)
        if add <= rem:
            chosen[(di, si)] = nxt; rem -= add
    # grow
    for (di, si), rs in list(chosen.items()):
        d = q['documents'][di]; s = d['spans'][si]
        while True:
            cands = []
            for a, b in rs:
                if a > 0: cands.append((s['chunks'][a-1]['score'], a-1))
                if b + 1 < len(s['chunks']): cands.append((s['chunks'][b+1]['score'], b+1))
            cands.sort(key=lambda x: (-x[0], x[1]))
            done = False
            for _, i in cands:
                nxt = merged(rs + [(i, i)]); add = tot(d, s, nxt) - tot(d, s, rs)
                if add <= rem: rs = nxt; rem -= add; done = True; break
            if not done: break
        chosen[(di, si)] = rs
    spans = []
    for (di, si), rs in chosen.items():
        d = q['documents'][di]; s = d['spans'][si]
        for a, b in rs:
            spans.append((d['uri'], s['chunks'][a]['lines'][0], s['chunks'][b]['lines'][1]))
    return spans, budget - rem
def aic(q, spans):
    return any(match(u, t[0]) and a <= t[1] and b >= t[2] for u, a, b in spans for t in q['targets'])
def real_aic(q, budget):
    for p in q['packs']:
        if p['budget'] != budget: continue
        sp = []
        for cit, tok in p['spans']:
            u, _, r = cit.rpartition('#L'); a, _, b = r.partition('-L'); sp.append((u, int(a), int(b or a)))
        return aic(q, sp), p['used']
def target_sizes(qs, root):
    """Each target's own lines at chars/4 (the corpus as indexed under
    ROOT), and how many queries have a top-10 hit on a target that fits."""
    import os
    sizes, fits = [], 0
    for q in qs:
        uri, start, end = q['targets'][0]
        with open(os.path.join(root, uri), encoding='utf-8') as f:
            text = '\n'.join(f.read().split('\n')[start - 1:end])
        tokens = (len(text) + 3) // 4
        sizes.append(tokens)
        hit = any(match(d['uri'], uri) and c['matched'] and c['lines'][0] <= end and c['lines'][1] >= start
                  for d in q['documents'] for s in d['spans'] for c in s['chunks'])
        fits += hit and tokens <= 1900
    sizes.sort()
    n = len(sizes)
    print(f'targets: median {sizes[n // 2]} tokens, p90 {sizes[int(n * 0.9)]}; '
          f'over 1,000: {sum(t > 1000 for t in sizes)}, over 2,000: {sum(t > 2000 for t in sizes)}; '
          f'top-10 hit on a target of <= 1,900 tokens: {fits} ({fits / n:.3f})')

if __name__ == '__main__':
    qs = load(sys.argv[1])
    if len(sys.argv) > 2:
        target_sizes(qs, sys.argv[2])
    budgets = [1000, 2000, 4000]
    line = []
    for b in budgets:
        r = [real_aic(q, b) for q in qs]
        line.append(f"{b}: {sum(x[0] for x in r)/len(qs):.3f}/{sum(x[1] for x in r)/len(qs):.0f}")
    print('real        ', ' | '.join(line))
    for agg in ['max', 'nor', 'sqrt', 'sum']:
        for exp in [0, 0.25, 0.5]:
            line = []
            for b in budgets:
                r = [pack(q, b, agg, exp) for q in qs]
                line.append(f"{b}: {sum(aic(q, x[0]) for q, x in zip(qs, r))/len(qs):.3f}/{sum(x[1] for x in r)/len(qs):.0f}")
            print(f'{agg:5} {exp:4}  ', ' | '.join(line))
    for first in [1, 2]:
        for exp in [0.25, 0.5]:
            r = [pack(q, 2000, 'max', exp, first) for q in qs]
            print(f'best {first} first, then e={exp}: 2000: '
                  f'{sum(aic(q, x[0]) for q, x in zip(qs, r))/len(qs):.3f}/{sum(x[1] for x in r)/len(qs):.0f}')
