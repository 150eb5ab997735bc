"""Pipeline parallelism (GPipe, PipeDream-flush 1F1B): the model's layers cut into
stages, one per rank; micro-batches flow forward and their gradients backward.

Input: graph, func: @main(x, target) -> (loss, metrics...) for ONE micro-batch (the
forward and the loss, before graph-autodiff; static shapes).
Output: @stage0 ... @stage<S-1>, the program of each rank: (x, target) of `microbatches`
micro-batches (row blocks) -> (loss, grad.<param> of its own params..., metrics...):
for each micro-batch in the schedule's order, a forward (stage 0 reads its rows of x;
the others `comm.recv` the activation; all but the last `comm.send` theirs on) and a
backward (the last stage from the loss; the others from the `comm.recv`d gradient of
their output; all but the first `comm.send` the gradient of their input back). The
gradients are accumulated over the micro-batches (their mean: the loss is the mean of
the micro-batches' mean losses); the last stage broadcasts the loss and metrics.
Stages: cut where one activation crosses, balancing the ops' result bytes and params.
Schedules: gpipe (all forwards, then all backwards), 1f1b (S - s - 1 warm-up forwards,
then one forward one backward, then the rest of the backwards), 2bw (PipeDream-2BW: 1F1B's
order on two weight versions; see below).
2bw: each stage holds two versions of its params, the newest W(t) (`graph.param "<p>"`)
and the one the in-flight micro-batches started on, W(t-1) (`graph.param
"pipeline.stash.<p>"`). This step's micro-batches run forward and backward on the
stashed version (in a pipeline without flushes, the newest version is not ready when
they start: its update needs the previous step's last gradient); their gradients are
coalesced (the mean over the m micro-batches) into grad.<p>, which the caller applies
to the newest version, W(t+1) = W(t) - lr * grad f(W(t-1)) (2BW's delayed-by-one
update); the step also returns `pipeline.stash.<p>` = W(t), the next step's stashed
version (the double buffer's rotation). At the first step both versions are W(0).
Requires: `stages` <= the cut points + 1; a param used by one stage only.
Guarantees: every send has its recv (same peer and tag) in an order that completes with
blocking sends (`check_schedule`, run on the output; a violation names both ops).

The backward of a stage is graph-autodiff's: its input and the received output
gradient g are params of the stage function, the latter's loss sum(out * g).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, StringAttr, UnitAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import DiagnosticException

from dlpc.dialects import comm, graph
from dlpc.dialects.sizes import element_bytes
from dlpc.passes.dist.data_parallel import main_of, result_names
from dlpc.passes.train._build import Builder

FORWARD = "dlpc.pipeline.forward"  # a forward op of a stage function
OUTPUT = "dlpc.pipeline.output"  # the stage's activation sent on
IN, GOUT = "pipeline.in", "pipeline.g_out"
SCHEDULES = ("gpipe", "1f1b", "2bw")
STASH = "pipeline.stash."  # 2bw: the older weight version of a param


def _fail(message: str) -> DiagnosticException:
    return DiagnosticException(f"graph-pipeline: {message}")


def _bytes(v: SSAValue) -> int:
    n = element_bytes(graph.element_type_of(v))
    for d in graph.shape_of(v):
        n *= d
    return n


def _is_leaf(op: Operation) -> bool:
    return isinstance(op, graph.ParamOp | graph.ConstantOp)


# ------------------------------------------------------------------------- stages


def cut_points(ops: Sequence[Operation]) -> list[int]:
    """Indices k (0 < k < len) where exactly one op result defined before k is used at
    or after k (params and constants are cloned where used, so never cross)."""
    index = {op: i for i, op in enumerate(ops)}
    last_use: dict[SSAValue, int] = {}
    for i, op in enumerate(ops):
        for v in op.operands:
            if isinstance(v.owner, Operation) and v.owner in index and not _is_leaf(v.owner):
                last_use[v] = i
    points = []
    for k in range(1, len(ops)):
        live = [v for v, u in last_use.items() if index[v.owner] < k <= u]  # type: ignore[index]
        if len(live) == 1 and not _is_leaf(ops[k - 1]):
            points.append(k)
    return points


def partition(ops: Sequence[Operation], stages: int) -> list[list[Operation]]:
    """The ops (forward and loss, in order) in `stages` contiguous parts, cut at cut
    points so that the largest part's cost (result bytes plus param bytes) is least."""
    compute = [op for op in ops if not _is_leaf(op)]
    points = cut_points(compute)
    if stages - 1 > len(points):
        raise _fail(
            f"{stages} stages need {stages - 1} cuts, but @main has {len(points)} places "
            f"where a single activation crosses"
        )
    cost = [sum(_bytes(r) for r in op.results) for op in compute]
    for i, op in enumerate(compute):
        cost[i] += sum(_bytes(v) for v in op.operands if isinstance(v.owner, graph.ParamOp))
    best: tuple[int, tuple[int, ...]] | None = None
    for cuts in _combinations(points, stages - 1):
        bounds = [0, *cuts, len(compute)]
        worst = max(sum(cost[a:b]) for a, b in zip(bounds, bounds[1:]))
        if best is None or worst < best[0]:
            best = (worst, cuts)
    assert best is not None
    bounds = [0, *best[1], len(compute)]
    return [list(compute[a:b]) for a, b in zip(bounds, bounds[1:])]


def _combinations(points: list[int], k: int):
    if k == 0:
        yield ()
        return
    for i, p in enumerate(points):
        for rest in _combinations(points[i + 1 :], k - 1):
            yield (p, *rest)


# -------------------------------------------------------------- a stage's function


@dataclass
class StageFunction:
    """A stage's forward and backward for one micro-batch, differentiated: @main(x,
    target) with params `pipeline.in` (its input, not on stage 0) and `pipeline.g_out`
    (its output's gradient, not on the last stage)."""

    module: ModuleOp
    output: str  # the name hint of the value sent on ("" on the last stage)
    params: list[str]  # the model params it reads


def stage_function(main: func.FuncOp, part: list[Operation], first: bool, last: bool):
    """The differentiated function of one stage (`part`: its compute ops, in order)."""
    from dlpc.passes.train import _comm_grad  # noqa: F401 - comm rules (none needed here)
    from dlpc.passes.train.autodiff import differentiate

    block = Block(arg_types=[a.type for a in main.args])
    mapping: dict[SSAValue, SSAValue] = dict(zip(main.args, block.args))
    defined = {r for op in part for r in op.results}
    b = Builder.at_end(block)
    params: list[str] = []

    def value(v: SSAValue) -> SSAValue:
        if v in mapping:
            return mapping[v]
        owner = v.owner
        if isinstance(owner, Operation) and _is_leaf(owner):
            new = owner.clone()
            block.add_op(new)
            new.attributes[FORWARD] = UnitAttr()
            if isinstance(owner, graph.ParamOp) and owner.pname not in params:
                params.append(owner.pname)
            mapping[v] = new.results[0]
            return new.results[0]
        if v not in defined:  # the activation from the previous stage
            assert not first
            p = b.param(IN, graph.shape_of(v), graph.element_type_of(v))
            assert isinstance(p.owner, Operation)
            p.owner.attributes[FORWARD] = UnitAttr()
            mapping[v] = p
            return p
        raise AssertionError(f"{v} used before definition")

    for op in part:
        operands = [value(v) for v in op.operands]
        new = op.clone(value_mapper={v: o for v, o in zip(op.operands, operands)})
        block.add_op(new)
        new.attributes[FORWARD] = UnitAttr()
        mapping.update(zip(op.results, new.results))
    ret = main.body.block.last_op
    assert isinstance(ret, func.ReturnOp)
    if last:
        outputs = [mapping[v] for v in ret.operands]
        output = ""
    else:
        out = part[-1].results[0]
        y = mapping[out]
        g = b.param(GOUT, graph.shape_of(y), graph.element_type_of(y))
        assert isinstance(y.owner, Operation)
        y.owner.attributes[OUTPUT] = UnitAttr()
        outputs = [b.sum(b.mul(y, g))]
        output = out.name_hint or "out"
    block.add_op(func.ReturnOp(*outputs))
    f = func.FuncOp("main", ([a.type for a in block.args], [o.type for o in outputs]))
    f.body.detach_block(f.body.block)
    f.body.add_block(block)
    module = ModuleOp([f])
    differentiate(module, aux=True)
    return StageFunction(module, output, params)


# ----------------------------------------------------------------- the schedule


def order(schedule: str, stage: int, stages: int, microbatches: int) -> list[tuple[str, int]]:
    """The (phase, micro-batch) sequence of a stage: ("F", m) forward, ("B", m) backward."""
    m = microbatches
    if schedule == "gpipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    # 1f1b and 2bw (which differs in the weight versions, not the order)
    warm = min(stages - stage - 1, m)
    out = [("F", i) for i in range(warm)]
    f, bw = warm, 0
    while f < m:
        out.append(("F", f))
        f += 1
        out.append(("B", bw))
        bw += 1
    out += [("B", i) for i in range(bw, m)]
    return out


def build_stage(
    target: func.FuncOp,
    fn: StageFunction,
    stage: int,
    stages: int,
    microbatches: int,
    schedule: str,
    n_metrics: int,
    grads_for: dict[str, graph.TensorType],
    group: comm.GroupAttr | None = None,
) -> list[str]:
    """Write stage `stage`'s program into `target` (its body replaced; its args x and
    target hold `microbatches` micro-batches): it returns the loss, grad.<p> for each p of
    `grads_for` (zeros for the params of other stages), `n_metrics` metrics and, under
    2bw, pipeline.stash.<p> for each of its own params p (whose names it returns).
    `group`: the stages' group (default: the world of `stages` ranks; a device mesh's pp
    axis in a hybrid), `stage` the rank's index in it."""
    block = target.body.block
    for op in reversed(list(block.ops)):
        op.detach()
        op.erase(safe_erase=False)
    b = Builder.at_end(block)
    group = group or comm.GroupAttr.of(stages)
    first, last = stage == 0, stage == stages - 1
    src = fn.module.ops.first
    assert isinstance(src, func.FuncOp)
    src_ops = list(src.body.block.ops)
    src_ret = src_ops.pop()
    assert isinstance(src_ret, func.ReturnOp)
    forward = [op for op in src_ops if FORWARD in op.attributes]
    backward = [op for op in src_ops if FORWARD not in op.attributes]
    names = result_names(src)
    specials = {op.pname: op.output for op in src_ops if isinstance(op, graph.ParamOp)}
    params = {p: b.param(p, ty.get_shape(), ty.get_element_type()) for p, ty in grads_for.items()}
    for p, v in specials.items():
        if p not in params and p not in (IN, GOUT):
            params[p] = b.param(p, graph.shape_of(v), graph.element_type_of(v))
    # 2bw: the micro-batches compute on the stashed version; the newest goes out as
    # the next step's stash
    newest: dict[str, SSAValue] = {}
    if schedule == "2bw":
        for p in grads_for:
            if f"grad.{p}" in names:
                newest[p] = params[p]
                params[p] = b.param(
                    STASH + p, graph.shape_of(newest[p]), graph.element_type_of(newest[p])
                )
    rows = graph.shape_of(src.args[0])[0]
    saved: dict[int, dict[SSAValue, SSAValue]] = {}
    # running sums of each result over the micro-batches, added right after each backward
    # (kept per micro-batch until the end, GPipe and 1F1B alike would hold m weight
    # gradients at once)
    sums: dict[int, SSAValue] = {}

    def rows_of(v: SSAValue, m: int) -> SSAValue:
        return b.op(graph.SliceOp, v, starts=[m * rows], ends=[(m + 1) * rows], axes=[0], steps=[1])

    def clone(ops: list[Operation], mapping: dict[SSAValue, SSAValue]) -> None:
        for op in ops:
            if isinstance(op, graph.ParamOp):
                if op.pname in params:
                    mapping[op.output] = params[op.pname]
                continue  # pipeline.in / g_out: mapped by the caller
            new = op.clone(value_mapper=mapping)
            new.attributes.pop(FORWARD, None)
            new.attributes.pop(OUTPUT, None)
            Rewriter.insert_op(new, b.point)
            mapping.update(zip(op.results, new.results))

    def recv_input(m: int) -> SSAValue:
        return b.insert(comm.RecvOp(specials[IN].type, stage - 1, 2 * m, group))

    steps = order(schedule, stage, stages, microbatches)
    early: dict[int, SSAValue] = {}  # activations received before the last gradient's send
    for i, (phase, m) in enumerate(steps):
        if phase == "F":
            mapping: dict[SSAValue, SSAValue] = {
                a: rows_of(x, m) for a, x in zip(src.args, target.args)
            }
            if not first:
                mapping[specials[IN]] = early.pop(m) if m in early else recv_input(m)
            clone(forward, mapping)
            if not last:
                out = next(op for op in forward if OUTPUT in op.attributes).results[0]
                Rewriter.insert_op(comm.SendOp(mapping[out], stage + 1, 2 * m, group), b.point)
            saved[m] = mapping
        else:
            mapping = saved.pop(m)
            if not last:
                mapping[specials[GOUT]] = b.insert(
                    comm.RecvOp(specials[GOUT].type, stage + 1, 2 * m + 1, group)
                )
            clone(backward, mapping)
            outs = [mapping.get(v, v) for v in src_ret.operands]
            if not first:
                # the next forward's activation first: the previous stage sends it before
                # it takes this gradient (1F1B), so a blocking send cannot wait on both sides
                after = steps[i + 1] if i + 1 < len(steps) else None
                if after is not None and after[0] == "F":
                    early[after[1]] = recv_input(after[1])
                d_in = outs[names.index(f"grad.{IN}")]
                Rewriter.insert_op(comm.SendOp(d_in, stage - 1, 2 * m + 1, group), b.point)
            for k, v in enumerate(outs):
                if (k > 0 or last) and names[k] not in (f"grad.{IN}", f"grad.{GOUT}"):
                    sums[k] = b.add(sums[k], v) if k in sums else v

    def total(k: int, mean: bool) -> SSAValue:
        acc = sums[k]
        return b.mul(acc, 1.0 / microbatches) if mean and microbatches > 1 else acc

    # the loss: the micro-batches' mean; the metrics: their sum; the last stage's to all
    if last:
        shown = [
            total(0, True),
            *(total(len(names) - n_metrics + k, False) for k in range(n_metrics)),
        ]
    else:
        shown = [b.const(0.0) for _ in range(1 + n_metrics)]
    shown = [b.insert(comm.BroadcastOp(v, stages - 1, group)) for v in shown]
    grads = []
    for p, ty in grads_for.items():
        if f"grad.{p}" in names:
            grads.append(total(names.index(f"grad.{p}"), True))
        else:
            zero = b.const(0.0, ty.get_element_type())
            grads.append(b.op(graph.BroadcastOp, zero, shape=list(ty.get_shape())))
    block.add_op(func.ReturnOp(shown[0], *grads, *shown[1:], *newest.values()))
    return list(newest)


# --------------------------------------------------------- the deadlock check


def check_schedule(programs: Sequence[func.FuncOp], who: str = "graph-pipeline") -> None:
    """Every comm.send meets its comm.recv (peer and tag) and the programs complete when
    each send blocks until its recv is posted (MPI's synchronous mode, the worst case).
    A violation is one line naming both ops."""
    queues = [
        [op for op in p.walk() if isinstance(op, comm.SendOp | comm.RecvOp)] for p in programs
    ]
    at = [0] * len(queues)

    def describe(rank: int, op: Operation) -> str:
        assert isinstance(op, comm.SendOp | comm.RecvOp)
        where = "to" if isinstance(op, comm.SendOp) else "from"
        index = queues[rank].index(op)
        return f"rank {rank}'s {op.name} {where} {op.peer.value.data} tag {op.tag.value.data} (its comm op {index})"

    while True:
        moved = False
        for r, q in enumerate(queues):
            if at[r] >= len(q):
                continue
            op = q[at[r]]
            assert isinstance(op, comm.SendOp | comm.RecvOp)
            peer = op.peer.value.data
            if not 0 <= peer < len(queues):
                raise DiagnosticException(
                    f"{who}: {describe(r, op)} names no rank of {len(queues)}"
                )
            other = queues[peer][at[peer]] if at[peer] < len(queues[peer]) else None
            if (
                isinstance(other, comm.SendOp | comm.RecvOp)
                and type(other) is not type(op)
                and other.peer.value.data == r
                and other.tag.value.data == op.tag.value.data
            ):
                at[r] += 1
                at[peer] += 1
                moved = True
        if all(at[r] >= len(q) for r, q in enumerate(queues)):
            return
        if not moved:
            r = next(r for r, q in enumerate(queues) if at[r] < len(q))
            op = queues[r][at[r]]
            peer = op.peer.value.data  # type: ignore[attr-defined]
            if at[peer] >= len(queues[peer]):
                raise DiagnosticException(
                    f"{who}: {describe(r, op)} has no matching op: rank {peer} has finished"
                )
            raise DiagnosticException(
                f"{who}: deadlock: {describe(r, op)} waits for rank {peer}, whose next is "
                f"{describe(peer, queues[peer][at[peer]])}"
            )


# ------------------------------------------------------------------------ the pass


def pipeline(module: ModuleOp, stages: int, microbatches: int, schedule: str) -> list[func.FuncOp]:
    """Replace @main (one micro-batch's forward and loss) by @stage0 ... (see above)."""
    if stages < 1 or microbatches < 1:
        raise _fail(f"stages and microbatches must be >= 1, got {stages} and {microbatches}")
    if schedule not in SCHEDULES:
        raise _fail(f"unknown schedule '{schedule}' (expected gpipe, 1f1b or 2bw)")
    main = main_of(module, "graph-pipeline")
    ret = main.body.block.last_op
    assert isinstance(ret, func.ReturnOp)
    parts = partition(list(main.body.block.ops)[:-1], stages)
    owner: dict[str, int] = {}
    functions = [
        stage_function(main, part, s == 0, s == stages - 1) for s, part in enumerate(parts)
    ]
    for s, fn in enumerate(functions):
        for p in fn.params:
            if owner.setdefault(p, s) != s:
                raise _fail(f"param '{p}' is read by stages {owner[p]} and {s}")
    n_metrics = len(ret.operands) - 1
    programs = []
    for s, fn in enumerate(functions):
        arg_types = [_rows(a.type, microbatches) for a in main.args]
        own = {}
        src = fn.module.ops.first
        assert isinstance(src, func.FuncOp)
        for op in src.body.block.ops:
            if isinstance(op, graph.ParamOp) and op.pname in fn.params:
                ty = op.output.type
                assert isinstance(ty, graph.TensorType)
                own[op.pname] = ty
        f = func.FuncOp(f"stage{s}", (arg_types, []), arg_attrs=main.arg_attrs)
        for new, old in zip(f.args, main.args):
            new.name_hint = old.name_hint
        stashed = build_stage(f, fn, s, stages, microbatches, schedule, n_metrics, own)
        f.update_function_type()
        names = ["loss", *(f"grad.{p}" for p in own), *(f"metric{k}" for k in range(n_metrics))]
        names += [STASH + p for p in stashed]
        f.res_attrs = ArrayAttr([DictionaryAttr({"dlpc.name": StringAttr(n)}) for n in names])
        programs.append(f)
    check_schedule(programs)
    Rewriter.replace_op(main, programs)
    return programs


def _rows(ty, times: int) -> graph.TensorType:
    assert isinstance(ty, graph.TensorType)
    shape = list(ty.get_shape())
    shape[0] *= times
    return graph.tensor_type(shape, ty.get_element_type())


@dataclass(frozen=True)
class GraphPipeline(ModulePass):
    """Cut @main into pipeline stages, one program each (see the module docstring)."""

    name = "graph-pipeline"

    stages: int = 2
    microbatches: int = 2
    schedule: str = "1f1b"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pipeline(op, self.stages, self.microbatches, self.schedule)


@dataclass(frozen=True)
class CommCheckSchedule(ModulePass):
    """Check the point-to-point order of a module's functions, the i-th being rank i's
    program (`check_schedule`)."""

    name = "comm-check-schedule"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_schedule([f for f in op.ops if isinstance(f, func.FuncOp)], self.name)
