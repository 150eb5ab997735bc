"""The one program against the program specialised per length, interleaved in one process:
the encoder of bench/dynamic.py at batch 1, per length the least mean of `--blocks`
blocks of 200 calls of each (us per call), taken in turn. A narrower, steadier figure
than bench/dynamic.py's medians on a shared machine.

    python bench/dynamic_pairs.py [--lengths 1,2,3,5,8,32,128] [--blocks 15] [--short 7]

`--short` is compile(short=) for the one program (0: none, its generic kernels only).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", default="1,2,3,5,8,32,128")
    p.add_argument("--blocks", type=int, default=15)
    p.add_argument("--short", type=int, default=7)
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import onnxruntime as ort
    from dynamic import export

    import dlpc
    from dlpc.api import compile as dlpc_compile
    from dlpc.frontends.onnx import load_model

    lengths = [int(v) for v in args.lengths.split(",")]
    path = str(Path(tempfile.mkdtemp(prefix="dlpc-pairs-")) / "encoder.onnx")
    export(path, 64, 4, 128)
    sess = ort.InferenceSession(path)
    one = dlpc_compile(
        dlpc.load(path), target="c", max_dims={"batch": 64, "seq": 128}, short=args.short
    )
    rng = np.random.default_rng(0)
    rows = []
    for n in lengths:
        x = rng.integers(0, 100, (1, n)).astype(np.int64)
        want = sess.run(None, {"ids": x})[0]
        static = dlpc_compile(load_model(path, input_shapes={"ids": (1, n)}), target="c")
        for fn in (one, static):
            err = float(np.abs(fn(x)[0] - want).max())
            assert err < 1e-4, (n, err)
        rows.append((n, x, static))
    for n, x, static in rows:
        best = {"one": 1e9, "spec": 1e9}
        for _ in range(args.blocks):
            for name, fn in (("one", one), ("spec", static)):
                t = time.perf_counter()
                for _ in range(200):
                    fn(x)
                best[name] = min(best[name], (time.perf_counter() - t) / 200 * 1e6)
        print(
            f"seq {n:>4}: one program {best['one']:8.2f} us  specialised {best['spec']:8.2f} us"
            f"  ratio {best['one'] / best['spec']:.2f}",
            flush=True,
        )
    print(f"stats {one.stats}; load {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
