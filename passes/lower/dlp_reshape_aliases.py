"""Reshapes as aliases for the DLP target (`dlp-reshape-aliases`), before `loop-to-dlp`.

Input: loop IR (`loop.kernel`s over memrefs in `func.func @main`, as te-to-loop writes
them). Output: loop IR.
Requires: a `func.func @main` (or a module of one function); a reshape-family kernel
(origin graph.reshape, squeeze, unsqueeze, flatten) copies as many elements as it reads.
Guarantees: the same results; every reshape-family copy kernel that copies a buffer into
a fresh intermediate of @main in row-major order, where neither is written again, is gone:
the intermediate becomes `memref.reinterpret_cast %src` (row-major, contiguous), the same
GDRAM bytes. A second run changes nothing.

    loop.kernel "reshape_1" {... memref.store %v, %r[%i0] ...}   (%r: a fresh 16-vector)

becomes

    %r = memref.reinterpret_cast %x to offset: [0], sizes: [16], strides: [1]

This is the C target's alias rule (`memory_plan.alias_reshapes`, part of `loop-views`),
without `loop-views`' strided views: the DLP tiles its kernels over row-major GDRAM
buffers, so a slice or transpose read through an index map would lose its intrinsics.
On the DLP a reshape kernel is a GDRAM2GDRAM copy: one launch and a DMA latency (about
0.2 us on the default description) for no arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from dlpc.passes.lower.memory_plan import _main, alias_reshapes


@dataclass(frozen=True)
class DlpReshapeAliases(ModulePass):
    """`dlp-reshape-aliases`: reshape copies into fresh intermediates become aliases."""

    name = "dlp-reshape-aliases"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fn = _main(op)
        if fn is not None:
            alias_reshapes(fn)
