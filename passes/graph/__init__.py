"""Graph-level passes: shape inference, folding, simplification, substitution rules,
layout and fusion (see docs/graph-passes.md).

`O_LEVEL_PASSES[n]` is the recommended graph pipeline of `-On` (xDSL pass specs, applied
in order); `passes/pipeline.py` imports it. When weights are bound at compile time, call
`fold_constants.fold_params(module, weights)` after the passes: it evaluates the static
subgraphs the rules leave on weights (batch-norm folding, concatenated Q/K/V weights).
"""

O_LEVEL_PASSES: dict[int, list[str]] = {
    0: ["graph-infer-shapes"],
    1: ["graph-infer-shapes", "graph-fold-constants", "graph-simplify", "cse", "dce"],
    2: [
        "graph-infer-shapes",
        "graph-simplify",
        "graph-substitute",
        "graph-fold-constants",
        "graph-simplify",
        "cse",
        "graph-fuse",
        "dce",
    ],
    # -O3 = -O2 plus NHWC layout; graph-layout stays out of -O2 until graph-to-te lowers
    # the layout = "nhwc" variants of conv2d/pools/batch_norm (see docs/graph-passes.md)
    3: [
        "graph-infer-shapes",
        "graph-simplify",
        "graph-substitute",
        "graph-fold-constants",
        "graph-simplify",
        "cse",
        "graph-fuse",
        "dce",
    ],
}
