"""Write `<model>.npz` beside each example from the seeded initialisers in its source.

    python examples/gen_weights.py                     # every examples/*.dlpc
    python examples/gen_weights.py examples/mlp.dlpc --out-dir /tmp/w

The arrays are exactly what `load_model` computes when no .npz is present (same seeds,
same numpy generator), so a generated file changes nothing; it exists to exercise and
demonstrate the weights-file path (`dlpc ... --weights model.npz`) and to hand the weights
to other tools.  The files are generated, not committed (examples/.gitignore).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from dlpc.diagnostics import run_guarded
from dlpc.frontends.text import load_model

HERE = Path(__file__).resolve().parent


def write_weights(source: Path, out_dir: Path | None = None) -> Path:
    """Bind every parameter from its initialiser (ignoring any .npz) and save them."""
    model = load_model(source, weights={})
    out = (out_dir or source.parent) / (source.stem + ".npz")
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(out, **model.weights)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=Path, help="default: every examples/*.dlpc")
    ap.add_argument("--out-dir", type=Path, help="default: beside each model")
    args = ap.parse_args(argv)
    for source in args.models or sorted(HERE.glob("*.dlpc")):
        out = write_weights(source, args.out_dir)
        count = sum(v.size for v in np.load(out).values())
        print(f"{out}: {count} values")
    return 0


if __name__ == "__main__":
    sys.exit(run_guarded(main, tool="gen_weights"))
