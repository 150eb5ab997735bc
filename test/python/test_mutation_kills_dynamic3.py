"""Tests written against mutants of the dynamic area (issue 35, third round): symbolic
dims' algebra, comparisons, text and binding (dialects/symdims.py); graph-bind-dims'
option parsing and errors; graph-mask-padding's masks checked numerically (a bucketed
call equals the unpadded one on the reference); DynamicFunction's guard, buckets, tiles
and caches (runtime/dynamic.py); the import-time shape arithmetic of onnx_symbolic."""

from __future__ import annotations

import dataclasses
import operator

import numpy as np
import pytest
from xdsl.dialects.builtin import ArrayAttr, StringAttr
from xdsl.utils.exceptions import VerifyException

from dlpc.diagnostics import DlpcError
from dlpc.dialects import symdims as sd
from dlpc.dialects.symdims import SymbolicError, sym
from dlpc.frontends import onnx_symbolic as osym
from dlpc.model import Model
from dlpc.passes import pipeline
from dlpc.passes.graph.bind_dims import parse_dims
from dlpc.reference import graph as ref
from dlpc.runtime.dynamic import DynamicFunction, leading_independent

S, T = sym("s"), sym("t")


# ------------------------------------------------------------------ symdims: algebra


def test_polynomials_are_canonical():
    assert 2 * S == S + S and S * T == T * S and S - S == 0 and isinstance(S - S, int)
    assert (S + 3) - 3 == S and 3 - S == -S + 3 and (S + 1) * 0 == 0
    assert S != T and S != 1 and (S == 1) is False and hash(S + T) == hash(T + S)
    assert (S + 1) * (S - 1) == S * S - 1
    assert str(S * S * 2 + 3 * T - 4) == "2*s*s + 3*t + -4" and str(-S) == "-1*s"
    assert sd.SymDim.of(0).terms == {} and sd.SymDim.of(5).terms == {(): 5}
    assert sd.SymDim.make({(): 7}) == 7 and sd.SymDim.make({("s",): 0}) == 0
    assert (S + T).symbols() == {"s", "t"}
    for bad in (lambda: S + 1.5, lambda: S - "a", lambda: S * 2.0, lambda: 1.5 - S):
        with pytest.raises(TypeError):
            bad()


def test_floor_division_and_modulo():
    assert (4 * S + 2) // 2 == 2 * S + 1 and (S + 3) // 1 == S + 3
    assert (2 * S + 3) // 2 == S + 1  # the remainder 3 leaves 1 and floor(1 / 2) = 0
    half = (S + 1) // 2
    assert str(half) == "floor((s + 1) / 2)" and str(S // 3) == "floor(s / 3)"
    assert [sd.evaluate(half, {"s": n}) for n in (1, 2, 5)] == [1, 1, 3]
    q = (3 * S + 7) // 2  # = s + 3 + floor((s + 1) / 2)
    assert [sd.evaluate(q, {"s": n}) for n in (1, 2, 3, 8)] == [
        (3 * n + 7) // 2 for n in (1, 2, 3, 8)
    ]
    with pytest.raises(ZeroDivisionError):
        S // 0
    assert (2 * S * T) // T == 2 * S and (6 * S) // (3 * S) == 2
    assert (S * T + T) // (S + 1) == T and (2 * S + 2) // (S + 1) == 2
    for bad in (lambda: S // T, lambda: (2 * S) // (4 * S), lambda: (S * T) // (S + 1)):
        with pytest.raises(SymbolicError, match="cannot divide"):
            bad()
    assert 0 // S == 0 and 0 % S == 0
    with pytest.raises(SymbolicError, match="cannot divide 6 by s"):
        6 // S
    with pytest.raises(SymbolicError, match="cannot take 5 modulo s"):
        5 % S
    assert (2 * S + 3) % 2 == 1 and (S * T) % T == 0 and (4 * S) % 2 == 0
    assert [sd.evaluate(S % 3, {"s": n}) for n in (1, 3, 7)] == [1, 0, 1]


def test_comparisons_assume_symbols_at_least_one():
    assert S >= 1 and S > 0 and not S < 1 and not S <= 0 and (S - 1 >= 0)
    assert S + 1 > S and not S + 1 <= S and S >= S and not S < S and S <= S
    assert not S > S and not S < S + 1 - 1
    assert not S + 1 < S and S < S + 1 and not S + 2 <= S + 1 and S >= S - 3
    # undecided: >, >= True; <, <= False (a symbolic size is taken to be large)
    assert S > 1 and S >= 2 and not S < 2 and not S <= 1
    assert S - T > 0 and not S - T < 0 and (1 - S) >= 0 and not (1 - S) < 0
    assert half_bound() is None and (2 * S + T + 1).lower_bound() == 4
    assert (S - 1).lower_bound() == 0 and (S * T).lower_bound() == 1
    with pytest.raises(TypeError, match="cannot compare a symbolic dim with 'x'"):
        _ = S < "x"
    assert bool(S) and bool(S - S + T)
    with pytest.raises(SymbolicError, match="symbolic dim s has no value until it is bound"):
        operator.index(S)


def half_bound():
    return ((S + 1) // 2).lower_bound()


# ------------------------------------------------------------------ symdims: text, binding


@pytest.mark.parametrize(
    "d", [sym("seq"), 2 * S + 1, S * T * 3 - 2, (S + -3) // 2 + 1, (2 * S + 1) // 4 * T]
)
def test_parse_reads_what_str_prints(d):
    assert sd.parse(str(d)) == d
    assert sd.parse(f"  {d}  ") == d


def test_parse_errors_and_forms():
    assert sd.parse("12") == 12 and sd.parse("-3") == -3 and sd.parse("(s + 1)*2") == 2 * S + 2
    assert sd.parse("a.b?") == sym("a.b?")
    for text, message in (
        ("2*", "expected more"),
        ("s)", "unexpected '\\)'"),
        ("s $ t", "at ' \\$ t'"),
        ("floor(s + 1)", "expected /"),
        ("(s", "expected \\)"),
    ):
        with pytest.raises(ValueError, match=message):
            sd.parse(text)


def test_names_shapes_and_evaluation():
    assert sd.name_of(S) == "s" and sd.name_of(2 * S) is None and sd.name_of(S * T) is None
    assert sd.name_of(S + 1) is None and sd.name_of(4) is None and sd.name_of(S // 2) is None
    assert sd.is_symbolic((2, S)) and not sd.is_symbolic((2, 3))
    assert sd.symbols((1, S * T, (S + sym("u")) // 2)) == {"s", "t", "u"}
    assert sd.bind_shape((2, S * T + 1, S // 2), {"s": 5, "t": 3}) == (2, 16, 2)
    with pytest.raises(KeyError):
        sd.evaluate(S + T, {"s": 1})
    enc = ArrayAttr([StringAttr("2*s"), StringAttr("t")])
    assert sd.shape_from_type((-1, 4, -1), enc) == (2 * S, 4, T)
    assert sd.shape_from_type((-1, -1), ArrayAttr([StringAttr("s")])) == (S, sym("?"))
    assert sd.shape_from_type((3, -1), None) == (3, sym("?"))
    mark = sd.MARK
    assert sd.from_marked((1, mark, 3, mark), enc) == (1, 2 * S, 3, T)
    with pytest.raises(SymbolicError, match="1 symbolic entries but 2 expressions"):
        sd.from_marked((mark, 2), enc)


def test_slice_indices():
    assert sd.slice_indices(0, 2**62, 1, S) == (0, S, 1)
    assert sd.slice_indices(-2, -1, 1, S) == (S - 2, S - 1, 1)
    assert sd.slice_indices(1, 9, 1, 5) == (1, 5, 1) and sd.slice_indices(S, 3, 1, T) == (S, 3, 1)
    assert sd.slice_indices(0, 2**62 - 1, 1, S)[1] == 2**62 - 1
    with pytest.raises(SymbolicError, match="needs step 1, got 2"):
        sd.slice_indices(0, S, 2, S)


def test_bind_inputs_guards_every_relation():
    names = ["x", "y"]
    shapes = [(S, 4), (S, T, 2 * T)]
    assert sd.bind_inputs(names, shapes, [(3, 4), (3, 5, 10)]) == {"s": 3, "t": 5}
    cases = {
        "input 'x' has rank 1 but the model expects rank 2 \\(s, 4\\)": [(3,), (3, 5, 10)],
        "input 'x' dim 1 is 5 but the model expects 4": [(3, 5), (3, 5, 10)],
        "input 'y' dim 0 \\('s'\\) is 2 but input 'x' dim 0 gives 's' = 3": [(3, 4), (2, 5, 10)],
        "input 'x' dim 0 \\('s'\\) is 0: a symbolic dim must be at least 1": [(0, 4), (0, 2, 4)],
        "input 'y' dim 2 is 9 but '2\\*t' = 10": [(3, 4), (3, 5, 9)],
    }
    for message, actual in cases.items():
        with pytest.raises(SymbolicError, match=message):
            sd.bind_inputs(names, shapes, actual)
    with pytest.raises(SymbolicError, match="input 'y' dim 1 is '2\\*t', but no input binds 't'"):
        sd.bind_inputs(names, [(S, 4), (S, 2 * T)], [(3, 4), (3, 10)])
    with pytest.raises(SymbolicError, match="\\('s'\\) is 9, above its declared maximum 8"):
        sd.bind_inputs(["x"], [(S,)], [(9,)], {"s": 8})
    assert sd.bind_inputs(["x"], [(S,)], [(8,)], {"s": 8}) == {"s": 8}
    assert sd.bind_inputs(["x"], [(S,)], [(9,)], {"t": 1}) == {"s": 9}


# ------------------------------------------------------------------ graph-bind-dims


def test_parse_dims():
    assert parse_dims(" batch=8, seq = 16 ,") == {"batch": 8, "seq": 16}
    assert parse_dims("") == {}
    for bad, message in (
        ("batch", "dims entry 'batch' is not name=int"),
        ("=4", "dims entry '=4' is not name=int"),
        ("b=x", "dims entry 'b=x' is not name=int"),
        ("b=0", "dim 'b' = 0 is below 1"),
        ("b=-2", "dim 'b' = -2 is below 1"),
    ):
        with pytest.raises(VerifyException, match=message):
            parse_dims(bad)


# ------------------------------------------------------------------ masks and buckets

MASKED = """
func.func @main(%x: tensor<?x?x3xf32, ["b", "seq"]>, %y: tensor<?x3x?xf32, ["b", "seq"]>) -> (tensor<?x?x3xf32, ["b", "seq"]>, tensor<?x?x3xf32, ["b", "seq"]>, tensor<?x3xf32, ["b"]>, tensor<?x3xf32, ["b"]>, tensor<?x3xf32, ["b"]>, tensor<?x3xf32, ["b"]>, tensor<?x3xf32, ["b"]>, tensor<?x3x3xf32, ["b"]>, tensor<?x3x3xf32, ["b"]>) {
  %e = graph.exp %x : (tensor<?x?x3xf32, ["b", "seq"]>) -> tensor<?x?x3xf32, ["b", "seq"]>
  %n = graph.neg %e : (tensor<?x?x3xf32, ["b", "seq"]>) -> tensor<?x?x3xf32, ["b", "seq"]>
  %ey = graph.exp %y : (tensor<?x3x?xf32, ["b", "seq"]>) -> tensor<?x3x?xf32, ["b", "seq"]>
  %sm = graph.softmax %x {axis = 1 : i64} : (tensor<?x?x3xf32, ["b", "seq"]>) -> tensor<?x?x3xf32, ["b", "seq"]>
  %ls = graph.log_softmax %x {axis = 1 : i64} : (tensor<?x?x3xf32, ["b", "seq"]>) -> tensor<?x?x3xf32, ["b", "seq"]>
  %sum = graph.reduce_sum %e {axes = array<i64: 1>} : (tensor<?x?x3xf32, ["b", "seq"]>) -> tensor<?x3xf32, ["b"]>
  %mean = graph.reduce_mean %e {axes = array<i64: 1>} : (tensor<?x?x3xf32, ["b", "seq"]>) -> tensor<?x3xf32, ["b"]>
  %max = graph.reduce_max %n {axes = array<i64: 1>} : (tensor<?x?x3xf32, ["b", "seq"]>) -> tensor<?x3xf32, ["b"]>
  %min = graph.reduce_min %e {axes = array<i64: 1>} : (tensor<?x?x3xf32, ["b", "seq"]>) -> tensor<?x3xf32, ["b"]>
  %prod = graph.reduce_prod %e {axes = array<i64: 1>} : (tensor<?x?x3xf32, ["b", "seq"]>) -> tensor<?x3xf32, ["b"]>
  %mt = graph.matmul %e, %e {transpose_a = true} : (tensor<?x?x3xf32, ["b", "seq"]>, tensor<?x?x3xf32, ["b", "seq"]>) -> tensor<?x3x3xf32, ["b"]>
  %mm = graph.matmul %ey, %e : (tensor<?x3x?xf32, ["b", "seq"]>, tensor<?x?x3xf32, ["b", "seq"]>) -> tensor<?x3x3xf32, ["b"]>
  func.return %sm, %ls, %sum, %mean, %max, %min, %prod, %mt, %mm : tensor<?x?x3xf32, ["b", "seq"]>, tensor<?x?x3xf32, ["b", "seq"]>, tensor<?x3xf32, ["b"]>, tensor<?x3xf32, ["b"]>, tensor<?x3xf32, ["b"]>, tensor<?x3xf32, ["b"]>, tensor<?x3xf32, ["b"]>, tensor<?x3x3xf32, ["b"]>, tensor<?x3x3xf32, ["b"]>
}
"""


def _model(text: str) -> Model:
    return Model(pipeline.parse_module(text))


def _on_reference(static: Model):
    return lambda *xs: ref.run_reference(static.module, list(xs), static.weights)


def _dyn(model: Model, **options) -> DynamicFunction:
    """One program per binding, on the reference (the one-compile mode, where the runtime
    has it, is another area's: passes/lower/_symbolic.py)."""
    if "symbolic" in {f.name for f in dataclasses.fields(DynamicFunction)}:
        options.setdefault("symbolic", False)
    return DynamicFunction(model, _on_reference, **options)


def _inputs(b: int, n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.1, 1.0, (b, n, 3)).astype(np.float32)  # exp(x) > 1 > padding's 1
    y = rng.uniform(-1.0, 1.0, (b, 3, n)).astype(np.float32)
    return [x, y]


@pytest.mark.parametrize("n", [3, 4, 6])
def test_bucketed_masked_call_equals_the_unpadded_one(n):
    exact = _dyn(_model(MASKED))
    padded = _dyn(_model(MASKED), buckets={"seq": [8, 4]})
    assert padded.buckets == {"seq": [4, 8]} and padded.mask_inputs == ["seq"]
    args = _inputs(2, n)
    want = exact(*args)
    got = padded(*args)
    assert [g.shape for g in got] == [w.shape for w in want]
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"output {k}")
    assert padded.stats == {"calls": 1, "compiles": 1}
    (key,) = padded.masks
    assert key == ("seq", 4 if n <= 4 else 8, n)


def test_buckets_share_programs_and_masks():
    f = _dyn(_model(MASKED), buckets={"seq": [4, 8]})
    for n in (3, 4, 2, 3):
        f(*_inputs(1, n))
    assert f.stats == {"calls": 4, "compiles": 1}  # one bucket, one binding
    assert sorted(f.masks) == [("seq", 4, 2), ("seq", 4, 3), ("seq", 4, 4)]
    np.testing.assert_array_equal(f.masks[("seq", 4, 3)], [1, 1, 1, 0])
    with pytest.raises(
        DlpcError, match="input 'x' dim 1 \\('seq'\\) is 9, above the largest bucket 8"
    ):
        f(*_inputs(1, 9))


def test_bucket_and_tile_options_are_checked():
    m = _model(MASKED)
    for kwargs, message in (
        ({"buckets": {"len": [4]}}, "bucketed dim 'len' is not a symbolic dim .*they have: b, seq"),
        ({"buckets": {"seq": []}}, "the buckets of 'seq' must be positive sizes"),
        ({"buckets": {"seq": [0, 4]}}, "the buckets of 'seq' must be positive sizes"),
        ({"tiles": {"b": 2, "seq": 2}}, "tiles= takes one dim"),
        ({"tiles": {"len": 2}}, "tiled dim 'len' must be a symbolic dim"),
        ({"tiles": {"b": 0}}, "tiled dim 'b' must be a symbolic dim .* with a tile size >= 1"),
        ({"tiles": {"seq": 2}}, "dim 'seq' cannot be tiled: graph.exp has 'seq' off axis 0"),
    ):
        with pytest.raises(DlpcError, match=message):
            _dyn(m, **kwargs)


TILED = """
func.func @main(%x: tensor<?x4xf32, ["b"]>) -> (tensor<?x4xf32, ["b"]>, tensor<?xf32, ["b"]>) {
  %e = graph.exp %x : (tensor<?x4xf32, ["b"]>) -> tensor<?x4xf32, ["b"]>
  %s = graph.reduce_sum %e {axes = array<i64: 1>} : (tensor<?x4xf32, ["b"]>) -> tensor<?xf32, ["b"]>
  func.return %e, %s : tensor<?x4xf32, ["b"]>, tensor<?xf32, ["b"]>
}
"""


@pytest.mark.parametrize("b", [1, 2, 5, 6])
def test_tiled_calls_run_chunks_of_the_tile_and_of_one(b):
    x = np.random.default_rng(b).standard_normal((b, 4)).astype(np.float32)
    f = _dyn(_model(TILED), tiles={"b": 2})
    got = f(x)
    np.testing.assert_allclose(got[0], np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(got[1], np.exp(x).sum(1), rtol=1e-5)
    sizes = ([2] if b >= 2 else []) + ([1] if b % 2 else [])  # b // 2 chunks of 2, b % 2 of 1
    assert sorted(f.cache) == sorted((("b", n),) for n in sizes)


def test_leading_independent_names_the_op():
    def why(body: str, out: str = 'tensor<?x4xf32, ["b"]>') -> str | None:
        text = (
            f'func.func @main(%x: tensor<?x4xf32, ["b"]>) -> {out} {{\n{body}\n'
            f"  func.return %y : {out}\n}}"
        )
        return leading_independent(pipeline.parse_module(text), "b")

    b4 = 'tensor<?x4xf32, ["b"]>'
    assert why(f"  %y = graph.relu %x : ({b4}) -> {b4}") is None
    assert (
        why(f"  %y = graph.softmax %x {{axis = 0 : i64}} : ({b4}) -> {b4}")
        == "graph.softmax works along axis 0"
    )
    assert (
        why(
            f"  %y = graph.reduce_sum %x {{axes = array<i64: 0>}} : ({b4}) -> tensor<4xf32>",
            "tensor<4xf32>",
        )
        == "graph.reduce_sum reduces over it"
    )
    # a gather along axis 0 given as -rank (by indices that lead with b themselves)
    gather = (
        'func.func @main(%x: tensor<?x4xf32, ["b"]>, %i: tensor<?xi64, ["b"]>) -> '
        f"{b4} {{\n  %y = graph.gather %x, %i {{axis = -2 : i64}} : ({b4}, "
        f'tensor<?xi64, ["b"]>) -> {b4}\n  func.return %y : {b4}\n}}'
    )
    assert (
        leading_independent(pipeline.parse_module(gather), "b") == "graph.gather gathers along it"
    )
    c4 = 'tensor<?x4xf32, ["2*b"]>'
    assert (
        why(f"  %y = graph.concat %x, %x {{axis = 0 : i64}} : ({b4}, {b4}) -> {c4}", c4)
        == "graph.concat has 'b' off axis 0 or inside an expression"
    )
    t4 = 'tensor<4x?xf32, ["b"]>'
    assert (
        why(f"  %y = graph.transpose %x {{perm = array<i64: 1, 0>}} : ({b4}) -> {t4}", t4)
        == "graph.transpose has 'b' off axis 0 or inside an expression"
    )


def test_the_guard_names_the_input():
    f = _dyn(_model(TILED))
    x = np.ones((3, 4), np.float32)
    with pytest.raises(
        DlpcError, match="^error: the model takes 1 inputs \\(x\\) but 2 were given$"
    ):
        f(x, x)
    with pytest.raises(
        DlpcError, match="^error: input 'x' has dtype float64 but the model expects float32$"
    ):
        f(x.astype(np.float64))
    with pytest.raises(DlpcError, match="^error: input 'x' dim 1 is 5 but the model expects 4$"):
        f(np.ones((3, 5), np.float32))
    f(x)
    f(x)  # the fast path: same shapes, no binding redone
    f(np.ones((2, 4), np.float32))
    assert f.stats == {"calls": 3, "compiles": 2} and f._fast is not None
    # the fast path answers for the last call's shapes and dtype only
    assert f._fast(np.ones((2, 4), np.float32)) is not None
    assert f._fast(x) is None and f._fast(np.ones((2, 4), np.float64)) is None
    assert f._fast(np.ones((2, 4), np.float32), x) is None
    y = f(x + 1)
    np.testing.assert_allclose(y[0], np.exp(x + 1), rtol=1e-6)
    assert f.stats == {"calls": 4, "compiles": 2}


# ------------------------------------------------------------------ onnx_symbolic


def _obj(*values) -> np.ndarray:
    return np.array(values, dtype=object)


def test_shape_arithmetic_keeps_dims():
    shape = _obj(S, 4, T)
    (g,) = osym.fold("Gather", {"axis": 0}, [shape, np.array([2, 0])])
    assert g.tolist() == [T, S]
    (rows,) = osym.fold("Gather", {}, [np.array([[S, 1], [T, 2]], dtype=object), np.array([1])])
    assert rows.tolist() == [[T, 2]]  # axis 0 when the node gives none
    (u,) = osym.fold("Unsqueeze", {}, [np.asarray(S, dtype=object), np.array([0])])
    assert u.shape == (1,) and u[0] == S
    (c,) = osym.fold("Concat", {"axis": 0}, [_obj(S), np.array([-1], np.int64), _obj(8)])
    assert c.tolist() == [S, -1, 8]
    (m,) = osym.fold("Mul", {}, [_obj(S, 2), _obj(T, 3)])
    assert m.tolist() == [S * T, 6] and m.dtype == object
    (d,) = osym.fold("Div", {}, [_obj(2 * S, 7, -7), _obj(2, 2, 2)])
    assert d.tolist() == [S, 3, -3]  # ONNX's integer Div truncates
    (z,) = osym.fold("Div", {}, [_obj(5), _obj(0)])
    assert z.tolist() == [0]
    (e,) = osym.fold("Equal", {}, [_obj(S, -1), np.array([-1, -1])])
    assert e.dtype == bool and e.tolist() == [False, True]
    (w,) = osym.fold("Where", {}, [e, _obj(1, 1), _obj(S, 4)])
    assert w.tolist() == [S, 1]
    (a,) = osym.fold("Sub", {}, [_obj(S + 3), np.array([3])])
    assert a.tolist() == [S]
    (settled,) = osym.fold("Add", {}, [_obj(2), np.array([3])])
    assert settled.dtype == np.int64 and settled.tolist() == [5]
    (sl,) = osym.fold("Slice", {}, [shape, np.array([1]), np.array([3]), None, None])
    assert sl.tolist() == [4, T]
    (sl2,) = osym.fold("Slice", {}, [shape, np.array([-1]), np.array([-4]), None, np.array([-1])])
    assert sl2.tolist() == [T, 4, S]
    (sq,) = osym.fold("Squeeze", {}, [_obj(S).reshape(1, 1), np.array([-1])])
    assert sq.shape == (1,) and sq[0] == S
    (sq0,) = osym.fold("Squeeze", {}, [_obj(S).reshape(1, 1)])
    assert sq0.shape == () and sq0.item() == S
    (r,) = osym.fold("Reshape", {}, [_obj(S, T), np.array([2, 1])])
    assert r.shape == (2, 1)
    (cast,) = osym.fold("Cast", {"to": 7}, [shape])
    assert cast is shape
    (i,) = osym.fold("Identity", {}, [shape])
    assert i is shape
    (u2,) = osym.fold("Unsqueeze", {}, [_obj(S, T), np.array([-1, 0])])
    assert u2.shape == (1, 2, 1)


def test_shape_arithmetic_refusals_are_value_errors():
    shape = _obj(S, 4)
    for op, attrs, inputs, message in (
        ("Cast", {"to": 1}, [shape], "cast to a non-integer type"),
        ("Shape", {}, [shape], "'Shape' of a symbolic dim is not evaluated at import time"),
        ("Concat", {}, [shape, shape], "Concat needs 'axis'"),
        ("Slice", {}, [shape, _obj(S), np.array([2])], "symbolic bounds"),
        ("Reshape", {}, [shape, _obj(S)], "'shape' must not be symbolic"),
        ("Gather", {"axis": 0}, [shape, np.array([5])], "'Gather' of a symbolic dim: "),
    ):
        with pytest.raises(ValueError, match=message):
            osym.fold(op, attrs, inputs)
    assert osym.has_symbols(shape) and not osym.has_symbols(np.array([1, 2]))
    assert not osym.has_symbols(_obj(1, 2))
    empty = osym.settle(np.empty((0,), dtype=object))
    assert empty.dtype == np.int64 and empty.shape == (0,)
    assert osym.settle(shape) is shape
