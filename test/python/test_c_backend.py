"""The C backend on hand-written loop IR: emitted, compiled, run, compared with numpy;
the build cache; compiler diagnostics; calling-convention checks."""

from pathlib import Path

import numpy as np
import pytest

from dlpc.backends.c import emit_c
from dlpc.backends.names import c_comment, identifier
from dlpc.backends.runtime.cbuild import CFunction, build
from dlpc.diagnostics import DlpcError
from dlpc.dialects.loop import ForOp
from dlpc.passes.pipeline import parse_module

E2E = Path(__file__).parent.parent / "e2e"


@pytest.fixture(autouse=True)
def cache_dir(tmp_path_factory, monkeypatch):
    # one cache per test session: later tests reuse earlier builds
    path = tmp_path_factory.getbasetemp() / "dlpc-cache"
    monkeypatch.setenv("DLPC_CACHE_DIR", str(path))
    return path


def mlir_body(path: Path) -> str:
    return "\n".join(ln for ln in path.read_text().splitlines() if not ln.startswith("//"))


def test_emit_c_example_runs():
    module = parse_module(mlir_body(E2E / "emit-c.mlir"))
    f = CFunction(module, name="emit_c_example")
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    out0, out1 = f(x)
    m = x * np.array([0.5, -1.0, 2.5], np.float32)
    s = np.where(m > 0, np.exp(m), np.tanh(m)).astype(np.float32)
    np.testing.assert_allclose(out0, s.astype(np.float64).sum(1), rtol=1e-6)
    assert out0.dtype == np.float64
    k = np.arange(0, 8, 2)
    expect = np.zeros(8, np.int32)
    expect[k] = k // 3 + k % 3
    np.testing.assert_array_equal(out1[k], expect[k])


def test_sanitised_names_compile_and_run():
    module = parse_module(mlir_body(E2E / "emit-c-names.mlir"))
    f = CFunction(module, name="names")
    x, w = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    (out,) = f(x, params={"fc1.weight": w})
    np.testing.assert_array_equal(out, np.ones(4, np.float32))  # the last kernel stores 1.0


ANNOTATED = """
func.func @main(%a: memref<37x19xf32>, %b: memref<19x23xf32>, %c: memref<37x23xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["b"], dlpc.num_outputs = 1 : i64} {
  loop.kernel "matmul" {
    loop.for %i = 0 to 37 step 1 {name = "i0", parallel} {
      loop.for %j = 0 to 23 step 1 {name = "i1", vectorize, unroll = 4} {
        %acc = memref.alloca() : memref<f32>
        %z = arith.constant 0.0 : f32
        memref.store %z, %acc[] : memref<f32>
        loop.for %k = 0 to 19 step 1 {name = "r0", reduction, unroll = 2} {
          %x = memref.load %a[%i, %k] : memref<37x19xf32>
          %y = memref.load %b[%k, %j] : memref<19x23xf32>
          %p = arith.mulf %x, %y : f32
          %s = memref.load %acc[] : memref<f32>
          %n = arith.addf %s, %p : f32
          memref.store %n, %acc[] : memref<f32>
        }
        %r = memref.load %acc[] : memref<f32>
        %e = math.erf %r : f32
        %q = math.rsqrt %r : f32
        %sel = arith.cmpf oge, %r, %z : f32
        %v = arith.select %sel, %q, %e : f32
        memref.store %v, %c[%i, %j] : memref<37x23xf32>
      }
    }
  }
  func.return
}
"""


def test_annotations_compile_and_compute():
    module = parse_module(ANNOTATED)
    source = emit_c(module)
    assert "/* parallel: left serial, 16169 iterations are too few */" in source
    assert "#pragma GCC unroll 4" in source and "#pragma GCC ivdep" in source
    f = CFunction(module, name="annotated")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((37, 19)).astype(np.float32)
    b = rng.standard_normal((19, 23)).astype(np.float32)
    (c,) = f(a, params=[b])
    import math

    r = a.astype(np.float64) @ b
    erf = np.vectorize(math.erf)(r)
    expect = np.where(r >= 0, 1 / np.sqrt(np.abs(r)), erf)
    np.testing.assert_allclose(c, expect, rtol=1e-4, atol=1e-5)


LOCAL_BUFFERS = """
func.func @main(%x: memref<700x100xf32>, %y: memref<700x100xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "stage" {
    loop.for %i = 0 to 700 step 1 {name = "i0", parallel} {
      %big = memref.alloca() : memref<20000xf32>
      %small = memref.alloc() : memref<100xf32>
      loop.for %j = 0 to 100 step 1 {name = "i1"} {
        %v = memref.load %x[%i, %j] : memref<700x100xf32>
        memref.store %v, %big[%j] : memref<20000xf32>
        %w = arith.mulf %v, %v : f32
        memref.store %w, %small[%j] : memref<100xf32>
      }
      loop.for %j = 0 to 100 step 1 {name = "i2", vectorize} {
        %a = memref.load %big[%j] : memref<20000xf32>
        %b = memref.load %small[%j] : memref<100xf32>
        %c = arith.addf %a, %b : f32
        memref.store %c, %y[%i, %j] : memref<700x100xf32>
      }
      memref.dealloc %small : memref<100xf32>
    }
  }
  func.return
}
"""


def test_kernel_local_buffers_stack_and_heap():
    module = parse_module(LOCAL_BUFFERS)
    source = emit_c(module)
    # a stack array reached through a restrict pointer (GCC then keeps accumulators in
    # registers next to vector loads of another local array); the heap buffer restrict too
    assert "float v_small_mem[100] __attribute__((aligned(64)));" in source
    assert "float *restrict v_small = v_small_mem;" in source
    assert (
        "float *restrict v_big = (float *)dlpc_alloc(20000, sizeof(float), \"kernel 'stage'\");"
        in source
    )
    assert "if (!v_big) dlpc_oom();" in source  # checked: a failure says what and where
    assert "free(v_big);" in source and "#pragma omp parallel for" in source
    x = np.random.default_rng(3).standard_normal((700, 100)).astype(np.float32)
    (y,) = CFunction(module, name="local_buffers")(x)
    np.testing.assert_allclose(y, x + x * x, rtol=1e-5, atol=1e-6)  # FMA contraction allowed


def test_cache_hit_on_second_build(cache_dir):
    source = emit_c(parse_module(ANNOTATED)) + "\n/* cache test */\n"
    first = build(source, name="cache_test")
    second = build(source, name="cache_test")
    assert not first.cached and second.cached
    assert first.path == second.path and first.path.parent == cache_dir
    assert not [p for p in cache_dir.iterdir() if p.name.endswith(".tmp")]


def test_compile_error_is_one_line_naming_the_kernel():
    source = (
        '/* kernel "relu_0" (from graph.relu) */\n'
        "static void kernel_relu_0(float *restrict x)\n{\n  x[0] = undeclared_name;\n}\n"
        "int dlpc_main(void **args)\n{\n  kernel_relu_0((float *)args[0]);\n  return 0;\n}\n"
    )
    with pytest.raises(DlpcError) as info:
        build(source, name="broken")
    msg = str(info.value)
    assert "\n" not in msg
    assert "in kernel 'relu_0'" in msg and "undeclared_name" in msg
    assert ".c:4: error: C compiler failed" in msg


def test_missing_compiler_is_a_diagnostic(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/dlpc-cc")
    with pytest.raises(DlpcError, match="cannot run the C compiler '/nonexistent/dlpc-cc'"):
        build("int dlpc_main(void **args) { return 0; }", name="nocc")


def test_calling_convention_checks():
    f = CFunction(parse_module(ANNOTATED), name="annotated")
    a, b = np.zeros((37, 19), np.float32), np.zeros((19, 23), np.float32)
    with pytest.raises(DlpcError, match="expected 1 inputs, got 2"):
        f(a, a)
    with pytest.raises(
        DlpcError, match="parameter 'b' has shape \\(23, 19\\), expected \\(19, 23\\)"
    ):
        f(a, params={"b": b.T})
    with pytest.raises(DlpcError, match="missing value for parameter 'b'"):
        f(a, params={})


def test_unsupported_op_is_a_diagnostic():
    module = parse_module("""
func.func @main(%a: memref<4xi32>) {
  loop.kernel "k" {
    loop.for %i = 0 to 4 step 1 {name = "i0"} {
      %v = memref.load %a[%i] : memref<4xi32>
      %r = math.ctlz %v : i32
      memref.store %r, %a[%i] : memref<4xi32>
    }
  }
  func.return
}""")
    with pytest.raises(DlpcError, match="unsupported op 'math.ctlz' in kernel 'k'"):
        emit_c(module)


INT_CONSTANT = """
func.func @main(%a: memref<4xTYPE>)
    attributes {dlpc.num_inputs = 0 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to 4 step 1 {name = "i0"} {
      %c = arith.constant VALUE : TYPE
      memref.store %c, %a[%i] : memref<4xTYPE>
    }
  }
  func.return
}"""


@pytest.mark.parametrize(
    "ty, value, want",
    [
        ("i64", -(2**63), -(2**63)),
        ("i64", 2**63 - 1, 2**63 - 1),
        ("i32", -(2**31), -(2**31)),
        ("i8", 255, -1),  # a signless constant in its unsigned form
        ("i8", -128, -128),
    ],
)
def test_integer_constants_at_the_edges_of_their_type(ty, value, want):
    module = parse_module(INT_CONSTANT.replace("TYPE", ty).replace("VALUE", str(value)))
    dtype = {"i64": np.int64, "i32": np.int32, "i8": np.int8}[ty]
    (out,) = CFunction(module, name=f"int_edge_{ty}")()
    np.testing.assert_array_equal(out, np.full(4, want, dtype))


def test_an_index_constant_beyond_int64_is_a_diagnostic():
    """Hand-written loop IR: a constant no C integer type holds is an error naming the op and
    the kernel, not C that wraps it (it was emitted as INT64_C(99999999999999999999999))."""
    module = parse_module(
        INT_CONSTANT.replace("memref.store %c, %a[%i] : memref<4xTYPE>", "")
        .replace("TYPE", "index")
        .replace("VALUE", str(10**23))
        .replace("memref<4xindex>", "memref<4xi64>")
    )
    with pytest.raises(
        DlpcError,
        match=r"^error: c backend: integer constant 10{23} does not fit index "
        r"\('arith.constant' in kernel 'k'\)$",
    ):
        emit_c(module)


def test_identifiers_and_comments():
    assert identifier("fc1.weight") == "v_fc1_weight"
    assert identifier("3x") == "v_3x"
    assert identifier("for") == "v_for"
    assert identifier("exp") == "v_exp"
    assert c_comment("a */ b\nc") == "/* a *\\/ b\\nc */"


def test_simd_reduction_clauses_compute_the_reduction():
    module = parse_module(mlir_body(E2E / "emit-c-simd.mlir"))
    rng = np.random.default_rng(5)
    x, y = (
        rng.standard_normal(1000).astype(np.float32),
        rng.standard_normal(1000).astype(np.float32),
    )
    d, p = CFunction(module, name="simd")(x, y)
    np.testing.assert_allclose(d, [np.dot(x.astype(np.float64), y), x.max()], rtol=1e-4)
    np.testing.assert_allclose(p, np.cumsum(x), rtol=1e-4, atol=1e-4)


def test_float16_and_bool_buffers():
    module = parse_module("""
func.func @main(%x: memref<8xf16>, %y: memref<8xf16>, %z: memref<8xi1>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 2 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to 8 step 1 {name = "i0", vectorize} {
      %v = memref.load %x[%i] : memref<8xf16>
      %e = math.exp %v : f16
      %h = arith.constant 0.5 : f16
      %r = arith.mulf %e, %h : f16
      memref.store %r, %y[%i] : memref<8xf16>
      %p = arith.cmpf olt, %v, %h : f16
      memref.store %p, %z[%i] : memref<8xi1>
    }
  }
  func.return
}""")
    x = np.linspace(-1, 1, 8).astype(np.float16)
    y, z = CFunction(module, name="f16")(x)
    assert y.dtype == np.float16 and z.dtype == np.bool_
    np.testing.assert_allclose(y, np.exp(x.astype(np.float32)) * 0.5, rtol=2e-3)
    np.testing.assert_array_equal(z, x < 0.5)


def test_integer_pow():
    """math.ipowi: by squaring, wrapping like i32 multiplication; a negative exponent
    gives the integer part of 1 / a ** |b| (0 but for a = 1 and a = -1)."""
    module = parse_module("""
func.func @main(%a: memref<9xi32>, %b: memref<9xi32>, %y: memref<9xi32>)
    attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to 9 step 1 {name = "i0"} {
      %x = memref.load %a[%i] : memref<9xi32>
      %e = memref.load %b[%i] : memref<9xi32>
      %p = math.ipowi %x, %e : i32
      memref.store %p, %y[%i] : memref<9xi32>
    }
  }
  func.return
}""")
    a = np.array([2, -3, 5, 0, 7, 1, -1, -1, 3], np.int32)
    b = np.array([10, 3, 0, 0, 20, -4, -3, -2, -1], np.int32)
    (y,) = CFunction(module, name="ipowi")(a, b)
    want = [1024, -27, 1, 1, int(np.int64(7) ** 20 % 2**32), 1, -1, 1, 0]
    np.testing.assert_array_equal(y, np.array(want, np.int64).astype(np.int32))


@pytest.mark.parametrize("example", ["emit-c.mlir", "emit-c-names.mlir", "emit-c-simd.mlir"])
def test_emitted_c_is_warning_free(example, tmp_path):
    import subprocess

    from dlpc.backends.runtime.cbuild import compiler

    path = tmp_path / "m.c"
    path.write_text(emit_c(parse_module(mlir_body(E2E / example))))
    res = subprocess.run(
        [
            *compiler(),
            "-std=gnu11",
            "-fopenmp",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fsyntax-only",
            str(path),
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr


def test_scf_if_without_results_or_else():
    module = parse_module("""
func.func @main(%x: memref<5xf32>, %y: memref<5xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to 5 step 1 {name = "i0"} {
      %v = memref.load %x[%i] : memref<5xf32>
      memref.store %v, %y[%i] : memref<5xf32>
      %z = arith.constant 0.0 : f32
      %c = arith.cmpf olt, %v, %z : f32
      scf.if %c {
        memref.store %z, %y[%i] : memref<5xf32>
      }
    }
  }
  func.return
}""")
    source = emit_c(module)
    assert "if (v_c) {\n      v_out0[v_i0] = 0.0f;\n    }\n" in source and "else" not in source
    x = np.array([-2, -0.5, 0, 0.5, 3], np.float32)
    (y,) = CFunction(module, name="if_no_else")(x)
    np.testing.assert_array_equal(y, np.maximum(x, 0))


def test_optional_flags_are_dropped_when_the_compiler_rejects_them(tmp_path, monkeypatch):
    from dlpc.backends.runtime.cbuild import compiler, flags

    wrapper = tmp_path / "picky-cc"
    wrapper.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do case "$a" in -fopenmp|-march=native) exit 1;; esac; done\n'
        'exec cc "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("CC", str(wrapper))
    assert "-fopenmp" not in flags(compiler()) and "-march=native" not in flags(compiler())
    module = parse_module(LOCAL_BUFFERS)
    x = np.ones((700, 100), np.float32)
    (y,) = CFunction(module, name="picky")(x)
    np.testing.assert_array_equal(y, np.full((700, 100), 2, np.float32))


def test_loop_ir_built_from_python_helpers():
    """Build a kernel with the loop dialect's helpers, annotate it by path, run it."""
    from xdsl.dialects import arith, func, memref
    from xdsl.dialects.builtin import FunctionType, IntegerAttr, MemRefType, ModuleOp, f32, i64
    from xdsl.ir import Block, Region

    from dlpc.dialects.loop import KernelOp, find_kernel, find_loop, loop_nest

    ty = MemRefType(f32, [6, 10])
    block = Block(arg_types=[ty, ty])
    x, y = block.args
    kernel = KernelOp("double", origin="graph.add")
    block.add_op(kernel)

    def body(inner: Block, ivs) -> None:
        load = memref.LoadOp.get(x, ivs)
        add = arith.AddfOp(load, load)
        inner.add_ops([load, add, memref.StoreOp.get(add, y, ivs)])

    nest = loop_nest(kernel, [6, 10], ["i0", "i1"], body, {"i0": {"parallel": True}})
    assert [lp.loop_name for lp in nest] == ["i0", "i1"] and nest[0].parallel is not None
    block.add_op(func.ReturnOp())
    fn = func.FuncOp("main", FunctionType.from_lists([ty, ty], []), Region(block))
    fn.attributes["dlpc.num_outputs"] = IntegerAttr(1, i64)
    module = ModuleOp([fn])
    module.verify()

    assert find_kernel(module, "double") is kernel
    find_loop(module, "double/i1").annotate("vectorize")
    assert kernel.fresh_loop_name("i0") == "i0.1" and kernel.fresh_loop_name("j") == "j"
    with pytest.raises(KeyError, match="kernel 'double' has no loop named 'r0'"):
        find_loop(module, "double/r0")
    source = emit_c(module)
    assert '/* kernel "double" (from graph.add) */' in source and "#pragma omp simd" in source
    x_in = np.arange(60, dtype=np.float32).reshape(6, 10)
    (out,) = CFunction(module, name="helpers")(x_in)
    np.testing.assert_array_equal(out, 2 * x_in)


NESTED_PARALLEL = """
func.func @main(%x: memref<4x300x300xf32>, %y: memref<4x300x300xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "outer" {
    loop.for %i = 0 to 4 step 1 {name = "i0", parallel} {
      loop.for %j = 0 to 300 step 1 {name = "i1", parallel} {
        loop.for %k = 0 to 300 step 1 {name = "i2", vectorize} {
          %v = memref.load %x[%i, %j, %k] : memref<4x300x300xf32>
          %w = arith.mulf %v, %v : f32
          memref.store %w, %y[%i, %j, %k] : memref<4x300x300xf32>
        }
      }
    }
  }
  loop.kernel "flat" {
    %c300 = arith.constant 300 : index
    loop.for %n = 0 to 360000 step 1 {name = "i0", parallel, vectorize} {
      %p = arith.divui %n, %c300 : index
      %a = arith.divui %p, %c300 : index
      %r = arith.remui %p, %c300 : index
      %q = arith.remui %n, %c300 : index
      %v = memref.load %y[%a, %r, %q] : memref<4x300x300xf32>
      %w = arith.addf %v, %v : f32
      memref.store %w, %y[%a, %r, %q] : memref<4x300x300xf32>
    }
  }
  func.return
}
"""


def test_parallel_loop_has_a_serial_copy():
    """A parallel loop is emitted twice: under `omp parallel for` when the team would have
    more than one thread (`dlpc_parallel()`), else the same loop without the region (a
    one-thread region still costs a GOMP_parallel call); a parallel loop inside another
    is left serial (libgomp would give it a team of one)."""
    source = emit_c(parse_module(NESTED_PARALLEL))
    assert "static inline int dlpc_parallel(void)" in source
    assert "omp_get_max_threads() > 1" in source
    flat = source[source.index('/* kernel "flat"') :]
    flat = flat[: flat.index("\n}\n")]
    lines = [ln.strip() for ln in flat.splitlines()]
    head = lines.index("if (dlpc_parallel()) {")
    loop = "for (int64_t v_i0 = 0; v_i0 < 360000; v_i0++) {"
    assert lines[head + 1 : head + 3] == ["#pragma omp parallel for simd", loop]
    other = lines.index("} else {")
    assert lines[other + 1 : other + 3] == ["#pragma omp simd", loop]
    # the same body in both branches
    assert lines[head + 2 : other] == lines[other + 2 : other + 2 + other - head - 2]
    assert sum("omp parallel" in ln for ln in lines) == 1
    outer = source[source.index('/* kernel "outer"') : source.index('/* kernel "flat"')]
    assert outer.count("omp parallel") == 1 and outer.count("if (dlpc_parallel())") == 1
    assert outer.count("/* parallel: left serial inside the parallel loop around it */") == 2
    x = np.random.default_rng(5).standard_normal((4, 300, 300)).astype(np.float32)
    (y,) = CFunction(parse_module(NESTED_PARALLEL), name="nested_parallel")(x)
    np.testing.assert_allclose(y, 2 * x * x, rtol=1e-6)


# two parallel kernels, a serial one (a sum over the rows) and a parallel one with a store
# before its loop; `{EXTRA}` is where a test puts that last one
TEAM = """
func.func @main(%x: memref<64x4096xf32>, %y: memref<64x4096xf32>, %s: memref<64xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 2 : i64} {
  loop.kernel "twice" {
    loop.for %i = 0 to 64 step 1 {name = "i0", parallel} {
      loop.for %j = 0 to 4096 step 1 {name = "i1", vectorize} {
        %v = memref.load %x[%i, %j] : memref<64x4096xf32>
        %w = arith.addf %v, %v : f32
        memref.store %w, %y[%i, %j] : memref<64x4096xf32>
      }
    }
  }
  loop.kernel "square" {
    loop.for %o = 0 to 1 step 1 {name = "o"} {
      loop.for %i = 0 to 64 step 1 {name = "i0", parallel} {
        loop.for %j = 0 to 4096 step 1 {name = "i1", vectorize} {
          %v = memref.load %y[%i, %j] : memref<64x4096xf32>
          %w = arith.mulf %v, %v : f32
          memref.store %w, %y[%i, %j] : memref<64x4096xf32>
        }
      }
    }
  }
  loop.kernel "rows" {
    loop.for %i = 0 to 64 step 1 {name = "i0"} {
      %z = arith.constant 0.0 : f32
      memref.store %z, %s[%i] : memref<64xf32>
      loop.for %j = 0 to 4096 step 1 {name = "i1"} {
        %v = memref.load %y[%i, %j] : memref<64x4096xf32>
        %a = memref.load %s[%i] : memref<64xf32>
        %b = arith.addf %a, %v : f32
        memref.store %b, %s[%i] : memref<64xf32>
      }
    }
  }{EXTRA}
  func.return
}
"""
STORE_FIRST = """
  loop.kernel "halve" {
    %c0 = arith.constant 0 : index
    %h = arith.constant 0.5 : f32
    memref.store %h, %s[%c0] : memref<64xf32>
    loop.for %i = 0 to 64 step 1 {name = "i0", parallel} {
      loop.for %j = 0 to 4096 step 1 {name = "i1", vectorize} {
        %v = memref.load %y[%i, %j] : memref<64x4096xf32>
        %w = arith.mulf %v, %h : f32
        memref.store %w, %y[%i, %j] : memref<64x4096xf32>
      }
    }
  }"""


def test_team_region():
    """@main's kernels from the first one on run in one OpenMP region when the team
    would have more than one thread (`team_region`): a kernel whose body is serial loops
    around one parallel loop shares that loop with the team (`omp for`, `team_kind`
    "loop"), a kernel with no parallel loop runs on one thread (`omp single`); else, in
    the DLPC_PROFILE build and on one thread, the calls as before. A kernel storing
    outside its parallel loop (every thread would run the store) leaves @main without a
    region, as does a single parallel kernel (nothing to share a region with)."""
    from dlpc.backends.c import team_kind, team_region
    from dlpc.dialects.loop import KernelOp

    module = parse_module(TEAM.replace("{EXTRA}", ""))
    main = next(op for op in module.walk() if op.name == "func.func")
    kernels = {k.sym: k for k in module.walk() if isinstance(k, KernelOp)}
    assert {s: team_kind(k) for s, k in kernels.items()} == {
        "twice": "loop",
        "square": "loop",
        "rows": "single",
    }
    assert team_region(main) is kernels["twice"]
    source = emit_c(module)
    body = source[source.index("int dlpc_main(void **args)") :]
    lines = [ln.strip() for ln in body.splitlines()]
    head = lines.index("if (dlpc_parallel()) {")
    assert lines[head + 1 : head + 5] == [
        "#pragma omp parallel",
        "{",
        "if (dlpc_team_first()) DLPC_PROF_BEGIN(0);",  # (timed on one thread, DLPC_PROFILE)
        "kernel_twice_team(v_x, v_out0);",
    ]
    single = lines.index("#pragma omp single")
    assert lines[single + 1 : single + 3] == ["{", "DLPC_PROF_BEGIN(2);"]
    # each kernel's timer has its own start: "rows" starts on whichever thread runs the
    # single while the first thread may still be stopping "square"'s
    assert "static double dlpc_kernel_start[3];" in source
    assert (
        "#define DLPC_PROF_END(k) (dlpc_kernel_seconds[k] += dlpc_now() - dlpc_kernel_start[k])"
        in source
    )
    assert lines[single + 3].startswith("kernel_rows(") and lines.count("#pragma omp single") == 1
    # the calls again, without the region, for a one-thread team
    other = lines.index("} else {", head)
    calls = [ln.split("(")[0] for ln in lines[other:] if ln.startswith("kernel_")]
    assert calls == ["kernel_twice", "kernel_square", "kernel_rows"]
    loop = "for (int64_t v_i0 = 0; v_i0 < 64; v_i0++) {"
    for name in ("twice", "square"):
        team = source[source.index(f"static void kernel_{name}_team(") :]
        team = [ln.strip() for ln in team[: team.index("\n}\n")].splitlines()]
        assert team[team.index("#pragma omp for") + 1] == loop
        assert not any("omp parallel" in ln or "dlpc_parallel" in ln for ln in team)
        plain = source[source.index(f"static void kernel_{name}(") :]
        plain = [ln.strip() for ln in plain[: plain.index("\n}\n")].splitlines()]
        assert "if (dlpc_parallel()) {" in plain and "#pragma omp for" not in plain
    assert "kernel_rows_team" not in source
    x = np.random.default_rng(7).standard_normal((64, 4096)).astype(np.float32)
    y, s = CFunction(module, name="team_region")(x)
    np.testing.assert_allclose(y, 4 * x * x, rtol=1e-6)
    np.testing.assert_allclose(s, (4 * x * x).astype(np.float64).sum(axis=1), rtol=1e-4)

    store_first = parse_module(TEAM.replace("{EXTRA}", STORE_FIRST))
    halve = next(k for k in store_first.walk() if isinstance(k, KernelOp) and k.sym == "halve")
    assert team_kind(halve) is None
    source = emit_c(store_first)
    assert "#pragma omp parallel\n" not in source and "_team(" not in source
    alone = TEAM.replace("{EXTRA}", "")
    alone = (
        alone[: alone.index('  loop.kernel "square"')]
        + alone[alone.index('  loop.kernel "rows"') :]
    )
    source = emit_c(parse_module(alone))
    assert "#pragma omp parallel\n" not in source and "_team(" not in source


def test_team_loop_is_shared_only_in_the_region():
    """A loop marked `dlpc.team` (TEAM_LOOP: independent iterations in a kernel too small
    to wake a thread for) is serial in its kernel's function and an `omp for` in the
    kernel's team copy: "rows" marked so is shared in the region "twice" and "square"
    open. A marked kernel opens no region (it counts for none of TEAM_MIN_KERNELS), and
    a mark that does not fit one shared loop (two marked loops) leaves a kernel serial,
    in `omp single`."""
    from dlpc.backends.c import team_kind, team_region
    from dlpc.dialects.loop import KernelOp

    text = TEAM.replace("{EXTRA}", "")
    head = 'loop.for %i = 0 to 64 step 1 {name = "i0"} {\n      %z'
    marked = text.replace(head, head.replace('"i0"}', '"i0", dlpc.team}'))
    assert marked.count("dlpc.team") == 1
    module = parse_module(marked)
    kernels = {k.sym: k for k in module.walk() if isinstance(k, KernelOp)}
    assert team_kind(kernels["rows"]) == "loop"
    main = next(op for op in module.walk() if op.name == "func.func")
    assert team_region(main) is kernels["twice"]
    source = emit_c(module)
    team = source[source.index("static void kernel_rows_team(") :]
    team = [ln.strip() for ln in team[: team.index("\n}\n")].splitlines()]
    loop = "for (int64_t v_i0 = 0; v_i0 < 64; v_i0++) {"
    assert team[team.index("#pragma omp for") + 1] == loop
    plain = source[source.index("static void kernel_rows(") :]
    plain = [ln.strip() for ln in plain[: plain.index("\n}\n")].splitlines()]
    assert loop in plain and not any("omp for" in ln or "dlpc_parallel" in ln for ln in plain)
    x = np.random.default_rng(8).standard_normal((64, 4096)).astype(np.float32)
    y, s = CFunction(module, name="team_loop")(x)
    np.testing.assert_allclose(y, 4 * x * x, rtol=1e-6)
    np.testing.assert_allclose(s, (4 * x * x).astype(np.float64).sum(axis=1), rtol=1e-4)

    # "square" marked instead of parallel: one parallel kernel left, no region
    square = 'loop.for %i = 0 to 64 step 1 {name = "i0", parallel} {\n        loop.for %j = 0 to 4096 step 1 {name = "i1", vectorize} {\n          %v = memref.load %y'
    assert marked.count(square) == 1
    alone = parse_module(marked.replace(square, square.replace("parallel}", "dlpc.team}", 1)))
    assert team_region(next(op for op in alone.walk() if op.name == "func.func")) is None

    # two marked loops side by side: no one shared loop, so one thread runs the kernel
    copy = (
        '    loop.for %{i} = 0 to 64 step 1 {{name = "{n}", dlpc.team}} {{\n'
        '      loop.for %{j} = 0 to 4096 step 1 {{name = "{n}j", vectorize}} {{\n'
        "        %{v} = memref.load %x[%{i}, %{j}] : memref<64x4096xf32>\n"
        "        memref.store %{v}, %y[%{i}, %{j}] : memref<64x4096xf32>\n"
        "      }}\n"
        "    }}\n"
    )
    pair = copy.format(i="a", j="b", v="c", n="p") + copy.format(i="d", j="e", v="f", n="q")
    two = parse_module(
        text.replace("  func.return", f'  loop.kernel "pair" {{\n{pair}  }}\n  func.return')
    )
    pair_kernel = next(k for k in two.walk() if isinstance(k, KernelOp) and k.sym == "pair")
    assert team_kind(pair_kernel) == "single"


BIG_PARALLEL = """
func.func @main(%x: memref<16x256x256xf32>, %y: memref<16x256x256xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "big" {
    loop.for %i = 0 to 16 step 1 {name = "i0", parallel} {
      loop.for %j = 0 to 256 step 1 {name = "i1"} {
        loop.for %k = 0 to 256 step 1 {name = "i2"} {
          %v = memref.load %x[%i, %j, %k] : memref<16x256x256xf32>
          %w = arith.mulf %v, %v : f32
          memref.store %w, %y[%i, %j, %k] : memref<16x256x256xf32>
        }
      }
    }
  }
  func.return
}
"""


def test_big_parallel_loop_is_emitted_once():
    """A parallel loop of ONE_BODY_MIN_WORK innermost iterations or more has no serial
    copy: one OpenMP loop whose `if(parallel: ...)` clause gives a one-thread team when
    `dlpc_parallel()` says no (the compile time of the copy saved, a region's cost lost
    in the loop's)."""
    from dlpc.backends.c import ONE_BODY_MIN_WORK, vector_work

    module = parse_module(BIG_PARALLEL)
    assert vector_work(next(op for op in module.walk() if isinstance(op, ForOp))) == 16 * 256 * 256
    assert 16 * 256 * 256 >= ONE_BODY_MIN_WORK
    source = emit_c(module)
    big = source[source.index('/* kernel "big"') :]
    big = big[: big.index("\n}\n")]
    lines = [ln.strip() for ln in big.splitlines()]
    assert "if (dlpc_parallel()) {" not in lines and "} else {" not in lines
    head = lines.index("#pragma omp parallel for if(parallel: dlpc_parallel())")
    assert lines[head + 1] == "for (int64_t v_i0 = 0; v_i0 < 16; v_i0++) {"
    assert sum("omp parallel" in ln for ln in lines) == 1
    x = np.random.default_rng(6).standard_normal((16, 256, 256)).astype(np.float32)
    (y,) = CFunction(parse_module(BIG_PARALLEL), name="big_parallel")(x)
    np.testing.assert_allclose(y, x * x, rtol=1e-6)


def test_vectorised_loop_counts_its_vectors_for_one_body():
    """The same nest with its innermost loop vectorised runs 1/VECTOR_STEP of the steps
    (tens of microseconds), below ONE_BODY_MIN_WORK: it keeps its serial copy, so a
    one-thread call enters no OpenMP region for it."""
    from dlpc.backends.c import ONE_BODY_MIN_WORK, VECTOR_STEP, vector_work

    module = parse_module(BIG_PARALLEL.replace('{name = "i2"}', '{name = "i2", vectorize}'))
    loop = next(op for op in module.walk() if isinstance(op, ForOp))
    assert vector_work(loop) == 16 * 256 * (256 // VECTOR_STEP) < ONE_BODY_MIN_WORK
    source = emit_c(module)
    big = source[source.index('/* kernel "big"') :]
    lines = [ln.strip() for ln in big[: big.index("\n}\n")].splitlines()]
    assert "if (dlpc_parallel()) {" in lines and "} else {" in lines
    assert "#pragma omp parallel for if(parallel: dlpc_parallel())" not in lines


# counts the parallel regions the emitted C enters: the program's own GOMP_parallel
# interposes libgomp's and forwards to it
GOMP_COUNTER = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <omp.h>
#define N (4 * 300 * 300)
static int regions;
void GOMP_parallel(void (*fn)(void *), void *data, unsigned n, unsigned flags)
{
  static void (*real)(void (*)(void *), void *, unsigned, unsigned);
  if (!real)
    real = (void (*)(void (*)(void *), void *, unsigned, unsigned))dlsym(RTLD_NEXT, "GOMP_parallel");
  regions++;
  real(fn, data, n, flags);
}
int main(void)
{
  static float x[N], y1[N], y2[N];
  for (int i = 0; i < N; i++)
    x[i] = (float)(i % 17) - 8.0f;
  void *a1[2] = {x, y1}, *a2[2] = {x, y2};
  int fails = 0;
  omp_set_num_threads(1);
  fails += dlpc_main(a1);
  int serial = regions;
  omp_set_num_threads(2);
  fails += dlpc_main(a2);
  int parallel = regions - serial;
  omp_set_num_threads(2);
  #pragma omp parallel num_threads(2)
  {
    #pragma omp single
    fails += dlpc_main(a2);  /* inside the caller's region: no nested team */
  }
  int nested = regions - serial - parallel - 1;
  for (int i = 0; i < N; i++)
    fails += y1[i] != 2 * x[i] * x[i] || y2[i] != y1[i];
  printf("%d %d %d %d\n", serial, parallel, nested, fails);
  return 0;
}
"""


def test_one_thread_enters_no_parallel_region(tmp_path):
    """On a one-thread team (omp_set_num_threads(1) between calls, or a call from inside
    the user's own parallel region) the kernels run their serial copies: no GOMP_parallel
    call; on two threads the call enters one region, its two kernels' loops shared by
    its team (`team_region`); the results agree."""
    import subprocess

    from dlpc.backends.runtime.cbuild import compiler

    source = emit_c(parse_module(NESTED_PARALLEL))
    path = tmp_path / "count.c"
    path.write_text(source + GOMP_COUNTER)
    exe = tmp_path / "count"
    cc = [*compiler(), "-std=gnu11", "-O1", "-fopenmp", str(path), "-o", str(exe), "-lm", "-ldl"]
    res = subprocess.run(cc, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    serial, parallel, nested, fails = map(int, out.split())
    assert (serial, parallel, nested, fails) == (0, 1, 0, 0)


def test_kernels_are_out_of_line_in_the_plain_and_the_profile_build():
    """Every kernel function is `noinline` (KERNEL_ATTRIBUTES), so the DLPC_PROFILE build
    (timers between the kernel calls) compiles each kernel as the plain build does: each is
    its own function in both libraries (inlined into dlpc_main, GCC compiled resnet's convs
    up to 3x worse in the profile build), and each timer brackets one of them."""
    import re
    import subprocess

    from dlpc.backends.runtime.profile import kernel_costs, profile, profile_library

    module = parse_module(mlir_body(E2E / "emit-c.mlir"))
    plain = CFunction(module, name="noinline")
    profiled = profile_library(plain, "noinline")
    definition = re.compile(r"^(.*)\bstatic (?:void|int) (kernel_\w+)\(", re.M)
    kernels = []
    for build_ in (plain, profiled):
        found = definition.findall(build_.source)
        assert [attrs for attrs, _ in found] == ["__attribute__((noinline)) "] * len(found)
        kernels.append([name for _, name in found])
    assert kernels[0] == kernels[1] and len(kernels[0]) == 5
    for lib in (plain.library, profiled.library):
        symbols = subprocess.run(["nm", str(lib.path)], capture_output=True, text=True, check=True)
        # a kernel kept out of line is a local function symbol, possibly as a clone
        # (`kernel_x.constprop.0`); `kernel_x._omp_fn.0` is its OpenMP body, outlined even
        # when the kernel itself is inlined, so it does not count
        functions = {
            fields[2].split(".")[0]
            for fields in (ln.split() for ln in symbols.stdout.splitlines())
            if len(fields) == 3 and fields[1] in "tT" and "_omp_fn" not in fields[2]
        }
        assert set(kernels[0]) <= functions, lib.path
    # the profile's rows are the call's kernels, one timer each, in call order
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    rows, call = profile(plain, module, [x], repeat=3, name="noinline")
    names = [c.name for c in kernel_costs(module)]
    assert [r.name for r in rows] == names
    assert [f"kernel_{n}" for n in names] == kernels[0]
    assert all(r.seconds > 0 for r in rows) and call > 0
