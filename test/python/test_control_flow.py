"""graph.if and graph.loop: the numpy reference and the numpy backend against plain
Python, and the compiled backends against the reference (issue 29, control flow)."""

import numpy as np
import pytest

import dlpc
from dlpc.backends.numpy import emit_numpy
from dlpc.backends.runtime.profile import kernel_costs
from dlpc.model import Model
from dlpc.passes import pipeline
from dlpc.reference import graph as ref

RNG = np.random.default_rng(0)

# if c: relu(a) * b else: a - b   (two results: the second counts the branch)
IF = """
func.func @main(%c: tensor<i1>, %a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<i64>) {
  %r:2 = graph.if %c, %a, %b : (tensor<i1>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<i64>) {
  ^bb0(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>):
    %0 = graph.relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %1 = graph.mul %0, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %k = graph.constant dense<1> : tensor<i64>
    graph.yield %1, %k : tensor<4x8xf32>, tensor<i64>
  } else {
  ^bb0(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>):
    %0 = graph.sub %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %k = graph.constant dense<2> : tensor<i64>
    graph.yield %0, %k : tensor<4x8xf32>, tensor<i64>
  }
  func.return %r#0, %r#1 : tensor<4x8xf32>, tensor<i64>
}
"""

# x = a; s = 0; for i < 5 while sum(x) < limit: x = tanh(x @ w) + i; s = s + sum(x)
LOOP = """
func.func @main(%a: tensor<2x4xf32>, %w: tensor<4x4xf32>, %limit: tensor<f32>) -> (tensor<2x4xf32>, tensor<f32>) {
  %t = graph.constant dense<true> : tensor<i1>
  %z = graph.constant dense<0.0> : tensor<f32>
  %r:4 = graph.loop %t, %a, %z, %w, %limit {trip_count = 5 : i64} : (tensor<i1>, tensor<2x4xf32>, tensor<f32>, tensor<4x4xf32>, tensor<f32>) -> (tensor<2x4xf32>, tensor<f32>, tensor<4x4xf32>, tensor<f32>) {
  ^bb0(%i: tensor<i64>, %x: tensor<2x4xf32>, %s: tensor<f32>, %m: tensor<4x4xf32>, %l: tensor<f32>):
    %0 = graph.matmul %x, %m : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %1 = graph.tanh %0 : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %fi = graph.cast %i {to = f32} : (tensor<i64>) -> tensor<f32>
    %2 = graph.add %1, %fi : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
    %3 = graph.reduce_sum %2 : (tensor<2x4xf32>) -> tensor<f32>
    %4 = graph.add %s, %3 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %go = graph.compare %4, %l {predicate = "lt"} : (tensor<f32>, tensor<f32>) -> tensor<i1>
    graph.yield %go, %2, %4, %m, %l : tensor<i1>, tensor<2x4xf32>, tensor<f32>, tensor<4x4xf32>, tensor<f32>
  }
  func.return %r#0, %r#1 : tensor<2x4xf32>, tensor<f32>
}
"""


def plain_if(c, a, b):
    return [np.maximum(a, 0) * b, np.int64(1)] if c else [a - b, np.int64(2)]


def plain_loop(a, w, limit):
    x, s = a, np.float32(0)
    for i in range(5):
        x = np.tanh(x @ w) + np.float32(i)
        s = s + x.sum(dtype=np.float32)
        if not s < limit:
            break
    return [x, s]


def if_inputs(c):
    return [
        np.array(c),
        RNG.standard_normal((4, 8), np.float32),
        RNG.standard_normal((4, 8), np.float32),
    ]


def loop_inputs(limit):
    a = RNG.standard_normal((2, 4), np.float32)
    w = (RNG.standard_normal((4, 4)) * 0.5).astype(np.float32)
    return [a, w, np.array(limit, np.float32)]


def model(text):
    return Model(pipeline.parse_module(text))


def check(got, want, rtol=1e-5, atol=1e-5):
    assert len(got) == len(want)
    for g_, w_ in zip(got, want):
        np.testing.assert_allclose(np.asarray(g_), np.asarray(w_), rtol=rtol, atol=atol)


CASES = [
    (IF, plain_if, lambda: if_inputs(True)),
    (IF, plain_if, lambda: if_inputs(False)),
    # the limit stops the loop after 1, 2 or 3 iterations, or never (trip_count 5)
    (LOOP, plain_loop, lambda: loop_inputs(-100.0)),
    (LOOP, plain_loop, lambda: loop_inputs(3.0)),
    (LOOP, plain_loop, lambda: loop_inputs(12.0)),
    (LOOP, plain_loop, lambda: loop_inputs(1e9)),
]


@pytest.mark.parametrize("text,plain,make", CASES)
def test_reference_and_numpy_backend(text, plain, make):
    m = model(text)
    inputs = make()
    want = ref.run_reference(m.module, inputs, {})
    check(want, plain(*inputs))
    namespace: dict = {}
    exec(emit_numpy(m.module), namespace)
    got = namespace["main"](*inputs, params={})
    for g_, w_ in zip(got, want):
        np.testing.assert_array_equal(g_, w_)


@pytest.mark.parametrize("target", ["c", "dlp", "opencl"])
@pytest.mark.parametrize("text,plain,make", CASES)
def test_compiled_against_reference(target, text, plain, make):
    """The control flow runs on the host: C if / while around the kernel calls (in
    `dlpc_main` of the C library, and of the DLP C program around its kernel launches);
    on OpenCL the Python host reads the condition back from the device."""
    if target == "opencl":
        pytest.importorskip("pyopencl", reason="the opencl extra is not installed")
    m = model(text)
    inputs = make()
    want = ref.run_reference(m.module, inputs, {})
    check(dlpc.compile(m, target=target)(*inputs), want, rtol=1e-4, atol=1e-5)


def test_c_host_code_has_the_control_flow():
    """`dlpc_main` holds an if/else and a loop around the kernels: no Python between
    (the C library's, and the DLP C program's around its kernel launches)."""
    from dlpc.backends.c import emit_c
    from dlpc.backends.dlp_c import emit_dlp_c

    for text, words in ((IF, ("if (", "} else {")), (LOOP, ("for (;;) {", ") break;"))):
        lowered = pipeline.lower(model(text).module.clone(), "loop", pipeline.PipelineOptions())
        source = emit_c(lowered)
        main = source[source.index("int dlpc_main(void **args)") :]
        assert all(w in main for w in words), words
        lowered = pipeline.lower(
            model(text).module.clone(), "dlp", pipeline.PipelineOptions(target="dlp")
        )
        source = emit_dlp_c(lowered)
        main = source[source.index("int dlpc_main(void **args)") :]
        assert all(w in main for w in words), words


# loss = sum(if(c, a, b)#0 ^ 2) with the branches of IF
IF_LOSS = IF.replace(
    "-> (tensor<4x8xf32>, tensor<i64>) {\n  %r:2",
    "-> tensor<f32> {\n  %r:2",
).replace(
    "  func.return %r#0, %r#1 : tensor<4x8xf32>, tensor<i64>",
    "  %sq = graph.mul %r#0, %r#0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>\n"
    "  %l = graph.reduce_sum %sq : (tensor<4x8xf32>) -> tensor<f32>\n"
    "  func.return %l : tensor<f32>",
)


def _gradients(text, inputs, targets=("c",)):
    """The loss and input gradients by the reference; the compiled backends run the
    backward (an if of the adjoint branches, a reverse loop) to the same values."""
    from dlpc.passes.train.autodiff import differentiate

    module = pipeline.parse_module(text)
    differentiate(module, wrt_inputs=True)
    module.verify()
    want = ref.run_reference(module, inputs, {})
    for target in targets:
        check(dlpc.compile(Model(module), target=target)(*inputs), want, rtol=1e-4, atol=1e-5)
    return want


def _compiled_targets() -> tuple[str, ...]:
    try:
        import pyopencl  # noqa: F401
    except ImportError:
        return ("numpy", "c", "dlp")
    return ("numpy", "c", "dlp", "opencl")


@pytest.mark.parametrize("c", [True, False])
def test_if_gradient_against_finite_differences_and_torch(c):
    """The adjoint of an if is an if of the branches' adjoints."""
    torch = pytest.importorskip("torch")
    inputs = if_inputs(c)
    loss, da, db = _gradients(IF_LOSS, inputs, _compiled_targets())
    ta, tb = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in inputs[1:])
    y = torch.relu(ta) * tb if c else ta - tb
    (y * y).sum().backward()
    np.testing.assert_allclose(da, ta.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(db, tb.grad.numpy(), rtol=1e-4, atol=1e-4)
    # central differences in float64 through the reference on a few elements
    m = model(IF_LOSS)
    for which, grad in ((1, da), (2, db)):
        for idx in [(0, 0), (1, 3), (3, 7)]:
            hi = [x.copy() for x in inputs]
            lo = [x.copy() for x in inputs]
            hi[which][idx] += 1e-2
            lo[which][idx] -= 1e-2
            (f_hi,) = ref.run_reference(m.module, hi, {})
            (f_lo,) = ref.run_reference(m.module, lo, {})
            fd = (float(f_hi) - float(f_lo)) / 2e-2
            assert abs(fd - grad[idx]) < 2e-2 * max(1.0, abs(fd)), (which, idx, fd, grad[idx])


def _loop_loss(text):
    """LOOP with loss sum(x_final * x_final) + s_final (both carried values reach it)."""
    return text.replace(
        "-> (tensor<2x4xf32>, tensor<f32>) {\n  %t", "-> tensor<f32> {\n  %t"
    ).replace(
        "  func.return %r#0, %r#1 : tensor<2x4xf32>, tensor<f32>",
        "  %sq = graph.mul %r#0, %r#0 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>\n"
        "  %q = graph.reduce_sum %sq : (tensor<2x4xf32>) -> tensor<f32>\n"
        "  %l = graph.add %q, %r#1 : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
        "  func.return %l : tensor<f32>",
    )


def plain_loop_torch(torch, a, w, limit):
    x, s = a, torch.zeros((), dtype=a.dtype)
    for i in range(5):
        x = torch.tanh(x @ w) + i
        s = s + x.sum()
        if not s.item() < limit:
            break
    return (x * x).sum() + s


@pytest.mark.parametrize("limit", [-100.0, 3.0, 1e9])
def test_loop_gradient_replays_the_iterations_backwards(limit):
    """The reverse of a loop replays its iterations from the stack it saved: gradients of
    the initial value and of the loop-invariant weight against torch and differences."""
    torch = pytest.importorskip("torch")
    inputs = loop_inputs(limit)
    text = _loop_loss(LOOP)
    loss, da, dw, _ = _gradients(text, inputs, _compiled_targets() if limit == 3.0 else ("c",))
    ta, tw = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in inputs[:2])
    plain_loop_torch(torch, ta, tw, float(inputs[2])).backward()
    np.testing.assert_allclose(da, ta.grad.numpy(), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(dw, tw.grad.numpy(), rtol=1e-3, atol=1e-4)
    m = model(text)
    for which, grad, idx in ((0, da, (1, 2)), (1, dw, (2, 3))):
        hi = [x.copy() for x in inputs]
        lo = [x.copy() for x in inputs]
        hi[which][idx] += 1e-2
        lo[which][idx] -= 1e-2
        fd = (
            float(ref.run_reference(m.module, hi, {})[0])
            - float(ref.run_reference(m.module, lo, {})[0])
        ) / 2e-2
        assert abs(fd - grad[idx]) < 3e-2 * max(1.0, abs(fd)), (which, fd, grad[idx])


# a conv + relu branch and a conv + max-pool loop body whose weight is carried unchanged
CONV = """
func.func @main(%c: tensor<i1>, %x: tensor<1x4x8x8xf32>, %w: tensor<4x4x3x3xf32>) -> tensor<1x4x8x8xf32> {
  %r = graph.if %c, %x, %w : (tensor<i1>, tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) -> (tensor<1x4x8x8xf32>) {
  ^bb0(%a: tensor<1x4x8x8xf32>, %k: tensor<4x4x3x3xf32>):
    %y = graph.conv2d %a, %k {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x8x8xf32>
    %z = graph.relu %y : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
    graph.yield %z : tensor<1x4x8x8xf32>
  } else {
  ^bb0(%a: tensor<1x4x8x8xf32>, %k: tensor<4x4x3x3xf32>):
    graph.yield %a : tensor<1x4x8x8xf32>
  }
  %t = graph.constant dense<true> : tensor<i1>
  %l:2 = graph.loop %t, %r, %w {trip_count = 2 : i64} : (tensor<i1>, tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) -> (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) {
  ^bb0(%i: tensor<i64>, %a: tensor<1x4x8x8xf32>, %k: tensor<4x4x3x3xf32>):
    %y = graph.conv2d %a, %k {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x8x8xf32>
    %p = graph.max_pool2d %y {kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
    %g = graph.constant dense<true> : tensor<i1>
    graph.yield %g, %p, %k : tensor<i1>, tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>
  }
  func.return %l#0 : tensor<1x4x8x8xf32>
}
"""


@pytest.mark.parametrize("opt_level", [0, 3])
@pytest.mark.parametrize("c", [True, False])
def test_graph_passes_inside_regions(c, opt_level):
    """-O3's passes (layout, fusion, simplification) rewrite inside a region as in @main
    and never across its boundary: C against the reference."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 4, 8, 8)).astype(np.float32)
    w = (rng.standard_normal((4, 4, 3, 3)) * 0.3).astype(np.float32)
    inputs = [np.array(c), x, w]
    m = model(CONV)
    want = ref.run_reference(m.module, inputs, {})
    check(dlpc.compile(m, target="c", opt_level=opt_level)(*inputs), want, rtol=1e-4, atol=1e-5)


# acc = a; for i < 5: acc = acc * x[i] + x[i], the row read by graph.dynamic_slice at the
# iteration (a run-time offset: ONNX Slice at [i, i + 1) in a Loop body)
ROWS = """
func.func @main(%x: tensor<5x3xf32>, %a: tensor<1x3xf32>) -> tensor<f32> {
  %t = graph.constant dense<true> : tensor<i1>
  %r:2 = graph.loop %t, %a, %x {trip_count = 5 : i64} : (tensor<i1>, tensor<1x3xf32>, tensor<5x3xf32>) -> (tensor<1x3xf32>, tensor<5x3xf32>) {
  ^bb0(%i: tensor<i64>, %acc: tensor<1x3xf32>, %xs: tensor<5x3xf32>):
    %s = graph.reshape %i {shape = array<i64: 1>} : (tensor<i64>) -> tensor<1xi64>
    %row = graph.dynamic_slice %xs, %s {axes = array<i64: 0>, sizes = array<i64: 1>} : (tensor<5x3xf32>, tensor<1xi64>) -> tensor<1x3xf32>
    %p = graph.mul %acc, %row : (tensor<1x3xf32>, tensor<1x3xf32>) -> tensor<1x3xf32>
    %n = graph.add %p, %row : (tensor<1x3xf32>, tensor<1x3xf32>) -> tensor<1x3xf32>
    %go = graph.constant dense<true> : tensor<i1>
    graph.yield %go, %n, %xs : tensor<i1>, tensor<1x3xf32>, tensor<5x3xf32>
  }
  %sq = graph.mul %r#0, %r#0 : (tensor<1x3xf32>, tensor<1x3xf32>) -> tensor<1x3xf32>
  %l = graph.reduce_sum %sq : (tensor<1x3xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}
"""


def test_dynamic_slice_in_a_loop_body_and_its_gradient():
    """graph.dynamic_slice reads row i of a carried tensor: every backend against plain
    Python, and the gradients (a scatter of each row's adjoint, replayed backwards) against
    torch in float64 on every backend."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((5, 3)) * 0.7).astype(np.float32)
    a = rng.standard_normal((1, 3)).astype(np.float32)
    acc = a.astype(np.float64)
    for i in range(5):
        acc = acc * x[i] + x[i]
    m = model(ROWS)
    check(ref.run_reference(m.module, [x, a], {}), [(acc * acc).sum()], rtol=1e-5)
    for target in _compiled_targets():
        check(dlpc.compile(m, target=target)(x, a), [(acc * acc).sum()], rtol=1e-4)
    _, dx, da = _gradients(ROWS, [x, a], _compiled_targets())
    tx, ta = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (x, a))
    t = ta
    for i in range(5):
        t = t * tx[i] + tx[i]
    (t * t).sum().backward()
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(da, ta.grad.numpy(), rtol=1e-4, atol=1e-5)


def _loop_bodies(source: str) -> list[str]:
    """The text of every `for (;;) { ... }` in `source` (braces matched)."""
    bodies, at = [], source.find("for (;;) {")
    while at >= 0:
        depth, end = 0, at + len("for (;;) ")
        while True:
            depth += {"{": 1, "}": -1}.get(source[end], 0)
            if depth == 0:
                break
            end += 1
        bodies.append(source[at : end + 1])
        at = source.find("for (;;) {", at + 1)
    return bodies


@pytest.mark.parametrize("opt_level", [0, 3])
def test_loop_body_buffers_are_allocated_once(opt_level):
    """A loop body's intermediates (and a gradient's reverse loop's, nested ifs' and
    loops') are allocated before the outermost loop, not per iteration: no allocation or
    free inside a host loop of dlpc_main; C's memory plan then gives them arena slots."""
    from dlpc.backends.c import emit_c
    from dlpc.passes.train.autodiff import differentiate

    grad = pipeline.parse_module(_loop_loss(LOOP))
    differentiate(grad, wrt_inputs=True)
    for module in (model(LOOP).module, model(CONV).module, grad):
        options = pipeline.PipelineOptions(opt_level=opt_level)
        source = emit_c(pipeline.lower(module.clone(), "loop", options))
        bodies = _loop_bodies(source[source.index("int dlpc_main(void **args)") :])
        assert bodies and all("dlpc_alloc(" not in b and "free(" not in b for b in bodies)
    # with C's memory plan the hoisted buffers are arena slots: no allocation per call
    options = pipeline.PipelineOptions(opt_level=opt_level, target="c")
    source = emit_c(pipeline.lower(model(LOOP).module.clone(), "loop", options))
    main = source[source.index("int dlpc_main(void **args)") :]
    assert "dlpc_alloc(" not in main and "(v_arena + " in main


def test_opencl_profile_counts_every_launch_of_a_loop_body():
    """OpenCL profiling sums a kernel's launches in a call: the loop body's kernels run
    once per iteration (their rows' work scaled by the count), the initial copies once,
    the branch not taken never."""
    pytest.importorskip("pyopencl", reason="the opencl extra is not installed")
    from dlpc.backends.runtime.opencl_rt import opencl_profile

    inputs = loop_inputs(12.0)
    iterations = next(
        n
        for n in range(1, 6)
        if n == 5 or not plain_loop_iterations(*inputs, n)  # the limit stopped it at n
    )
    compiled = dlpc.compile(model(LOOP), target="opencl")
    rows, call = opencl_profile(compiled.artifact, compiled.lowered, inputs, repeat=2)
    counts = dict(zip((r.name for r in rows), compiled.artifact.launches_per_call))
    matmul = next(r for r in rows if r.name.startswith("matmul"))
    assert counts[matmul.name] == iterations and call > 0
    assert all(n == 1 for name, n in counts.items() if "_init" in name)
    one = next(c for c in kernel_costs(compiled.lowered) if c.name == matmul.name)
    assert matmul.flops == one.flops * iterations > 0
    compiled = dlpc.compile(model(IF), target="opencl")
    rows, _ = opencl_profile(compiled.artifact, compiled.lowered, if_inputs(False), repeat=2)
    counts = dict(zip((r.name for r in rows), compiled.artifact.launches_per_call))
    assert counts[next(n for n in counts if n.startswith("relu"))] == 0  # the then branch
    assert counts[next(n for n in counts if n.startswith("sub"))] == 1


def plain_loop_iterations(a, w, limit, n):
    """Whether plain_loop's condition still holds after n iterations."""
    x, s = a, np.float32(0)
    for i in range(n):
        x = np.tanh(x @ w) + np.float32(i)
        s = s + x.sum(dtype=np.float32)
    return bool(s < limit)
