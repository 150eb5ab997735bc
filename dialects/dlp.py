# pyright: strict
"""The `dlp` dialect: a DLP-class accelerator (textbook DLP / Cambricon-MLU style).

The machine has clusters of cores; each core owns two scratchpads, NRAM (vectors,
neurons) and WRAM (weights, read by the matrix unit); each cluster shares an SRAM; all
of them reach the off-chip GDRAM only through DMA. Buffers are builtin `memref`s whose
memory space says where they live (no memory space means GDRAM):

    memref<1024xf32, #dlp.space<nram>>      per core
    memref<1024xf32, #dlp.space<wram>>      per core, matrix-unit operands
    memref<4096xf32, #dlp.space<sram>>      per cluster
    memref<64x784xf32>                      GDRAM (the model's tensors)

A kernel runs once per task (one task per core); `dlp.task_id` tells which:

    dlp.kernel "relu_0" attributes {origin = "graph.relu", tasks = 16 : i64} {
      %t = dlp.task_id
      %buf = memref.alloc() : memref<256xf32, #dlp.space<nram>>
      dlp.memcpy GDRAM2NRAM %buf[%c0], %x[%off], %n : memref<256xf32, #dlp.space<nram>>, memref<64x64xf32>
      dlp.relu %buf[%c0], %buf[%c0], %n : memref<256xf32, #dlp.space<nram>>, memref<256xf32, #dlp.space<nram>>
      dlp.memcpy NRAM2GDRAM %out[%off], %buf[%c0], %n : memref<64x64xf32>, memref<256xf32, #dlp.space<nram>>
    }

Every buffer operand of a copy or an intrinsic is a pair `%buffer[%offset]`: the
element offset into the buffer viewed as flat and row-major; counts are elements.

Ops, in the order of this file: `dlp.kernel`; `dlp.task_id`, `dlp.cluster_id`,
`dlp.core_id`; `dlp.sync_cluster`, `dlp.sync_all`; `dlp.memcpy`, `dlp.memcpy_async`,
`dlp.memcpy_strided_async` (one DMA of equally strided segments), `dlp.wait_dma`; vector intrinsics (`add sub mul max min div`, `add_scalar mul_scalar
max_scalar`, `cycle_add cycle_sub cycle_mul`, `relu sigmoid tanh exp log sqrt`,
`reduce_sum reduce_max`, `transpose`); matrix intrinsics (`matmul`, `conv2d`); window
pooling (`pool`, max or sum).

Verifiers check the memory space of every operand (vector operands in NRAM, a matmul
or conv weight in WRAM), a copy's direction against the spaces of its source and
destination, element types, and -- where an offset is a constant -- its alignment
against the enclosing kernel's `dma_align` / `vector_align` (bytes). Alignment of
dynamic offsets, and capacities, are checked by the simulator at run time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar, NamedTuple

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    I64,
    AnyFloat,
    IndexType,
    IntegerAttr,
    MemRefType,
    NoneAttr,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    Operation,
    Region,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
)
from xdsl.irdl import (
    IRDLOperation,
    attr_def,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import NoTerminator, RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from dlpc.dialects.loop import NamedKernelSyntax
from dlpc.dialects.typed import bitwidth, element_type, int_value, memref_type, shape_of

# ------------------------------------------------------------------- attributes


class Space(StrEnum):
    GDRAM = "gdram"
    SRAM = "sram"
    NRAM = "nram"
    WRAM = "wram"


@irdl_attr_definition
class SpaceAttr(EnumAttribute[Space]):
    """A memref memory space: `#dlp.space<nram>`."""

    name = "dlp.space"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> Space:
        with parser.in_angle_brackets():
            return parser.parse_str_enum(Space)

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(self.data.value)


class Direction(StrEnum):
    """A copy direction `SRC2DST`, one member for every (source, destination) pair of spaces
    (written out rather than generated so that the type checker knows the class)."""

    GDRAM2GDRAM = "GDRAM2GDRAM"
    GDRAM2SRAM = "GDRAM2SRAM"
    GDRAM2NRAM = "GDRAM2NRAM"
    GDRAM2WRAM = "GDRAM2WRAM"
    SRAM2GDRAM = "SRAM2GDRAM"
    SRAM2SRAM = "SRAM2SRAM"
    SRAM2NRAM = "SRAM2NRAM"
    SRAM2WRAM = "SRAM2WRAM"
    NRAM2GDRAM = "NRAM2GDRAM"
    NRAM2SRAM = "NRAM2SRAM"
    NRAM2NRAM = "NRAM2NRAM"
    NRAM2WRAM = "NRAM2WRAM"
    WRAM2GDRAM = "WRAM2GDRAM"
    WRAM2SRAM = "WRAM2SRAM"
    WRAM2NRAM = "WRAM2NRAM"
    WRAM2WRAM = "WRAM2WRAM"


@irdl_attr_definition
class DirectionAttr(EnumAttribute[Direction], SpacedOpaqueSyntaxAttribute):
    """A copy direction `SRC2DST`: `#dlp<dir GDRAM2NRAM>`, bare `GDRAM2NRAM` in `dlp.memcpy`."""

    name = "dlp.dir"


def space_attr(space: str) -> SpaceAttr:
    return SpaceAttr(Space(space))


def space_of(ty: Attribute) -> str:
    """The memory space of a memref type: `gdram` when it has none."""
    if not isinstance(ty, MemRefType):
        raise VerifyException(f"expected a memref, got {ty}")
    ms = ty.memory_space
    if isinstance(ms, NoneAttr):
        return "gdram"
    if isinstance(ms, SpaceAttr):
        return ms.data.value
    raise VerifyException(f"memref {ty} has memory space {ms}, expected #dlp.space<...>")


def memref_in(space: str, shape: Sequence[int], element_type: Attribute) -> MemRefType:
    """`memref<shape x element_type, #dlp.space<space>>` (no memory space for gdram)."""
    ms = NoneAttr() if space == "gdram" else space_attr(space)
    return MemRefType(element_type, list(shape), memory_space=ms)


def direction(src_space: str, dst_space: str) -> DirectionAttr:
    return DirectionAttr(Direction(f"{src_space.upper()}2{dst_space.upper()}"))


def element_bytes(ty: MemRefType) -> int:
    """Bytes per element of a buffer (an i1 is a one-byte C bool)."""
    return max(1, bitwidth(ty.get_element_type()) // 8)


def constant_index(value: SSAValue) -> int | None:
    op = value.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


def _kernel_alignment(op: Operation, key: str) -> int | None:
    """The enclosing kernel's `dma_align` or `vector_align` (None: no kernel, or unset)."""
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, KernelOp):
        parent = parent.parent_op()
    if parent is None:
        return None
    attr = parent.dma_align if key == "dma_align" else parent.vector_align
    return attr.value.data if attr is not None else None


# ------------------------------------------------------------------------ kernel


@irdl_op_definition
class KernelOp(NamedKernelSyntax, IRDLOperation):
    """One kernel, run once per task (one task per core of the machine).

        dlp.kernel "matmul_0" attributes {origin = "graph.matmul", tasks = 16 : i64,
                                          dma_align = 64 : i64, vector_align = 64 : i64} {
          ...
        }

    `origin` names the graph op the kernel came from; `tasks` is the launch size;
    `double_buffered` marks kernels whose loads overlap compute (for the time model).
    A kernel that issues `dlp.memcpy_async` ends with `dlp.wait_dma`: its copies land
    before the kernel is done.
    """

    name = "dlp.kernel"
    origin = opt_attr_def(StringAttr)
    tasks = opt_attr_def(IntegerAttr[I64])
    dma_align = opt_attr_def(IntegerAttr[I64])
    vector_align = opt_attr_def(IntegerAttr[I64])
    double_buffered = opt_attr_def(UnitAttr)
    traits = traits_def(NoTerminator(), RecursiveMemoryEffect())

    def __init__(self, name: str, body: Region | Block | None = None, /, **attrs: Attribute):
        if body is None:
            body = Region(Block())
        elif isinstance(body, Block):
            body = Region(body)
        super().__init__(properties={"name": StringAttr(name)}, regions=[body], attributes=attrs)

    @property
    def num_tasks(self) -> int:
        return self.tasks.value.data if self.tasks is not None else 1

    def verify_(self) -> None:
        if self.tasks is not None and self.num_tasks < 1:
            raise VerifyException(
                f"kernel '{self.sym}' launches {self.num_tasks} tasks, expected >= 1"
            )
        for key, attr in (("dma_align", self.dma_align), ("vector_align", self.vector_align)):
            if attr is not None and (
                attr.value.data <= 0 or attr.value.data & (attr.value.data - 1)
            ):
                raise VerifyException(
                    f"kernel '{self.sym}' has {key} {attr}, expected a power of two"
                )
        last = self.body.block.last_op if self.body.blocks else None
        if not isinstance(last, WaitDmaOp) and any(
            isinstance(op, MemcpyAsyncOp | MemcpyStridedAsyncOp) for op in self.walk()
        ):
            raise VerifyException(
                f"kernel '{self.sym}' issues dlp.memcpy_async but does not end with dlp.wait_dma"
            )


# --------------------------------------------------------------- ids and barriers


class _IdOp(IRDLOperation):
    res = result_def(IndexType)
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__(result_types=[IndexType()])


@irdl_op_definition
class TaskIdOp(_IdOp):
    """This task's number, 0 <= id < tasks (BANG `taskId`):  `%t = dlp.task_id`"""

    name = "dlp.task_id"


@irdl_op_definition
class ClusterIdOp(_IdOp):
    """The cluster running this task (BANG `clusterId`):  `%c = dlp.cluster_id`"""

    name = "dlp.cluster_id"


@irdl_op_definition
class CoreIdOp(_IdOp):
    """This core's number within its cluster (BANG `coreId`):  `%c = dlp.core_id`"""

    name = "dlp.core_id"


@irdl_op_definition
class SyncClusterOp(IRDLOperation):
    """Barrier among the cores of one cluster (after SRAM staging):  `dlp.sync_cluster`"""

    name = "dlp.sync_cluster"
    assembly_format = "attr-dict"


@irdl_op_definition
class SyncAllOp(IRDLOperation):
    """Barrier among all tasks of the kernel:  `dlp.sync_all`"""

    name = "dlp.sync_all"
    assembly_format = "attr-dict"


# ------------------------------------------------------------------------ copies


class BufferOperand(NamedTuple):
    """One `%buffer[%offset]` operand of a copy or an intrinsic, with its operand name."""

    what: str
    buffer: SSAValue
    offset: SSAValue


def _check_buffer(
    op: Operation,
    operand: BufferOperand,
    spaces: Sequence[str],
    align_key: str | None,
) -> str:
    """Check one `%buffer[%offset]` operand: memref, space in `spaces`, alignment of a
    constant offset (on-chip side only). Returns the space."""
    what, buf, offset = operand
    if not isinstance(buf.type, MemRefType):
        raise VerifyException(f"{op.name} operand '{what}' must be a memref, got {buf.type}")
    ty = memref_type(buf)
    space = space_of(ty)
    if space not in spaces:
        want = " or ".join(spaces)
        raise VerifyException(f"{op.name} operand '{what}' must be in {want}, got {space} ({ty})")
    off = constant_index(offset)
    if off is not None and off < 0:
        raise VerifyException(f"{op.name} operand '{what}' has negative offset {off}")
    if off is not None and align_key is not None and space != "gdram":
        align = _kernel_alignment(op, align_key)
        nbytes = off * element_bytes(ty)
        if align is not None and nbytes % align:
            raise VerifyException(
                f"{op.name} operand '{what}' offset {off} ({nbytes} bytes) is not aligned "
                f"to {align} bytes ({align_key})"
            )
    return space


# The operand bases. xDSL orders an op's operands by its classes' MRO, each class's own
# first: a family lists its buffer base first, then the base of the operands that follow
# the buffers (counts, sizes, a scalar), and declares no operand itself; so every op's
# operands are in the order of its syntax, buffers first.


class BufferOp(IRDLOperation):
    """An op whose memory operands are `%buffer[%offset]` pairs (a copy or an intrinsic)."""

    def buffer_operands(self) -> tuple[BufferOperand, ...]:
        """The buffer operands, in the order of the op's syntax."""
        raise NotImplementedError

    def trailing_operands(self) -> tuple[SSAValue, ...]:
        """The operands after the buffers (counts, sizes, a scalar), in order."""
        return tuple(self.operands[2 * len(self.buffer_operands()) :])


class _DstSrcOperands(BufferOp):
    """`%dst[%dst_offset], %src[%src_offset]`."""

    dst = operand_def(MemRefType)
    dst_offset = operand_def(IndexType)
    src = operand_def(MemRefType)
    src_offset = operand_def(IndexType)

    def buffer_operands(self) -> tuple[BufferOperand, ...]:
        return (
            BufferOperand("dst", self.dst, self.dst_offset),
            BufferOperand("src", self.src, self.src_offset),
        )


class _DstLhsRhsOperands(BufferOp):
    """`%dst[%dst_offset], %lhs[%lhs_offset], %rhs[%rhs_offset]`."""

    dst = operand_def(MemRefType)
    dst_offset = operand_def(IndexType)
    lhs = operand_def(MemRefType)
    lhs_offset = operand_def(IndexType)
    rhs = operand_def(MemRefType)
    rhs_offset = operand_def(IndexType)

    def buffer_operands(self) -> tuple[BufferOperand, ...]:
        return (
            BufferOperand("dst", self.dst, self.dst_offset),
            BufferOperand("lhs", self.lhs, self.lhs_offset),
            BufferOperand("rhs", self.rhs, self.rhs_offset),
        )


class _CountOperand(IRDLOperation):
    count = operand_def(IndexType)


class _MemcpyBase(_DstSrcOperands, _CountOperand):
    direction = prop_def(DirectionAttr)
    assembly_format = (
        "$direction $dst `[` $dst_offset `]` `,` $src `[` $src_offset `]` `,` $count "
        "attr-dict `:` type($dst) `,` type($src)"
    )

    def __init__(
        self,
        dst: SSAValue,
        dst_offset: SSAValue,
        src: SSAValue,
        src_offset: SSAValue,
        count: SSAValue,
    ):
        d = direction(space_of(src.type), space_of(dst.type))
        super().__init__(
            operands=[dst, dst_offset, src, src_offset, count], properties={"direction": d}
        )

    def verify_(self) -> None:
        spaces = [s.value for s in Space]
        dst, src = self.buffer_operands()
        dst_space = _check_buffer(self, dst, spaces, "dma_align")
        src_space = _check_buffer(self, src, spaces, "dma_align")
        d = self.direction.data.value
        want_src, want_dst = (s.lower() for s in d.split("2"))
        if (want_src, want_dst) != (src_space, dst_space):
            raise VerifyException(
                f"{self.name} direction {d} does not match source in {src_space} and "
                f"destination in {dst_space} (expected {src_space.upper()}2{dst_space.upper()})"
            )
        src_elt, dst_elt = element_type(self.src), element_type(self.dst)
        if dst_elt != src_elt:
            raise VerifyException(f"{self.name} copies {src_elt} into {dst_elt}")


@irdl_op_definition
class MemcpyOp(_MemcpyBase):
    """Copy `count` elements by DMA (BANG `__memcpy(dst, src, bytes, DIR)`).

    dlp.memcpy GDRAM2NRAM %buf[%c0], %x[%off], %n : memref<256xf32, #dlp.space<nram>>, memref<64x64xf32>
    """

    name = "dlp.memcpy"


@irdl_op_definition
class MemcpyAsyncOp(_MemcpyBase):
    """Start a DMA copy and continue (BANG `__memcpy_async`); `dlp.wait_dma` waits for it.

    dlp.memcpy_async GDRAM2NRAM %buf[%c256], %x[%off], %n : memref<512xf32, #dlp.space<nram>>, memref<64x64xf32>
    """

    name = "dlp.memcpy_async"


class _StrideOperands(IRDLOperation):
    count = operand_def(IndexType)
    segments = operand_def(IndexType)
    dst_stride = operand_def(IndexType)
    src_stride = operand_def(IndexType)


@irdl_op_definition
class MemcpyStridedAsyncOp(_DstSrcOperands, _StrideOperands):
    """Start one DMA of `segments` segments of `count` elements, segment i from
    `src[src_offset + i * src_stride]` to `dst[dst_offset + i * dst_stride]` (BANG's
    strided `__memcpy_async(dst, src, bytes, DIR, dst_stride, src_stride, segments - 1)`,
    strides in bytes); `dlp.wait_dma` waits for it. One DMA: one latency.

    dlp.memcpy_strided_async GDRAM2GDRAM %q[%c0], %qkv[%c0], %c64 x %c16, %c64, %c192 : memref<16x64xf32>, memref<16x192xf32>
    """

    name = "dlp.memcpy_strided_async"
    direction = prop_def(DirectionAttr)
    assembly_format = (
        "$direction $dst `[` $dst_offset `]` `,` $src `[` $src_offset `]` `,` $count `x` "
        "$segments `,` $dst_stride `,` $src_stride attr-dict `:` type($dst) `,` type($src)"
    )

    def __init__(
        self,
        dst: SSAValue,
        dst_offset: SSAValue,
        src: SSAValue,
        src_offset: SSAValue,
        count: SSAValue,
        segments: SSAValue,
        dst_stride: SSAValue,
        src_stride: SSAValue,
    ):
        d = direction(space_of(src.type), space_of(dst.type))
        super().__init__(
            operands=[dst, dst_offset, src, src_offset, count, segments, dst_stride, src_stride],
            properties={"direction": d},
        )

    def verify_(self) -> None:
        _MemcpyBase.verify_(self)  # type: ignore[arg-type]  # (spaces, direction, types)
        segments = constant_index(self.segments)
        if segments is not None and segments < 1:
            raise VerifyException(f"{self.name} has {segments} segments, expected >= 1")
        count, stride = constant_index(self.count), constant_index(self.dst_stride)
        if (segments or 2) > 1 and count is not None and stride is not None and stride < count:
            raise VerifyException(
                f"{self.name} destination stride {stride} is less than the segment's "
                f"{count} elements: segments would overlap"
            )


@irdl_op_definition
class WaitDmaOp(IRDLOperation):
    """Wait until this core's outstanding asynchronous copies are done (BANG `__sync_io`).

    dlp.wait_dma
    """

    name = "dlp.wait_dma"
    assembly_format = "attr-dict"


# ------------------------------------------------------------- vector intrinsics


class IntrinsicOp(BufferOp):
    """A vector or matrix intrinsic. Common verification: every buffer in NRAM (but the
    matrix unit's weight operand, in WRAM), holding floats of one element type, a constant
    offset aligned to the kernel's `vector_align`."""

    WRAM_OPERAND: ClassVar[str | None] = None  # the operand the matrix unit reads from WRAM

    def element_type(self) -> Attribute:
        """The element type of the buffers (verified to be one float type)."""
        return element_type(self.buffer_operands()[0].buffer)

    def verify_(self) -> None:
        elt = None
        for operand in self.buffer_operands():
            wram = operand.what == self.WRAM_OPERAND
            _check_buffer(self, operand, ("wram",) if wram else ("nram",), "vector_align")
            e = element_type(operand.buffer)
            if not isinstance(e, AnyFloat):
                raise VerifyException(
                    f"{self.name} operand '{operand.what}' must hold floats, got {e}"
                )
            if elt is not None and e != elt:
                raise VerifyException(f"{self.name} mixes element types {elt} and {e}")
            elt = e


class _BinaryOp(_DstLhsRhsOperands, _CountOperand, IntrinsicOp):
    assembly_format = (
        "$dst `[` $dst_offset `]` `,` $lhs `[` $lhs_offset `]` `,` $rhs `[` $rhs_offset `]` `,` "
        "$count attr-dict `:` type($dst) `,` type($lhs) `,` type($rhs)"
    )

    def __init__(
        self,
        dst: SSAValue,
        dst_offset: SSAValue,
        lhs: SSAValue,
        lhs_offset: SSAValue,
        rhs: SSAValue,
        rhs_offset: SSAValue,
        count: SSAValue,
    ):
        super().__init__(operands=[dst, dst_offset, lhs, lhs_offset, rhs, rhs_offset, count])


@irdl_op_definition
class AddOp(_BinaryOp):
    """`dst[i] = lhs[i] + rhs[i]`, i < count (BANG `__bang_add`).

    dlp.add %d[%c0], %a[%c0], %b[%c0], %n : memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>
    """

    name = "dlp.add"


@irdl_op_definition
class SubOp(_BinaryOp):
    """`dst[i] = lhs[i] - rhs[i]` (BANG `__bang_sub`)."""

    name = "dlp.sub"


@irdl_op_definition
class MulOp(_BinaryOp):
    """`dst[i] = lhs[i] * rhs[i]` (BANG `__bang_mul`)."""

    name = "dlp.mul"


@irdl_op_definition
class MaxOp(_BinaryOp):
    """`dst[i] = max(lhs[i], rhs[i])` (BANG `__bang_maxequal`)."""

    name = "dlp.max"


@irdl_op_definition
class MinOp(_BinaryOp):
    """`dst[i] = min(lhs[i], rhs[i])` (BANG `__bang_minequal`)."""

    name = "dlp.min"


@irdl_op_definition
class DivOp(_BinaryOp):
    """`dst[i] = lhs[i] / rhs[i]` (BANG `__bang_div`)."""

    name = "dlp.div"


class _ScalarCountOperands(IRDLOperation):
    scalar = operand_def(AnyFloat)
    count = operand_def(IndexType)


class _ScalarOp(_DstSrcOperands, _ScalarCountOperands, IntrinsicOp):
    assembly_format = (
        "$dst `[` $dst_offset `]` `,` $src `[` $src_offset `]` `,` $scalar `,` $count "
        "attr-dict `:` type($dst) `,` type($src) `,` type($scalar)"
    )

    def __init__(
        self,
        dst: SSAValue,
        dst_offset: SSAValue,
        src: SSAValue,
        src_offset: SSAValue,
        scalar: SSAValue,
        count: SSAValue,
    ):
        super().__init__(operands=[dst, dst_offset, src, src_offset, scalar, count])

    def verify_(self) -> None:
        super().verify_()
        elt = self.element_type()
        if self.scalar.type != elt:
            raise VerifyException(f"{self.name} scalar has type {self.scalar.type}, expected {elt}")


@irdl_op_definition
class AddScalarOp(_ScalarOp):
    """`dst[i] = src[i] + scalar` (BANG `__bang_add_scalar`).

    dlp.add_scalar %d[%c0], %a[%c0], %s, %n : memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>, f32
    """

    name = "dlp.add_scalar"


@irdl_op_definition
class MulScalarOp(_ScalarOp):
    """`dst[i] = src[i] * scalar` (BANG `__bang_mul_scalar`)."""

    name = "dlp.mul_scalar"


@irdl_op_definition
class MaxScalarOp(_ScalarOp):
    """`dst[i] = max(src[i], scalar)` (BANG `__bang_maxeq_scalar`)."""

    name = "dlp.max_scalar"


class _SegmentOperands(IRDLOperation):
    seg = operand_def(MemRefType)
    seg_offset = operand_def(IndexType)
    count = operand_def(IndexType)
    seg_count = operand_def(IndexType)


class _CycleOp(_DstSrcOperands, _SegmentOperands, IntrinsicOp):
    assembly_format = (
        "$dst `[` $dst_offset `]` `,` $src `[` $src_offset `]` `,` $seg `[` $seg_offset `]` `,` "
        "$count `,` $seg_count attr-dict `:` type($dst) `,` type($src) `,` type($seg)"
    )

    def __init__(
        self,
        dst: SSAValue,
        dst_offset: SSAValue,
        src: SSAValue,
        src_offset: SSAValue,
        seg: SSAValue,
        seg_offset: SSAValue,
        count: SSAValue,
        seg_count: SSAValue,
    ):
        super().__init__(
            operands=[dst, dst_offset, src, src_offset, seg, seg_offset, count, seg_count]
        )

    def buffer_operands(self) -> tuple[BufferOperand, ...]:
        return (*super().buffer_operands(), BufferOperand("seg", self.seg, self.seg_offset))

    def verify_(self) -> None:
        super().verify_()
        n, m = constant_index(self.count), constant_index(self.seg_count)
        if n is not None and m is not None and (m <= 0 or n % m):
            raise VerifyException(f"{self.name} count {n} is not a multiple of segment length {m}")


@irdl_op_definition
class CycleAddOp(_CycleOp):
    """Broadcast add: `dst[i] = src[i] + seg[i % seg_count]` (BANG `__bang_cycle_add`).

    dlp.cycle_add %d[%c0], %a[%c0], %b[%c0], %n, %m : memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>, memref<8xf32, #dlp.space<nram>>
    """

    name = "dlp.cycle_add"


@irdl_op_definition
class CycleSubOp(_CycleOp):
    """`dst[i] = src[i] - seg[i % seg_count]` (BANG `__bang_cycle_sub`)."""

    name = "dlp.cycle_sub"


@irdl_op_definition
class CycleMulOp(_CycleOp):
    """`dst[i] = src[i] * seg[i % seg_count]` (BANG `__bang_cycle_mul`)."""

    name = "dlp.cycle_mul"


class _UnaryOp(_DstSrcOperands, _CountOperand, IntrinsicOp):
    assembly_format = (
        "$dst `[` $dst_offset `]` `,` $src `[` $src_offset `]` `,` $count "
        "attr-dict `:` type($dst) `,` type($src)"
    )

    def __init__(
        self,
        dst: SSAValue,
        dst_offset: SSAValue,
        src: SSAValue,
        src_offset: SSAValue,
        count: SSAValue,
    ):
        super().__init__(operands=[dst, dst_offset, src, src_offset, count])


@irdl_op_definition
class ReluOp(_UnaryOp):
    """`dst[i] = max(src[i], 0)` (BANG `__bang_active_relu`).

    dlp.relu %d[%c0], %a[%c0], %n : memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>
    """

    name = "dlp.relu"


@irdl_op_definition
class SigmoidOp(_UnaryOp):
    """`dst[i] = 1 / (1 + exp(-src[i]))` (BANG `__bang_active_sigmoid`)."""

    name = "dlp.sigmoid"


@irdl_op_definition
class TanhOp(_UnaryOp):
    """`dst[i] = tanh(src[i])` (BANG `__bang_active_tanh`)."""

    name = "dlp.tanh"


@irdl_op_definition
class ExpOp(_UnaryOp):
    """`dst[i] = exp(src[i])` (BANG `__bang_active_exp`)."""

    name = "dlp.exp"


@irdl_op_definition
class LogOp(_UnaryOp):
    """`dst[i] = log(src[i])` (BANG `__bang_active_log`)."""

    name = "dlp.log"


@irdl_op_definition
class SqrtOp(_UnaryOp):
    """`dst[i] = sqrt(src[i])` (BANG `__bang_active_sqrt`)."""

    name = "dlp.sqrt"


class _RowsColsOperands(IRDLOperation):
    rows = operand_def(IndexType)
    cols = operand_def(IndexType)


class _RowsColsOp(_DstSrcOperands, _RowsColsOperands, IntrinsicOp):
    assembly_format = (
        "$dst `[` $dst_offset `]` `,` $src `[` $src_offset `]` `,` $rows `,` $cols "
        "attr-dict `:` type($dst) `,` type($src)"
    )

    def __init__(
        self,
        dst: SSAValue,
        dst_offset: SSAValue,
        src: SSAValue,
        src_offset: SSAValue,
        rows: SSAValue,
        cols: SSAValue,
    ):
        super().__init__(operands=[dst, dst_offset, src, src_offset, rows, cols])


@irdl_op_definition
class ReduceSumOp(_RowsColsOp):
    """Row sums of a rows x cols matrix: `dst[r] = sum_c src[r*cols + c]` (BANG `__bang_reduce_sum`).

    dlp.reduce_sum %d[%c0], %a[%c0], %rows, %cols : memref<8xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>
    """

    name = "dlp.reduce_sum"


@irdl_op_definition
class ReduceMaxOp(_RowsColsOp):
    """Row maxima: `dst[r] = max_c src[r*cols + c]` (BANG `__bang_reduce_max`)."""

    name = "dlp.reduce_max"


@irdl_op_definition
class TransposeOp(_RowsColsOp):
    """`dst[c*rows + r] = src[r*cols + c]` (BANG `__bang_transpose`)."""

    name = "dlp.transpose"


# ------------------------------------------------------------- matrix intrinsics


class _MatmulSizes(IRDLOperation):
    m = operand_def(IndexType)
    k = operand_def(IndexType)
    n = operand_def(IndexType)


@irdl_op_definition
class MatmulOp(_DstLhsRhsOperands, _MatmulSizes, IntrinsicOp):
    """`dst (m x n) = lhs (m x k) @ rhs`, rhs in WRAM as k x n, or n x k with
    `transpose_rhs` (BANG `__bang_matmul`/`__bang_mlp`).

        dlp.matmul %d[%c0], %a[%c0], %w[%c0], %m, %k, %n {transpose_rhs} : memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<wram>>
    """

    name = "dlp.matmul"
    WRAM_OPERAND: ClassVar[str | None] = "rhs"
    transpose_rhs = opt_attr_def(UnitAttr)
    assembly_format = (
        "$dst `[` $dst_offset `]` `,` $lhs `[` $lhs_offset `]` `,` $rhs `[` $rhs_offset `]` `,` "
        "$m `,` $k `,` $n attr-dict `:` type($dst) `,` type($lhs) `,` type($rhs)"
    )

    def __init__(
        self,
        dst: SSAValue,
        dst_offset: SSAValue,
        lhs: SSAValue,
        lhs_offset: SSAValue,
        rhs: SSAValue,
        rhs_offset: SSAValue,
        m: SSAValue,
        k: SSAValue,
        n: SSAValue,
        transpose_rhs: bool = False,
    ):
        attrs: dict[str, Attribute] = {"transpose_rhs": UnitAttr()} if transpose_rhs else {}
        super().__init__(
            operands=[dst, dst_offset, lhs, lhs_offset, rhs, rhs_offset, m, k, n], attributes=attrs
        )


def _elements(value: SSAValue) -> int:
    return math.prod(shape_of(value))


class _WindowAttrs(IRDLOperation):
    """The static geometry of a window over CHW planes, shared by `conv2d` and `pool`
    (attributes, in the op's attribute dictionary)."""

    height = attr_def(IntegerAttr[I64])
    width = attr_def(IntegerAttr[I64])
    kernel_h = attr_def(IntegerAttr[I64])
    kernel_w = attr_def(IntegerAttr[I64])
    stride_h = attr_def(IntegerAttr[I64])
    stride_w = attr_def(IntegerAttr[I64])
    pad_top = attr_def(IntegerAttr[I64])
    pad_left = attr_def(IntegerAttr[I64])

    PARAMS: ClassVar[tuple[str, ...]] = ()  # the geometry attributes, in intrinsic order

    def param(self, key: str) -> int:
        """The value of the geometry attribute `key` (one of `PARAMS`)."""
        return int_value(self.attributes[key])

    def param_values(self) -> tuple[int, ...]:
        """The geometry attributes' values in the order of `PARAMS` (the intrinsic's)."""
        return tuple(self.param(key) for key in self.PARAMS)

    def _verify_params(self) -> None:
        for key in self.PARAMS:
            low = 0 if key.startswith("pad") else 1
            if self.param(key) < low:
                raise VerifyException(
                    f"{self.name} has {key} = {self.param(key)}, expected >= {low}"
                )


CONV_PARAMS = (
    "channels_in",
    "height",
    "width",
    "kernel_h",
    "kernel_w",
    "stride_h",
    "stride_w",
    "pad_top",
    "pad_left",
    "pad_bottom",
    "pad_right",
)


class _WeightOperands(IRDLOperation):
    weight = operand_def(MemRefType)
    weight_offset = operand_def(IndexType)
    channels_out = operand_def(IndexType)


@irdl_op_definition
class Conv2dOp(_DstSrcOperands, _WeightOperands, _WindowAttrs, IntrinsicOp):
    """Direct convolution of one CHW image in NRAM with OIHW weights in WRAM into a CHW
    result in NRAM (BANG `__bang_conv`); padding is implicit (zeros outside the image).
    Shapes are static attributes, the number of output channels is an operand.

        dlp.conv2d %y[%c0], %x[%c0], %w[%c0], %co {channels_in = 3 : i64, height = 8 : i64, width = 8 : i64, kernel_h = 3 : i64, kernel_w = 3 : i64, stride_h = 1 : i64, stride_w = 1 : i64, pad_top = 1 : i64, pad_left = 1 : i64, pad_bottom = 1 : i64, pad_right = 1 : i64} : ...
    """

    name = "dlp.conv2d"
    WRAM_OPERAND: ClassVar[str | None] = "weight"
    PARAMS: ClassVar[tuple[str, ...]] = CONV_PARAMS
    channels_in = attr_def(IntegerAttr[I64])
    pad_bottom = attr_def(IntegerAttr[I64])
    pad_right = attr_def(IntegerAttr[I64])
    assembly_format = (
        "$dst `[` $dst_offset `]` `,` $src `[` $src_offset `]` `,` $weight `[` $weight_offset `]` `,` "
        "$channels_out attr-dict `:` type($dst) `,` type($src) `,` type($weight)"
    )

    def __init__(
        self,
        dst: SSAValue,
        dst_offset: SSAValue,
        src: SSAValue,
        src_offset: SSAValue,
        weight: SSAValue,
        weight_offset: SSAValue,
        channels_out: SSAValue,
        **params: int,
    ):
        super().__init__(
            operands=[dst, dst_offset, src, src_offset, weight, weight_offset, channels_out],
            attributes={k: IntegerAttr(params[k], i64) for k in CONV_PARAMS},
        )

    def buffer_operands(self) -> tuple[BufferOperand, ...]:
        weight = BufferOperand("weight", self.weight, self.weight_offset)
        return (*super().buffer_operands(), weight)

    def out_hw(self) -> tuple[int, int]:
        p = self.param
        return (
            (p("height") + p("pad_top") + p("pad_bottom") - p("kernel_h")) // p("stride_h") + 1,
            (p("width") + p("pad_left") + p("pad_right") - p("kernel_w")) // p("stride_w") + 1,
        )

    def verify_(self) -> None:
        super().verify_()
        self._verify_params()
        oh, ow = self.out_hw()
        if oh < 1 or ow < 1:
            raise VerifyException("dlp.conv2d kernel is larger than the padded input")
        p = self.param
        checks = [("src", self.src, p("channels_in") * p("height") * p("width"))]
        co = constant_index(self.channels_out)
        if co is not None:
            taps = p("channels_in") * p("kernel_h") * p("kernel_w")
            checks += [("dst", self.dst, co * oh * ow), ("weight", self.weight, co * taps)]
        for what, buf, need in checks:
            if _elements(buf) < need:
                raise VerifyException(
                    f"dlp.conv2d operand '{what}' holds {_elements(buf)} elements, needs {need}"
                )


class PoolMode(StrEnum):
    MAX = "max"
    SUM = "sum"


@irdl_attr_definition
class PoolModeAttr(EnumAttribute[PoolMode], SpacedOpaqueSyntaxAttribute):
    """What `dlp.pool` combines a window with: `#dlp<pool_mode "max">`, a bare `"max"` or
    `"sum"` in `dlp.pool`."""

    name = "dlp.pool_mode"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> PoolMode:
        start = parser.pos
        mode = parser.parse_str_literal(" for the pool mode")
        if mode not in {m.value for m in PoolMode}:
            parser.raise_error(
                f'dlp.pool has mode "{mode}", expected "max" or "sum"', start, parser.pos
            )
        return PoolMode(mode)

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string_literal(self.data.value)


POOL_PARAMS = (
    "height",
    "width",
    "kernel_h",
    "kernel_w",
    "stride_h",
    "stride_w",
    "pad_top",
    "pad_left",
    "out_h",
    "out_w",
)


class _ChannelsOperand(IRDLOperation):
    channels = operand_def(IndexType)


@irdl_op_definition
class PoolOp(_DstSrcOperands, _ChannelsOperand, _WindowAttrs, IntrinsicOp):
    """Window pooling of `channels` CHW planes in NRAM into CHW results in NRAM (BANG
    `__bang_maxpool`/`__bang_sumpool`): `dst[c, y, x]` is the max (`mode = "max"`) or the sum
    (`mode = "sum"`) of `src[c, y*stride_h - pad_top + i, x*stride_w - pad_left + j]` over the
    `kernel_h x kernel_w` window; cells outside the image are skipped (padding is implicit, and
    `out_h`/`out_w` may reach past the padded image, as in ceil mode). Average pooling is a sum
    followed by its division (a vector op, or scalar loops when the count varies).

        dlp.pool "max" %y[%c0], %x[%c0], %n {height = 8 : i64, width = 8 : i64, kernel_h = 2 : i64, kernel_w = 2 : i64, stride_h = 2 : i64, stride_w = 2 : i64, pad_top = 0 : i64, pad_left = 0 : i64, out_h = 4 : i64, out_w = 4 : i64} : ...
    """

    name = "dlp.pool"
    PARAMS: ClassVar[tuple[str, ...]] = POOL_PARAMS
    mode = prop_def(PoolModeAttr)
    out_h = attr_def(IntegerAttr[I64])
    out_w = attr_def(IntegerAttr[I64])
    assembly_format = (
        "$mode $dst `[` $dst_offset `]` `,` $src `[` $src_offset `]` `,` $channels attr-dict "
        "`:` type($dst) `,` type($src)"
    )

    def __init__(
        self,
        mode: str,
        dst: SSAValue,
        dst_offset: SSAValue,
        src: SSAValue,
        src_offset: SSAValue,
        channels: SSAValue,
        **params: int,
    ):
        super().__init__(
            operands=[dst, dst_offset, src, src_offset, channels],
            properties={"mode": PoolModeAttr(PoolMode(mode))},
            attributes={k: IntegerAttr(params[k], i64) for k in POOL_PARAMS},
        )

    def verify_(self) -> None:
        super().verify_()
        self._verify_params()
        p = self.param
        if p("pad_top") >= p("kernel_h") or p("pad_left") >= p("kernel_w"):
            raise VerifyException("dlp.pool padding must be smaller than the window")
        for axis, o, s, pad, n in (
            ("rows", "out_h", "stride_h", "pad_top", "height"),
            ("columns", "out_w", "stride_w", "pad_left", "width"),
        ):
            if (p(o) - 1) * p(s) - p(pad) >= p(n):
                raise VerifyException(
                    f"dlp.pool last window of {axis} starts past the image ({o} = {p(o)})"
                )
        c = constant_index(self.channels)
        if c is None:
            return
        for what, buf, need in (
            ("src", self.src, c * p("height") * p("width")),
            ("dst", self.dst, c * p("out_h") * p("out_w")),
        ):
            if _elements(buf) < need:
                raise VerifyException(
                    f"dlp.pool operand '{what}' holds {_elements(buf)} elements, needs {need}"
                )


VECTOR_OPS = (
    AddOp,
    SubOp,
    MulOp,
    MaxOp,
    MinOp,
    DivOp,
    AddScalarOp,
    MulScalarOp,
    MaxScalarOp,
    CycleAddOp,
    CycleSubOp,
    CycleMulOp,
    ReluOp,
    SigmoidOp,
    TanhOp,
    ExpOp,
    LogOp,
    SqrtOp,
    ReduceSumOp,
    ReduceMaxOp,
    TransposeOp,
)

Dlp = Dialect(
    "dlp",
    [
        KernelOp,
        TaskIdOp,
        ClusterIdOp,
        CoreIdOp,
        SyncClusterOp,
        SyncAllOp,
        MemcpyOp,
        MemcpyAsyncOp,
        MemcpyStridedAsyncOp,
        WaitDmaOp,
        *VECTOR_OPS,
        MatmulOp,
        Conv2dOp,
        PoolOp,
    ],
    [SpaceAttr, DirectionAttr, PoolModeAttr],
)
