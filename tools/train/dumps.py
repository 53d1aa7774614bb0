"""Reading what `train-candidates` dumps, shared by the trainers and screens.

PREFIX.jsonl holds one row per query (its candidates with ranks, scores and
whether each is a hit), PREFIX.queries.f32 and PREFIX.chunks.f32 the query
and chunk vectors (little-endian f32 rows). `fused` is weft's fixed fusion
and boost (`FusionConfig::default`, `BoostConfig::default` in weft-core),
so a screen scores candidates the way the query engine would.
"""

import hashlib
import json
import math

import numpy as np

# FusionConfig::default (score fusion) and BoostConfig::default.
VECTOR_WEIGHT, TEXT_WEIGHT, INDEX_DOC_BOOST = 0.4, 0.6, 1.25


def load(prefix, dim):
    """(rows, query vectors, chunk vectors) of one dump."""
    rows = [json.loads(line) for line in open(prefix + ".jsonl")]
    q = np.fromfile(prefix + ".queries.f32", dtype="<f4").reshape(-1, dim)
    c = np.fromfile(prefix + ".chunks.f32", dtype="<f4").reshape(-1, dim)
    return rows, q, c


def held_out(package, share=0.15):
    """Whether a training package is held out: its name's hash, not chance."""
    return int(hashlib.sha256(package.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < share


def is_index_doc(uri):
    """weft's README/index documents (the chunker's rule)."""
    base = uri.rsplit("/", 1)[-1].lower()
    return base.split(".")[0] in ("readme", "index", "_index")


def within(rank, depth):
    return rank is not None and rank < depth


def fused(vnorm, tnorm, index_doc):
    """weft's fused and boosted score from min-max normalised scores."""
    return (VECTOR_WEIGHT * vnorm + TEXT_WEIGHT * tnorm) * np.where(index_doc, INDEX_DOC_BOOST, 1.0)


def ndcg10(scores, hits):
    """nDCG@10 of the first hit, as `weft eval` counts it."""
    for rank, i in enumerate(np.argsort(-scores, kind="stable")[:10]):
        if hits[i]:
            return 1.0 / math.log2(rank + 2)
    return 0.0
