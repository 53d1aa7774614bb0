#!/usr/bin/env python3
"""Derive (query -> section span) pairs from a tree of real reStructuredText or
AsciiDoc documentation, the way ../shared/eval/tools/derive_md_queries.py does
for Markdown (same filters, same row fields, same hard variant).

For every section title (outside literal blocks, directives and delimited
blocks):
  query  = the cleaned title text (inline markup, roles and links stripped)
  target = the section's own span: first line of the title block (overline,
           or the title line) .. the last non-blank line before the next title
           of ANY level, not counting the targets (`.. _label:`) or anchors
           (`[[id]]`) that belong to the next title; `full_end_line` also
           includes sub-sections.
Filters (as for Markdown): generic titles (Examples, Usage, Options, Name,
Synopsis, ...), titles of < 3 words unless API-like, sections whose own body
has < --min-body-words words, titles whose normalised text occurs more than
once in the corpus. Rows carry body_words, approx_tokens (words * 1.3) and
`long@256` / `long@512`.

--masked-out DIR writes a copy of the corpus in which each queried title is
replaced by "Section <n>" (same level, same line count; reST adornments are
redrawn to the new length so that the title stays a title): the hard variant.

  derive_rst_adoc_queries.py --name django-docs --format rst --root src/django-docs \
      --ext .txt --out django.jsonl --masked-out masked/django-docs \
      --corpus-root src/django-docs --hard-root masked/django-docs
"""
import argparse, json, os, re, sys
from collections import OrderedDict, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "..", "..", "..", "shared", "eval", "tools")
sys.path.insert(0, os.path.abspath(SHARED))
try:  # the same generic-title list and API test as the Markdown deriver
    from derive_md_queries import GENERIC, is_apiish, words  # noqa: E402
except ImportError:  # a copy, so that the script also runs without ../shared
    GENERIC = set("""example examples usage overview introduction intro syntax notes note see also summary description
parameters params returns return options option installation install conclusion next steps prerequisites faq
configuration config requirements background motivation contents table of contents details reference references
getting started quick start quickstart api changelog changes history license licence credits acknowledgements
limitations caveats warning warnings todo misc miscellaneous other related links further reading resources
troubleshooting tips events methods properties class constructor stability deprecated deprecation
setup building build testing tests test features feature flags environment variables arguments output
synopsis name exit status files bugs author authors""".split())

    def is_apiish(t):
        return bool(re.search(r"[A-Za-z_]\w*(\.|::)\w+|\w\(", t)) and len(t) >= 8

    def words(s):
        return re.findall(r"[A-Za-z0-9_]+", s)


# --- reStructuredText --------------------------------------------------------

PUNCT = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def adornment(line):
    t = line.rstrip()
    if len(t) < 2 or t[0] not in PUNCT or any(c != t[0] for c in t):
        return None
    return t[0], len(t)


def indent(line):
    return len(line) - len(line.lstrip(" \t"))


def rst_titles(lines):
    """[(first, title_line, last, style, text)] as the chunker finds them:
    unindented titles after a blank line, over- and underlined or underlined;
    indented text (literal blocks, directive bodies) is never a title."""
    out = []
    i, n = 0, len(lines)
    blank = lambda k: not lines[k].strip()
    while i + 1 < n:
        if not (i == 0 or blank(i - 1)) or blank(i):
            i += 1
            continue
        a = adornment(lines[i])
        if a and i + 2 < n and not blank(i + 1) and adornment(lines[i + 1]) is None:
            b = adornment(lines[i + 2])
            if b and b[0] == a[0] and len(lines[i + 1].strip()) <= a[1]:
                out.append((i, i + 1, i + 2, (a[0], True), lines[i + 1].strip()))
                i += 3
                continue
        t = lines[i]
        if indent(t) == 0 and adornment(t) is None and not t.startswith(".."):
            u = adornment(lines[i + 1])
            if u and not t.lstrip().startswith(u[0]):
                chars = len(t.rstrip())
                if u[1] >= chars or u[1] >= 4:
                    out.append((i, i, i + 1, (u[0], False), t.strip()))
                    i += 2
                    continue
        i += 1
    # levels in the order styles first appear
    styles, res = [], []
    for (first, tl, last, style, text) in out:
        if style not in styles:
            styles.append(style)
        res.append((first, tl, last, styles.index(style) + 1, text))
    return res


def rst_attached(line):
    """Lines that belong to the title below them: targets and index entries."""
    s = line.strip()
    return s.startswith(".. _") or s.startswith(".. index::") or s.startswith("[[")


def clean_rst(t):
    t = re.sub(r":[\w:+-]+:`([^`<]*?)\s*<[^>]*>`", r"\1", t)  # :role:`text <target>`
    t = re.sub(r":[\w:+-]+:`~?([^`]*)`", r"\1", t)             # :role:`text`
    t = re.sub(r"`([^`<]*?)\s*<[^>]*>`__?", r"\1", t)          # `text <url>`_
    t = re.sub(r"`([^`]*)`__?", r"\1", t)                      # `text`_
    t = t.replace("``", "").replace("`", "")
    t = re.sub(r"(?<!\w)\*\*?([^*]+)\*\*?(?!\w)", r"\1", t)
    t = re.sub(r"\|([^|]+)\|", r"\1", t)                        # |substitution|
    return re.sub(r"\s+", " ", t).strip()


# --- AsciiDoc ----------------------------------------------------------------

ADOC_TITLE = re.compile(r"^(={1,6})[ \t]+(\S.*?)\s*=*\s*$")
UNDERLINE_LEVEL = {"=": 1, "-": 2, "~": 3, "^": 4, "+": 5}


def delimiter(t):
    t = t.rstrip()
    if t == "--" or t.startswith("```"):
        return "```" if t.startswith("```") else t
    if len(t) >= 4 and t[:4] in (",===", ":===", "!===", "|===") and set(t[1:]) == {"="}:
        return t
    if len(t) >= 4 and t[0] in "-.=*_+/" and set(t) == {t[0]}:
        return t
    return None


def titleable(line):
    t = line.rstrip()
    return bool(t) and indent(line) == 0 and not t.startswith(("[", ".", "/", ":", "*", "-", "=", "+", "|", "<")) \
        and any(c.isalnum() for c in t) and delimiter(t) is None


def adoc_titles(lines):
    """[(first, title_line, last, level, text)]: `== Title` and two-line titles,
    outside delimited blocks."""
    out = []
    i, n = 0, len(lines)
    while i < n:
        ln = lines[i].rstrip()
        if not ln:
            i += 1
            continue
        d = delimiter(ln)
        if d:
            underline = i > 0 and titleable(lines[i - 1]) and ln[0] in UNDERLINE_LEVEL \
                and abs(len(lines[i - 1].rstrip()) - len(ln)) <= 2
            if not underline:
                close = next((k for k in range(i + 1, n) if lines[k].rstrip() == d
                              or (d == "```" and lines[k].rstrip() == "```")), None)
                if close is not None:
                    i = close + 1
                    continue
        m = ADOC_TITLE.match(ln)
        if m:
            out.append((i, i, i, len(m.group(1)), m.group(2)))
            i += 1
            continue
        if i + 1 < n and titleable(ln) and (i == 0 or not lines[i - 1].strip()
                                            or lines[i - 1].startswith("[")):
            u = lines[i + 1].rstrip()
            if len(u) >= 2 and u[0] in UNDERLINE_LEVEL and set(u) == {u[0]} and abs(len(ln) - len(u)) <= 2:
                out.append((i, i, i + 1, UNDERLINE_LEVEL[u[0]], ln.strip()))
                i += 2
                continue
        i += 1
    return out


def clean_adoc(t):
    t = re.sub(r"\blinkgit:([\w.-]+)\[\d*\]", r"\1", t)
    t = re.sub(r"\b(?:link|xref|https?):[^\[\s]*\[([^\]]*)\]", r"\1", t)
    t = re.sub(r"<<[^,>]*,\s*([^>]*)>>", r"\1", t)
    t = re.sub(r"\[\[[^\]]*\]\]", "", t)
    t = t.replace("`", "").replace("'", "'").replace("+", " ").replace("*", "")
    return re.sub(r"\s+", " ", t).strip()


def mask(lines, first, tl, last, label, fmt):
    """Replaces a title's text by `label`, keeping the line count and a valid title."""
    if fmt == "adoc":
        m = ADOC_TITLE.match(lines[tl].rstrip())
        if m:
            lines[tl] = f"{m.group(1)} {label}"
            return
        lines[tl] = label
        lines[last] = lines[last].rstrip()[0] * len(label)
        return
    ch = lines[last].rstrip()[0]
    lines[tl] = label
    lines[last] = ch * max(len(label), 4)
    if first != tl:
        lines[first] = ch * max(len(label), 4)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--format", required=True, choices=["rst", "adoc"])
    ap.add_argument("--root", required=True)
    ap.add_argument("--ext", nargs="+", required=True, help="file extensions, e.g. .txt .rst")
    ap.add_argument("--out", required=True)
    ap.add_argument("--exclude", default=r"(^|/)(CHANGELOG|CHANGES|HISTORY|LICENSE|AUTHORS|CODE_OF_CONDUCT)[^/]*$|(^|/)releases?/|(^|/)RelNotes/|/release/|changelog")
    ap.add_argument("--min-body-words", type=int, default=40)
    ap.add_argument("--masked-out")
    ap.add_argument("--corpus-root", help="written as corpus_root (relative to the corpus directory)")
    ap.add_argument("--hard-root", help="written as hard_root")
    a = ap.parse_args()
    excl = re.compile(a.exclude, re.I) if a.exclude else None
    titles_of = rst_titles if a.format == "rst" else adoc_titles
    clean = clean_rst if a.format == "rst" else clean_adoc
    rows, files, stats = [], {}, defaultdict(int)
    for dp, dn, fn in os.walk(a.root):
        dn.sort()
        for f in sorted(fn):
            if not f.lower().endswith(tuple(a.ext)):
                continue
            path = os.path.join(dp, f)
            rel = os.path.relpath(path, a.root)
            if excl and excl.search(rel):
                stats["files_excluded"] += 1
                continue
            lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
            files[rel] = lines
            stats["files"] += 1
            hs = titles_of(lines)
            stats["headings"] += len(hs)
            doc_title = clean(hs[0][4]) if hs else ""
            for k, (first, tl, last, lv, raw) in enumerate(hs):
                nxt = hs[k + 1][0] if k + 1 < len(hs) else len(lines)
                own_end = nxt - 1
                # not the blank lines, nor the labels that belong to the next title
                while own_end > last and (not lines[own_end].strip() or rst_attached(lines[own_end])):
                    own_end -= 1
                full_end = len(lines) - 1
                for (fj, _, _, lvj, _) in hs[k + 1:]:
                    if lvj <= lv:
                        full_end = fj - 1
                        break
                while full_end > last and (not lines[full_end].strip() or rst_attached(lines[full_end])):
                    full_end -= 1
                body = "\n".join(lines[last + 1: own_end + 1])
                bw = len(words(body))
                q = clean(raw)
                qw = words(q)
                low = " ".join(w.lower() for w in qw)
                kind = "title" if k == 0 and lv == 1 else "section"
                if not q:
                    stats["drop_empty"] += 1; continue
                if low in GENERIC or all(w.lower() in GENERIC for w in qw):
                    stats["drop_generic"] += 1; continue
                if len(qw) < 3 and not is_apiish(q):
                    stats["drop_short_heading"] += 1; continue
                if bw < a.min_body_words:
                    stats["drop_short_body"] += 1; continue
                crumbs = []
                for (_, _, _, lvj, tj) in hs[:k]:
                    while crumbs and crumbs[-1][0] >= lvj:
                        crumbs.pop()
                    crumbs.append((lvj, clean(tj)))
                while crumbs and crumbs[-1][0] >= lv:
                    crumbs.pop()
                approx = int(bw * 1.3)
                rows.append(OrderedDict(
                    query=q, corpus=a.name, lang=a.format, path=rel,
                    start_line=first + 1, end_line=own_end + 1, full_end_line=full_end + 1,
                    heading_level=lv, doc_title=doc_title, kind=kind,
                    heading_path=" > ".join(t for _, t in crumbs), body_words=bw,
                    approx_tokens=approx, **{"long@256": approx > 256, "long@512": approx > 512},
                    _title=(first, tl, last),
                ))
    cnt = defaultdict(int)
    norm = lambda s: re.sub(r"[^a-z0-9]+", " ", s.lower()).strip()
    for r in rows:
        cnt[norm(r["query"])] += 1
    out = [r for r in rows if cnt[norm(r["query"])] == 1]
    stats["drop_ambiguous"] = len(rows) - len(out)
    titles = {}
    with open(a.out, "w") as fo:
        for i, r in enumerate(out):
            titles[(r["path"], r["_title"])] = i
            r = OrderedDict([("id", f"{a.name}-{i:05d}")] + [(k, v) for k, v in r.items() if k != "_title"])
            if a.corpus_root:
                r["corpus_root"] = a.corpus_root
            if a.hard_root:
                r["hard_root"] = a.hard_root
            fo.write(json.dumps(r, ensure_ascii=False) + "\n")
    stats["queries_written"] = len(out)
    stats["long@256"] = sum(r["long@256"] for r in out)
    stats["long@512"] = sum(r["long@512"] for r in out)
    if a.masked_out:
        by_file = defaultdict(list)
        for (rel, t), i in titles.items():
            by_file[rel].append((t, i))
        for rel, lines in files.items():
            lines = list(lines)
            for (first, tl, last), i in by_file.get(rel, []):
                mask(lines, first, tl, last, f"Section {i}", a.format)
            op = os.path.join(a.masked_out, rel)
            os.makedirs(os.path.dirname(op), exist_ok=True)
            open(op, "w", encoding="utf-8").write("\n".join(lines))
    print(a.name, json.dumps(dict(sorted(stats.items()))), file=sys.stderr)


if __name__ == "__main__":
    main()
