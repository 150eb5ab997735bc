"""Graph-level passes: shape inference, folding, simplification, substitution rules,
layout and fusion (see docs/graph-passes.md).

The graph pipeline of each `-On` is `passes/pipeline.py: GRAPH_PASSES_BY_LEVEL` (one
list, the one compiles run). When weights are bound at compile time, call
`fold_constants.fold_params(module, weights)` after the passes: it evaluates the static
subgraphs the rules leave on weights (batch-norm folding, concatenated Q/K/V weights).
"""
