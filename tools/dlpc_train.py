"""dlpc-train: compile a model's training step and train it on a data set.

    dlpc-train examples/mlp.dlpc --data digits --epochs 10
    dlpc-train examples/lenet.dlpc --data digits --optimizer sgd --lr 0.05 --momentum 0.9 \\
        --batch 32 --target c --save lenet.npz --plot curve.png
    dlpc-train model.dlpc --data mine.npz --save w.npz --resume      # continue a run

`--data digits` is scikit-learn's bundled 8x8 digits (1797 images, shipped in its wheel;
nothing is downloaded), scaled to [0, 1] and split with a fixed seed into train (72 %),
validation (8 %) and test (20 %) sets; any `.npz` with `x` and `y` arrays (and optionally
`x_test`, `y_test`) works too. Samples are fitted to the model's input where that is well
defined (said on stderr): flattened or reshaped when the sizes agree, 8x8 images resized
(bilinear) to a model's 28x28 (the MNIST-sized MLP and LeNet); otherwise a one-line error
names both shapes.

Per epoch: a progress bar on stderr (loss, accuracy, samples/s; one line per epoch when
stderr is not a terminal) and the validation accuracy. `--save` writes the weights and the
optimizer state after every epoch; `--resume` continues from them up to `--epochs` in all,
bit for bit as an uninterrupted run would. `--plot` writes the loss and accuracy curves as
a PNG. `--stats` says how many bytes of activations the backward keeps alive (and with
graph-autodiff's recompute). The last line is `test accuracy: NN.N %`.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import numpy as np

from dlpc.diagnostics import DlpcError, ToolArgumentParser, install_hint, run_guarded

DATA_SPLIT_SEED = 0


def build_parser() -> ToolArgumentParser:
    from dlpc.passes.train.losses import KINDS
    from dlpc.passes.train.optim import OPTIMIZERS, SCHEDULES

    p = ToolArgumentParser(
        prog="dlpc-train",
        description="Compile the training step of a model and train it on a data set.",
        example="dlpc-train examples/mlp.dlpc --data digits --epochs 10",
    )
    p.add_argument("model", help="the model (.dlpc with a named batch dim, .onnx or .mlir)")
    p.add_argument(
        "--emit",
        choices=("graph", "te", "loop", "dlp", "numpy", "c", "opencl", "dlp-c"),
        help="print the training step at this stage (as `dlpc --emit=`) instead of training",
    )
    p.add_argument(
        "--data",
        help="'digits' (scikit-learn's bundled 8x8 digits) or an .npz with x and y arrays "
        "(and optionally x_test, y_test)",
    )
    p.add_argument("--loss", default="cross_entropy", choices=KINDS, help="the loss function")
    p.add_argument(
        "--label-smoothing", type=float, default=0.0, help="cross-entropy label smoothing"
    )
    p.add_argument("--optimizer", default="adam", choices=list(OPTIMIZERS), help="optimizer")
    p.add_argument("--lr", type=float, default=1e-3, help="learning rate (default 1e-3)")
    p.add_argument("--momentum", type=float, default=0.0, help="SGD momentum")
    p.add_argument("--nesterov", action="store_true", help="SGD with Nesterov momentum")
    p.add_argument("--weight-decay", type=float, default=None, help="weight decay")
    p.add_argument(
        "--schedule", default="constant", choices=SCHEDULES, help="learning-rate schedule"
    )
    p.add_argument(
        "--warmup", type=int, default=0, help="warm-up steps (warmup, warmup_cosine schedules)"
    )
    p.add_argument(
        "--step-size",
        type=int,
        default=None,
        help="steps between lr decays of the step schedule (default: a third of the run)",
    )
    p.add_argument(
        "--gamma", type=float, default=0.1, help="lr factor per decay (step schedule; 0.1)"
    )
    p.add_argument(
        "--accumulate",
        type=int,
        default=1,
        metavar="K",
        help="one update per K batches, on their mean gradient (default 1)",
    )
    p.add_argument(
        "--keep-last",
        action="store_true",
        help="train on the last partial batch of an epoch too (default: left out)",
    )
    p.add_argument(
        "--bn-momentum", type=float, default=0.1, help="batch-norm running-stat momentum (0.1)"
    )
    p.add_argument(
        "--freeze",
        action="append",
        default=[],
        metavar="PATTERN",
        help="do not train the params matching this name or glob pattern (repeatable)",
    )
    p.add_argument(
        "--clip-norm", type=float, default=None, help="clip gradients to this global L2 norm"
    )
    p.add_argument("--epochs", type=int, default=10, help="epochs in all (default 10)")
    p.add_argument("--batch", type=int, default=32, help="batch size (default 32)")
    p.add_argument(
        "--target",
        default="c",
        choices=("numpy", "c", "opencl", "dlp"),
        help="where the training step runs (default c)",
    )
    p.add_argument("-O", dest="opt_level", type=int, default=2, choices=range(4), help="-O0..-O3")
    p.add_argument("--weights", help="initial weights (.npz; default: the model's own)")
    p.add_argument("--save", help="write weights and optimizer state here (.npz) every epoch")
    p.add_argument("--resume", action="store_true", help="continue from the --save file")
    p.add_argument("--plot", help="write the loss/accuracy curves to this PNG")
    p.add_argument("--seed", type=int, default=0, help="seed of the per-epoch shuffles (default 0)")
    p.add_argument(
        "--dp", type=int, default=0, help="data parallel on N MPI ranks (under mpiexec -n N)"
    )
    p.add_argument("--ranks", type=int, default=0, help="start N ranks with mpiexec (with --dp)")
    p.add_argument(
        "--bucket-mb", type=float, default=25.0, help="--dp: all-reduce bucket size (MiB)"
    )
    p.add_argument("--tp", type=int, default=0, help="tensor parallel on N MPI ranks")
    p.add_argument("--pp", type=int, default=0, help="pipeline of N stages on N MPI ranks")
    p.add_argument("--microbatches", type=int, default=2, help="--pp: micro-batches a batch")
    p.add_argument(
        "--ps", type=int, default=0, help="synchronous parameter server (rank 0) on N MPI ranks"
    )
    p.add_argument(
        "--ps-async",
        action="store_true",
        help="--ps: asynchronous server on rank 0 (N - 1 workers; SGD)",
    )
    p.add_argument(
        "--staleness", type=int, default=0, help="--ps-async: staleness bound (default 0)"
    )
    p.add_argument(
        "--pp-schedule", default="1f1b", choices=("gpipe", "1f1b", "2bw"), help="--pp: schedule"
    )
    p.add_argument(
        "--stats",
        action="store_true",
        help="say how many bytes of activations the backward keeps alive (with and without "
        "graph-autodiff's recompute)",
    )
    return p


# ------------------------------------------------------------------------ data


def load_data(spec: str):
    """(x_train, y_train, x_val, y_val, x_test, y_test, name)."""
    if spec == "digits":
        try:
            from sklearn.datasets import load_digits
            from sklearn.utils import Bunch
        except ImportError:
            raise DlpcError(
                f"error: --data digits needs scikit-learn ({install_hint('train')})"
            ) from None
        digits = load_digits()
        assert isinstance(digits, Bunch)  # (a tuple only with return_X_y=True)
        x = (digits.images / 16.0).astype(np.float32)  # [1797, 8, 8] in [0, 1]
        y = digits.target.astype(np.int64)
        order = np.random.default_rng(DATA_SPLIT_SEED).permutation(len(x))
        n_test = len(x) // 5
        n_val = (len(x) - n_test) // 10
        test, val, train = np.split(order, [n_test, n_test + n_val])
        return x[train], y[train], x[val], y[val], x[test], y[test], "digits"
    path = Path(spec)
    if path.suffix != ".npz":
        raise DlpcError(f"error: --data must be 'digits' or an .npz file, got '{spec}'")
    if not path.is_file():
        raise DlpcError(f"error: no such data file: {path}")
    # (an empty file is an EOFError, a damaged archive a BadZipFile)
    unreadable = (OSError, ValueError, EOFError, zipfile.BadZipFile)
    try:
        data = np.load(path, allow_pickle=False)
    except unreadable as e:
        raise DlpcError(f"error: cannot read data {path}: {e}") from None
    if not isinstance(data, np.lib.npyio.NpzFile):  # (one .npy array, named .npz)
        raise DlpcError(f"error: data {path} must be an .npz archive of named arrays")
    with data:
        try:
            arrays = {k: data[k] for k in data.files}
        except unreadable as e:
            raise DlpcError(f"error: cannot read data {path}: {e}") from None
    for key in ("x", "y"):
        if key not in arrays:
            raise DlpcError(f"error: data {path} has no '{key}' array")
    x, y = arrays["x"], arrays["y"]
    if len(x) != len(y):
        raise DlpcError(f"error: data {path} has {len(x)} samples in x but {len(y)} in y")
    order = np.random.default_rng(DATA_SPLIT_SEED).permutation(len(x))
    if "x_test" in arrays and "y_test" in arrays:
        n_val = len(x) // 10
        val, train = order[:n_val], order[n_val:]
        xt, yt = arrays["x_test"], arrays["y_test"]
    else:
        n_test = len(x) // 5
        n_val = (len(x) - n_test) // 10
        test, val, train = np.split(order, [n_test, n_test + n_val])
        xt, yt = x[test], y[test]
    return x[train], y[train], x[val], y[val], xt, yt, path.name


def resize_bilinear(images: np.ndarray, h: int, w: int) -> np.ndarray:
    """[..., H, W] -> [..., h, w] by bilinear interpolation (align_corners=False)."""
    H, W = images.shape[-2:]

    def axis(n_out: int, n_in: int):
        pos = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
        lo = np.floor(pos).astype(int)
        hi = np.minimum(lo + 1, n_in - 1)
        return lo, hi, (pos - lo).astype(np.float32)

    r0, r1, fr = axis(h, H)
    c0, c1, fc = axis(w, W)
    rows = images[..., r0, :] * (1 - fr)[:, None] + images[..., r1, :] * fr[:, None]
    return rows[..., c0] * (1 - fc) + rows[..., c1] * fc


def fit_to_input(x: np.ndarray, shape: tuple[int, ...], what: str, say) -> np.ndarray:
    """Samples `x` [N, ...] fitted to the model's per-sample input `shape`."""
    sample = x.shape[1:]
    if sample == shape:
        return x
    size = int(np.prod(shape))
    if int(np.prod(sample)) == size:
        say(f"{what}: samples {_fmt(sample)} reshaped to the model's input {_fmt(shape)}")
        return x.reshape(len(x), *shape)
    spatial = [d for d in shape if d != 1]
    if len(sample) == 2 and (len(spatial) == 2 or (len(spatial) == 1 and _square(size))):
        side = (spatial[0], spatial[1]) if len(spatial) == 2 else (_square(size),) * 2
        say(
            f"{what}: {_fmt(sample)} images resized to {side[0]}x{side[1]} (bilinear) for "
            f"the model's input {_fmt(shape)}"
        )
        return resize_bilinear(x, *side).reshape(len(x), *shape).astype(np.float32)
    raise DlpcError(
        f"error: {what} samples have shape {_fmt(sample)} but the model's input is "
        f"{_fmt(shape)} per sample"
    )


def _square(n: int) -> int:
    r = int(round(n**0.5))
    return r if r * r == n else 0


def _fmt(shape) -> str:
    return "x".join(str(d) for d in shape) or "scalar"


# ------------------------------------------------------------------------ plot


def plot(history: dict[str, list[float]], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = np.arange(1, len(history["loss"]) + 1)
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.5))
    a.plot(epochs, history["loss"], marker="o")
    a.set_xlabel("epoch")
    a.set_ylabel("training loss")
    a.set_yscale("log")
    a.grid(True, alpha=0.3)
    b.plot(epochs, np.array(history["accuracy"]) * 100, marker="o", label="train")
    b.plot(epochs, np.array(history["val_accuracy"]) * 100, marker="s", label="validation")
    b.set_xlabel("epoch")
    b.set_ylabel("accuracy (%)")
    b.legend()
    b.grid(True, alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    def body() -> int:
        args = build_parser().parse_args(argv)
        for name, value, low in (("--epochs", args.epochs, 1), ("--batch", args.batch, 1)):
            if value < low:
                raise DlpcError(f"dlpc-train: error: {name} must be >= {low}, got {value}")
        if not args.lr > 0:
            raise DlpcError(f"dlpc-train: error: --lr must be > 0, got {args.lr}")
        if args.resume and not args.save:
            raise DlpcError("dlpc-train: error: --resume needs --save (the file to resume)")
        if args.resume and not Path(args.save).is_file():
            raise DlpcError(f"dlpc-train: error: --resume: no such file: {args.save}")
        if args.save and not args.save.endswith(".npz"):
            raise DlpcError(f"dlpc-train: error: --save must name an .npz file, got {args.save}")
        if args.plot:
            try:
                import matplotlib  # noqa: F401
            except ImportError:
                raise DlpcError(
                    f"dlpc-train: error: --plot needs matplotlib ({install_hint('train')})"
                ) from None
        if not Path(args.model).is_file():
            raise DlpcError(f"error: no such file: {args.model}")
        if args.momentum and args.optimizer not in ("sgd", "rmsprop", "lars"):
            raise DlpcError(
                "dlpc-train: error: --momentum applies to --optimizer sgd, rmsprop, lars"
            )
        if args.accumulate < 1:
            raise DlpcError(f"dlpc-train: error: --accumulate must be >= 1, got {args.accumulate}")
        if args.step_size is not None and args.step_size < 1:
            raise DlpcError(f"dlpc-train: error: --step-size must be >= 1, got {args.step_size}")
        if args.schedule in ("warmup", "warmup_cosine") and args.warmup < 1:
            raise DlpcError(f"dlpc-train: error: --schedule {args.schedule} needs --warmup N")
        distributed = (args.dp, args.ranks, args.tp, args.pp, args.ps, args.ps_async)
        if any(distributed) or args.staleness:  # dlpc.dist (distributed.md)
            from dlpc.dist import cli as dist

            line = argv if argv is not None else sys.argv[1:]
            return dist.run(args, line, load_data, train, _optimizer)
        if args.emit:
            return emit_step(args)
        if not args.data:
            raise DlpcError("dlpc-train: error: --data is required (digits or an .npz)")
        data = load_data(args.data)  # before compiling: a bad data set fails fast
        return train(args, data)

    return run_guarded(body, tool="dlpc-train")


def emit_step(args) -> int:
    """Print the whole training step (forward, loss, backward, update) at a stage."""
    import dlpc.train as dlpc_train
    from dlpc import api
    from dlpc.passes import pipeline
    from dlpc.passes.train.losses import Loss

    model = api.load(args.model, weights=args.weights, batch=args.batch)
    step_model, _ = dlpc_train.train_step_model(
        model,
        Loss(args.loss, label_smoothing=args.label_smoothing),
        _optimizer(args, 1),
        frozen=args.freeze,
    )
    options = pipeline.PipelineOptions(
        opt_level=args.opt_level, schedule=pipeline.schedules_for(args.emit)
    )
    print(pipeline.compile_to(step_model.module, args.emit, options), end="")
    return 0


def _trainer_class(args):
    """dlpc.train.Trainer, or under --dp / --tp / --pp the distributed one."""
    if any(getattr(args, name, 0) for name in ("dp", "tp", "pp", "ps")):
        from dlpc.dist import cli as dist

        return dist.trainer_class(args)
    import dlpc.train as dlpc_train

    return dlpc_train.Trainer


def activation_stats(step) -> str:
    """The `--stats` line: what the step's backward keeps alive of the forward."""
    kib = lambda n: f"{n / 1024:.1f} KiB"  # noqa: E731
    plain, checkpointed = (
        (step.kept_bytes_other, step.kept_bytes)
        if step.recompute
        else (step.kept_bytes, step.kept_bytes_other)
    )
    return (
        f"backward keeps {kib(plain)} of activations alive ({kib(checkpointed)} with "
        f"graph-autodiff recompute)"
    )


def _optimizer(args, total_steps: int):
    from dlpc.passes.train import optim

    schedule = optim.Schedule(
        args.schedule,
        total_steps=total_steps,
        warmup_steps=args.warmup,
        step_size=args.step_size or max(total_steps // 3, 1),
        gamma=args.gamma,
    )
    options = {"lr": args.lr, "schedule": schedule, "clip_norm": args.clip_norm}
    if args.weight_decay is not None:
        options["weight_decay"] = args.weight_decay
    if args.optimizer == "sgd":
        options.update(momentum=args.momentum, nesterov=args.nesterov)
    elif args.optimizer == "rmsprop":
        options.update(momentum=args.momentum)
    elif args.optimizer == "lars" and args.momentum:  # else LARS's own 0.9
        options.update(momentum=args.momentum)
    return optim.make_optimizer(args.optimizer, **options)


def train(args, data) -> int:
    from dlpc import api
    from dlpc.passes.train.losses import Loss
    from dlpc.reference import graph as ref

    x_train, y_train, x_val, y_val, x_test, y_test, data_name = data
    say = lambda msg: print(f"dlpc-train: {msg}", file=sys.stderr)

    probe = api.load(args.model, weights=args.weights, batch=1)
    arg0 = ref.main_func(probe.module).args[0]
    shape = ref.graph.shape_of(arg0)[1:]
    x_train = fit_to_input(x_train, shape, data_name, say)
    x_val = fit_to_input(x_val, shape, f"{data_name} validation", lambda m: None)
    x_test = fit_to_input(x_test, shape, f"{data_name} test", lambda m: None)
    if len(x_train) < args.batch:
        raise DlpcError(
            f"error: {len(x_train)} training samples are fewer than one batch of {args.batch}"
        )
    steps_per_epoch = len(x_train) // args.batch
    loss = Loss(args.loss, label_smoothing=args.label_smoothing)
    optimizer = _optimizer(args, max(steps_per_epoch // args.accumulate, 1) * args.epochs)
    model = api.load(args.model, weights=args.weights, batch=args.batch)
    trainer = _trainer_class(args)(
        model,
        loss,
        optimizer,
        batch_size=args.batch,
        target=args.target,
        opt_level=args.opt_level,
        frozen=args.freeze,
        accumulate=args.accumulate,
        bn_momentum=args.bn_momentum,
    )
    if args.stats:
        say(activation_stats(trainer.spec))
    history = {"loss": [], "accuracy": [], "val_accuracy": []}
    if args.resume:
        trainer.load(args.save)
        say(f"resumed from {args.save} at epoch {trainer.epoch} (step {trainer.steps_done})")
        saved_history = Path(args.save).with_suffix(".history.npz")
        if saved_history.is_file():
            with np.load(saved_history) as f:
                history = {k: list(f[k]) for k in history if k in f.files}
    tty = sys.stderr.isatty()
    bar = None

    def progress(event: str, info: dict) -> None:
        nonlocal bar
        if event == "batch" and tty:
            if bar is None:
                from tqdm import tqdm

                bar = tqdm(
                    total=info["batches"],
                    desc=f"epoch {info['epoch'] + 1}/{args.epochs}",
                    file=sys.stderr,
                    leave=True,
                    unit="batch",
                )
            acc = info["accuracy"]
            bar.set_postfix_str(
                f"loss {info['mean_loss']:.4f}"
                + (f" acc {acc * 100:.1f}%" if acc is not None else "")
                + f" {info['samples_per_s']:.0f} samples/s",
                refresh=False,
            )
            bar.update(1)
        elif event == "epoch":
            if bar is not None:
                bar.close()
                bar = None
            n = steps_per_epoch * args.batch
            acc = info["accuracy"]
            val = info["val_accuracy"]
            mse = info.get("val_mse", float("nan"))
            print(
                f"epoch {info['epoch'] + 1}/{args.epochs}: loss {info['loss']:.4f}"
                + (f", accuracy {acc * 100:.1f} %" if acc == acc else "")
                + (f", validation accuracy {val * 100:.1f} %" if val == val else "")
                + (f", validation mse {mse:.4g}" if mse == mse else "")
                + f", {n / max(info['seconds'], 1e-9):.0f} samples/s",
                file=sys.stderr if not tty else sys.stdout,
                flush=True,
            )

    while trainer.epoch < args.epochs:
        h = trainer.fit(
            x_train,
            y_train,
            epochs=1,
            validation=(x_val, y_val) if len(x_val) else None,
            seed=args.seed,
            callback=progress,
            drop_last=not args.keep_last,
        )
        for k in history:
            history[k].extend(h[k])
        if args.save:
            trainer.save(args.save)
            from dlpc.diagnostics import save_npz, write_atomically

            def write_history(f):
                save_npz(f, {k: np.asarray(v, np.float64) for k, v in history.items()})

            write_atomically(Path(args.save).with_suffix(".history.npz"), write_history)
    if args.plot:
        if history["loss"]:
            plot(history, args.plot, f"dlpc-train {Path(args.model).name} on {data_name}")
            say(f"plot: {args.plot}")
    if args.save:
        say(f"saved: {args.save}")
    scores = trainer.evaluate(x_test, y_test)
    if loss.metric == "accuracy":
        print(f"test accuracy: {scores['accuracy'] * 100:.1f} %")
    else:
        print(f"test mse: {scores['mse']:.6g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
