"""`dlpc-train`'s distributed options, kept out of the tool's own module:

    mpiexec -n 2 dlpc-train examples/mlp.dlpc --data digits --dp 2   # ranks started by you
    mpiexec -n 3 dlpc-train ... --ps 3 --ps-async --staleness 1 --optimizer sgd --lr 0.1
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
from dlpc.dist.data_parallel import DataParallelTrainer, ParameterServerTrainer, check_divides

TOOL = "dlpc-train"


def strategy(args) -> tuple[str, int]:
    """("dp" | "tp" | "pp" | "ps", ranks) of the command line (one strategy; --ranks
    alone: dp)."""
    names = ("dp", "tp", "pp", "ps")
    given = [(name, getattr(args, name)) for name in names if getattr(args, name, 0)]
    if len(given) > 1:
        names = " and ".join(f"--{n} {v}" for n, v in given)
        raise DlpcError(f"{TOOL}: error: {names}: one strategy at a time (no hybrids yet)")
    name, n = given[0] if given else ("dp", args.ranks)
    if args.ranks and args.ranks != n:
        raise DlpcError(f"{TOOL}: error: --ranks {args.ranks} but --{name} {n}")
    return name, n


def check(args, argv: list[str]) -> None:
    """Options checked before any rank starts."""
    name, n = strategy(args)
    if n < 1:
        raise DlpcError(f"{TOOL}: error: --{name} must be >= 1, got {n}")
    if args.ps_async or args.staleness:
        check_async(args, name, n)
    elif name in ("dp", "ps"):
        check_divides(args.batch, n)
    if args.bucket_mb <= 0:
        raise DlpcError(f"{TOOL}: error: --bucket-mb must be > 0, got {args.bucket_mb}")
    if name == "pp" and (args.microbatches < 1 or args.batch % args.microbatches):
        raise DlpcError(
            f"{TOOL}: error: batch size {args.batch} does not divide into "
            f"{args.microbatches} micro-batches"
        )
    explicit_target = any(a == "--target" or a.startswith("--target=") for a in argv)
    if explicit_target and args.target not in ("numpy", "c"):
        raise DlpcError(
            f"{TOOL}: error: --{name} runs the step on --target numpy or c (comm ops through "
            f"mpi4py), not {args.target}"
        )
    if not explicit_target:
        args.target = "numpy"


def check_async(args, name: str, n: int) -> None:
    """`--ps N --ps-async [--staleness S]`: a server and N - 1 workers running plain SGD."""
    if not args.ps_async:
        raise DlpcError(f"{TOOL}: error: --staleness applies to --ps-async")
    if name != "ps":
        raise DlpcError(f"{TOOL}: error: --ps-async needs --ps N (a server and N - 1 workers)")
    if n < 2:
        raise DlpcError(f"{TOOL}: error: --ps-async needs --ps 2 or more (1 server), got {n}")
    if args.staleness < 0:
        raise DlpcError(f"{TOOL}: error: --staleness must be >= 0, got {args.staleness}")
    if args.batch % (n - 1):
        raise DlpcError(
            f"{TOOL}: error: batch size {args.batch} does not divide by {n - 1} workers "
            f"(--ps {n}: rank 0 serves)"
        )
    plain = {
        "--optimizer": args.optimizer != "sgd",
        "--momentum": args.momentum,
        "--nesterov": args.nesterov,
        "--weight-decay": args.weight_decay,
        "--schedule": args.schedule != "constant",
        "--clip-norm": args.clip_norm is not None,
        "--accumulate": args.accumulate != 1,
        "--freeze": args.freeze,
        "--keep-last": args.keep_last,
        "--emit": args.emit,
    }
    given = next((option for option, set_ in plain.items() if set_), None)
    if given:
        raise DlpcError(
            f"{TOOL}: error: --ps-async runs plain SGD on the server (--optimizer sgd, a "
            f"constant --lr), not with {given}"
            + (f" {args.optimizer}" if given == "--optimizer" else "")
        )


def launch(args, argv: list[str]) -> int:
    """`--ranks N`: run this command under `mpiexec -n N` (with `--dp N` if no strategy
    is given)."""
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
    if not (args.dp or args.tp or args.pp or args.ps):
        rest += ["--dp", str(args.ranks)]
    command = [mpiexec, "-n", str(args.ranks), sys.executable, "-m", "dlpc.tools.dlpc_train"]
    # a core's share of BLAS threads per rank unless set: ranks x threads beyond the
    # cores spin against each other (figures: docs/distributed.md)
    env = dict(os.environ)
    share = str(max(1, (os.cpu_count() or 1) // args.ranks))
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        env.setdefault(name, share)
    return subprocess.call([*command, *rest], env=env)


def trainer_class(args):
    """The Trainer `dlpc-train` constructs under `--dp`, `--tp` or `--pp`."""
    name, n = strategy(args)
    if name == "tp":
        from dlpc.dist.tensor_parallel import TensorParallelTrainer

        return functools.partial(TensorParallelTrainer, ranks=n)
    if name == "pp":
        from dlpc.dist.pipeline import PipelineTrainer

        return functools.partial(
            PipelineTrainer, stages=n, microbatches=args.microbatches, schedule=args.pp_schedule
        )
    if name == "ps" and args.ps_async:
        from dlpc.dist.parameter_server import AsyncParameterServerTrainer

        return functools.partial(AsyncParameterServerTrainer, ranks=n, staleness=args.staleness)
    if name == "ps":
        return functools.partial(ParameterServerTrainer, ranks=n)
    return functools.partial(DataParallelTrainer, ranks=n, bucket_mb=args.bucket_mb)


def train(args, data, train_fn) -> int:
    """Every rank runs `train_fn(args, data())` (the tool's training loop) with its
    trainer from `trainer_class`; ranks other than 0 are silent but for their error."""
    from dlpc.runtime import mpi

    def body() -> int:
        rank = mpi.world().rank
        _limit_blas_threads()
        if rank:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the rank's lifetime
            sys.stderr = sys.stdout
        return train_fn(args, data())

    return mpi.guard(body, TOOL)


def _limit_blas_threads() -> None:
    """Under a bare `mpiexec -n N` (no OPENBLAS_NUM_THREADS / OMP_NUM_THREADS set; `--ranks`
    sets them before the ranks start) each rank takes a core's share of BLAS threads: the
    ranks of one host share its cores, and more threads than cores spin against each other
    (figures: docs/distributed.md). A collective (every rank counts its host's ranks)."""
    if any(name in os.environ for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")):
        return
    from dlpc.runtime import mpi

    comm = mpi.world()
    local = comm.world.Split_type(comm.MPI.COMM_TYPE_SHARED)
    share = max(1, (os.cpu_count() or 1) // local.Get_size())
    local.Free()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # scikit-learn brings it; without it BLAS keeps its own count
        return
    threadpool_limits(limits=share, user_api="blas")


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
    """Each rank's training step at the `--emit` stage: dp (ps), the step at the rank's
    share of the batch through graph-data-parallel (graph-parameter-server); tp, through graph-tensor-parallel (the ranks
    run the same program on their shards); pp, each stage's program."""
    from xdsl.context import Context

    from dlpc import api
    from dlpc.passes import pipeline
    from dlpc.passes.dist.data_parallel import GraphDataParallel
    from dlpc.passes.dist.tensor_parallel import (
        shard_weights,
        tensor_parallel,
        tensor_parallel_grads,
    )
    from dlpc.passes.train.losses import Loss
    from dlpc.passes.train.step import train_step_module

    name, n = strategy(args)
    loss = Loss(args.loss, label_smoothing=args.label_smoothing)
    options = pipeline.PipelineOptions(
        opt_level=args.opt_level, schedule=pipeline.schedules_for(args.emit)
    )
    comment = "#" if args.emit == "numpy" else "//"
    for rank in range(n):
        if name == "dp":
            model = api.load(args.model, weights=args.weights, batch=args.batch // n)
            dp = GraphDataParallel(ranks=n, bucket_mb=args.bucket_mb, batch=args.batch)
            module, weights = model.module, model.weights
            hook = lambda m, dp=dp: dp.apply(Context(), m)  # noqa: E731
            what = f"data parallel, batch {args.batch // n} of {args.batch}"
        elif name == "ps":
            from dlpc.passes.dist.parameter_server import parameter_server

            model = api.load(args.model, weights=args.weights, batch=args.batch // n)
            module, weights = model.module, model.weights
            hook = lambda m: parameter_server(m, n, args.batch, 0)  # noqa: E731
            what = f"{'parameter server and ' if rank == 0 else ''}worker, batch {args.batch // n}"
        elif name == "tp":
            model = api.load(args.model, weights=args.weights, batch=args.batch)
            module = model.module.clone()
            sharded = tensor_parallel(module, n)
            weights = shard_weights(model.weights, sharded, rank, n)
            hook = lambda m: tensor_parallel_grads(m, n)  # noqa: E731
            what = f"tensor parallel, shards of {', '.join(sharded)}"
        else:
            from dlpc.dist.pipeline import stage_hook

            micro = api.load(
                args.model, weights=args.weights, batch=args.batch // args.microbatches
            )
            hook, owner = stage_hook(
                micro.module, loss, n, args.microbatches, args.pp_schedule, rank
            )
            model = api.load(args.model, weights=args.weights, batch=args.batch)
            module, weights = model.module, model.weights
            mine = [p for p, s in owner.items() if s == rank]
            what = f"pipeline stage {rank} ({', '.join(mine) or 'no params'}), {args.pp_schedule}"
        step = train_step_module(module, loss, optimizer, weights, distribute=hook)
        text = pipeline.compile_to(step.module, args.emit, options)
        print(f"{comment} rank {rank} of {n}: {what}")
        print(text, end="")
    return 0
