"""Evaluate constant subgraphs with the numpy reference and replace them by one constant.

Input: graph, func.  Output: graph, func (fewer ops).
Requires: nothing.
Guarantees: every value that depends only on `graph.constant` ops and is used by a
non-constant op (or returned) is one `graph.constant`, unless it has more than
`max-elements` elements (then the subgraph computing it stays, so the IR never holds a
big dense literal that it did not hold before). Intermediate values of a folded subgraph
are never materialised; graph ops left without uses are erased.

    %a = graph.constant dense<16.0> : tensor<f32>
    %b = graph.constant dense<224.0> : tensor<f32>
    %c = graph.mul %a, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %y = graph.mul %x, %c : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>

becomes

    %c = graph.constant dense<3584.0> : tensor<f32>
    %y = graph.mul %x, %c : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>

Weights: `graph.param` values are not in the IR, so this pass leaves them alone (there
is deliberately no `params=true` option in `dlpc-opt`). When the weights are known
(`dlpc.compile` with bound weights), `fold_params(module, weights)` does the same for
subgraphs over params and constants (the concatenated Q/K/V weights of horizontal fusion,
the rescaled conv weights of batch-norm folding): each folded value becomes a new
`graph.param "folded.N"` whose array is added to the returned weights, so the IR stays
small however big the weights are. A param's value is never used to drop an op: a
compiled model may be called with other weights (`params=`), so only folded subgraphs
depend on the values bound here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph as g
from dlpc.dialects.typed import tensor_type
from dlpc.passes.graph import _util as u

# values bigger than this are not evaluated at all (memory bound for the folder)
EVAL_LIMIT = 1 << 24


def _foldable(op: Operation, known: dict[SSAValue, np.ndarray]) -> bool:
    return (
        isinstance(op, g.GraphOp)
        and not op.regions
        and all(v in known for v in op.operands)
        and u.numel(op.out_shape) <= EVAL_LIMIT
    )


def _evaluate_block(block: Block, seed: dict[SSAValue, np.ndarray]) -> dict:
    """Values of every op of `block` computable from `seed` (constants included)."""
    known = dict(seed)
    for op in block.ops:
        if isinstance(op, g.ConstantOp):
            known[op.output] = op.to_numpy()
        elif _foldable(op, known):
            known[op.results[0]] = u.evaluate(op, [known[v] for v in op.operands])
    return known


def _frontier(block: Block, known: dict[SSAValue, np.ndarray]) -> list[SSAValue]:
    """Computed values (not leaves) used by an op that is not computed (or returned)."""
    out = []
    for op in block.ops:
        if isinstance(op, g.ConstantOp | g.ParamOp) or not op.results:
            continue
        value = op.results[0]
        if value in known and any(_outside(use.operation, known) for use in value.uses):
            out.append(value)
    return out


def _outside(user: Operation, known: dict[SSAValue, np.ndarray]) -> bool:
    return not user.results or user.results[0] not in known


def fold_block(block: Block, max_elements: int) -> None:
    known = _evaluate_block(block, {})
    for value in _frontier(block, known):
        array = known[value]
        if array.size > max_elements and not u.is_splat(array):
            continue
        const = u.constant_like(array, value)
        assert isinstance(value.owner, Operation)
        u.insert_before(value.owner, const)
        value.replace_all_uses_with(const.output)
    u.erase_dead(block)


def fold_params(
    module: ModuleOp, weights: dict[str, np.ndarray], max_elements: int = 1 << 10
) -> dict[str, np.ndarray]:
    """Fold subgraphs over params and constants, given the weights.

    Small results (at most `max_elements`) become `graph.constant`s, bigger ones new
    `graph.param "folded.N"` ops. Returns the weights extended by the new params
    (unused original weights are kept; the runtime ignores extras).
    """
    out = dict(weights)
    counter = 0
    for fn in u.funcs(module):
        block = fn.body.blocks.first
        assert block is not None
        seed = {}
        for op in block.ops:
            if isinstance(op, g.ParamOp) and op.pname in weights:
                seed[op.output] = np.asarray(weights[op.pname], dtype=u.result_dtype(op.output))
        known = _evaluate_block(block, seed)
        for value in _frontier(block, known):
            array = known[value]
            if array.size <= max_elements:
                new: Operation = u.constant_like(array, value)
            else:
                while f"folded.{counter}" in out:
                    counter += 1
                name = f"folded.{counter}"
                out[name] = array
                new = g.ParamOp(name, tensor_type(value))
            assert isinstance(value.owner, Operation)
            u.insert_before(value.owner, new)
            value.replace_all_uses_with(new.results[0])
        u.erase_dead(block)
    return out


@dataclass(frozen=True)
class GraphFoldConstants(ModulePass):
    """graph-fold-constants{max-elements=N}: fold constant subgraphs."""

    name = "graph-fold-constants"

    max_elements: int = 1 << 16
    """Largest folded constant (elements) the pass may create."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.max_elements < 0:
            raise DlpcError(
                f"error: graph-fold-constants max-elements must be >= 0, got {self.max_elements}"
            )
        for fn in u.funcs(op):
            for block in fn.body.blocks:
                fold_block(block, self.max_elements)
