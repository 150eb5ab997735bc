"""DLP simulator figures against the roofline: per example and per kernel, the simulated
time beside its roofline bound and the ratio, at batch 1 and 32.

    python bench/dlp.py [--target-desc FILE|tiny|dlp] [--examples mlp,resnet]
                        [--batches 1,32] [--kernels] [--variants]

The bound of a kernel is the largest of
- compute at peak: its floating-point operations (2 per MAC), counted on its loop nest
  before loop-to-dlp (so a kernel left as scalar loops is charged its arithmetic, not
  its index computations), over the peak (every core's matrix unit busy);
- GDRAM: the bytes it must move, each GDRAM buffer it reads or writes once (its
  operands' sizes, or what it moved where that is less: a slice reads part of its
  source), over the GDRAM bandwidth;
- SRAM: the on-chip bytes it moved (SRAM and NRAM <-> WRAM copies) over the on-chip
  bandwidth of every core (the simulator's model charges them per task).
An example's bound is the sum over its kernels (they run one after the other). DMA
latency is not in the bound: a kernel of a few small copies is latency-bound and shows
it as its ratio.

Each example goes through the whole pipeline (`dlpc.compile(model, target="dlp")`: -O2
graph rewrites with weights folded, te, loop, loop-to-dlp). Times come from the
simulator's model (backends/runtime/dlp_sim.py), deterministic, not from the host clock;
the numerics of every run are checked against the numpy reference. `--variants` adds
ResNet's convolutions by lowering option (multi-core split, double buffering).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from xdsl.dialects import scf
from xdsl.dialects.builtin import AnyFloat, MemRefType, StringAttr
from xdsl.ir import Block

import dlpc
from dlpc.diagnostics import DlpcError
from dlpc.dialects import dlp
from dlpc.dialects.loop import ForOp, KernelOp
from dlpc.passes import pipeline
from dlpc.targets.dlp import DlpTarget, resolve

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ["mlp", "lenet", "resnet", "transformer", "mobilenet"]


@dataclass
class Row:
    """One kernel (or a whole example): simulated time against its roofline bound."""

    name: str
    seconds: float
    flops: float
    gdram_bytes: float  # compulsory: each GDRAM operand once
    moved_gdram: float  # what the simulator counted
    onchip_bytes: float
    desc: DlpTarget
    intrinsic: bool = True  # the kernel's compute ran on intrinsics (or had none to run)

    def bounds(self) -> dict[str, float]:
        d = self.desc
        return {
            "compute": self.flops / d.peak_ops_per_second(),
            "gdram": self.gdram_bytes / (d.gdram_bandwidth_gbs * 1e9),
            "sram": self.onchip_bytes / (d.sram_bandwidth_gbs * 1e9 * d.cores),
        }

    @property
    def bound(self) -> float:
        return max(self.bounds().values())

    @property
    def binding(self) -> str:
        b = self.bounds()
        return max(b, key=lambda k: b[k])

    @property
    def ratio(self) -> float:
        return self.seconds / self.bound if self.bound else math.inf


def block_flops(block: Block) -> float:
    """Floating-point operations one execution of `block` does (an scf.if: its larger
    branch)."""
    n = 0.0
    for op in block.ops:
        if isinstance(op, ForOp):
            n += op.trip_count * block_flops(op.block)
        elif isinstance(op, scf.IfOp):
            n += max((block_flops(r.block) for r in op.regions if r.blocks), default=0.0)
        elif op.name.startswith(("arith.", "math.")) and any(
            isinstance(r.type, AnyFloat) for r in op.results
        ):
            n += not op.name.startswith("arith.constant")
    return n


def kernel_flops(model) -> dict[str, float]:
    """Per loop.kernel of the model lowered for the dlp target (as `dlpc.compile` does,
    weights folded): its flops."""
    weights = dlpc.api.check_weights(model)
    options = pipeline.PipelineOptions(target="dlp")
    module = pipeline.lower(model.module.clone(), "loop", options, weights=weights)
    return {k.sym: block_flops(k.block) for k in module.walk() if isinstance(k, KernelOp)}


def kernel_operand_bytes(module) -> dict[str, float]:
    """Per dlp.kernel: the bytes of the GDRAM buffers its copies touch, each once per
    direction (a buffer both read and written counts twice)."""
    out: dict[str, float] = {}
    for k in module.walk():
        if not isinstance(k, dlp.KernelOp):
            continue
        inside = {id(op) for op in k.walk()}
        seen: set[tuple[int, str]] = set()
        total = 0.0
        for op in k.walk():
            if not isinstance(op, dlp.MemcpyOp | dlp.MemcpyAsyncOp | dlp.MemcpyStridedAsyncOp):
                continue
            for value, way in ((op.operands[0], "w"), (op.operands[2], "r")):
                owner = value.owner
                if id(owner) in inside or not isinstance(value.type, MemRefType):
                    continue  # a scratchpad buffer of the kernel
                if dlp.space_of(value.type) != "gdram" or (id(value), way) in seen:
                    continue
                seen.add((id(value), way))
                total += math.prod(value.type.get_shape()) * dlp.element_bytes(value.type)
        out[k.sym] = total
    return out


def run(name: str, desc: str | None, batch: int = 1, **options):
    """Compile an example (`dlpc.compile(target="dlp")`) at `batch`, run it on the
    simulator, check it against the reference; (per-kernel reports, dlp module)."""
    model = dlpc.load(ROOT / "examples" / f"{name}.dlpc", batch=batch)
    inputs = dlpc.api.random_inputs(model)
    if desc:
        options["target_desc"] = desc
    compiled = dlpc.compile(model, target="dlp", loop_to_dlp=options)
    outs = compiled(*inputs)
    for out, ref in zip(outs, dlpc.api.reference(model, inputs)):
        if not np.allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max()))):
            raise SystemExit(f"{name}: DLP output differs from the numpy reference")
    assert compiled.artifact is not None  # a dlp compile has its simulator function
    return compiled.artifact.report, compiled.lowered, model


def rows(name: str, desc: DlpTarget, desc_arg: str | None, batch: int) -> list[Row]:
    """One Row per kernel of the example."""
    reports, module, model = run(name, desc_arg, batch)
    compulsory = kernel_operand_bytes(module)
    flops = kernel_flops(model)
    for k in module.walk():  # a chain loop-to-dlp made one kernel: its members' flops
        members = k.attributes.get("dlpc.fused") if isinstance(k, dlp.KernelOp) else None
        if isinstance(members, StringAttr):
            flops[k.sym] = sum(flops.get(m, 0.0) for m in members.data.split(","))
    out = []
    for r in reports:
        lv = r.level_bytes()
        onchip = sum(n for key, n in r.bytes.items() if "gdram" not in key)
        out.append(
            Row(
                r.name,
                r.seconds,
                flops.get(r.name, r.intrinsic_ops),
                min(compulsory.get(r.name, lv["gdram"]), lv["gdram"]),
                lv["gdram"],
                onchip,
                desc,
                intrinsic=r.intrinsic_cycles > 0 or r.ops == 0,
            )
        )
    return out


def total(name: str, ks: list[Row], desc: DlpTarget) -> tuple[Row, float]:
    """The example as one row (sums), and the sum of the kernels' bounds."""
    row = Row(
        name,
        sum(k.seconds for k in ks),
        sum(k.flops for k in ks),
        sum(k.gdram_bytes for k in ks),
        sum(k.moved_gdram for k in ks),
        sum(k.onchip_bytes for k in ks),
        desc,
    )
    return row, sum(k.bound for k in ks)


HEAD = (
    f"{'example':<12} {'batch':>5} {'kernels':>7} {'sim us':>9} {'bound us':>9} {'x bound':>8} "
    f"{'binds':>8} {'Mflop':>9} {'GDRAM KiB':>10} {'moved KiB':>10} {'scalar':>6}"
)


def kernel_table(ks: list[Row]) -> str:
    lines = [
        f"  {'kernel':<30} {'sim us':>9} {'bound us':>9} {'x bound':>8} {'binds':>8} "
        f"{'Mflop':>9} {'GDRAM KiB':>10} {'moved KiB':>10}"
    ]
    for k in ks:
        lines.append(
            f"  {k.name[:30]:<30} {k.seconds * 1e6:>9.2f} {k.bound * 1e6:>9.2f} "
            f"{k.ratio:>8.2f} {k.binding:>8} {k.flops / 1e6:>9.2f} "
            f"{k.gdram_bytes / 1024:>10.1f} {k.moved_gdram / 1024:>10.1f}"
            + ("" if k.intrinsic else "  scalar loops")
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target-desc", default=None)
    ap.add_argument("--examples", default=",".join(EXAMPLES))
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--kernels", action="store_true", help="a table per example's kernels")
    ap.add_argument("--variants", action="store_true", help="ResNet by lowering option")
    args = ap.parse_args(argv)
    desc = resolve(args.target_desc)
    peak = desc.peak_ops_per_second()
    print(
        f"target {desc.name}: {desc.clusters} clusters x {desc.cores_per_cluster} cores, "
        f"peak {peak / 1e12:.2f} Tflop/s, GDRAM {desc.gdram_bandwidth_gbs} GB/s, "
        f"on-chip {desc.sram_bandwidth_gbs} GB/s per core\n"
    )
    print(HEAD)
    names = [n for n in args.examples.split(",") if n]
    batches = [int(b) for b in args.batches.split(",") if b]
    details = []
    for name in names:
        for batch in batches:
            try:
                ks = rows(name, desc, args.target_desc, batch)
            except DlpcError as e:  # e.g. a kernel that does not fit `tiny`
                print(f"{name:<12} {batch:>5} does not compile: {str(e).splitlines()[0]}")
                continue
            row, bound = total(name, ks, desc)
            ratio = row.seconds / bound if bound else math.inf
            scalar = sum(not k.intrinsic for k in ks)
            print(
                f"{name:<12} {batch:>5} {len(ks):>7} {row.seconds * 1e6:>9.1f} "
                f"{bound * 1e6:>9.1f} {ratio:>8.2f} {row.binding:>8} {row.flops / 1e6:>9.1f} "
                f"{row.gdram_bytes / 1024:>10.1f} {row.moved_gdram / 1024:>10.1f} {scalar:>6}",
                flush=True,
            )
            details.append((f"{name}, batch {batch}", ks))
    if args.kernels:
        for title, ks in details:
            print(f"\n{title}\n{kernel_table(ks)}")
    if args.variants and "resnet" in names:
        variants(args.target_desc)
    return 0


def variants(desc_arg: str | None) -> None:
    print("\nResNet convolutions: utilisation % (time us) by lowering option")
    options = {
        "single core, single buffer": dict(multicore=False, double_buffer=False),
        "single core, double buffer": dict(multicore=False, double_buffer=True),
        "multi-core, single buffer": dict(multicore=True, double_buffer=False),
        "multi-core, double buffer": dict(multicore=True, double_buffer=True),
    }
    results = {label: run("resnet", desc_arg, 1, **o)[0] for label, o in options.items()}
    convs = [r.name for r in results["multi-core, double buffer"] if "conv" in r.name]
    print(f"{'kernel':<22}" + "".join(f" {label:>28}" for label in options))
    for conv in convs:
        cells = []
        for label in options:
            rep = next(r for r in results[label] if r.name == conv)
            cells.append(f"{100 * rep.utilisation:.2f} ({rep.seconds * 1e6:.1f})")
        print(f"{conv:<22}" + "".join(f" {c:>28}" for c in cells))


if __name__ == "__main__":
    sys.exit(main())
