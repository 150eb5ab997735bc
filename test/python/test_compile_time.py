"""What the compile-time work keeps: `verify_ir` checks what `module.verify()` checks (a bad
op among many alike good ones, an erased operand, a missing terminator), the pipeline still
names the pass whose output does not verify, and try_script's adopted kernels leave no
uses of the module's buffers behind. (Times are measured by bench/compile.py, never here.)"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp, i32
from xdsl.ir import ErasedSSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from dlpc.diagnostics import DlpcError
from dlpc.dialects.loop import kernels, verify_ir
from dlpc.passes import pipeline
from dlpc.passes.pipeline import PipelineOptions, parse_module
from dlpc.passes.schedule.default import apply_default

# many alike constants and adds (verify_ir checks one of each kind), then the culprit
ALIKE = """
func.func @main(%x: memref<16xf32>, %y: memref<16xf32>) {
  loop.kernel "k" {
    loop.for %i = 0 to 16 step 1 {name = "i0"} {
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 1 : index
      %a = arith.addi %i, %c1 : index
      %b = arith.addi %a, %c2 : index
      %c3 = arith.constant 0 : index
      %v = memref.load %x[%c3] : memref<16xf32>
      %w = memref.load %x[%i] : memref<16xf32>
      %s = arith.addf %v, %w : f32
      memref.store %s, %y[%i] : memref<16xf32>
    }
  }
  func.return
}
"""


def _first(module: ModuleOp, name: str):
    return next(op for op in module.walk() if op.name == name)


def test_verify_ir_accepts_what_verify_accepts():
    module = parse_module(ALIKE)
    module.verify()
    verify_ir(module)


def test_verify_ir_catches_a_bad_op_after_alike_good_ones():
    module = parse_module(ALIKE)
    # the last constant's value no longer matches its result type (index): its kind
    # (class, types, properties) was not seen before, so its verifier runs
    last = [op for op in module.walk() if isinstance(op, arith.ConstantOp)][-1]
    last.properties["value"] = IntegerAttr(0, i32)
    with pytest.raises(DiagnosticException) as xdsl:
        module.verify()
    with pytest.raises(DiagnosticException) as ours:
        verify_ir(module)
    assert str(ours.value) == str(xdsl.value)


def test_verify_ir_catches_a_load_with_too_few_indices():
    module = parse_module(ALIKE)
    load = _first(module, "memref.load")
    load.operands = (load.operands[0],)  # memref<16xf32> with no index
    with pytest.raises(Exception, match="index for each dimension"):
        verify_ir(module)


def test_verify_ir_catches_an_erased_operand():
    module = parse_module(ALIKE)
    add = _first(module, "arith.addi")
    add.operands = (ErasedSSAValue(IndexType(), add.operands[0]), add.operands[1])
    with pytest.raises(ValueError, match="Erased SSA value"):
        verify_ir(module)


def test_verify_ir_catches_a_missing_terminator():
    module = parse_module(ALIKE)
    ret = _first(module, "func.return")
    ret.detach()
    with pytest.raises(DiagnosticException, match="not a terminator"):
        verify_ir(module)


@dataclass(frozen=True)
class _BreakLoadsPass(ModulePass):
    """A pass with a bug: it drops the index of every load."""

    name = "test-break-loads"

    def apply(self, ctx, op: ModuleOp) -> None:
        for load in [o for o in op.walk() if o.name == "memref.load"]:
            load.operands = (load.operands[0],)


def test_pipeline_names_the_pass_whose_output_does_not_verify(monkeypatch):
    from dlpc.passes.registry import PASSES

    monkeypatch.setitem(PASSES, "test-break-loads", lambda: _BreakLoadsPass)
    module = parse_module(ALIKE)
    with pytest.raises(DlpcError) as e:
        pipeline.run("test-break-loads", module, PipelineOptions())
    text = str(e.value)
    assert "\n" not in text
    assert "verifying the output of pass test-break-loads" in text
    assert "memref.load" in text


CHAIN = """
func.func @main(%x: memref<8x64xf32>, %w: memref<64x32xf32>, %y: memref<8x32xf32>) {
  %t = memref.alloc() : memref<8x32xf32>
  loop.kernel "mm" {
    loop.for %i0 = 0 to 8 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %t[%i0, %i1] : memref<8x32xf32>
        loop.for %r0 = 0 to 64 step 1 {name = "r0", reduction} {
          %a = memref.load %x[%i0, %r0] : memref<8x64xf32>
          %b = memref.load %w[%r0, %i1] : memref<64x32xf32>
          %p = arith.mulf %a, %b : f32
          %c = memref.load %t[%i0, %i1] : memref<8x32xf32>
          %s = arith.addf %c, %p : f32
          memref.store %s, %t[%i0, %i1] : memref<8x32xf32>
        }
      }
    }
  }
  loop.kernel "relu" {
    loop.for %i0 = 0 to 8 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        %v = memref.load %t[%i0, %i1] : memref<8x32xf32>
        %z = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %v, %z : f32
        memref.store %r, %y[%i0, %i1] : memref<8x32xf32>
      }
    }
  }
  memref.dealloc %t : memref<8x32xf32>
  func.return
}
"""


def test_adopted_kernels_leave_no_uses_behind():
    """try_script schedules a clone of the kernel and puts it in the original's place:
    every use of the module's buffers is then inside the module, and the kernels keep
    their order and names."""
    module = parse_module(CHAIN)
    apply_default(module)
    verify_ir(module)
    assert [k.sym for k in kernels(module)] == ["mm", "relu"]
    mm = next(kernels(module))
    assert len(list(mm.loops())) > 3  # scheduled: the reduction was split / tiled
    fn = next(iter(module.ops))
    buffers = [
        *fn.regions[0].block.args,
        *(op.results[0] for op in fn.walk() if op.name == "memref.alloc"),
    ]
    for value in buffers:
        for use in value.uses:
            top = use.operation
            while top.parent_op() is not None and not isinstance(top, ModuleOp):
                top = top.parent_op()
            assert top is module, f"a use of %{value.name_hint} outside the module"


@dataclass(frozen=True)
class _FailingPass(ModulePass):
    name = "test-failing"

    def apply(self, ctx, op: ModuleOp) -> None:
        raise KeyError("boom")


@pytest.mark.parametrize("was_on", [True, False])
def test_run_restores_the_garbage_collector(monkeypatch, was_on):
    """`run` pauses the cyclic collector during a pass and its verification, and leaves
    it as it found it, also when the pass fails."""
    import gc

    from dlpc.passes.registry import PASSES

    monkeypatch.setitem(PASSES, "test-failing", lambda: _FailingPass)
    monkeypatch.setitem(PASSES, "test-break-loads", lambda: _BreakLoadsPass)
    seen = []
    monkeypatch.setattr(pipeline, "verify_ir", lambda module: seen.append(gc.isenabled()))
    (gc.enable if was_on else gc.disable)()
    try:
        pipeline.run("test-break-loads", parse_module(ALIKE), PipelineOptions())
        assert seen == [False]  # off while the output was verified
        assert gc.isenabled() is was_on
        with pytest.raises(DlpcError, match="test-failing"):
            pipeline.run("test-failing", parse_module(ALIKE), PipelineOptions())
        assert gc.isenabled() is was_on
    finally:
        gc.enable()


def test_scope_names_are_the_first_free_of_their_sequence():
    """Scope.fresh resumes each base's search where it stopped; the names are still the
    first free one of the sequence (v_0, v_1, ...; v_x, v_x_2, ...), also when names are
    taken from outside (`used.add`, a parent's names)."""
    import itertools
    import random

    from dlpc.backends.names import Scope, identifier

    def naive(used: set[str], hint, kind="v") -> str:
        base = identifier(hint if hint else "", kind)
        if base.endswith("_"):
            names = (f"{base}{k}" for k in itertools.count())
        else:
            names = itertools.chain([base], (f"{base}_{k}" for k in itertools.count(2)))
        name = next(n for n in names if n not in used)
        used.add(name)
        return name

    rng = random.Random(0)
    scope, used = Scope(["v_1", "v_x_3"]), {"v_1", "v_x_3"}
    for _ in range(2000):
        hint = rng.choice([None, "", "x", "x_2", "y", "v", "0"])
        if rng.random() < 0.1:  # taken by the emitter directly
            taken = rng.choice(["v_5", "v_x_2", "v_x_9", "v_y", f"v_{rng.randrange(100)}"])
            scope.used.add(taken)
            used.add(taken)
        assert scope.fresh(hint) == naive(used, hint)
    assert scope.used == used
