"""The first hour of a new user (issue 16) and the files the tools write (issue 15, item 6):
every tool behaves like the Unix and MLIR tools people know. Pipes, optional dependencies
and file modes are tested for real: subprocesses, real pipes, real files."""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dlpc.diagnostics import EXIT_BROKEN_PIPE, install_hint, save_npz, write_atomically
from dlpc.tools import dlpc as dlpc_tool
from dlpc.tools import dlpc_opt, dlpc_run, dlpc_tune

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
MLP = str(EXAMPLES / "mlp.dlpc")

# a 64x64 weight (above fold_params' 1024-element limit for inline constants): folding
# exp(w) makes a new param "folded.0" that the output then needs
FOLDABLE = """
func.func @main(%x: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %w = graph.param "w" : tensor<64x64xf32>
  %e = graph.exp %w : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %y = graph.mul %x, %e : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  func.return %y : tensor<64x64xf32>
}
"""
MATMUL_DLPC = "model mm(a: f32[16, 32], b: f32[32, 64]) {\n  return matmul(a, b)\n}\n"


@pytest.fixture
def foldable(tmp_path):
    model = tmp_path / "f.mlir"
    model.write_text(FOLDABLE)
    weights = tmp_path / "rw.npz"
    w = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    np.savez(weights, w=w)
    return model, weights


def run_tool(*argv, input=None, env=None, cwd=None):
    return subprocess.run(
        argv, input=input, capture_output=True, env=env, cwd=cwd, timeout=300, check=False
    )


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


# ------------------------------------------------------------------ broken pipe

QUIET_PIPE_CASES = [
    ["dlpc", MLP, "--emit=loop"],
    ["dlpc-opt", str(ROOT / "test" / "passes" / "loop-apply-tuning-log.mlir")],
    ["dlpc-run", MLP, "--target", "numpy", "--repeat", "1"],
    [sys.executable, "-m", "dlpc", "run", MLP, "--target", "numpy", "--repeat", "1"],
    [sys.executable, "-m", "dlpc", MLP, "--emit=graph"],
]


@pytest.mark.parametrize("argv", QUIET_PIPE_CASES, ids=lambda a: " ".join(a[-3:]))
def test_reader_gone_before_any_output_ends_quietly(argv):
    """The reader closes its end before the tool writes (the final flush is the write
    that fails): no message, exit 141 as a shell reports for `cat`."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == EXIT_BROKEN_PIPE
    assert err == "", err


def test_reader_that_reads_one_line_ends_quietly():
    """`dlpc m.dlpc --emit=loop | head -1` with output larger than the pipe's buffer (the
    buffer is shrunk to one page, so the output is many times larger)."""
    model = str(EXAMPLES / "transformer.dlpc")  # ~80 KB of loop IR
    p = subprocess.Popen(
        ["dlpc", model, "--emit=loop", "--no-fold-weights"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    fcntl.fcntl(p.stdout.fileno(), fcntl.F_SETPIPE_SZ, 4096)
    assert os.read(p.stdout.fileno(), 100).startswith(b"builtin.module")
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == EXIT_BROKEN_PIPE
    assert err == "", err


def test_head_in_a_shell_pipeline_like_cat():
    """Through a shell's pipe and `head -1`: the same status as `cat` gets from the shell
    (`${PIPESTATUS[0]}` is 141), nothing on stderr. resnet's dlp-c is ~110 KB, more
    than a default 64 KiB pipe buffer (the output must outgrow the pipe for head to cut
    it short)."""
    model = EXAMPLES / "resnet.dlpc"
    script = (
        f"dlpc {model} --emit=dlp-c --no-fold-weights | head -1 >/dev/null; a=${{PIPESTATUS[0]}}; "
        f"cat {model} {model} {model} /dev/zero 2>/dev/null | head -c 1 >/dev/null; "
        'echo "$a ${PIPESTATUS[0]}"'
    )
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300)
    assert r.stderr == "", r.stderr
    assert r.stdout.split() == ["141", "141"]  # dlpc's status, cat's status


# -------------------------------------------------------- stdin and file names


def test_dlpc_opt_reads_stdin_and_any_file_name(tmp_path):
    graph_ir = run_tool("dlpc", MLP, "--emit=graph").stdout
    r = run_tool("dlpc-opt", "-", "-p", "graph-to-te", input=graph_ir)
    assert r.returncode == 0 and b"te.reduce" in r.stdout, r.stderr
    odd = tmp_path / "ir.txt"
    odd.write_bytes(graph_ir)
    r = run_tool("dlpc-opt", str(odd))
    assert r.returncode == 0 and b"graph.linear" in r.stdout, r.stderr
    r = run_tool("dlpc-opt", "-", input=b"func.func @f( {\n")
    assert r.returncode == 1 and one_line(r.stderr.decode()).startswith("<stdin>:1:")


@pytest.mark.parametrize("fmt", ["dlpc", "mlir"])
def test_dlpc_and_dlpc_run_read_stdin_with_format(fmt, tmp_path):
    from dlpc import api

    text, weights = Path(MLP).read_bytes(), []
    if fmt == "mlir":  # graph IR names its weights; from stdin there is no <model>.npz
        text = run_tool("dlpc", MLP, "--emit=graph").stdout
        np.savez(tmp_path / "w.npz", **api.load(MLP).weights)
        weights = ["--weights", str(tmp_path / "w.npz")]
    r = run_tool("dlpc", "-", "--format", fmt, "--emit=te", *weights, input=text)
    assert r.returncode == 0 and b"te.reduce" in r.stdout, r.stderr
    argv = ["dlpc-run", "-", "--format", fmt, "--target", "numpy", "--repeat", "1", *weights]
    r = run_tool(*argv, input=text)
    assert r.returncode == 0 and b": ok (identical)" in r.stdout, r.stderr


def test_onnx_from_stdin(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    data = helper.make_model(graph).SerializeToString()
    r = run_tool("dlpc", "-", "--format", "onnx", "--emit=graph", input=data)
    assert r.returncode == 0 and b"graph.relu" in r.stdout, r.stderr
    odd = tmp_path / "model.bin"
    odd.write_bytes(data)
    assert onnx.load(str(odd)).graph.node[0].op_type == "Relu"
    assert dlpc_tool.main([str(odd), "--format", "onnx", "--emit=graph"]) == 0


# ------------------------------------------------------ version, usage, python -m


def test_every_tool_has_version(capsys):
    for main, prefix in [
        (dlpc_tool.main, "dlpc 0.1.0 (xdsl "),
        (dlpc_run.main, "dlpc-run (dlpc 0.1.0, xdsl "),
        (dlpc_tune.main, "dlpc-tune (dlpc 0.1.0, xdsl "),
    ]:
        assert main(["--version"]) == 0
        assert capsys.readouterr().out.startswith(prefix)
    r = run_tool("dlpc-opt", "--version")
    assert r.returncode == 0 and r.stdout.decode().startswith("dlpc-opt (dlpc 0.1.0, xdsl ")


@pytest.mark.parametrize(
    "main, example",
    [
        (dlpc_tool.main, "example: dlpc examples/mlp.dlpc --emit=c -o mlp.c"),
        (dlpc_run.main, "example: dlpc-run examples/mlp.dlpc --target c --check"),
        (dlpc_tune.main, "example: dlpc-tune examples/mlp.dlpc"),
    ],
)
def test_no_arguments_prints_usage_and_an_example(main, example, capsys):
    """Exit 1, as every other usage error of dlpc's tools (ToolArgumentParser)."""
    assert main([]) == 1
    err = capsys.readouterr().err
    assert err.startswith("usage: ") and example in err and "--help" in err


def test_python_m_dlpc_subcommands(tmp_path):
    r = run_tool(sys.executable, "-m", "dlpc", "--version")
    assert r.returncode == 0 and r.stdout.startswith(b"dlpc 0.1.0")
    r = run_tool(sys.executable, "-m", "dlpc", MLP, "--emit=graph")  # compile, the default
    assert r.returncode == 0 and b"graph.linear" in r.stdout
    r = run_tool(sys.executable, "-m", "dlpc", "compile", MLP, "--emit=te")
    assert r.returncode == 0 and b"te.reduce" in r.stdout
    r = run_tool(sys.executable, "-m", "dlpc", "run", MLP, "--target", "numpy", "--repeat", "1")
    assert r.returncode == 0 and b"mlp: target numpy" in r.stdout
    graph_ir = run_tool("dlpc", MLP, "--emit=graph").stdout
    r = run_tool(sys.executable, "-m", "dlpc", "opt", "-", "-p", "graph-to-te", input=graph_ir)
    assert r.returncode == 0 and b"te.reduce" in r.stdout
    for sub, tool in [("tune", "dlpc-tune"), ("train", "dlpc-train")]:
        r = run_tool(sys.executable, "-m", "dlpc", sub, "--version")
        assert r.returncode == 0 and r.stdout.startswith(f"{tool} (dlpc".encode())
    r = run_tool(sys.executable, "-m", "dlpc")
    assert r.returncode == 1 and b"usage: python -m dlpc" in r.stderr
    assert b"example: " in r.stderr


# ----------------------------------------------------------------- help texts


def tool_parsers() -> dict[str, argparse.ArgumentParser]:
    parsers = {
        "dlpc": dlpc_tool.parser(),
        "dlpc-run": dlpc_run.parser(),
        "dlpc-tune": dlpc_tune.parser(),
    }
    opt = argparse.ArgumentParser()
    main = dlpc_opt.DlpcOptMain(args=["unused.mlir"])
    main.register_all_arguments(opt)
    parsers["dlpc-opt"] = opt
    if (ROOT / "tools" / "dlpc_train.py").exists():
        from dlpc.tools import dlpc_train

        parsers["dlpc-train"] = dlpc_train.build_parser()
    return parsers


def test_every_option_of_every_tool_has_help():
    missing = [
        f"{tool} {'/'.join(a.option_strings) or a.dest}"
        for tool, p in tool_parsers().items()
        for a in p._actions
        if not (a.help or "").strip() or a.help == argparse.SUPPRESS
    ]
    assert missing == []
    text = dlpc_run.parser().format_help()
    assert "relative tolerance" in text and "absolute tolerance" in text


# ----------------------------------------------------------------- install hints


def pyproject_extras() -> dict[str, list[str]]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def test_install_hints_work_as_printed():
    """dlpc is installed from its checkout: a hint is `pip install -e '.[extra]'` (run
    there) or the pinned packages of that extra, never `pip install 'dlpc[extra]'`."""
    extras = pyproject_extras()
    hint = install_hint("tune")
    assert hint.startswith("pip install -e '.[tune]' from the dlpc checkout")
    assert hint.endswith("pip install " + " ".join(extras["tune"]))
    bad = []
    for path in [*ROOT.rglob("*.py"), *ROOT.rglob("*.md")]:
        if any(
            part in ("Output", "build", ".git") or part.endswith(".egg-info") for part in path.parts
        ):
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if re.search(r"pip install '?dlpc\[", line) and path != Path(__file__):
                bad.append(f"{path.relative_to(ROOT)}:{n}")
    assert bad == []


def test_readme_lists_every_extra():
    readme = (ROOT / "README.md").read_text()
    for extra in pyproject_extras():
        assert f"`{extra}`" in readme, extra


# --------------------------------------------- options checked before any work

HIDE = "import sys; sys.modules[{mod!r}] = None; from {tool} import main; sys.exit(main({argv!r}))"


def run_hidden(module: str, tool: str, argv: list[str], cwd):
    code = HIDE.format(mod=module, tool=tool, argv=argv)
    return run_tool(sys.executable, "-c", code, cwd=cwd)


def test_tune_plot_without_matplotlib_fails_at_once(tmp_path):
    model = tmp_path / "mm.dlpc"
    model.write_text(MATMUL_DLPC)
    log = tmp_path / "tune.jsonl"
    argv = [str(model), "--trials", "4", "--log", str(log), "--plot", str(tmp_path / "b.png")]
    r = run_hidden("matplotlib", "dlpc.tools.dlpc_tune", argv, tmp_path)
    assert r.returncode == 1
    err = one_line(r.stderr.decode())
    assert err == (f"dlpc-tune: error: --plot needs matplotlib ({install_hint('tune')})\n")
    assert not log.exists()  # nothing was measured


def test_opencl_without_pyopencl_fails_before_loading(tmp_path):
    bad = tmp_path / "bad.dlpc"
    bad.write_text("this is not a model")  # loading it would be a different error
    r = run_hidden("pyopencl", "dlpc.tools.dlpc_run", [str(bad), "--target", "opencl"], tmp_path)
    assert r.returncode == 1
    assert "target 'opencl' needs pyopencl (pip install -e '.[opencl]'" in one_line(
        r.stderr.decode()
    )


def test_onnx_without_onnx_says_how_to_install(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(b"\x08\x07")
    r = run_hidden("onnx", "dlpc.tools.dlpc", [str(model), "--emit=graph"], tmp_path)
    assert r.returncode == 1
    assert "needs onnx (pip install -e '.[onnx]'" in one_line(r.stderr.decode())


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--trials", "0"], "--trials must be >= 1, got 0"),
        (["--timeout", "0"], "--timeout must be > 0 seconds"),
        (["--time-budget", "-1"], "--time-budget must be > 0 seconds"),
        (["--verify", "-1"], "--verify must be >= 0"),
        (["--log", "/nonexistent/dir/t.jsonl"], "no such directory /nonexistent/dir"),
    ],
)
def test_tune_checks_options_first(tmp_path, capsys, argv, message):
    model = tmp_path / "mm.dlpc"
    model.write_text(MATMUL_DLPC)
    assert dlpc_tune.main([str(model), *argv]) == 1
    assert message in one_line(capsys.readouterr().err)


def test_missing_tuning_log_is_found_before_compiling(capsys, monkeypatch):
    from dlpc import api

    monkeypatch.setattr(api, "load", lambda *a, **k: pytest.fail("the model was loaded"))
    assert dlpc_tool.main([MLP, "--tuning-log", "/nonexistent.jsonl"]) == 1
    assert "no such tuning log: /nonexistent.jsonl" in one_line(capsys.readouterr().err)


# -------------------------------------------------------------- dlpc-tune resume


def test_tune_resume_says_what_it_replayed_and_plots_the_whole_history(tmp_path, capsys):
    from dlpc.passes.schedule.tuning_log import TuningLog

    model = tmp_path / "mm.dlpc"
    model.write_text(MATMUL_DLPC)
    log = tmp_path / "tune.jsonl"
    base = [str(model), "--log", str(log), "--verify", "0", "--quiet"]
    assert dlpc_tune.main([*base, "--trials", "2"]) == 0
    first = capsys.readouterr()
    assert "resuming" not in first.err
    assert dlpc_tune.main([*base, "--trials", "2", "--plot", str(tmp_path / "b.png")]) == 0
    err = capsys.readouterr().err
    assert f"resuming from {log}: replayed 2 logged measurements (2 schedules" in err
    assert re.search(r"matmul_0: best so far \d+\.\d{4} ms", err), err
    records = TuningLog(log).records
    assert len(records) == 4
    tasks = [type("T", (), {"sig": records[0].sig, "kernel": "matmul_0"})()]
    history = dlpc_tune.history_of(TuningLog(log), tasks)
    assert [t for t, _, _ in history] == [1, 2, 3, 4]  # both runs, one curve
    best = [b for _, _, b in history]
    assert best == sorted(best, reverse=True) and best[-1] == min(r.time for r in records)
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"


# -------------------------------------------------------------- fold by default


def kernel_counts(capsys, argv) -> list[str]:
    assert dlpc_tool.main(argv) == 0
    err = capsys.readouterr().err
    return next(line.split() for line in err.splitlines() if line.startswith("kernels"))


def test_weights_fold_by_default(capsys, tmp_path):
    resnet = str(EXAMPLES / "resnet.dlpc")
    out = tmp_path / "r.c"
    folded = kernel_counts(capsys, [resnet, "--emit=c", "--stats", "-o", str(out)])
    explicit = kernel_counts(capsys, [resnet, "--emit=c", "--stats", "--fold-weights"])
    kept_c = tmp_path / "kept.c"
    kept = kernel_counts(
        capsys, [resnet, "--emit=c", "--stats", "--no-fold-weights", "-o", str(kept_c)]
    )
    # the default is the lean C: the same kernels as --fold-weights (the batch-norm
    # arithmetic on weights folded away: 21 te computes, 8 C kernels today; 15 of the te
    # computes are graph-winograd's chains for the three 16- and 32-channel convs, 5 te
    # computes each where the direct conv is 1, which need bound weights), where keeping
    # the weights emits that arithmetic as kernels of its own (51 te computes today, the
    # convs direct)...
    assert folded == explicit
    chains = len(
        re.findall(r"static void kernel_winograd_output_transform_\w*\d\(", out.read_text())
    )
    source = kept_c.read_text()
    prepare = source[source.index("int dlpc_prepare(void **args)") :]
    calls = prepare[: prepare.index("\n}\n")].count("  kernel_")
    assert int(kept[-2]) - (int(folded[-2]) - 4 * chains) >= calls > 4 * int(folded[-1])
    # ...which loop-prepack-weights runs once per binding of the weights (dlpc_prepare),
    # not in a call: a call runs the folded model's kernels, plus none
    assert kept[-1] == folded[-1]


# ------------------------------------------------------------- dlpc-run verdict


@pytest.mark.parametrize(
    "out, ref, verdict",
    [
        ([1.0, 2.0], [1.0, 2.0], "ok (identical)"),
        ([1e-6, 100.0], [0.0, 100.0], "ok (atol holds alone; rtol alone would not)"),
        ([0.0, 100.000001], [0.0, 100.0], "ok (atol and rtol each hold alone)"),
        ([0.0, 100.005], [0.0, 100.0], "ok (rtol holds alone; atol alone would not)"),
        ([1e-6, 100.005], [0.0, 100.0], "ok (only atol + rtol*|ref| together hold)"),
        ([1.0, 3.0], [1.0, 2.0], "MISMATCH (1 of 2 elements beyond atol + rtol*|ref|)"),
        ([np.inf, np.nan], [np.inf, np.nan], "ok (identical)"),
    ],
)
def test_verdict_says_which_bound_holds(out, ref, verdict):
    out, ref = np.array(out), np.array(ref)
    ok, said, _ = dlpc_run.verdict(out, ref, rtol=1e-4, atol=2e-6)
    assert said == verdict
    assert ok == dlpc_run.within(out, ref, rtol=1e-4, atol=2e-6)


def test_verdict_names_the_worst_element():
    ref = np.zeros((2, 3), np.float32)
    out = ref.copy()
    out[1, 2] = 0.5
    out[0, 1] = 0.25
    ok, said, worst = dlpc_run.verdict(out, ref, rtol=1e-4, atol=1e-5)
    assert not ok and said.startswith("MISMATCH (2 of 6")
    assert (
        worst == "worst against its bound: [1, 2] = 0.5 vs reference 0 (|diff| 0.5, allowed 1e-05)"
    )
    assert dlpc_run.verdict(out[:1], ref, 1e-4, 1e-5)[1] == "MISMATCH (shape 1x3, reference 2x3)"


def test_dlpc_run_prints_the_verdict_and_worst_element(tmp_path, capsys):
    r = run_tool("dlpc-run", MLP, "--target", "c", "--repeat", "1", "--check")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    assert re.search(r"\(rtol 0\.0001, atol 1e-05\): ok \((atol|rtol|only|identical)", lines[2])
    assert lines[3].startswith("  worst against its bound: [0, ") and " vs reference " in lines[3]


# ------------------------------------------------------------ files (15, item 6)


def test_output_mode_honours_the_umask(foldable, tmp_path):
    model, _ = foldable
    old = os.umask(0o022)
    try:
        out = tmp_path / "a.c"
        assert dlpc_tool.main([str(model), "--emit=c", "-o", str(out)]) == 0
        assert out.stat().st_mode & 0o777 == 0o644
        os.umask(0o027)
        out2 = tmp_path / "b.c"
        assert dlpc_tool.main([str(model), "--emit=c", "-o", str(out2)]) == 0
        assert out2.stat().st_mode & 0o777 == 0o640
        out.chmod(0o600)  # an existing file keeps its mode, as with open(path, "w")
        assert dlpc_tool.main([str(model), "--emit=c", "-o", str(out)]) == 0
        assert out.stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)


def test_output_writes_through_a_symlink(tmp_path):
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    target = real_dir / "target.txt"
    target.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    write_atomically(link, "new\n")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new\n"
    dangling = tmp_path / "dangling.txt"
    dangling.symlink_to(real_dir / "created.txt")
    write_atomically(dangling, "made\n")
    assert dangling.is_symlink() and (real_dir / "created.txt").read_text() == "made\n"
    assert sorted(p.name for p in real_dir.iterdir()) == ["created.txt", "target.txt"]


def test_weights_of_any_name_are_saved(tmp_path):
    """save_npz writes every array, one named allow_pickle too (np.savez takes that name
    as its own keyword: the weight was not written)."""
    arrays = {"allow_pickle": np.arange(3, dtype=np.float32), "w": np.ones((2, 2))}
    path = tmp_path / "w.npz"
    write_atomically(path, lambda f: save_npz(f, arrays))
    with np.load(path) as z:
        assert sorted(z.files) == ["allow_pickle", "w"]
        for name, a in arrays.items():
            np.testing.assert_array_equal(z[name], a)
            assert z[name].dtype == a.dtype


def test_output_to_a_device_is_written_directly(capsys):
    assert dlpc_tool.main([MLP, "--emit=graph", "-o", os.devnull]) == 0
    assert Path(os.devnull).is_char_device()


def test_fold_weights_never_overwrites_the_weights_input(foldable, capsys):
    """`dlpc m --weights rw.npz --fold-weights -o rw.c` used to rewrite rw.npz."""
    model, weights = foldable
    before = weights.read_bytes()
    out = weights.with_suffix(".c")
    argv = [str(model), "--weights", str(weights), "--fold-weights", "-o", str(out)]
    assert dlpc_tool.main(argv) == 1
    err = one_line(capsys.readouterr().err)
    assert f"-o {out} (its folded weights {weights}) would overwrite {weights}" in err
    assert weights.read_bytes() == before and not out.exists()
    # the default (fold when known) finds the same clash once folding made new weights
    assert dlpc_tool.main(argv[:3] + ["-o", str(out)]) == 1
    assert "would overwrite" in one_line(capsys.readouterr().err)
    assert weights.read_bytes() == before and not out.exists()


def test_output_never_overwrites_the_model(foldable, capsys):
    model, weights = foldable
    before = model.read_text()
    assert (
        dlpc_tool.main([str(model), "--weights", str(weights), "--emit=graph", "-o", str(model)])
        == 1
    )
    assert f"would overwrite {model}, the model" in one_line(capsys.readouterr().err)
    assert model.read_text() == before


def test_every_extra_file_is_named(foldable, capsys):
    model, weights = foldable
    out = model.parent / "out.c"
    assert dlpc_tool.main([str(model), "--weights", str(weights), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    npz = out.with_suffix(".npz")
    assert err == f"dlpc: wrote {npz}: the 2 weights {out} needs\n"
    with np.load(npz) as data:
        assert sorted(data.files) == ["folded.0", "w"]
        w = np.load(weights)["w"]
        np.testing.assert_allclose(data["folded.0"], np.exp(w), rtol=1e-6)
    # to stdout, the folded weights cannot be written: said once, on stderr
    assert dlpc_tool.main([str(model), "--weights", str(weights), "--emit=graph"]) == 0
    captured = capsys.readouterr()
    assert 'graph.param "folded.0"' in captured.out
    assert captured.err.startswith("dlpc: note: the output needs 1 folded weight(s) (folded.0")
    # --no-fold-weights: the output computes them, nothing beside it
    out2 = model.parent / "plain.c"
    assert (
        dlpc_tool.main(
            [str(model), "--weights", str(weights), "--no-fold-weights", "-o", str(out2)]
        )
        == 0
    )
    assert capsys.readouterr().err == "" and not out2.with_suffix(".npz").exists()


def test_tune_plot_never_overwrites_the_log(tmp_path, capsys):
    model = tmp_path / "mm.dlpc"
    model.write_text(MATMUL_DLPC)
    log = tmp_path / "t.jsonl"
    log.write_text("")
    argv = [str(model), "--log", str(log), "--plot", str(log)]
    assert dlpc_tune.main(argv) == 1
    assert f"would overwrite {log}" in one_line(capsys.readouterr().err)
