"""How far characters / 4 (weft's token estimate for packing) is from the
tokenizers assistants use (o200k_base, cl100k_base) and from the embedding
model's WordPiece, on 40-line pieces of 200 random files per corpus.

    python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install bpe-openai==0.1.4 tokenizers
    /tmp/tokvenv/bin/python bench/token-estimate.py [EVAL_CORPUS_DIR] [MODEL_DIR]

Results: bench/RESULTS.md, "Context packing".
"""
import os, random, sys, json
import bpe_openai as b
from tokenizers import Tokenizer
E=sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser('~/.cache/weft-eval')
MODEL=sys.argv[2] if len(sys.argv) > 2 else os.path.expanduser('~/.cache/weft/models/all-MiniLM-L6-v2')
roots={'guava (Java)':('src/guava-libraries/guava/src','.java'),'effect (TypeScript)':('npm/pkgs/effect-4.1.0/src','.ts'),'Node.js docs (Markdown)':('src/nodejs/doc/api','.md')}
o200=b.get_encoding('o200k_base'); cl100=b.get_encoding('cl100k_base')
mini=Tokenizer.from_file(os.path.join(MODEL, 'tokenizer.json'))
mini.no_truncation()
random.seed(7)
out={}
for name,(root,ext) in roots.items():
    files=[]
    for d,_,fs in os.walk(os.path.join(E,root)):
        files+= [os.path.join(d,f) for f in fs if f.endswith(ext)]
    files.sort(); random.shuffle(files)
    pieces=[]
    for f in files[:200]:
        lines=open(f,encoding='utf-8',errors='replace').read().split('\n')
        for i in range(0,len(lines),40):
            p='\n'.join(lines[i:i+40])
            if p.strip() and len(p) < 20000: pieces.append(p)
    chars=sum(len(p) for p in pieces)
    approx=sum((len(p)+3)//4 for p in pieces)
    t_o=sum(len(o200.encode(p)) for p in pieces)
    t_c=sum(len(cl100.encode(p)) for p in pieces)
    t_m=sum(len(mini.encode(p,add_special_tokens=False).ids) for p in pieces)
    under=sum(1 for p in pieces if len(o200.encode(p))>(len(p)+3)//4)
    out[name]=dict(pieces=len(pieces),chars_per_o200k=chars/t_o,approx_over_o200k=approx/t_o,approx_over_cl100k=approx/t_c,approx_over_minilm=approx/t_m, share_pieces_o200k_above_approx=under/len(pieces))
print(json.dumps(out,indent=1))
