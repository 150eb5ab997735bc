"""`dlpc-train`'s distributed options, kept out of the tool's own module:

    mpiexec -n 2 dlpc-train examples/mlp.dlpc --data digits --dp 2   # ranks started by you
    dlpc-train examples/mlp.dlpc --data digits --ranks 2              # mpiexec started here
    dlpc-train examples/mlp.dlpc --emit=graph --dp 2                  # each rank's program

Under `--dp N` every rank runs the tool; rank 0 alone prints, an error on any rank is
one line naming the rank and aborts them all (MPI_Abort), never a hang.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys

from dlpc.diagnostics import DlpcError, install_hint
from dlpc.dist.data_parallel import DataParallelTrainer, check_divides

TOOL = "dlpc-train"


def check(args, argv: list[str]) -> None:
    """Options checked before any rank starts."""
    n = args.ranks or args.dp
    if args.ranks and args.dp and args.ranks != args.dp:
        raise DlpcError(f"{TOOL}: error: --ranks {args.ranks} but --dp {args.dp}")
    check_divides(args.batch, n)
    if args.bucket_mb <= 0:
        raise DlpcError(f"{TOOL}: error: --bucket-mb must be > 0, got {args.bucket_mb}")
    explicit_target = any(a == "--target" or a.startswith("--target=") for a in argv)
    if explicit_target and args.target != "numpy":
        raise DlpcError(
            f"{TOOL}: error: --dp runs the step on --target numpy (comm ops through mpi4py), "
            f"not {args.target}"
        )
    args.target = "numpy"


def launch(args, argv: list[str]) -> int:
    """`--ranks N`: run this command under `mpiexec -n N` with `--dp N`."""
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        raise DlpcError(f"{TOOL}: error: --ranks needs mpiexec ({install_hint('dist')})")
    rest: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a == "--ranks":
            skip = True
        elif not a.startswith("--ranks="):
            rest.append(a)
    if not args.dp:
        rest += ["--dp", str(args.ranks)]
    command = [mpiexec, "-n", str(args.ranks), sys.executable, "-m", "dlpc.tools.dlpc_train"]
    # a core's share of BLAS threads per rank unless set: ranks x threads beyond the
    # cores spin against each other (mlp step on 2 ranks of 2 cores: 541 ms, 17 ms)
    env = dict(os.environ)
    share = str(max(1, (os.cpu_count() or 1) // args.ranks))
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        env.setdefault(name, share)
    return subprocess.call([*command, *rest], env=env)


def trainer_class(args):
    """The Trainer `dlpc-train` constructs under `--dp`."""
    return functools.partial(DataParallelTrainer, ranks=args.dp, bucket_mb=args.bucket_mb)


def train(args, data, train_fn) -> int:
    """Every rank runs `train_fn(args, data())` (the tool's training loop) with its
    trainer from `trainer_class`; ranks other than 0 are silent but for their error."""
    from dlpc.runtime import mpi

    def body() -> int:
        rank = mpi.world().rank
        if rank:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the rank's lifetime
            sys.stderr = sys.stdout
        return train_fn(args, data())

    return mpi.guard(body, TOOL)


def run(args, argv: list[str], load_data, train_fn, optimizer) -> int:
    """`dlpc-train` with `--dp` or `--ranks`: check, then launch, emit or train."""
    check(args, argv)
    if args.ranks:
        return launch(args, argv)
    if args.emit:
        return emit(args, optimizer(args, 1))
    if not args.data:
        raise DlpcError(f"{TOOL}: error: --data is required (digits or an .npz)")
    return train(args, lambda: load_data(args.data), train_fn)


def emit(args, optimizer) -> int:
    """Each rank's training step at the `--emit` stage: the step at the rank's share of
    the batch through graph-data-parallel (the ranks run the same program: SPMD)."""
    from xdsl.context import Context

    from dlpc import api
    from dlpc.passes import pipeline
    from dlpc.passes.dist.data_parallel import GraphDataParallel
    from dlpc.passes.train.losses import Loss
    from dlpc.passes.train.step import train_step_module

    n = args.dp
    model = api.load(args.model, weights=args.weights, batch=args.batch // n)
    dp = GraphDataParallel(ranks=n, bucket_mb=args.bucket_mb, batch=args.batch)
    step = train_step_module(
        model.module,
        Loss(args.loss, label_smoothing=args.label_smoothing),
        optimizer,
        model.weights,
        distribute=lambda module: dp.apply(Context(), module),
    )
    options = pipeline.PipelineOptions(
        opt_level=args.opt_level, schedule=pipeline.schedules_for(args.emit)
    )
    text = pipeline.compile_to(step.module, args.emit, options)
    comment = "#" if args.emit == "numpy" else "//"
    for rank in range(n):
        print(
            f"{comment} rank {rank} of {n}: data parallel, batch {args.batch // n} of {args.batch}"
        )
        print(text, end="")
    return 0
