"""Copy kernels that only move data become strided views (`loop-view-copies`).

Input: loop IR (`loop.kernel`s over memrefs in `func.func @main`, as te-to-loop writes
them). Output: loop IR.
Requires: a `func.func @main` (or a module of one function).
Guarantees: the same results; every pure copy kernel with an affine index map (slices,
transposes, splitting reshapes, chains of them) that a view can replace is gone: its
readers load the source through the map, or a transpose's producers store at the
permuted index (`memory_plan.view_copies`). A second run changes nothing.

    loop.kernel "transpose_1" {... %v = memref.load %a[%i1, %i0] ... memref.store %v, %t[%i0, %i1]}
    loop.kernel "neg_2" {... memref.load %t[%i0, %i1] ...}

becomes

    loop.kernel "neg_2" {... memref.load %a[%i1, %i0] ...}

Unlike `loop-views` (the C target's), plain reshape copies stay kernels: the OpenCL
runtime aliases them (`opencl_rt.reshape_aliases`), checking that nothing writes the
source while the alias is read. Each view is one launch less.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from dlpc.passes.lower.memory_plan import view_copies


def main_function(module: ModuleOp, pass_name: str) -> func.FuncOp:
    """@main, or the module's only function; else a diagnostic naming the pass."""
    funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
    named = [f for f in funcs if f.sym_name.data == "main"]
    if named:
        return named[0]
    if len(funcs) == 1:
        return funcs[0]
    raise VerifyException(
        f"{pass_name} needs a func.func @main; the module has {len(funcs)} functions, "
        "none named main"
    )


@dataclass(frozen=True)
class LoopViewCopies(ModulePass):
    """`loop-view-copies`: copy kernels a strided view can replace removed (module
    docstring)."""

    name = "loop-view-copies"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        view_copies(main_function(op, self.name))
