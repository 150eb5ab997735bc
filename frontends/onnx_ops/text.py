"""ONNX TfIdfVectorizer over integer tokens as a composition of graph ops: the pool is an
attribute, so every n-gram is a constant pattern. For each n-gram length n and skip distance
d, the n shifted slices x[:, j*d : C - (n-1-j)*d] are compared against the patterns' j-th
tokens, the matches multiplied (all n tokens equal) and summed over the start positions;
one constant (n-grams x outputs) matmul places the counts into their output columns.
Unigrams count once (at d = 1), as onnxruntime and onnx's reference do. String pools are
refused in one line."""

from __future__ import annotations

import numpy as np

from dlpc.dialects import graph
from dlpc.frontends.onnx_ops.elementwise import cast_to
from dlpc.frontends.onnx_ops.registry import handles
from dlpc.frontends.onnx_values import Const, NodeContext, Value

F32 = np.dtype(np.float32)


def _ngrams(imp: NodeContext, a: dict) -> dict[tuple[int, ...], int]:
    """Each pool n-gram of a counted length -> its output column; a repeated n-gram is an
    error (onnxruntime refuses it too)."""
    pool = [int(v) for v in a["pool_int64s"]]
    counts = [int(v) for v in a["ngram_counts"]]
    indexes = [int(v) for v in a["ngram_indexes"]]
    found: dict[tuple[int, ...], int] = {}
    k = 0
    for size, start in enumerate(counts, start=1):
        end = counts[size] if size < len(counts) else len(pool)
        if start < 0 or end < start or end > len(pool):
            raise imp.error(f"attribute 'ngram_counts' = {counts} does not fit the pool")
        for g in range((end - start) // size):
            if k >= len(indexes):
                raise imp.error(f"attribute 'ngram_indexes' has {len(indexes)} entries, too few")
            gram = tuple(pool[start + g * size : start + (g + 1) * size])
            if gram in found:
                raise imp.error(f"the pool holds the n-gram {list(gram)} twice")
            if a["min_gram_length"] <= size <= a["max_gram_length"]:
                found[gram] = indexes[k]
            k += 1
    return found


@handles("TfIdfVectorizer")
def tfidf_vectorizer(imp: NodeContext):
    a = imp.attrs(
        {
            "max_gram_length": None,
            "max_skip_count": None,
            "min_gram_length": None,
            "mode": None,
            "ngram_counts": None,
            "ngram_indexes": None,
            "pool_int64s": None,
            "pool_strings": None,
            "weights": None,
        }
    )
    if a["pool_strings"] is not None:
        raise imp.error("a string pool ('pool_strings') is not supported: dlpc has no strings")
    for name in ("max_gram_length", "max_skip_count", "min_gram_length", "mode"):
        if a[name] is None:
            raise imp.error(f"attribute '{name}' is required")
    for name in ("ngram_counts", "ngram_indexes", "pool_int64s"):
        if a[name] is None:
            raise imp.error(f"attribute '{name}' is required")
    imp.require(a, "mode", ("TF", "IDF", "TFIDF"))
    lo, hi, skips = a["min_gram_length"], a["max_gram_length"], a["max_skip_count"]
    if not 1 <= lo <= hi or skips < 0:
        raise imp.error(
            f"gram lengths {lo}..{hi} and max_skip_count {skips} must satisfy "
            "1 <= min <= max and skips >= 0"
        )
    x = imp.required(0)
    if imp.dtype(x).kind not in "iu":
        raise imp.error(f"input 'X' has element type {imp.dtype(x).name}; it needs integers")
    shape = imp.shape(x)
    if len(shape) not in (1, 2):
        raise imp.error(f"input 'X' must be [C] or [N, C], got {list(shape)}")
    n_out = max(int(v) for v in a["ngram_indexes"]) + 1 if len(a["ngram_indexes"]) else 0
    if n_out == 0:
        raise imp.error("attribute 'ngram_indexes' is empty: an empty output")
    rows = shape[0] if len(shape) == 2 else 1
    c = shape[-1]
    x2 = cast_to(imp, imp.reshape(x, (rows, c)), np.dtype(np.int64))
    grams = _ngrams(imp, a)
    counts: Value | None = None
    for size in range(lo, hi + 1):
        pats = [p for p in grams if len(p) == size]
        if not pats:
            continue
        place = np.zeros((len(pats), n_out), F32)
        place[np.arange(len(pats)), [grams[p] for p in pats]] = 1
        table = np.asarray(pats, np.int64)  # (G, size)
        for d in range(1, (skips + 1 if size > 1 else 1) + 1):
            span = c - (size - 1) * d  # start positions
            if span <= 0:
                break
            hit: Value | None = None
            for j in range(size):
                cut = imp.emit(
                    graph.SliceOp, x2, starts=(j * d,), ends=(j * d + span,), axes=(1,), steps=(1,)
                )
                eq = imp.emit(
                    graph.CompareOp,
                    imp.reshape(cut, (rows, span, 1)),
                    Const(table[:, j].reshape(1, 1, -1)),
                    predicate="eq",
                )
                eq = cast_to(imp, eq, F32)
                hit = eq if hit is None else imp.emit(graph.MulOp, hit, eq)
            assert hit is not None
            per = imp.emit(graph.ReduceSumOp, hit, axes=(1,), keepdims=False)  # (rows, G)
            part = imp.emit(graph.MatMulOp, per, Const(place))
            counts = part if counts is None else imp.emit(graph.AddOp, counts, part)
    if counts is None:  # (no n-gram of a counted length fits: all zeros)
        y: Value = Const(np.zeros((rows, n_out), F32))
    else:
        y = counts
        weights = None if a["weights"] is None else np.asarray(a["weights"], F32)
        if weights is not None and weights.size != n_out:
            raise imp.error(f"attribute 'weights' has {weights.size} values for {n_out} outputs")
        if a["mode"] == "IDF":
            seen = imp.emit(graph.CompareOp, y, Const(np.asarray(0, F32)), predicate="gt")
            y = cast_to(imp, seen, F32)
        if a["mode"] != "TF" and weights is not None and weights.size:
            y = imp.emit(graph.MulOp, y, Const(weights))
    return [imp.reshape(y, (rows, n_out) if len(shape) == 2 else (n_out,))]
