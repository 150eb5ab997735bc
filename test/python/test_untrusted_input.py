"""Input files are data (issue #15, docs/security.md): odd and hostile files give one error
line and exit code 1, or the right result; never a hang, a crash or a wrong shape."""

import re
import subprocess
import sys

import pytest

CLI_TIMEOUT = 60  # seconds; a generous bound for a hang, not a timing assertion


def run_cli(*argv, timeout=CLI_TIMEOUT, **kwargs):
    return subprocess.run(
        [sys.executable, "-m", "dlpc", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


def assert_one_line_error(proc, expected: str) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert expected in proc.stderr, proc.stderr


# --------------------------------------------- item 9: the lexer's exponential string pattern


def test_xdsl_string_pattern_is_the_one_dlpc_replaces():
    """Fails when xDSL changes its string-literal pattern: look at dialects/xdsl_fixes.py again
    (drop the fix if upstream made the pattern linear, adapt it otherwise)."""
    import importlib.util

    from xdsl.utils.mlir_lexer import MLIRLexer

    import dlpc.dialects  # noqa: F401  (installs the fix)
    from dlpc.dialects.xdsl_fixes import LINEAR_STRING_LITERAL, XDSL_STRING_LITERAL

    spec = importlib.util.find_spec("xdsl.utils.mlir_lexer")
    source = open(spec.origin, encoding="utf-8").read()
    shipped = "r'" + XDSL_STRING_LITERAL + "'"
    assert shipped in source, "xDSL's string-literal pattern changed: revisit xdsl_fixes.py"
    assert MLIRLexer._unescaped_characters_regex.pattern == LINEAR_STRING_LITERAL


@pytest.mark.parametrize(
    "text",
    [
        '""',
        '"abc"',
        '"a\\"b"',
        '"\\n\\t\\\\"',
        '"\\41\\ff"',
        '"x\\q"',
        '"a\nb"',
        '"abc',
        '"\\',
        "'",
    ],
)
def test_linear_string_pattern_accepts_what_xdsl_accepts(text):
    from dlpc.dialects.xdsl_fixes import LINEAR_STRING_LITERAL, XDSL_STRING_LITERAL

    old = re.compile(XDSL_STRING_LITERAL).match(text)
    new = re.compile(LINEAR_STRING_LITERAL).match(text)
    assert (old and old.group()) == (new and new.group())


@pytest.mark.parametrize("entry", ["dlpc-opt", "dlpc", "load"])
def test_unterminated_string_is_one_error_line(tmp_path, entry):
    """A 40-byte file that took minutes with xDSL's pattern (each 2 more characters double it)."""
    path = tmp_path / "hang.mlir"
    path.write_text('"' + "a" * 38 + "\n")
    assert path.stat().st_size == 40
    if entry == "dlpc-opt":
        proc = run_cli("opt", str(path))
    elif entry == "dlpc":
        proc = run_cli(str(path), "--emit=graph")
    else:
        code = "import dlpc, sys\nfrom dlpc.diagnostics import run_guarded\n"
        code += f"sys.exit(run_guarded(lambda: dlpc.load({str(path)!r}) and 0, 'load'))"
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=CLI_TIMEOUT
        )
    assert_one_line_error(proc, "hang.mlir:1:1: error: End of file reached before closing string")


# ------------------------------------------------------ item 7: rank-0 values from ONNX


def _backends():
    """numpy, C, and OpenCL when pyopencl is installed (the DLP simulator too: it is C)."""
    import importlib.util

    targets = ["numpy", "c", "dlp"]
    if importlib.util.find_spec("pyopencl") is not None:
        targets.append("opencl")
    return targets


def _onnx_model(nodes, inputs, outputs, inits):
    from onnx import helper, numpy_helper

    g = helper.make_graph(
        nodes, "g", inputs, outputs, [numpy_helper.from_array(a, n) for n, a in inits]
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _scalar_cases():
    import numpy as np
    from onnx import TensorProto, helper

    F = TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    node = helper.make_node
    x34 = np.arange(12, dtype=np.float32).reshape(3, 4)
    return {
        # Gather with a 0-d index drops the axis: (3, 4)[1] is (4,), it was (1, 4)
        "gather-scalar-index": (
            [node("Gather", ["x", "i"], ["y"], axis=0)],
            [vi("x", F, [3, 4])],
            [vi("y", F, [4])],
            [("i", np.array(1, np.int64))],
            [x34],
        ),
        "gather-scalar-index-axis1": (
            [node("Gather", ["x", "i"], ["y"], axis=1)],
            [vi("x", F, [3, 4])],
            [vi("y", F, [3])],
            [("i", np.array(-1, np.int64))],
            [x34],
        ),
        # scalar + scalar is a scalar, it was (1,)
        "add-scalar-input-initializer": (
            [node("Add", ["x", "c"], ["y"])],
            [vi("x", F, [])],
            [vi("y", F, [])],
            [("c", np.array(2.5, np.float32))],
            [np.array(1.5, np.float32)],
        ),
        "add-two-scalar-initializers": (
            [node("Add", ["a", "c"], ["s"]), node("Mul", ["x", "s"], ["y"])],
            [vi("x", F, [])],
            [vi("y", F, [])],
            [("a", np.array(1.0, np.float32)), ("c", np.array(2.5, np.float32))],
            [np.array(-2.0, np.float32)],
        ),
        "reduce-to-scalar": (
            [node("ReduceSum", ["x"], ["s"], keepdims=0), node("Add", ["s", "c"], ["y"])],
            [vi("x", F, [3, 4])],
            [vi("y", F, [])],
            [("c", np.array(0.5, np.float32))],
            [x34],
        ),
    }


@pytest.mark.parametrize("case", sorted(_scalar_cases()))
def test_onnx_scalars_keep_rank_0(case):
    """0-d initializers stay 0-d; every backend's result has onnxruntime's shape and values."""
    ort = pytest.importorskip("onnxruntime")
    import numpy as np

    import dlpc
    from dlpc.frontends.onnx import load_model

    nodes, ins, outs, inits, inputs = _scalar_cases()[case]
    proto = _onnx_model(nodes, ins, outs, inits)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {i.name: a for i, a in zip(proto.graph.input, inputs)})
    model = load_model(proto)
    for target in _backends():
        got = dlpc.compile(model, target=target)(*inputs)
        assert [g.shape for g in got] == [w.shape for w in want], target
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=target)


# --------------------------------------------------- item 8: zero-size inputs and constants

EMPTY_MODEL = """
func.func @main(%x: tensor<0x4xf32>, %y: tensor<2x4xf32>)
    -> (tensor<0x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %c = graph.constant dense<> : tensor<0x4xf32>
  %a = graph.add %x, %c : (tensor<0x4xf32>, tensor<0x4xf32>) -> tensor<0x4xf32>
  %r = graph.relu %a : (tensor<0x4xf32>) -> tensor<0x4xf32>
  %z = graph.concat %r, %y {axis = 0 : i64} : (tensor<0x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %t = graph.tanh %z : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %u = graph.concat %c, %y {axis = 0 : i64} : (tensor<0x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %v = graph.sigmoid %u : (tensor<2x4xf32>) -> tensor<2x4xf32>
  func.return %r, %t, %v : tensor<0x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}
"""


@pytest.mark.parametrize("target", _backends())
def test_zero_size_input_and_constant(tmp_path, target):
    """A (0, 4) input and a (0, 4) constant (OpenCL raised INVALID_BUFFER_SIZE)."""
    import numpy as np

    import dlpc

    path = tmp_path / "empty.mlir"
    path.write_text(EMPTY_MODEL)
    y = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    r, t, v = dlpc.compile(dlpc.load(str(path)), target=target)(np.zeros((0, 4), np.float32), y)
    assert r.shape == (0, 4) and t.shape == (2, 4) and v.shape == (2, 4)
    np.testing.assert_allclose(t, np.tanh(y), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(v, 1 / (1 + np.exp(-y)), rtol=1e-5, atol=1e-6)


# ------------------------------------------- item 6: files written by `dlpc -o` (real files)

FOLDABLE = """
func.func @main(%x: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %w = graph.param "w" : tensor<64x64xf32>
  %e = graph.exp %w : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %y = graph.mul %x, %e : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  func.return %y : tensor<64x64xf32>
}
"""


@pytest.fixture
def foldable(tmp_path):
    """f.mlir with its weights beside it (f.npz) and a copy given by --weights (rw.npz);
    folding exp(w) makes a new weight, so `-o X.c` also writes X.npz."""
    import numpy as np

    (tmp_path / "f.mlir").write_text(FOLDABLE)
    w = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    np.savez(tmp_path / "f.npz", w=w)
    np.savez(tmp_path / "rw.npz", w=w)
    return tmp_path


def _snapshot(directory):
    return {p.name: (p.is_symlink(), p.read_bytes()) for p in sorted(directory.iterdir())}


def test_side_file_never_overwrites_the_weights_beside_the_model(foldable):
    """`dlpc f.mlir -o f.c` reads f.npz (the default weights) and would write f.npz."""
    before = _snapshot(foldable)
    proc = run_cli("f.mlir", "-o", "f.c", cwd=foldable)
    assert_one_line_error(proc, "-o f.c (its folded weights f.npz) would overwrite f.npz")
    assert "the weights beside the model" in proc.stderr
    assert _snapshot(foldable) == before


def test_side_file_through_a_symlink_to_the_weights_is_refused(foldable):
    (foldable / "lnk.npz").symlink_to("rw.npz")
    before = _snapshot(foldable)
    proc = run_cli("f.mlir", "--weights", "rw.npz", "-o", "lnk.c", cwd=foldable)
    assert_one_line_error(proc, "(its folded weights lnk.npz) would overwrite rw.npz")
    assert _snapshot(foldable) == before


def test_output_symlink_to_the_weights_is_refused(foldable):
    (foldable / "link.c").symlink_to("rw.npz")
    before = _snapshot(foldable)
    proc = run_cli("f.mlir", "--weights", "rw.npz", "-o", "link.c", cwd=foldable)
    assert_one_line_error(proc, "-o link.c would overwrite rw.npz, the --weights input")
    assert _snapshot(foldable) == before


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_output_and_side_file_honour_the_umask_and_are_named(foldable, umask, mode):
    proc = run_cli("f.mlir", "--weights", "rw.npz", "-o", "out.c", cwd=foldable, umask=umask)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "dlpc: wrote out.npz: the 2 weights out.c needs\n"
    for name in ("out.c", "out.npz"):
        assert (foldable / name).stat().st_mode & 0o777 == mode, name
    assert sorted(p.name for p in foldable.iterdir()) == [
        "f.mlir",
        "f.npz",
        "out.c",
        "out.npz",
        "rw.npz",
    ]  # no temporary file is left


# ------------------------------------------- item 3: sizes, allocations, generated C under ASan

ODD_MODELS = {
    # odd extents everywhere: tails of vectorised and tiled loops, strided and padded conv
    "conv": """model conv(x: f32[1, 3, 7, 9]) {
  param w: f32[5, 3, 3, 3] = kaiming(seed=1)
  param b: f32[5] = normal(seed=2)
  let h = relu(conv2d(x, w, b, stride=2, padding=1))
  return max_pool2d(h, kernel=2, stride=1)
}""",
    "mlp": """model mlp(x: f32[3, 17]) {
  param w: f32[13, 17] = kaiming(seed=3)
  param b: f32[13] = normal(seed=4)
  return softmax(tanh(linear(x, w, b)))
}""",
    # a longer row: flat indices past 2^20 in a reduction and an elementwise chain
    "long": """model long(x: f32[3, 1000003]) {
  return reduce_sum(exp(x * 0.001), axis=1)
}""",
}

# the model, small enough for its allocation to be tried: at -O0 the broadcast is a
# 2^37-element (512 GiB) buffer, which fails cleanly instead of wrapping
OOM_MODEL = (
    "model m(x: f32[1]) {\n  return reduce_max(exp(broadcast(x, shape=[137438953472])))\n}\n"
)

# a kernel holding a 20000-float and a 512 GiB scratch buffer outside any OpenMP loop
KERNEL_ALLOC = """
func.func @main(%x: memref<4xf32>, %y: memref<4xf32>)
    attributes {dlpc.num_inputs = 1, dlpc.params = [], dlpc.num_outputs = 1} {
  loop.kernel "stage" {
    %small = memref.alloca() : memref<20000xf32>
    %big = memref.alloca() : memref<137438953472xf32>
    loop.for %i = 0 to 4 step 1 {name = "i0"} {
      %v = memref.load %x[%i] : memref<4xf32>
      memref.store %v, %big[%i] : memref<137438953472xf32>
      memref.store %v, %small[%i] : memref<20000xf32>
      %a = memref.load %big[%i] : memref<137438953472xf32>
      %b = memref.load %small[%i] : memref<20000xf32>
      %c = arith.addf %a, %b : f32
      memref.store %c, %y[%i] : memref<4xf32>
    }
  }
  func.return
}
"""

SANITIZED_CHILD = r"""
import ctypes
import pathlib
import sys

import numpy as np
import dlpc
from dlpc.backends.c import emit_c
from dlpc.backends.runtime.cbuild import build
from dlpc.diagnostics import DlpcError

root = pathlib.Path(sys.argv[1])
rng = np.random.default_rng(0)
for path in sorted(root.glob("odd-*.dlpc")):
    model = dlpc.load(str(path))
    main = model.module.body.block.first_op
    inputs = [rng.standard_normal([d for d in a.type.get_shape()]).astype(np.float32)
              for a in main.body.block.args]
    want = dlpc.compile(model, target="numpy")(*inputs)
    for opt in (0, 2):
        got = dlpc.compile(model, target="c", opt_level=opt)(*inputs)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"{path.name} -O{opt}")
    print("ok", path.name)

# a buffer far beyond memory: dlpc_main returns 1, the runtime names the size and the
# arena of the memory plan that holds it
model = dlpc.load(str(root / "oom.dlpc"))
try:
    dlpc.compile(model, target="c", opt_level=0)(np.ones(1, np.float32))
except DlpcError as e:
    print(e)

# a kernel's own heap buffer (outside any OpenMP loop): the kernel returns 1 to dlpc_main
from dlpc.backends.runtime.cbuild import CFunction
from dlpc.passes.pipeline import parse_module

kernel = CFunction(parse_module((root / "kernel-alloc.mlir").read_text()), name="kernel_alloc")
assert "if (kernel_stage(v_x, v_out0)) return 1;" in kernel.source
try:
    kernel(np.ones(4, np.float32))
except DlpcError as e:
    print(e)

# dlpc_alloc itself: a count whose byte size wraps size_t is refused, never allocated short
from dlpc.passes import pipeline
loop = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions(opt_level=0))
lib = build(emit_c(loop) + '''
int dlpc_test_alloc(size_t count, size_t size)
{
  void *p = dlpc_alloc(count, size, "kernel 'test'");
  if (p) { free(p); return 0; }
  return dlpc_oom_count == count && dlpc_oom_size == size ? 1 : 2;
}
''', name="alloc_test")
f = lib.handle.dlpc_test_alloc
f.argtypes, f.restype = [ctypes.c_size_t, ctypes.c_size_t], ctypes.c_int
print("wrap", f(2**62, 4), f(2**64 - 1, 8), f(2**64 // 64, 64), "fits", f(1000, 4))
"""


def _sanitizer_env(tmp_path):
    """A child environment building and loading ASan/UBSan libraries, or None when the
    compiler has no sanitizer runtime."""
    import os
    import shutil

    cc = os.environ.get("CC", "cc").split()[0]
    if not shutil.which(cc):
        return None
    lib = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True)
    libasan = lib.stdout.strip()
    if lib.returncode != 0 or not os.path.isabs(libasan):
        return None
    return {
        **os.environ,
        "DLPC_CFLAGS": "-fsanitize=address,undefined -fno-sanitize-recover=undefined "
        "-fno-omit-frame-pointer",
        "LD_PRELOAD": libasan,
        # Python itself leaks by design; a huge allocation returns NULL (as malloc does)
        # instead of ASan's report, and nothing over 4 GiB is even tried
        "ASAN_OPTIONS": "detect_leaks=0:allocator_may_return_null=1:max_allocation_size_mb=4096",
        "UBSAN_OPTIONS": "print_stacktrace=1",
        "OMP_NUM_THREADS": "2",
    }


def test_generated_c_under_asan_and_ubsan(tmp_path):
    """Odd shapes at -O0 and -O2 equal the reference with no sanitizer report; a buffer
    beyond memory is the runtime's one-line "out of memory" (it wrapped and overflowed the
    heap); dlpc_alloc refuses counts whose byte size wraps."""
    env = _sanitizer_env(tmp_path)
    if env is None:
        pytest.skip("the C compiler has no AddressSanitizer runtime (libasan)")
    for name, text in ODD_MODELS.items():
        (tmp_path / f"odd-{name}.dlpc").write_text(text + "\n")
    (tmp_path / "oom.dlpc").write_text(OOM_MODEL)
    (tmp_path / "kernel-alloc.mlir").write_text(KERNEL_ALLOC)
    proc = subprocess.run(
        [sys.executable, "-c", SANITIZED_CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "ERROR: AddressSanitizer" not in proc.stderr, proc.stderr[-4000:]
    assert "runtime error" not in proc.stderr, proc.stderr[-4000:]
    assert proc.stdout.splitlines() == [
        *(f"ok odd-{name}.dlpc" for name in sorted(ODD_MODELS)),
        # the intermediates live in the memory plan's arena (passes/lower/memory_plan.py)
        "error: out of memory: 549755813888 bytes for the memory plan's arena",
        "error: out of memory: 549755813888 bytes for kernel 'stage'",
        "wrap 1 1 1 fits 0",
    ]
