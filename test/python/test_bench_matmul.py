"""bench/matmul.py's options: bad or empty values are argparse errors (one line, exit 2),
never a traceback; '' means none for --sizes as for --shapes."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_matmul", ROOT / "bench" / "matmul.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--sizes", "abc"], "argument --sizes: invalid size 'abc': not a positive integer"),
        (["--sizes", "256,0"], "argument --sizes: invalid size '0': not a positive integer"),
        (["--shapes", "3x4"], "argument --shapes: invalid shape '3x4': expected MxNxK"),
        (["--shapes", "3x-1x4"], "invalid dimension in shape '3x-1x4': '-1': not a positive"),
        (["--threads", ""], "argument --threads: expected at least one thread count"),
        (["--threads", "1,two"], "invalid thread count 'two': not a positive integer"),
        (["--tune-trials", ""], "argument --tune-trials: invalid integer ''"),
        (["--tune-trials", "-1"], "argument --tune-trials: -1 is below the minimum, 0"),
        (["--repeat", "0"], "argument --repeat: 0 is below the minimum, 1"),
        (["--sizes", "", "--no-conv"], "nothing to measure: --sizes and --shapes are empty"),
        (["--sizes", ",", "--shapes", "", "--no-conv"], "nothing to measure"),
    ],
)
def test_bad_options_are_one_line_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        _bench().main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1] and ": error: " in err[-1]
    assert not any("Traceback" in line for line in err)


def test_option_lists():
    bench = _bench()
    assert bench.size_list("") == [] and bench.size_list("256, 512,") == [256, 512]
    assert bench.shape_list("") == [] and bench.shape_list("101x256x256,8x9x10") == [
        (101, 256, 256),
        (8, 9, 10),
    ]
    assert bench.thread_list("1,2") == [1, 2]


def test_empty_sizes_run_the_shapes_only(capsys):
    """`--sizes ''` with a shape: one row, measured in the child processes the lists are
    passed to as text."""
    argv = ["--sizes", "", "--shapes", "8x8x8", "--no-conv", "--threads", "1", "--repeat", "1"]
    assert _bench().main(argv) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("matmul")]
    assert len(rows) == 1 and rows[0].split()[:2] == ["matmul", "8x8x8"]
