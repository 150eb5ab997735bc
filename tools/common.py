"""What dlpc's command-line tools share: reading a model from a file of any name or from
stdin (`-`), checking the files an option names before any work is done, and never
writing over a file the tool reads.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dlpc.diagnostics import DlpcError, require, same_file
from dlpc.model import Model

FORMATS = ("dlpc", "onnx", "mlir")


def add_format_option(p) -> None:
    p.add_argument(
        "--format",
        choices=FORMATS,
        help="the model's format when its name cannot say it (stdin '-', another "
        "extension); default: from the extension (.dlpc, .onnx, .mlir)",
    )


def parse_dims(text: str | None, what: str, many: bool) -> dict:
    """`--dims seq=16,batch=2` -> {"seq": 16, ...}; `--buckets seq=8:16` -> {"seq": [8, 16]}."""
    out: dict = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        name, eq, value = part.partition("=")
        sizes = value.split(":") if many else [value]
        if not eq or not name or not all(v.strip().isdigit() and int(v) > 0 for v in sizes):
            form = "NAME=N:N:..." if many else "NAME=N"
            raise DlpcError(f"error: {what} entry '{part}' is not {form} (N > 0)")
        out[name.strip()] = [int(v) for v in sizes] if many else int(value)
    return out


def add_batch_option(p) -> None:
    p.add_argument(
        "--batch",
        type=int,
        metavar="N",
        help="bind a .dlpc model's named batch dim (x: f32[B, 784]) to N (dlpc-run: unbound "
        "it stays symbolic, one program for every batch; dlpc, dlpc-tune: unbound it is 1)",
    )


def model_format(path: str, fmt: str | None) -> str:
    """The format of the model at `path` (`-` is stdin): `--format`, else the extension."""
    if fmt:
        return fmt
    if path == "-":
        raise DlpcError("error: a model read from stdin ('-') needs --format dlpc|onnx|mlir")
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix in FORMATS:
        return suffix
    raise DlpcError(
        f"error: cannot tell the format of {path} from its extension; pass --format dlpc|onnx|mlir"
    )


def check_model_path(path: str, fmt: str | None) -> str:
    """Check the model argument (file present, format known) before any work."""
    if path != "-" and not Path(path).is_file():
        raise DlpcError(f"error: no such file: {path}")
    fmt = model_format(path, fmt)
    if fmt == "onnx":
        require("onnx", "onnx", "importing an ONNX model")
    return fmt


def load_model(
    path: str,
    fmt: str | None = None,
    weights: str | None = None,
    batch: int | None = None,
    dims: dict[str, int] | None = None,
    unbound: int | None = 1,
) -> Model:
    """`dlpc.load` for a tool's model argument: any file name with `--format`, and `-`
    for stdin (read whole; errors then name `<stdin>`). A .dlpc model's named dims are
    bound by `batch` (`--batch`: the named leading dims) and `dims` (by name); the others
    are `unbound` (None: they stay symbolic, one program for every value)."""
    from dlpc import api

    fmt = model_format(path, fmt)
    if batch is not None and (batch < 1 or fmt != "dlpc"):
        what = f"must be >= 1, got {batch}" if batch < 1 else f"applies to .dlpc models, not {fmt}"
        raise DlpcError(f"error: --batch {what}")
    if fmt == "dlpc" and path != "-":
        from dlpc.frontends.text import load_model as load_text

        return load_text(path, weights=weights, dims=dims, batch=batch, unbound=unbound)
    if path != "-":
        return api.load(path, weights=weights, format=fmt)
    data = sys.stdin.buffer.read()
    if fmt == "onnx":
        onnx = require("onnx", "onnx", "importing an ONNX model")
        from dlpc.frontends.onnx import load_model as load_onnx

        try:
            proto = onnx.load_model_from_string(data)
        except Exception as e:  # noqa: BLE001 - protobuf decode errors
            raise DlpcError(f"<stdin>: error: not a readable ONNX model: {e}") from None
        model = load_onnx(proto, weights=api.load_weights(weights) if weights else None)
        return Model(model.module, model.weights, "stdin", None)
    try:
        text = data.decode()
    except UnicodeDecodeError as e:
        raise DlpcError(f"<stdin>: error: not UTF-8 text: {e}") from None
    if fmt == "dlpc":
        from dlpc.frontends.text import parse_model

        return parse_model(
            text, "<stdin>", weights=weights, dims=dims, batch=batch, unbound=unbound
        )
    from dlpc.passes.pipeline import parse_module

    module = parse_module(text, "<stdin>")
    return Model(module, api.load_weights(weights) if weights else {}, "stdin", None)


def check_file(path: str | None, what: str) -> None:
    """An input file named by an option exists (checked before any work)."""
    if path is not None and not Path(path).is_file():
        raise DlpcError(f"error: no such {what}: {path}")


def check_output_dir(path: str | os.PathLike | None) -> None:
    if path is not None and not Path(path).parent.is_dir():
        raise DlpcError(f"error: cannot write {path}: no such directory {Path(path).parent}")


def model_inputs(model: str, weights: str | None, *others: str | None) -> list[tuple[str, str]]:
    """(path, what) of every file a tool reads: the model, the weights it names or the
    `<model>.npz` read beside it, and `others` (tuning log, target description, inputs)."""
    out = []
    if model != "-":
        out.append((model, "the model"))
        if weights is None:
            out.append((str(Path(model).with_suffix(".npz")), "the weights beside the model"))
    if weights is not None:
        out.append((weights, "the --weights input"))
    out += [(p, "an input") for p in others if p]
    return [(p, what) for p, what in out if Path(p).exists()]


def refuse_overwrite(output: str | os.PathLike, inputs: list[tuple[str, str]], role: str) -> None:
    """One-line error when `output` (what `role` writes) is one of the files read."""
    for path, what in inputs:
        if Path(output).exists() and same_file(output, path):
            raise DlpcError(
                f"error: {role} would overwrite {path}, {what}; choose another output name"
            )


def available_memory() -> int | None:
    """Bytes this process can still get: MemAvailable plus free swap from /proc/meminfo,
    capped by RLIMIT_AS; None when neither says (not Linux)."""
    import resource

    avail = None
    try:
        info = _kib_fields("/proc/meminfo")
        avail = info["MemAvailable"] + info.get("SwapFree", 0)
    except (OSError, KeyError, ValueError):
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:  # `ulimit -v`: what is left of the address space
        try:
            left = soft - _kib_fields("/proc/self/status")["VmSize"]
        except (OSError, KeyError, ValueError):
            left = soft
        avail = left if avail is None else min(avail, left)
    return avail


def _kib_fields(path: str) -> dict[str, int]:
    """The `Name: N kB` lines of a /proc file, in bytes."""
    fields = {}
    with open(path, encoding="ascii", errors="replace") as f:
        for line in f:
            name, _, value = line.partition(":")
            parts = value.split()
            if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
                fields[name] = int(parts[0]) * 1024
    return fields


def gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def check_memory(model: Model, what: str) -> None:
    """One-line error before any work when a run of `model` cannot fit: the numpy
    reference's live tensors at its peak (inputs and weights included, dead values
    freed) plus the compiled outputs it is compared with, against `available_memory()`."""
    from dlpc.reference import graph as ref

    func = ref.main_func(model.module)
    outputs = sum(ref.value_bytes(t) for t in func.function_type.outputs.data)
    need = ref.peak_bytes(model.module) + outputs
    avail = available_memory()
    if avail is not None and need > avail:
        raise DlpcError(
            f"error: {what} needs at least {gib(need)} (the reference's live tensors and the "
            f"outputs) but {gib(avail)} of memory are available"
        )
