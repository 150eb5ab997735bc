"""Convolution and pooling: a window slid over NCHW planes, one intrinsic per tile.

Both match `acc = init; for (ci,) kh, kw: acc = combine(acc, cell); out[c, oh, ow] =
epilogue(acc)` over three unit-stride spatial loops, where the cell reads
`x[0, c, oh*sh - pt + kh, ow*sw - pl + kw]`, guarded by `scf.if` (the fill value
outside) where padding or ceil mode reach past the image; `match_window` reads the
strides and pads off the cell's indices for both:

- convolution (`dlp.conv2d`): combine = add, the cell multiplied by a weight tile
  `w[co, ci, kh, kw]` (in WRAM); depthwise (channel c reads channel c) as one
  `dlp.conv2d` per channel;
- pooling (`dlp.pool "max"|"sum"`): combine = max or add of the cell itself, the work
  loop over channels; average pooling's division (a constant: `dlp.mul_scalar`, or the
  per-window count: scalar loops over the output tile) is its epilogue.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import arith, memref, scf
from xdsl.ir import Block, Operation, Region, SSAValue

from dlpc.dialects import dlp
from dlpc.dialects.loop import ForOp
from dlpc.dialects.typed import element_type
from dlpc.passes.lower._dlp_build import BufferPlan, KernelPlan, Selection
from dlpc.passes.lower.dlp_select._matching import (
    NoMatch,
    const_value,
    linear_form,
    loop_chain,
    scratch_elems,
    tile_bytes,
    work_nest,
)
from dlpc.passes.lower.dlp_select.elementwise import (
    BINARY,
    Elementwise,
    ScalarEpilogue,
    match_epilogue,
)


def _window_nest(
    plan: KernelPlan, n_reduce: int
) -> tuple[list[ForOp], list[ForOp], memref.StoreOp, memref.LoadOp, list[Operation], SSAValue]:
    """The shape conv and pooling kernels share: three unit-stride spatial loops from 0
    (four when the work loop is the batch: n, c, oh, ow) around `acc = alloca; store
    init; <n_reduce reduction loops>; load acc; ...`. Returns (spatial loops, reduction
    loops, the init store, the load of the total, the ops after it, acc)."""
    assert plan.work is not None  # select_compute matches only kernels with a work loop
    spatial = work_nest(plan.work)
    if len(spatial) not in (3, 4) or any(lp.lower != 0 or lp.stride != 1 for lp in spatial):
        raise NoMatch
    ops = [op for op in spatial[-1].block.ops if not isinstance(op, arith.ConstantOp)]
    loops_in = [op for op in ops if isinstance(op, ForOp)]
    if len(loops_in) != 1:
        raise NoMatch
    red = loop_chain(loops_in[0], perfect=False)
    if len(red) != n_reduce or any(lp.lower != 0 or lp.stride != 1 for lp in red):
        raise NoMatch
    pos = ops.index(red[0])
    pre, post = ops[:pos], ops[pos + 1 :]
    if (
        len(pre) != 2
        or not isinstance(pre[0], memref.AllocaOp)
        or not isinstance(pre[1], memref.StoreOp)
    ):
        raise NoMatch
    acc = pre[0].memref
    if not post or not isinstance(post[0], memref.LoadOp) or post[0].memref is not acc:
        raise NoMatch
    return spatial, red, pre[1], post[0], post[1:], acc


def _accumulation(body: list[Operation], acc: SSAValue) -> tuple[Operation, Operation]:
    """`v = load acc; c = combine(v, x); store c, acc` ending the innermost body:
    (the combine, its other operand's op), NoMatch otherwise."""
    if len(body) < 4:
        raise NoMatch
    la, comb, st = body[-3:]
    if not (
        isinstance(la, memref.LoadOp)
        and la.memref is acc
        and isinstance(st, memref.StoreOp)
        and st.memref is acc
        and st.value is comb.results[0]
        and la.res in comb.operands
    ):
        raise NoMatch
    x = next((o.owner for o in comb.operands if o is not la.res), None)
    if not isinstance(x, Operation):
        raise NoMatch
    return comb, x


def _only_index_arith(body: list[Operation], pattern: tuple[Operation, ...]) -> None:
    """NoMatch unless every op of `body` besides `pattern` is index arithmetic."""
    for o in body:
        if o not in pattern and not (
            o.name.startswith("arith.") and o.name not in BINARY and o.name != "arith.negf"
        ):
            raise NoMatch


def _cell_load(cell: Operation, fill: float) -> tuple[memref.LoadOp, bool]:
    """The load of a window cell and whether it is guarded: a plain load, or
    `if (inside) load else fill` (padding)."""
    if isinstance(cell, memref.LoadOp):
        return cell, False
    if isinstance(cell, scf.IfOp):
        then_ops = [o for o in cell.true_region.block.ops if not isinstance(o, arith.ConstantOp)]
        else_ops = list(cell.false_region.block.ops) if cell.false_region.blocks else []
        if (
            len(then_ops) == 2
            and isinstance(then_ops[0], memref.LoadOp)
            and else_ops
            and const_value(else_ops[-1].operands[0]) == fill
        ):
            return then_ops[0], True
    raise NoMatch


@dataclass(frozen=True)
class Window:
    """Output (oh, ow) reads rows `oh * stride_h - pad_top + kh` (kh < kernel_h) and
    columns likewise of a height x width plane; pad_bottom / pad_right: the rows /
    columns past the plane the last window reaches."""

    height: int
    width: int
    kernel_h: int
    kernel_w: int
    stride_h: int
    stride_w: int
    pad_top: int
    pad_left: int
    pad_bottom: int
    pad_right: int
    out_h: int
    out_w: int


def match_window(
    plan: KernelPlan,
    cell: Operation,
    fill: float,
    loops: tuple[ForOp, ForOp, ForOp, ForOp],
    batch: ForOp | None = None,
) -> tuple[BufferPlan, dict, Window]:
    """The window `cell` reads over the loops (oh, ow, kh, kw): `x[n, c, oh*sh - pt + kh,
    ow*sw - pl + kw]`, n = 0 or the `batch` loop (the work loop, x then tiled by whole
    images), guarded by `if (inside) .. else fill` wherever it reaches past the plane.
    Returns x's buffer plan, the linear form of the channel index and the window."""
    oh_l, ow_l, kh_l, kw_l = loops
    x_load, guarded = _cell_load(cell, fill)
    px = plan.buffers.get(x_load.memref)
    if px is None or len(px.shape) != 4 or (batch is None and px.shape[0] != 1 and not px.outer):
        raise NoMatch
    forms = [linear_form(plan, v) for v in x_load.indices]
    xi = [f for f in forms if f is not None]  # used only when none is None
    image: dict[SSAValue | int, int] = {1: 0} if batch is None else {batch.induction_var: 1}
    if len(xi) < len(forms) or xi[0] not in (image, {**image, 1: 0}):
        raise NoMatch
    if batch is not None and not (px.kind == "tiled" and px.dim == 0 and _unit(px)):
        raise NoMatch
    _, _, h, w = px.shape
    hy, wx = xi[2], xi[3]
    sh, sw = hy.get(oh_l.induction_var, 0), wx.get(ow_l.induction_var, 0)
    if (
        set(hy) - {oh_l.induction_var, kh_l.induction_var, 1}
        or set(wx) - {ow_l.induction_var, kw_l.induction_var, 1}
        or hy.get(kh_l.induction_var) != 1
        or wx.get(kw_l.induction_var) != 1
        or sh < 1
        or sw < 1
    ):
        raise NoMatch
    pt, pl = -hy.get(1, 0), -wx.get(1, 0)
    kh, kw, oh, ow = kh_l.trip_count, kw_l.trip_count, oh_l.trip_count, ow_l.trip_count
    if min(pt, pl) < 0 or pt >= kh or pl >= kw:
        raise NoMatch
    pb = max(0, (oh - 1) * sh + kh - h - pt)  # rows past the plane read as the fill value
    pr = max(0, (ow - 1) * sw + kw - w - pl)
    if not guarded and max(pt, pl, pb, pr) > 0:
        raise NoMatch  # an unguarded load past the plane would read out of bounds
    return px, xi[1], Window(h, w, kh, kw, sh, sw, pt, pl, pb, pr, oh, ow)


def _unit(p: BufferPlan) -> bool:
    """A tile of the work loop is one whole row of p's tiled dim per iteration."""
    return p.a == 1 and p.rlo == p.rhi == 0


def match_conv(plan) -> ConvSelection:
    spatial, (ci_l, kh_l, kw_l), init, total, rest, acc = _window_nest(plan, 3)
    batch = spatial[0] if len(spatial) == 4 else None
    co_l, oh_l, ow_l = spatial[-3:]
    if const_value(init.value) != 0.0:
        raise NoMatch
    body = [op for op in kw_l.block.ops if not isinstance(op, arith.ConstantOp)]
    add, mul = _accumulation(body, acc)
    if add.name != "arith.addf" or mul.name != "arith.mulf":
        raise NoMatch
    loads = [o.owner for o in mul.operands]
    w_load = next(
        (
            o
            for o in loads
            if isinstance(o, memref.LoadOp)
            and o.memref in plan.buffers
            and len(o.indices) == 4
            and list(o.indices)[0] is co_l.induction_var
        ),
        None,
    )
    cell = next((o for o in loads if o is not w_load), None)
    if w_load is None or not isinstance(cell, Operation):
        raise NoMatch
    _only_index_arith(body, (*body[-3:], mul, w_load, cell))
    pw = plan.buffers[w_load.memref]
    iv = [lp.induction_var for lp in (co_l, ci_l, kh_l, kw_l)]
    if list(w_load.indices) != iv:
        raise NoMatch
    if batch is None and not (pw.kind == "tiled" and pw.dim == 0 and _unit(pw)):
        raise NoMatch  # the work loop over output channels: a tile of filters
    # (the work loop over images: w's load does not depend on it, so plan_buffers loads
    # it whole, every filter once)
    px, channel, win = match_window(plan, cell, 0.0, (oh_l, ow_l, kh_l, kw_l), batch)
    cin = px.shape[1]
    ci, co = ci_l.induction_var, co_l.induction_var
    depthwise = (
        channel in ({co: 1, ci: 1}, {co: 1, ci: 1, 1: 0}, {co: 1}, {co: 1, 1: 0})
        and ci_l.trip_count == 1
    )
    if batch is not None and depthwise:
        raise NoMatch  # (a batched depthwise conv keeps its scalar loops)
    if depthwise:  # channel c of the output reads channel c of the input
        if not (
            px.kind == "tiled"
            and px.dim == 1
            and px.a == 1
            and px.rlo == px.rhi == 0
            and pw.shape[1:] == (1, win.kernel_h, win.kernel_w)
        ):
            raise NoMatch
    elif (
        (px.kind != "whole" if batch is None else False)
        or channel not in ({ci: 1}, {ci: 1, 1: 0})
        or pw.shape[1:] != (cin, win.kernel_h, win.kernel_w)
        or ci_l.trip_count != cin
    ):
        raise NoMatch
    h, w, kh, kw, sh, sw = (
        win.height,
        win.width,
        win.kernel_h,
        win.kernel_w,
        win.stride_h,
        win.stride_w,
    )
    pt, pl, pb, pr = win.pad_top, win.pad_left, win.pad_bottom, win.pad_right
    if ((h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1) != (win.out_h, win.out_w):
        raise NoMatch
    ew = match_epilogue(plan, spatial, list(ow_l.block.ops), rest, total.res)
    params = dict(
        channels_in=1 if depthwise else cin,
        height=h,
        width=w,
        kernel_h=kh,
        kernel_w=kw,
        stride_h=sh,
        stride_w=sw,
        pad_top=pt,
        pad_left=pl,
        pad_bottom=pb,
        pad_right=pr,
    )
    if depthwise:
        align = plan.desc.vector_align
        if (h * w * 4) % align or (ew.inner * 4) % align:
            raise NoMatch  # per-channel operands must start aligned
        pw.direct = True
        return DepthwiseSelection(ew, px, pw, total.res, params)
    pw.space = "wram"
    if batch is not None:
        return BatchConvSelection(ew, px, pw, total.res, params, co_l.trip_count)
    return ConvSelection(ew, px, pw, total.res, params)


def match_pool(plan) -> PoolSelection:
    """`acc = init; for kh, kw: acc = max/add(acc, x[c, oh*sh - pt + kh, ow*sw - pl + kw]);
    out[c, oh, ow] = epilogue(acc)` over NCHW planes, the work loop over channels."""
    spatial, (kh_l, kw_l), init_store, total, rest, acc = _window_nest(plan, 2)
    batch = spatial[0] if len(spatial) == 4 else None
    c_l, oh_l, ow_l = spatial[-3:]
    body = [op for op in kw_l.block.ops if not isinstance(op, arith.ConstantOp)]
    comb, cell = _accumulation(body, acc)
    mode = {"arith.maximumf": "max", "arith.maxnumf": "max", "arith.addf": "sum"}.get(comb.name)
    if mode is None:
        raise NoMatch
    init = {"max": float("-inf"), "sum": 0.0}[mode]
    if const_value(init_store.value) != init:
        raise NoMatch
    _only_index_arith(body, (*body[-3:], cell))
    px, channel, win = match_window(plan, cell, init, (oh_l, ow_l, kh_l, kw_l), batch)
    if not (px.kind == "tiled" and px.dim == (1 if batch is None else 0) and _unit(px)) or (
        channel not in ({c_l.induction_var: 1}, {c_l.induction_var: 1, 1: 0})
    ):
        raise NoMatch
    if (win.out_h - 1) * win.stride_h - win.pad_top >= win.height or (
        win.out_w - 1
    ) * win.stride_w - win.pad_left >= win.width:
        raise NoMatch  # the last window starts past the plane
    ew = match_epilogue(plan, spatial, list(ow_l.block.ops), rest, total.res)
    params = dict(
        height=win.height,
        width=win.width,
        kernel_h=win.kernel_h,
        kernel_w=win.kernel_w,
        stride_h=win.stride_h,
        stride_w=win.stride_w,
        pad_top=win.pad_top,
        pad_left=win.pad_left,
        out_h=win.out_h,
        out_w=win.out_w,
    )
    # a batch tile is whole images, their planes contiguous: one dlp.pool for them all
    planes = c_l.trip_count if batch is not None else 1
    return PoolSelection(mode, ew, px, total.res, params, planes)


@dataclass
class ConvSelection(Selection):
    matrix_unit = True

    ew: Elementwise | ScalarEpilogue  # the epilogue over the output channels of a tile
    src: BufferPlan  # the whole input image, NRAM
    weight: BufferPlan  # weight tiles, WRAM
    acc: SSAValue
    params: dict
    # set by a chain split into bands of output rows while it is built (_dlp_fuse): the
    # task's band and each band's parameters (`band_params`); the NRAM image holds the
    # band's rows (`band_rows`)
    band: tuple[SSAValue, list[dict]] | None = field(default=None, init=False)

    @property
    def out_h(self) -> int:
        p = self.params
        return (p["height"] + p["pad_top"] + p["pad_bottom"] - p["kernel_h"]) // p["stride_h"] + 1

    def _band_span(self, k: int, bands: int) -> tuple[int, int]:
        """Image rows [first, last) the windows of band k's output rows reach (may pass
        the image's edges: that part is the padding)."""
        p = self.params
        rows = self.out_h // bands
        first = k * rows * p["stride_h"] - p["pad_top"]
        return first, first + (rows - 1) * p["stride_h"] + p["kernel_h"]

    def band_params(self, bands: int) -> list[dict]:
        """Per band of `out_h / bands` output rows: the conv over the image rows it reads
        (clamped to the image), padded by the rows its windows reach past them."""
        out = []
        for k in range(bands):
            first, last = self._band_span(k, bands)
            top, bottom = max(first, 0), min(last, self.params["height"])
            out.append(
                {
                    **self.params,
                    "height": bottom - top,
                    "pad_top": top - first,
                    "pad_bottom": last - bottom,
                }
            )
        return out

    def band_rows(self, b, band: SSAValue, bands: int) -> tuple[SSAValue, SSAValue]:
        """(first row, rows) of the image band `band` reads, as index values."""
        p = self.params
        rows = self.out_h // bands
        first = b.sub(b.mul(band, b.c(rows * p["stride_h"])), b.c(p["pad_top"]))
        last = b.add(first, b.c((rows - 1) * p["stride_h"] + p["kernel_h"]))
        top = b.min(b.max(first, b.c(0)), b.c(p["height"]))
        bottom = b.min(b.max(last, b.c(0)), b.c(p["height"]))
        return top, b.sub(bottom, top)

    @property
    def passthrough(self) -> bool:
        """The convolution is the output (its bias and activation applied after a pool
        they commute with: _dlp_commute): convolved into the output tile."""
        return type(self) in (ConvSelection, BatchConvSelection) and (
            isinstance(self.ew, Elementwise) and self.ew.passthrough(self.acc)
        )

    def scratch_bytes(
        self, plan, tile: int
    ) -> int:  # the accumulator tile, the epilogue's temporaries
        if self.passthrough:
            return 0
        return tile_bytes(plan, tile * self.ew.inner) * (self.ew.temps() + 1)

    def _conv(
        self, b, acc: SSAValue, n: SSAValue, params: dict, at: SSAValue | None = None
    ) -> None:
        b.op(
            dlp.Conv2dOp(
                acc,
                at if at is not None else b.c(0),
                self.src.local,
                b.c(0),
                self.weight.local,
                self.weight.slot,
                n,
                **params,
            )
        )

    def _banded(self, b, acc: SSAValue, n: SSAValue, at: SSAValue | None) -> None:
        """One conv per distinct band geometry, chosen by the task's band (the first and
        last bands are clamped at the image's edges, the ones between alike)."""
        assert self.band is not None
        band, params = self.band
        groups: list[tuple[dict, list[int]]] = []
        for k, p in enumerate(params):
            same = next((g for g in groups if g[0] == p), None)
            if same is None:
                groups.append((p, [k]))
            else:
                same[1].append(k)
        groups.sort(key=lambda g: len(g[1]))  # the largest group is the last `else`
        opened = []
        for p, ks in groups[:-1]:
            for k in ks:
                then, other = Block(), Block()
                b.op(
                    scf.IfOp(b.v(arith.CmpiOp(band, b.c(k), "eq")), [], Region(then), Region(other))
                )
                tb = b.nested(then)
                self._conv(tb, acc, n, p, at)
                tb.op(scf.YieldOp())
                b = b.nested(other)
                opened.append(b)
        self._conv(b, acc, n, groups[-1][0], at)
        for nb in opened:
            nb.op(scf.YieldOp())

    def emit(self, lowering, b, t0: SSAValue, n: SSAValue) -> None:
        plan = lowering.plan
        if self.passthrough:  # (the epilogue would be one NRAM2NRAM copy: a DMA latency)
            assert isinstance(self.ew, Elementwise)  # (passthrough says so)
            acc, at = self.ew.out.local, self.ew.out.slot
        else:
            acc = b.alloc(
                "nram",
                scratch_elems(plan, plan.tile * self.ew.inner),
                element_type(self.src.value),
                "acc_nram",
            )
            at = None
        if self.band is None:
            self._conv(b, acc, n, self.params, at)
        else:
            self._banded(b, acc, n, at)
        if not self.passthrough:
            self.ew.emit_after(lowering, b, b.mul(n, b.c(self.ew.inner)), acc, t0, n, self.acc)


@dataclass
class DepthwiseSelection(ConvSelection):
    """One `dlp.conv2d` (1 in, 1 out channel) per channel of the tile; each channel's
    filter is DMA'd from GDRAM into its own aligned WRAM slot."""

    def slot_elems(self, plan) -> int:
        return scratch_elems(plan, self.params["kernel_h"] * self.params["kernel_w"])

    def wram_bytes(self, plan, tile: int) -> int:
        return tile * self.slot_elems(plan) * 4

    def emit(self, lowering, b, t0: SSAValue, n: SSAValue) -> None:
        plan = lowering.plan
        elt = element_type(self.src.value)
        count = b.mul(n, b.c(self.ew.inner))
        acc = b.alloc("nram", scratch_elems(plan, plan.tile * self.ew.inner), elt, "acc_nram")
        slot = self.slot_elems(plan)
        taps = self.params["kernel_h"] * self.params["kernel_w"]
        filters = b.alloc("wram", plan.tile * slot, elt, f"{self.weight.name}_wram")
        hw = self.params["height"] * self.params["width"]
        # the tile's filters back to back (their latencies overlap), one wait, the convs
        _, fetch, c = b.for_(b.c(0), n, b.c(1))
        fetch.op(
            dlp.MemcpyAsyncOp(
                filters,
                fetch.mul(c, fetch.c(slot)),
                self.weight.value,
                fetch.mul(fetch.add(t0, c), fetch.c(taps)),
                fetch.c(taps),
            )
        )
        fetch.op(scf.YieldOp())
        b.op(dlp.WaitDmaOp())
        _, body, c = b.for_(b.c(0), n, b.c(1))
        body.op(
            dlp.Conv2dOp(
                acc,
                body.mul(c, body.c(self.ew.inner)),
                self.src.local,
                body.add(self.src.slot, body.mul(c, body.c(hw))),
                filters,
                body.mul(c, body.c(slot)),
                body.c(1),
                **self.params,
            )
        )
        body.op(scf.YieldOp())
        self.ew.emit_after(lowering, b, count, acc, t0, n, self.acc)


@dataclass
class PoolSelection(Selection):
    """Max or sum pooling of the tile's channels: one `dlp.pool` into an NRAM accumulator
    tile, then the epilogue (average pooling's division) over it."""

    mode: str  # "max" | "sum"
    ew: Elementwise | ScalarEpilogue  # the epilogue over the output channels of a tile
    src: BufferPlan  # the input tile (whole channels), NRAM
    acc: SSAValue
    params: dict
    planes: int = 1  # planes per work iteration (the channels of an image when batched)

    @property
    def passthrough(self) -> bool:
        """The window result is the output (max pooling): pooled into the output tile."""
        return isinstance(self.ew, Elementwise) and self.ew.passthrough(self.acc)

    def scratch_bytes(
        self, plan, tile: int
    ) -> int:  # the accumulator tile, the epilogue's temporaries
        if self.passthrough:
            return 0
        return tile_bytes(plan, tile * self.ew.inner) * (self.ew.temps() + 1)

    def emit(self, lowering, b, t0: SSAValue, n: SSAValue) -> None:
        plan = lowering.plan
        planes = b.mul(n, b.c(self.planes))
        if self.passthrough:  # (the epilogue would be one NRAM2NRAM copy: a DMA latency)
            assert isinstance(self.ew, Elementwise)  # (passthrough says so)
            out = self.ew.out
            b.op(
                dlp.PoolOp(
                    self.mode,
                    out.local,
                    out.slot,
                    self.src.local,
                    self.src.slot,
                    planes,
                    **self.params,
                )
            )
            return
        acc = b.alloc(
            "nram",
            scratch_elems(plan, plan.tile * self.ew.inner),
            element_type(self.src.value),
            "acc_nram",
        )
        b.op(
            dlp.PoolOp(self.mode, acc, b.c(0), self.src.local, self.src.slot, planes, **self.params)
        )
        self.ew.emit_after(lowering, b, b.mul(n, b.c(self.ew.inner)), acc, t0, n, self.acc)


@dataclass
class BatchConvSelection(ConvSelection):
    """The work loop over images: every filter in WRAM once; per image of the tile one
    `dlp.conv2d` over all output channels into a one-image accumulator, then the epilogue
    over that image (so the scratch is one image's, whatever the tile). An image or
    output that is not a vector-alignment multiple keeps the tile to one image (each
    tile slot starts aligned)."""

    channels_out: int = 0

    def image_elems(self) -> tuple[int, int]:
        p = self.params
        return p["channels_in"] * p["height"] * p["width"], self.ew.inner

    def max_tile(self, plan) -> int | None:
        align = plan.desc.vector_align
        if any((e * 4) % align for e in self.image_elems()):
            return 1
        return None

    def scratch_bytes(self, plan, tile: int) -> int:
        if self.passthrough:
            return 0
        # a one-image accumulator; the epilogue's temporaries are sized by the tile
        return tile_bytes(plan, self.ew.inner) + tile_bytes(plan, tile * self.ew.inner) * (
            self.ew.temps()
        )

    def emit(self, lowering, b, t0: SSAValue, n: SSAValue) -> None:
        plan = lowering.plan
        image, out = self.image_elems()
        if self.passthrough:  # each image convolved into its slot of the output tile
            assert isinstance(self.ew, Elementwise)  # (passthrough says so)
            _, body, i = b.for_(b.c(0), n, b.c(1))
            body.op(
                dlp.Conv2dOp(
                    self.ew.out.local,
                    body.add(self.ew.out.slot, body.mul(i, body.c(out))),
                    self.src.local,
                    body.add(self.src.slot, body.mul(i, body.c(image))),
                    self.weight.local,
                    body.c(0),
                    body.c(self.channels_out),
                    **self.params,
                )
            )
            body.op(scf.YieldOp())
            return
        acc = b.alloc("nram", scratch_elems(plan, out), element_type(self.src.value), "acc_nram")
        _, body, i = b.for_(b.c(0), n, b.c(1))
        body.op(
            dlp.Conv2dOp(
                acc,
                body.c(0),
                self.src.local,
                body.add(self.src.slot, body.mul(i, body.c(image))),
                self.weight.local,
                body.c(0),
                body.c(self.channels_out),
                **self.params,
            )
        )
        if isinstance(self.ew, ScalarEpilogue):  # its stores index the tile by t0 + i
            self.ew.emit_after(
                lowering, body, body.c(out), acc, body.add(t0, i), body.c(1), self.acc
            )
        else:  # the tile's operands from image i on: every tiled slot moved by i images
            tiled = [p for p in plan.buffers.values() if p.kind == "tiled" and not p.direct]
            slots = {p: p.slot for p in tiled}
            for p in tiled:
                p.slot = body.add(slots[p], body.mul(i, body.c(p.inner)))
            self.ew.emit_after(lowering, body, body.c(out), acc, t0, n, self.acc)
            for p in tiled:
                p.slot = slots[p]
        body.op(scf.YieldOp())
