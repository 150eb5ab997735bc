"""A seeded mutation fuzzer for dlpc's tools: mutated models and IR must give exit 0, or
one located diagnostic and exit 1; never an internal error, a traceback or a hang.

    from fuzzing import fuzz
    report = fuzz(cases=200, seed=0)          # all kinds, round robin
    assert not report.findings, report.summary()

Seeds: the examples (examples/*.dlpc) and the text frontend's tests (test/frontends/*.dlpc)
for `dlpc`; the lit inputs (test/**/*.mlir), run with the pass pipeline their RUN lines
name, for `dlpc-opt`; a handful of small ONNX models built here, mutated field by field
(op types, attributes, dims, names, tensor data) and byte by byte, for `dlpc`.

Each case runs a tool's `main(argv)` in a forked worker process (the module is imported
once), with stdout/stderr captured and stdin empty; the parent kills a worker that takes
longer than the per-case time limit (a hang) and starts another. `subprocess=True` runs
the installed console scripts instead (the real exit path). A case is a finding when:
- it timed out ("hang"), or the worker died ("crash");
- stderr has "Traceback" or "internal error";
- the exit code is neither 0 nor 1, or is 1 with a stderr that is not one diagnostic:
  one line `[tool: ]error: ...` or `file:line[:col]: error: ...`, optionally followed by
  the source line and a caret under the column (the text frontend's clang form).

`bench/fuzz.py` is the long run (`python bench/fuzz.py --cases 10000`);
`test_fuzz.py` runs a bounded number of cases in CI.
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("text", "mlir", "onnx")

# ---------------------------------------------------------------------------- seeds


def text_seeds() -> list[tuple[str, str]]:
    """(name, source) of every .dlpc example and frontend test."""
    files = sorted(ROOT.glob("examples/*.dlpc")) + sorted(ROOT.glob("test/frontends/*.dlpc"))
    return [(f.name, f.read_text()) for f in files]


_RUN_PASSES = re.compile(r"dlpc-opt %s[^|]*?-p[ =]('[^']*'|\"[^\"]*\"|\S+)")


def mlir_seeds() -> list[tuple[str, str, list[str]]]:
    """(name, text, pass pipelines its RUN lines name) of every lit .mlir input."""
    out = []
    for f in sorted(ROOT.glob("test/**/*.mlir")):
        if "Output" in f.parts:
            continue
        text = f.read_text()
        pipelines = [m.group(1).strip("'\"") for m in _RUN_PASSES.finditer(text)]
        out.append((str(f.relative_to(ROOT)), text, pipelines))
    return out


def onnx_seeds() -> list[tuple[str, bytes]]:
    """Small ONNX models (serialized): an MLP, a CNN block, a normalisation, a
    reshaping/indexing graph, an attention-like matmul/softmax."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    def model(name, nodes, inputs, outputs, inits, opset=17):
        graph = helper.make_graph(
            nodes,
            name,
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
            [numpy_helper.from_array(v, k) for k, v in inits.items()],
        )
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
        return name, m.SerializeToString()

    node = helper.make_node
    return [
        model(
            "mlp",
            [
                node("Gemm", ["x", "w", "b"], ["h"], transB=1),
                node("Relu", ["h"], ["a"]),
                node("Reshape", ["a", "shape"], ["y"]),
            ],
            [("x", [2, 8])],
            [("y", [2, 16])],
            {"w": arr(16, 8), "b": arr(16), "shape": np.array([0, -1], dtype=np.int64)},
        ),
        model(
            "cnn",
            [
                node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"]),
                node("Relu", ["n"], ["r"]),
                node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                node("GlobalAveragePool", ["p"], ["g"]),
                node("Flatten", ["g"], ["y"]),
            ],
            [("x", [1, 3, 8, 8])],
            [("y", [1, 4])],
            {
                "w": arr(4, 3, 3, 3),
                "b": arr(4),
                "s": arr(4),
                "bb": arr(4),
                "m": arr(4),
                "v": np.abs(arr(4)) + 1,
            },
        ),
        model(
            "norm",
            [
                node("ReduceMean", ["x"], ["mu"], axes=[-1], keepdims=1),
                node("Sub", ["x", "mu"], ["d"]),
                node("Mul", ["d", "d"], ["d2"]),
                node("ReduceMean", ["d2"], ["var"], axes=[-1], keepdims=1),
                node("Add", ["var", "eps"], ["ve"]),
                node("Sqrt", ["ve"], ["sd"]),
                node("Div", ["d", "sd"], ["z"]),
                node("Softmax", ["z"], ["y"], axis=-1),
            ],
            [("x", [2, 3, 8])],
            [("y", [2, 3, 8])],
            {"eps": np.array(1e-5, dtype=np.float32)},
            opset=13,
        ),
        model(
            "shapes",
            [
                node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
                node("Concat", ["t", "t"], ["c"], axis=2),
                node("Slice", ["c", "starts", "ends", "axes"], ["s"]),
                node("Gather", ["s", "idx"], ["g"], axis=0),
                node("Unsqueeze", ["g", "uaxes"], ["u"]),
                node("Tanh", ["u"], ["y"]),
            ],
            [("x", [2, 3, 4])],
            [("y", [1, 2, 2, 6])],
            {
                "starts": np.array([1], dtype=np.int64),
                "ends": np.array([7], dtype=np.int64),
                "axes": np.array([2], dtype=np.int64),
                "idx": np.array([0, 2], dtype=np.int64),
                "uaxes": np.array([0], dtype=np.int64),
            },
        ),
        model(
            "attention",
            [
                node("MatMul", ["x", "wq"], ["q"]),
                node("MatMul", ["x", "wk"], ["k"]),
                node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
                node("MatMul", ["q", "kt"], ["s"]),
                node("Mul", ["s", "scale"], ["ss"]),
                node("Softmax", ["ss"], ["p"], axis=-1),
                node("MatMul", ["p", "x"], ["o"]),
                node("Erf", ["o"], ["e"]),
                node("Where", ["cond", "e", "o"], ["y"]),
            ],
            [("x", [1, 4, 8])],
            [("y", [1, 4, 8])],
            {
                "wq": arr(8, 8),
                "wk": arr(8, 8),
                "scale": np.array(0.35, dtype=np.float32),
                "cond": np.array([True, False] * 16).reshape(1, 4, 8),
            },
        ),
    ]


# ------------------------------------------------------------------------ mutations

INTERESTING_INTS = [0, 1, -1, 2, 3, 7, 64, 255, 2**31 - 1, 2**31, 2**32, 2**62, 2**63 - 1, 2**63]
INTERESTING_NUMBERS = [
    *map(str, INTERESTING_INTS),
    "-0.0",
    "1e308",
    "1e-320",
    "3.5",
    "-2",
    "99999999999999999999999999",
]
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*|%[A-Za-z0-9_.$-]+|-?[0-9][0-9.eE+-]*|\S")


def _tokens(text: str) -> list[re.Match]:
    return list(_TOKEN.finditer(text))


def _replace_span(text: str, m: re.Match, new: str) -> str:
    return text[: m.start()] + new + text[m.end() :]


def mutate_source(text: str, rng: random.Random, vocabulary: list[str], donors: list[str]) -> str:
    """One to three token/line-level edits of source text (.dlpc or .mlir): replace a
    number with an interesting one, a name with a name from `vocabulary` (op names, element
    types, keywords), delete/duplicate/swap tokens or lines, splice a line from a donor,
    truncate, nest deeply, or insert stray bytes."""
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        toks = _tokens(text)
        lines = text.split("\n")
        # half the edits keep the syntax (a number, a name, deep nesting), so that the
        # cases reach the later stages; the others may break anything
        choice = rng.choice((0, 0, 1, 1, 9, 10)) if rng.random() < 0.5 else rng.randrange(12)
        if not toks:
            return text + rng.choice(vocabulary)
        tok = rng.choice(toks)
        if choice == 0:  # a number
            nums = [
                t for t in toks if t.group()[0].isdigit() or t.group()[:2].lstrip("-")[:1].isdigit()
            ]
            if nums:
                text = _replace_span(text, rng.choice(nums), rng.choice(INTERESTING_NUMBERS))
        elif choice == 1:  # a name
            names = [t for t in toks if t.group()[0].isalpha() or t.group()[0] == "_"]
            if names:
                text = _replace_span(text, rng.choice(names), rng.choice(vocabulary))
        elif choice == 2:
            text = _replace_span(text, tok, "")
        elif choice == 3:
            text = _replace_span(text, tok, tok.group() + " " + tok.group())
        elif choice == 4:  # swap two tokens
            other = rng.choice(toks)
            a, b = sorted((tok, other), key=lambda m: m.start())
            if a.end() <= b.start():
                text = (
                    text[: a.start()]
                    + b.group()
                    + text[a.end() : b.start()]
                    + a.group()
                    + text[b.end() :]
                )
        elif choice == 5 and len(lines) > 1:
            del lines[rng.randrange(len(lines))]
            text = "\n".join(lines)
        elif choice == 6:
            i = rng.randrange(len(lines))
            lines.insert(i, lines[rng.randrange(len(lines))])
            text = "\n".join(lines)
        elif choice == 7 and donors:
            donor = rng.choice(donors).split("\n")
            lines.insert(rng.randrange(len(lines) + 1), rng.choice(donor))
            text = "\n".join(lines)
        elif choice == 8:
            text = text[: rng.randrange(len(text) + 1)]
        elif choice == 9:  # deep nesting
            depth = rng.choice((50, 300, 1000, 5000))
            wrap = rng.choice(
                (("-" * depth, ""), ("(" * depth, ")" * depth), ("[" * depth, "]" * depth))
            )
            text = _replace_span(text, tok, wrap[0] + tok.group() + wrap[1])
        elif choice == 10 and rng.random() < 0.4:  # a quoted name: kernel, loop, op names
            strings = list(re.finditer(r'"[^"\n]*"', text))
            if strings:
                weird = ("", "1 bad", "a-b", "x.y", "%v", "é", "a/b", "k:0", " ", "a" * 300)
                text = _replace_span(text, rng.choice(strings), f'"{rng.choice(weird)}"')
        elif choice == 10:
            pos = rng.randrange(len(text) + 1)
            junk = rng.choice(
                ("\x00", "\xff", "é", "\t", "\r", '"', "{", "}", "<", ">", ":", "#", "//", "\n\n")
            )
            text = text[:pos] + junk + text[pos:]
        else:  # a name with a near miss or another token of the file
            text = _replace_span(text, tok, rng.choice(toks).group())
    return text


def _vocabulary_text() -> list[str]:
    from dlpc.frontends import builder

    words = "model param let return axis axes keepdims stride padding kaiming zeros normal true"
    return [*builder.op_names(), *builder.DTYPES, *words.split(), "inf", "B"]


def _vocabulary_mlir(seeds) -> list[str]:
    words = Counter()
    for _, text, _ in seeds:
        words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_.]*", text))
    common = [w for w, _ in words.most_common(400)]
    return [*common, "i8", "i1", "i64", "f16", "f64", "index", "tensor<?xf32>", "memref<0xf32>"]


def mutate_onnx(data: bytes, rng: random.Random) -> bytes:
    """A field-level edit of an ONNX model (op type, attribute, input name, dims, tensor
    data, opset, value info), or a byte-level one of its serialization."""
    import onnx
    from onnx import helper

    if rng.random() < 0.12:  # bytes
        b = bytearray(data)
        for _ in range(rng.choice((1, 2, 8))):
            op = rng.randrange(3)
            i = rng.randrange(len(b))
            if op == 0:
                b[i] = rng.randrange(256)
            elif op == 1:
                del b[i : i + rng.randrange(1, 16)]
            else:
                b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
        return bytes(b)
    m = onnx.load_model_from_string(data)
    g = m.graph
    for _ in range(rng.choice((1, 1, 2, 3))):
        choice = rng.randrange(10)
        node = rng.choice(g.node) if g.node else None
        if choice == 0 and node is not None:
            node.op_type = rng.choice(ONNX_OPS)
        elif choice == 1 and node is not None and node.attribute:
            a = rng.choice(node.attribute)
            if a.type == onnx.AttributeProto.INT:
                a.i = rng.choice(INTERESTING_INTS[:-1] + [-2, -3, -(2**63)])
            elif a.type == onnx.AttributeProto.INTS and a.ints:
                a.ints[rng.randrange(len(a.ints))] = rng.choice([0, -1, -5, 3, 100, 2**40])
                if rng.random() < 0.3:
                    a.ints.append(rng.choice([0, 1, -1, 2]))
            elif a.type == onnx.AttributeProto.FLOAT:
                a.f = rng.choice([0.0, -1.0, float("nan"), float("inf"), 1e30])
            else:
                node.attribute.remove(a)
        elif choice == 2 and node is not None:
            name = rng.choice(
                ["x", "h", "missing", "", "y", *[o for n in g.node for o in n.output]]
            )
            if node.input and rng.random() < 0.7:
                node.input[rng.randrange(len(node.input))] = name
            else:
                node.input.append(name)
        elif choice == 3 and node is not None:
            node.attribute.append(
                rng.choice(
                    [
                        helper.make_attribute("axis", rng.choice([-9, 0, 1, 5])),
                        helper.make_attribute("axes", [rng.choice([-9, 0, 1, 5])]),
                        helper.make_attribute("perm", [2, 2, 0]),
                        helper.make_attribute("kernel_shape", [0, 9]),
                        helper.make_attribute("group", rng.choice([0, 2, 3])),
                        helper.make_attribute("keepdims", 7),
                        helper.make_attribute("mode", "bogus"),
                    ]
                )
            )
        elif choice == 4:  # dims of an input/output
            vi = rng.choice([*g.input, *g.output])
            dims = vi.type.tensor_type.shape.dim
            if dims:
                d = dims[rng.randrange(len(dims))]
                if rng.random() < 0.2:
                    d.dim_param = rng.choice(["N", "batch", ""])
                else:
                    d.dim_value = rng.choice([0, 1, 3, 2**31, 2**40, 2**62, -1])
            elif rng.random() < 0.5:
                vi.type.tensor_type.shape.dim.add().dim_value = 2
        elif choice == 5 and g.initializer:  # initializer dims/data disagree
            t = rng.choice(g.initializer)
            if t.dims and rng.random() < 0.6:
                t.dims[rng.randrange(len(t.dims))] = rng.choice([0, 1, 7, 2**40, -3])
            elif t.raw_data:
                t.raw_data = t.raw_data[: rng.randrange(len(t.raw_data) + 1)]
            else:
                t.data_type = rng.choice([1, 2, 3, 6, 7, 9, 10, 11, 16, 99])
        elif choice == 6:
            m.opset_import[0].version = rng.choice([1, 6, 9, 11, 13, 18, 21, 24, 99])
        elif choice == 7 and node is not None:
            g.node.remove(node)
        elif choice == 8 and node is not None:
            g.node.insert(rng.randrange(len(g.node) + 1), node)  # a duplicate (same outputs)
        else:
            vi = rng.choice([*g.input, *g.output])
            vi.type.tensor_type.elem_type = rng.choice([1, 2, 3, 6, 7, 9, 10, 11, 16, 0, 77])
    return m.SerializeToString()


ONNX_OPS = (
    "Relu Gemm MatMul Conv MaxPool AveragePool Softmax Reshape Add Sub Mul Div Pow Sqrt Exp "
    "Log Tanh Sigmoid Erf Transpose Concat Slice Gather Unsqueeze Squeeze Flatten ReduceMean "
    "ReduceSum ReduceMax BatchNormalization LayerNormalization Where Cast Clip Expand Split "
    "Pad Tile ArgMax Identity Dropout ConvTranspose Resize NoSuchOp"
).split()


# ---------------------------------------------------------------------------- cases


@dataclass
class Case:
    kind: str  # text | mlir | onnx
    tool: str  # dlpc | dlpc-opt
    args: list[str]  # after the input file
    name: str  # the seed it came from
    data: bytes  # the input file's content
    suffix: str

    def argv(self, path: str) -> list[str]:
        return [path, *self.args]

    def describe(self) -> str:
        return f"{self.kind} {self.name}: {self.tool} <input{self.suffix}> {' '.join(self.args)}"


class Generator:
    """Seeded cases of the given kinds, round robin."""

    def __init__(self, seed: int = 0, kinds: tuple[str, ...] = KINDS):
        self.rng = random.Random(seed)
        self.kinds = kinds
        self.count = 0
        self.text = text_seeds() if "text" in kinds else []
        self.mlir = mlir_seeds() if "mlir" in kinds else []
        self.onnx = onnx_seeds() if "onnx" in kinds else []
        self.text_vocab = _vocabulary_text() if self.text else []
        self.mlir_vocab = _vocabulary_mlir(self.mlir) if self.mlir else []
        from dlpc.passes.registry import PASSES

        self.passes = sorted(PASSES)

    def __iter__(self):
        return self

    def __next__(self) -> Case:
        kind = self.kinds[self.count % len(self.kinds)]
        self.count += 1
        return getattr(self, f"_{kind}")()

    def _text(self) -> Case:
        rng = self.rng
        name, src = rng.choice(self.text)
        donors = [s for _, s in self.text]
        text = mutate_source(src, rng, self.text_vocab, donors)
        emit = rng.choice(("graph", "graph", "te", "loop", "c", "c", "numpy", "dlp-c", "opencl"))
        args = [f"--emit={emit}", f"-O{rng.choice((0, 1, 2, 2, 3))}"]
        return Case("text", "dlpc", args, name, text.encode("utf-8", "surrogatepass"), ".dlpc")

    def _mlir(self) -> Case:
        rng = self.rng
        name, src, pipelines = rng.choice(self.mlir)
        text = mutate_source(src, rng, self.mlir_vocab, [s for _, s, _ in self.mlir])
        if "loop.kernel" in src and rng.random() < 0.25:
            spec = rng.choice(("loop-default-schedule", "loop-default-schedule,loop-to-dlp"))
        elif pipelines and rng.random() < 0.8:
            spec = rng.choice(pipelines)
        else:
            spec = ",".join(rng.sample(self.passes, rng.choice((1, 1, 2))))
        args = ["-p", spec] if spec else []
        if rng.random() < 0.1:
            args.append("--split-input-file")
        return Case("mlir", "dlpc-opt", args, name, text.encode("utf-8", "surrogatepass"), ".mlir")

    def _onnx(self) -> Case:
        rng = self.rng
        name, data = rng.choice(self.onnx)
        emit = rng.choice(("graph", "graph", "c", "numpy", "te", "loop"))
        return Case("onnx", "dlpc", [f"--emit={emit}"], name, mutate_onnx(data, rng), ".onnx")


# ---------------------------------------------------------------------- the verdict

# `[tool: ]error: ...`, `file:line:col: error: ...`, `file: node #4 (Exp -> 'u'): error: ...`
_DIAGNOSTIC = re.compile(r"^(?:\S.*?: )?error: \S")


def verdict(rc: int | None, stderr: str) -> str | None:
    """None when the outcome is allowed, else the kind of finding."""
    if rc is None:
        return "hang"
    if "Traceback (most recent call last)" in stderr or "Traceback (escaped" in stderr:
        return "traceback"
    lines = stderr.rstrip("\n").split("\n")
    caret_form = len(lines) == 3 and lines[2].strip() == "^" and lines[1].strip() != ""
    # (the source line echoed under a located error may say anything: not searched)
    if any("internal error" in line for line in (lines[:1] if caret_form else lines)):
        return "internal error"
    if rc == 0:
        return None
    if rc != 1:
        return f"exit {rc}"
    if not lines[0].strip():
        return "empty diagnostic"
    if not _DIAGNOSTIC.match(lines[0]):
        return "not a diagnostic"
    if len(lines) == 1 or caret_form:  # caret form: the text frontend's source line, ^
        return None
    return "multi-line diagnostic"


# --------------------------------------------------------------------------- running


def _tool_main(tool: str):
    if tool == "dlpc":
        from dlpc.tools.dlpc import main
    elif tool == "dlpc-opt":
        from dlpc.tools.dlpc_opt import main
    else:
        raise ValueError(tool)
    return main


def run_inprocess(case: Case, workdir: str) -> tuple[int, str]:
    """(exit code, stderr) of the tool's main in this process, output captured."""
    path = os.path.join(workdir, f"input{case.suffix}")
    with open(path, "wb") as f:
        f.write(case.data)
    out, err = io.StringIO(), io.StringIO()
    stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(b""))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = _tool_main(case.tool)(case.argv(path))
            except SystemExit as e:  # a tool that exits past its guard
                rc = e.code if isinstance(e.code, int) else 1
            except BaseException:  # noqa: BLE001 - reported as a finding
                import traceback

                err.write("Traceback (escaped the tool):\n" + traceback.format_exc())
                rc = 1
    finally:
        sys.stdin = stdin
    return rc, err.getvalue()


def run_subprocess(case: Case, workdir: str, timeout: float) -> tuple[int | None, str]:
    path = os.path.join(workdir, f"input{case.suffix}")
    with open(path, "wb") as f:
        f.write(case.data)
    exe = shutil.which(case.tool) or case.tool
    try:
        p = subprocess.run(
            [exe, *case.argv(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return None, ""
    return p.returncode, p.stderr.decode(errors="replace")


def _worker(conn, workdir: str) -> None:
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    while True:
        case = conn.recv()
        if case is None:
            return
        conn.send(run_inprocess(case, workdir))


class Worker:
    """A forked process running cases one at a time; killed and replaced on a timeout."""

    def __init__(self, workdir: str):
        self.workdir = workdir
        self.proc = None
        self.conn = None

    def _start(self) -> None:
        ctx = multiprocessing.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, self.workdir), daemon=True)
        self.proc.start()

    def run(self, case: Case, timeout: float) -> tuple[int | None, str]:
        if self.proc is None or not self.proc.is_alive():
            self._start()
        self.conn.send(case)
        if not self.conn.poll(timeout):
            self.kill()
            return None, ""
        try:
            return self.conn.recv()
        except EOFError:  # the worker died (a crash in native code)
            code = self.proc.exitcode if self.proc else None
            self.kill()
            return -1 if code is None else code, f"worker died (exit {code})"

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.join()
        self.proc = None

    def close(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.conn.send(None)
            self.proc.join(5)
        self.kill()


@dataclass
class Finding:
    what: str
    case: Case
    rc: int | None
    stderr: str

    def __str__(self) -> str:
        first = self.stderr.strip().splitlines()[-1:] if self.stderr.strip() else [""]
        return f"{self.what}: {self.case.describe()} -> exit {self.rc}: {first[0][:300]}"


@dataclass
class Report:
    cases: int = 0
    seconds: float = 0.0
    findings: list[Finding] = field(default_factory=list)
    outcomes: Counter = field(default_factory=Counter)  # (kind, "ok"|"error"|finding) -> n

    def summary(self) -> str:
        lines = [f"{self.cases} cases in {self.seconds:.0f} s, {len(self.findings)} findings"]
        for (kind, outcome), n in sorted(self.outcomes.items()):
            lines.append(f"  {kind:5} {outcome:22} {n}")
        seen = set()
        for f in self.findings:
            key = (f.what, f.stderr.strip().splitlines()[-1][:120] if f.stderr.strip() else "")
            if key not in seen:
                seen.add(key)
                lines.append(f"  - {f}")
        return "\n".join(lines)


def fuzz(
    cases: int,
    seed: int = 0,
    kinds: tuple[str, ...] = KINDS,
    timeout: float = 20.0,
    subprocess_every: int = 0,
    on_case=None,
    keep: str | None = None,
) -> Report:
    """Run `cases` mutated inputs; every `subprocess_every`-th case (0: none) goes through
    the real console script instead of the in-process main. `keep`, a directory, gets
    the input of every finding. `on_case(i, case, rc, stderr, finding)` sees each case."""
    report = Report()
    gen = Generator(seed, kinds)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dlpc-fuzz-") as workdir:
        worker = Worker(workdir)
        try:
            for i in range(cases):
                case = next(gen)
                if subprocess_every and i % subprocess_every == subprocess_every - 1:
                    rc, err = run_subprocess(case, workdir, timeout)
                else:
                    rc, err = worker.run(case, timeout)
                what = verdict(rc, err)
                outcome = what or ("ok" if rc == 0 else "error")
                report.outcomes[case.kind, outcome] += 1
                if what:
                    report.findings.append(Finding(what, case, rc, err))
                    if keep:
                        Path(keep).mkdir(parents=True, exist_ok=True)
                        stem = f"{len(report.findings):04d}-{case.kind}"
                        Path(keep, stem + case.suffix).write_bytes(case.data)
                        Path(keep, stem + ".txt").write_text(f"{case.describe()}\n{err}")
                if on_case:
                    on_case(i, case, rc, err, what)
                report.cases += 1
        finally:
            worker.close()
    report.seconds = time.perf_counter() - started
    return report
