"""Input files are data (docs/security.md, issue #15 items 1, 2 and 5).

The matrix: every frontend (`.dlpc` text, ONNX, `.mlir`, the Python builder) x every
backend (numpy, C, OpenCL, DLP C on the simulator) on one model per pair that holds one
input and one parameter per hostile name (quotes, comment delimiters, newlines,
keywords, predefined macros, builtins, Unicode lookalikes and NFKC collisions, a
10,000-character name, the empty name, ...):

    out = sum_k (x_k + p_k) * p_k        p_k = k + 0.5

so two names that end up as one variable change the result. Each run must compile,
equal plain numpy on the same inputs, create no canary file, and generate ASCII source.
Then the regression tests of items 1, 2 and 5 through the real tools, and the
properties of `backends/names.py` itself.
"""

from __future__ import annotations

import keyword
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import dlpc
from dlpc.backends import names
from dlpc.diagnostics import DlpcError
from dlpc.frontends.builder import GraphBuilder
from dlpc.targets.dlp import DlpTarget

CANARY = "canary"  # every payload below touches ./canary; tests run in a tmp dir

HOSTILE = [
    # quotes and string/comment syntax of Python and C
    "'",
    '"',
    "'''",
    '"""',
    'a"""; __import__("os").system("touch canary"); x="""',
    "'); __import__('os').system('touch canary'); ('",
    "*/",
    "/*",
    '*/ __attribute__((constructor)) static void pwn(void) { system("touch canary"); } /*',
    "//",
    "# comment",
    "#",
    "\\",
    "a\\",
    "??/",
    "%s%n",
    # line breaks: a new line of code after a comment or a #define
    "a\nb",
    '\n#include <stdlib.h>\n__attribute__((constructor)) static void pwn2(void) { system("touch canary"); }\n',
    "\r",
    "x\r\nimport os; os.system('touch canary')",
    "\u2028",
    "\t\x07\x00",
    # keywords (C, OpenCL C, Python)
    "int",
    "for",
    "return",
    "static",
    "def",
    "lambda",
    "None",
    "True",
    "class",
    "__kernel",
    "kernel",
    "global",
    "local",
    # predefined and library macros
    "NULL",
    "EOF",
    "M_PI",
    "linux",
    "unix",
    "i386",
    "stdin",
    "errno",
    "assert",
    "INFINITY",
    "NAN",
    "CLK_LOCAL_MEM_FENCE",
    # builtins and names the generated code itself uses
    "float",
    "main",
    "printf",
    "get_global_id",
    "np",
    "math",
    "params",
    "inputs",
    "args",
    "dlpc_main",
    "expf",
    "taskId",
    "relu",
    "__import__",
    "v_x",
    "kernel_relu_0",
    # Unicode: lookalikes, NFKC collisions, case
    "ﬁ",
    "fi",
    "Ｘ",
    "X",
    "x",
    "é",
    "e\u0301",
    "😀",
    # different only after mangling, or only after truncation
    "a.b",
    "a_b",
    "a-b",
    "0",
    "z" * 10_000,
    "z" * 10_000 + "1",
    "",
]
assert len(HOSTILE) >= 40 and len(set(HOSTILE)) == len(HOSTILE)

SHAPE = (2, 3)
TARGETS = ["numpy", "c", "opencl", "dlp"]
FRONTENDS = ["dlpc", "onnx", "mlir", "builder"]


def p_value(k: int) -> np.ndarray:
    return np.full(SHAPE, k + 0.5, np.float32)


def expected(inputs: list[np.ndarray]) -> np.ndarray:
    """The model's meaning, computed by plain numpy (float64)."""
    return sum((x.astype(np.float64) + k + 0.5) * (k + 0.5) for k, x in enumerate(inputs))


# --------------------------------------------------------------------------- frontends

DLPC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")  # NAME in frontends/text/grammar.lark
DLPC_KEYWORDS = {"model", "param", "let", "return"}


def dlpc_names() -> list[str]:
    """The hostile names the text language admits as identifiers."""
    return [n for n in HOSTILE if DLPC_NAME.fullmatch(n) and n not in DLPC_KEYWORDS]


def build_dlpc(tmp_path) -> tuple[dlpc.Model, int]:
    ns = dlpc_names()
    dims = ", ".join(map(str, SHAPE))
    lines = [f"model hostile({', '.join(f'{n}: f32[{dims}]' for n in ns)}) {{"]
    lines += [f"  param p.{n}: f32[{dims}] = full({k + 0.5})" for k, n in enumerate(ns)]
    lines.append("  return " + " + ".join(f"({n} + p.{n}) * p.{n}" for n in ns))
    lines.append("}")
    path = tmp_path / "hostile.dlpc"
    path.write_text("\n".join(lines) + "\n")
    return dlpc.load(path), len(ns)


def build_builder(tmp_path) -> tuple[dlpc.Model, int]:
    b = GraphBuilder("hostile")
    xs = [b.input(n, SHAPE) for n in HOSTILE]
    ps = [b.param("p." + n, SHAPE, init=p_value(k)) for k, n in enumerate(HOSTILE)]
    terms = [b.mul(b.add(x, p), p) for x, p in zip(xs, ps)]
    total = terms[0]
    for t in terms[1:]:
        total = b.add(total, t)
    b.output(total)
    return b.model(), len(HOSTILE)


def build_onnx(tmp_path) -> tuple[dlpc.Model, int]:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    ins = [n for n in HOSTILE if n]  # "" means "no input" in ONNX; it names a node below
    nodes, inits, prev = [], [], None
    for k, n in enumerate(ins):
        inits.append(numpy_helper.from_array(p_value(k), name="p." + n))
        nodes.append(helper.make_node("Add", [n, "p." + n], ["s." + n], name=HOSTILE[-1]))
        nodes.append(helper.make_node("Mul", ["s." + n, "p." + n], ["m." + n], name="*/" + n))
        if prev is not None:
            out = "sum." + n if k < len(ins) - 1 else '"""\n*/ out /*'
            nodes.append(helper.make_node("Add", [prev, "m." + n], [out], name=n))
            prev = out
        else:
            prev = "m." + n
    graph = helper.make_graph(
        nodes,
        "hostile\n*/",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, SHAPE) for n in ins],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, SHAPE)],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    path = tmp_path / "hostile.onnx"
    onnx.save(model, str(path))
    return dlpc.load(path), len(ins)


def mlir_string(text: str) -> str:
    """An MLIR string literal: UTF-8 text, `"`, `\\` and control characters as hex."""
    out = []
    for ch in text:
        if ch in '"\\' or ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\{ord(ch):02X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def build_mlir(tmp_path) -> tuple[dlpc.Model, int]:
    """`dlpc.name` of every argument and the result, `graph.param` names and
    `graph.fused` names from the list; one more input named by invalid UTF-8."""
    t = f"tensor<{'x'.join(map(str, SHAPE))}xf32>"
    args = [f"%a{k}: {t} {{dlpc.name = {mlir_string(n)}}}" for k, n in enumerate(HOSTILE)]
    args.append(f'%bytes: {t} {{dlpc.name = "\\E2\\80"}}')  # a BytesAttr, not a string
    body = []
    for k, n in enumerate(HOSTILE):
        s = mlir_string(n)
        body += [
            f"  %p{k} = graph.param {s} : {t}",
            f"  %f{k} = graph.fused {s} %a{k}, %p{k} : ({t}, {t}) -> {t} {{",
            f"  ^bb0(%u: {t}, %v: {t}):",
            f"    %s = graph.add %u, %v : ({t}, {t}) -> {t}",
            f"    %m = graph.mul %s, %v : ({t}, {t}) -> {t}",
            f"    graph.yield %m : {t}",
            "  }",
        ]
    acc = "%bytes"
    for k in range(len(HOSTILE)):
        body.append(f"  %acc{k} = graph.add {acc}, %f{k} : ({t}, {t}) -> {t}")
        acc = f"%acc{k}"
    out_name = mlir_string('*/ out\n"""')
    text = (
        f"func.func @main({', '.join(args)}) -> ({t} {{dlpc.name = {out_name}}}) {{\n"
        + "\n".join(body)
        + f"\n  func.return {acc} : {t}\n}}\n"
    )
    path = tmp_path / "hostile.mlir"
    path.write_text(text, encoding="utf-8")
    weights = {n: p_value(k) for k, n in enumerate(HOSTILE)}
    return dlpc.load(path, weights=weights), len(HOSTILE)


BUILD = {"dlpc": build_dlpc, "onnx": build_onnx, "mlir": build_mlir, "builder": build_builder}


def target_available(target: str) -> None:
    if target == "opencl":
        pytest.importorskip("pyopencl", reason="the opencl extra is not installed")


# ------------------------------------------------------------------------------ matrix


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("frontend", FRONTENDS)
def test_hostile_names_matrix(frontend, target, tmp_path, monkeypatch):
    target_available(target)
    monkeypatch.chdir(tmp_path)
    model, n = BUILD[frontend](tmp_path)
    rng = np.random.default_rng(7)
    inputs = [rng.standard_normal(SHAPE).astype(np.float32) for _ in range(n)]
    if frontend == "mlir":  # one more input, named by invalid UTF-8 bytes, is added in
        extra = rng.standard_normal(SHAPE).astype(np.float32)
        want = expected(inputs) + extra
        inputs = [*inputs, extra]
    else:
        want = expected(inputs)
    compiled = dlpc.compile(model, target=target, fold_weights=False)
    (got,) = compiled(*inputs)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-4)
    assert compiled.source.isascii(), "generated source holds non-ASCII text"
    assert not (tmp_path / CANARY).exists()


def test_matrix_covers_the_text_language():
    """The text language admits enough hostile names to mean something."""
    admitted = dlpc_names()
    assert len(admitted) >= 40
    assert {"NULL", "EOF", "M_PI", "linux", "int", "def", "np", "a.b", "a_b"} <= set(admitted)


# ------------------------------------------------------------------ item 1: .mlir -> numpy

FUSED_PAYLOAD = 'a"""; __import__("os").system("touch canary"); x="""'


def fused_mlir(name: str) -> str:
    t = "tensor<4xf32>"
    return (
        f"func.func @main(%x: {t}) -> {t} {{\n"
        f"  %y = graph.fused {mlir_string(name)} %x : ({t}) -> {t} {{\n"
        f"  ^bb0(%a: {t}):\n"
        f"    %r = graph.relu %a : ({t}) -> {t}\n"
        f"    graph.yield %r : {t}\n"
        "  }\n"
        f"  func.return %y : {t}\n}}\n"
    )


def test_item1_fused_name_runs_no_code_through_dlpc_run(tmp_path):
    (tmp_path / "f.mlir").write_text(fused_mlir(FUSED_PAYLOAD))
    r = subprocess.run(
        [shutil.which("dlpc-run") or "dlpc-run", "f.mlir", "--target", "numpy"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout
    assert not (tmp_path / CANARY).exists()


def test_item1_fused_name_is_a_comment_in_the_numpy_module(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f.mlir").write_text(fused_mlir(FUSED_PAYLOAD))
    compiled = dlpc.compile(dlpc.load(tmp_path / "f.mlir"), target="numpy")
    x = np.array([-1, 0, 2, -3], np.float32)
    np.testing.assert_array_equal(compiled(x)[0], np.maximum(x, 0))
    assert not (tmp_path / CANARY).exists()
    comment = [line for line in compiled.source.splitlines() if "graph.fused" in line]
    assert comment and all(line.lstrip().startswith("#") for line in comment)


# ---------------------------------------------------------- item 2: --target-desc is data

EVIL_KEY = (
    'add 1\n#include <stdlib.h>\n__attribute__((constructor)) static void pwn(void) { system("touch canary"); }\n'
    "#define DLP_TP_zz"
)


def toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@pytest.mark.parametrize(
    "toml, message",
    [
        (f"[intrinsics]\n{toml_string(EVIL_KEY)} = 32\n", "unknown intrinsic 'add 1\\n#include"),
        ("[intrinsics]\nad = 32\n", "unknown intrinsic 'ad'; did you mean 'add'?"),
        ("[intrinsics]\nadd = inf\n", "intrinsic 'add' must be a finite number in"),
        ("[intrinsics]\nexp = nan\n", "intrinsic 'exp' must be a finite number in"),
        ("[intrinsics]\nmatmul = -1\n", "intrinsic 'matmul' must be a finite number in"),
        ('[intrinsics]\nadd = "fast"\n', "intrinsic 'add' must be a finite number in"),
        ("clock_ghz = inf\n", "'clock_ghz' must be a finite number in"),
        ("gdram_bandwidth_gbs = nan\n", "'gdram_bandwidth_gbs' must be a finite number in"),
        ("clusters = 100000\n", "'clusters' must be a positive integer at most 64, got 100000"),
        ("nram_bytes = 9223372036854775807\n", "'nram_bytes' must be a positive integer at most"),
        ("dma_align = 1.5\n", "'dma_align' must be a positive integer at most 4096, got 1.5"),
        ("vector_width = true\n", "'vector_width' must be a positive integer"),
        ("clusters = 64\ncores_per_cluster = 64\n", "4096 cores (clusters x cores_per_cluster)"),
        ("name = 5\n", "'name' must be a string"),
    ],
)
def test_item2_bad_target_description_is_one_line_through_the_cli(tmp_path, toml, message):
    (tmp_path / "m.dlpc").write_text("model m(x: f32[4]) { return relu(x) }\n")
    (tmp_path / "t.toml").write_text(toml)
    r = subprocess.run(
        [shutil.which("dlpc-run") or "dlpc-run", "m.dlpc", "--target", "dlp"]
        + ["--target-desc", "t.toml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "t.toml: error: " in lines[0] and message in lines[0], lines[0]
    assert "Traceback" not in r.stderr
    assert not (tmp_path / CANARY).exists()


def test_item2_json_description_and_python_api_are_checked(tmp_path):
    p = tmp_path / "t.json"
    p.write_text('{"intrinsics": {"add\\n#define x": 1}}')
    with pytest.raises(DlpcError, match=r"t.json: error: unknown intrinsic 'add\\n#define x'"):
        DlpTarget.load(str(p))
    p.write_text('{"clusters": 1e400}')
    with pytest.raises(DlpcError, match="'clusters' must be a positive integer"):
        DlpTarget.load(str(p))
    with pytest.raises(DlpcError, match="unknown intrinsic 'x\\\\n'"):
        DlpTarget(intrinsics=(("x\n", 1.0), ("matmul", 256.0)))
    with pytest.raises(DlpcError, match="'clock_ghz' must be a finite number"):
        DlpTarget(clock_ghz=float("nan"))


def test_item2_dlp_c_defines_only_known_intrinsics():
    from dlpc.backends.dlp_c import target_macros
    from dlpc.targets.dlp import KNOWN_INTRINSICS

    defined = re.findall(r"#define DLP_TP_(\S+) (\S+)", target_macros(DlpTarget()))
    assert [n for n, _ in defined] == list(KNOWN_INTRINSICS)
    assert all(np.isfinite(float(v)) for _, v in defined)


# ------------------------------------------------------------- item 5: names and results


def sub_model(tmp_path, a: str, b: str):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Sub", [a, b], ["y"])],
        "sub",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in (a, b)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    path = tmp_path / "sub.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return dlpc.load(path)


@pytest.mark.parametrize("a, b", [("ﬁ", "fi"), ("Ｘ", "X"), ("x", "X"), ("a.b", "a_b")])
@pytest.mark.parametrize("target", TARGETS)
def test_item5_names_that_fold_together_stay_apart(tmp_path, a, b, target):
    target_available(target)
    model = sub_model(tmp_path, a, b)
    x, y = np.array([1, 2, 3], np.float32), np.array([10, 20, 40], np.float32)
    np.testing.assert_array_equal(dlpc.compile(model, target=target)(x, y)[0], x - y)


MACRO_MODEL = """model m(NULL: f32[3], EOF: f32[3], M_PI: f32[3], linux: f32[3], errno: f32[3]) {
  param stdin: f32[3] = full(2.0)
  param assert: f32[3] = full(3.0)
  let unix = NULL * stdin + EOF * assert
  return unix - M_PI + linux * errno
}
"""


@pytest.mark.parametrize("target", ["c", "opencl", "dlp"])
def test_item5_predefined_macros_as_names_compile(tmp_path, target):
    target_available(target)
    (tmp_path / "m.dlpc").write_text(MACRO_MODEL)
    model = dlpc.load(tmp_path / "m.dlpc")
    a, b, c, d, e = (np.arange(3, dtype=np.float32) + k for k in range(5))
    (got,) = dlpc.compile(model, target=target)(a, b, c, d, e)
    np.testing.assert_allclose(got, a * 2 + b * 3 - c + d * e, rtol=1e-6)


def test_item5_macro_names_through_the_cli(tmp_path):
    (tmp_path / "m.dlpc").write_text(MACRO_MODEL)
    for target in ("c", "dlp"):
        r = subprocess.run(
            [shutil.which("dlpc-run") or "dlpc-run", "m.dlpc", "--target", target],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0 and "ok" in r.stdout, r.stderr


# ----------------------------------------------------------------------- names.py itself

C_WORDS = {"NULL", "EOF", "int", "for", "main", "printf", "errno", "linux", "kernel", "local"}


def test_identifier_is_safe_ascii_with_a_prefix():
    for text in HOSTILE:
        for kind in names.KINDS:
            ident = names.identifier(text, kind)
            assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", ident), ident
            assert ident.startswith(kind + "_")
            assert not keyword.iskeyword(ident) and ident not in C_WORDS
            assert ident not in dir(__builtins__)
            assert len(ident) <= len(kind) + 1 + names.MAX_LENGTH
    assert names.identifier("fc1.weight") == "v_fc1_weight"
    assert names.identifier("ﬁ") == "v_uFB01" != names.identifier("fi") == "v_fi"
    assert names.identifier("relu_0", "kernel") == "kernel_relu_0"
    assert names.identifier(b"\xe2\x80") == "v_xe2_x80"  # a BytesAttr's data


def test_scope_is_injective_over_the_hostile_names():
    scope = names.Scope()
    made = [scope.fresh(n) for n in HOSTILE] + [scope.fresh(None) for _ in range(3)]
    assert len(set(made)) == len(made)
    two = names.Scope()
    assert [two.fresh("a.b"), two.fresh("a_b"), two.fresh("a_b_2")] == [
        "v_a_b",
        "v_a_b_2",
        "v_a_b_2_2",
    ]
    assert [two.fresh(""), two.fresh(None), two.fresh("")] == ["v_0", "v_1", "v_2"]


def test_c_comment_and_python_comment_cannot_end_early():
    for text in HOSTILE:
        c = names.c_comment(text)
        assert c.isascii() and "\n" not in c and "\r" not in c
        assert c.startswith("/* ") and c.endswith(" */") and "*/" not in c[3:-3]
        assert "/*" not in c[3:-3] and "??" not in c
        py = names.py_comment(text)
        assert py.isascii() and py.startswith("# ") and len(py.splitlines()) == 1
        literal = names.py_literal(text)
        assert literal.isascii() and eval(literal) == text  # noqa: S307 - our own literal


def test_c_string_is_exact(tmp_path):
    """Every hostile name through c_string, printed by a compiled C program, comes back
    byte for byte."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    texts = [t for t in HOSTILE if "\x00" not in t]  # a C string ends at NUL
    body = "\n".join(f"  fputs({names.c_string(t)}, stdout); putchar(0);" for t in texts)
    src = tmp_path / "s.c"
    src.write_text(f"#include <stdio.h>\nint main(void)\n{{\n{body}\n  return 0;\n}}\n")
    exe = tmp_path / "s"
    subprocess.run([cc, "-std=c11", "-trigraphs", str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, check=True).stdout
    assert out.split(b"\0")[:-1] == [t.encode() for t in texts]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
