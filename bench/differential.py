"""The long differential run (issue 18): random well-typed .dlpc programs against a torch
interpretation of their AST, on every backend at -O0 and -O3, with fresh seeds.

    python bench/differential.py                       # 500 programs, numpy and C
    python bench/differential.py -n 2000 --targets numpy,c,opencl,dlp --max-steps 8
    python bench/differential.py --seed 7              # reproducible

Each failure prints the program (a .dlpc file it also writes under --out) and the first
mismatch; the exit status is the number of failures (capped at 100). The CI subset is
test/python/test_differential.py (derandomized, a few dozen cases).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, seed, settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test" / "python"))

from programs import assert_matches, programs, torch_eval  # noqa: E402

import dlpc  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=500, help="programs to try (default 500)")
    p.add_argument("--targets", default="numpy,c", help="comma-separated backends")
    p.add_argument("--levels", default="0,3", help="comma-separated -O levels")
    p.add_argument("--max-steps", type=int, default=6, help="lets per program")
    p.add_argument("--seed", type=int, default=None, help="hypothesis seed (default: random)")
    p.add_argument("--out", default="differential-failures", help="where failing programs go")
    args = p.parse_args(argv)
    targets, levels = args.targets.split(","), [int(x) for x in args.levels.split(",")]
    failures: list[tuple[str, str]] = []
    counts = {"programs": 0, "compiles": 0}
    start = time.perf_counter()

    @settings(
        max_examples=args.n,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[p for p in settings.default.phases if p.name != "shrink"],
    )
    @given(programs(max_steps=args.max_steps))
    def run(program):
        counts["programs"] += 1
        want = torch_eval(program)
        model = program.model()
        for target in targets:
            for level in levels:
                counts["compiles"] += 1
                # -O3 with NHWC forced on every conv (alone it converts where it pays)
                options = {"graph_layout": {"where": "all"}} if level == 3 else {}
                try:
                    with np.errstate(all="ignore"):
                        fn = dlpc.compile(model, target, opt_level=level, **options)
                        got = fn(*program.inputs)
                    assert_matches(got, want, what=f"{target} -O{level}")
                except Exception as e:  # noqa: BLE001 - every failure is reported
                    failures.append((program.source, f"{target} -O{level}: {e}"))
                    return

    if args.seed is not None:
        run = seed(args.seed)(run)
    run()
    elapsed = time.perf_counter() - start
    out = Path(args.out)
    for k, (source, message) in enumerate(failures):
        out.mkdir(exist_ok=True)
        (out / f"fail{k}.dlpc").write_text(source)
        print(f"--- {out / f'fail{k}.dlpc'}\n{source}{message.splitlines()[0][:300]}\n")
    print(
        f"{counts['programs']} programs, {counts['compiles']} compilations "
        f"({', '.join(targets)} at -O{'/-O'.join(map(str, levels))}): "
        f"{len(failures)} failures, {elapsed:.0f} s"
    )
    return min(len(failures), 100)


if __name__ == "__main__":
    sys.exit(main())
