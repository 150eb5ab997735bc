# pyright: strict
"""The `comm` dialect: collective and point-to-point communication between ranks.

A program with comm ops is the program of one rank (SPMD: every rank of a group runs
it); each op names its process group, a set of ranks of a world of `world` ranks, or an
axis of a device mesh dp x tp x pp. Values are graph-level tensors, as in `graph`.

    %s = comm.all_reduce sum %g1, %g2 group <world 2> : tensor<4x3xf32>, tensor<3xf32>
    %y = comm.all_gather %x dim 0 group <world 2> : tensor<2x3xf32> -> tensor<4x3xf32>
    comm.send %a to 1 tag 0 group <world 2> : tensor<2xf32>

Order within a rank's program is the order of execution: comm ops have effects, so no
pass may drop or reorder them. The numpy definition of each op (a function of every rank's
inputs giving every rank's outputs) is `dlpc.reference.comm`; their gradient rules are in
`dlpc.passes.train._comm_grad`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    IntAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
)
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import (
    Attribute,
    Dialect,
    ParametrizedAttribute,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
)
from xdsl.irdl import (
    IRDLOperation,
    RangeOf,
    RangeVarConstraint,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from dlpc.dialects import typed

MESH_AXES = ("dp", "tp", "pp")

# --------------------------------------------------------------------- attributes


class ReduceKind(StrEnum):
    SUM = "sum"
    PROD = "prod"
    MIN = "min"
    MAX = "max"
    AVG = "avg"


@irdl_attr_definition
class ReduceKindAttr(EnumAttribute[ReduceKind], SpacedOpaqueSyntaxAttribute):
    """How a reduction combines the ranks' values: `#comm<reduce sum>`."""

    name = "comm.reduce"


@irdl_attr_definition
class GroupAttr(ParametrizedAttribute):
    """A process group: explicit ranks of a world, or one axis of a device mesh.

        #comm.group<world 4>                              all four ranks
        #comm.group<world 4, ranks [0, 2]>                ranks 0 and 2
        #comm.group<world 4, mesh [2, 2, 1], axis "dp">   the ranks that differ only in dp

    A mesh dp x tp x pp numbers its ranks row-major (rank = (d * tp + t) * pp + p); the
    group of a mesh axis depends on the rank that runs the op (`members`).
    """

    name = "comm.group"

    world: IntAttr
    ranks: ArrayAttr[IntAttr]
    mesh: ArrayAttr[IntAttr]
    axis: StringAttr

    @staticmethod
    def of(
        world: int, ranks: Sequence[int] = (), mesh: Sequence[int] = (), axis: str = ""
    ) -> GroupAttr:
        return GroupAttr(
            IntAttr(world),
            ArrayAttr([IntAttr(r) for r in ranks]),
            ArrayAttr([IntAttr(m) for m in mesh]),
            StringAttr(axis),
        )

    @property
    def world_size(self) -> int:
        return self.world.data

    @property
    def rank_list(self) -> tuple[int, ...]:
        return tuple(r.data for r in self.ranks.data)

    @property
    def mesh_shape(self) -> tuple[int, ...]:
        return tuple(m.data for m in self.mesh.data)

    @property
    def size(self) -> int:
        """The number of ranks in the group (the n of the ops' shape rules)."""
        if self.axis.data:
            return self.mesh_shape[MESH_AXES.index(self.axis.data)]
        return len(self.rank_list) or self.world_size

    def members(self, rank: int) -> tuple[int, ...]:
        """The group's ranks, in group order, as seen by world rank `rank`."""
        if self.axis.data:
            shape = self.mesh_shape
            k = MESH_AXES.index(self.axis.data)
            coords: list[int] = []
            rest = rank
            for extent in reversed(shape):
                coords.insert(0, rest % extent)
                rest //= extent
            out: list[int] = []
            for i in range(shape[k]):
                c = list(coords)
                c[k] = i
                flat = 0
                for extent, v in zip(shape, c):
                    flat = flat * extent + v
                out.append(flat)
            return tuple(out)
        return self.rank_list or tuple(range(self.world_size))

    def verify(self) -> None:
        world = self.world_size
        if world < 1:
            raise VerifyException(f"comm.group: world size must be >= 1, got {world}")
        for r in self.rank_list:
            if not 0 <= r < world:
                raise VerifyException(f"comm.group: rank {r} is out of range for world {world}")
        if len(set(self.rank_list)) != len(self.rank_list):
            raise VerifyException(f"comm.group: ranks {list(self.rank_list)} repeat a rank")
        if self.axis.data or self.mesh.data:
            if self.rank_list:
                raise VerifyException("comm.group: give either ranks or a mesh axis, not both")
            if self.axis.data not in MESH_AXES:
                raise VerifyException(
                    f"comm.group: mesh axis '{self.axis.data}' is not one of dp, tp, pp"
                )
            shape = self.mesh_shape
            product = 1
            for m in shape:
                product *= m
            if len(shape) != 3 or product != world:
                raise VerifyException(
                    f"comm.group: mesh {list(shape)} is not dp x tp x pp of world {world}"
                )

    def print_parameters(self, printer: Printer) -> None:
        text = f"world {self.world_size}"
        if self.rank_list:
            text += f", ranks [{', '.join(map(str, self.rank_list))}]"
        if self.axis.data:
            text += f', mesh [{", ".join(map(str, self.mesh_shape))}], axis "{self.axis.data}"'
        printer.print_string(f"<{text}>")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        def int_list() -> list[int]:
            return parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)

        with parser.in_angle_brackets():
            parser.parse_keyword("world")
            world = parser.parse_integer()
            ranks: list[int] = []
            mesh: list[int] = []
            axis = ""
            while parser.parse_optional_punctuation(","):
                if parser.parse_optional_keyword("ranks"):
                    ranks = int_list()
                elif parser.parse_optional_keyword("mesh"):
                    mesh = int_list()
                else:
                    parser.parse_keyword("axis")
                    axis = parser.parse_str_literal()
        group = GroupAttr.of(world, ranks, mesh, axis)
        return [group.world, group.ranks, group.mesh, group.axis]


# --------------------------------------------------------------------------- ops


def _shape(value: SSAValue) -> tuple[int, ...]:
    ty = value.type
    assert isinstance(ty, TensorType)  # operand_def(TensorType) was verified first
    return ty.get_shape()


def _element(value: SSAValue) -> Attribute:
    return typed.element_type(value)


def _fmt(shape: Sequence[int]) -> str:
    return "x".join(map(str, shape)) if shape else "scalar"


class CommOp(IRDLOperation):
    """Every comm op runs over a process group; the group's ranks must be in range."""

    group = prop_def(GroupAttr)

    @property
    def group_size(self) -> int:
        return self.group.size

    def _check_rank(self, what: str, rank: int) -> None:
        n = self.group_size
        if not 0 <= rank < n:
            raise VerifyException(f"{self.name}: {what} {rank} is out of range for a group of {n}")

    def _check_same(self, x: SSAValue, y: SSAValue) -> None:
        if x.type != y.type:
            raise VerifyException(
                f"{self.name}: result type {y.type} differs from operand type {x.type}"
            )

    def _check_dim(self, x: SSAValue, dim: int) -> None:
        rank = len(_shape(x))
        if not 0 <= dim < rank:
            raise VerifyException(f"{self.name}: dim {dim} is out of range for rank {rank}")


class _RootedOp(CommOp):
    """A collective with a root rank (its index in the group)."""

    root = prop_def(IntegerAttr[I64])

    def verify_(self) -> None:
        self._check_rank("root", self.root.value.data)


@irdl_op_definition
class BroadcastOp(_RootedOp):
    """Every rank's result is the root's input (other ranks' inputs are not read).

    %y = comm.broadcast %x root 0 group <world 2> : tensor<3xf32>
    """

    name = "comm.broadcast"
    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    output = result_def(T)
    assembly_format = "$input `root` $root `group` $group attr-dict `:` type($input)"

    def __init__(self, x: SSAValue, root: int, group: GroupAttr):
        super().__init__(
            operands=[x],
            result_types=[x.type],
            properties={"root": IntegerAttr(root, 64), "group": group},
        )

    def verify_(self) -> None:
        super().verify_()
        self._check_same(self.input, self.output)


@irdl_op_definition
class ReduceOp(_RootedOp):
    """The root's result combines every rank's input; other ranks' results are zero.

    %y = comm.reduce sum %x root 0 group <world 2> : tensor<3xf32>
    """

    name = "comm.reduce"
    kind = prop_def(ReduceKindAttr)
    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    output = result_def(T)
    assembly_format = "$kind $input `root` $root `group` $group attr-dict `:` type($input)"

    def __init__(self, x: SSAValue, kind: str, root: int, group: GroupAttr):
        super().__init__(
            operands=[x],
            result_types=[x.type],
            properties={
                "kind": ReduceKindAttr(ReduceKind(kind)),
                "root": IntegerAttr(root, 64),
                "group": group,
            },
        )

    def verify_(self) -> None:
        super().verify_()
        self._check_same(self.input, self.output)


@irdl_op_definition
class ScatterOp(_RootedOp):
    """The root's input, split into n chunks along `dim`: chunk i goes to group rank i.

    %y = comm.scatter %x dim 0 root 0 group <world 2> : tensor<4x3xf32> -> tensor<2x3xf32>
    """

    name = "comm.scatter"
    dim = prop_def(IntegerAttr[I64])
    input = operand_def(TensorType)
    output = result_def(TensorType)
    assembly_format = (
        "$input `dim` $dim `root` $root `group` $group attr-dict `:` type($input) `->` "
        "type($output)"
    )

    def verify_(self) -> None:
        super().verify_()
        _check_split(self, self.input, self.output, self.dim.value.data)


@irdl_op_definition
class GatherOp(_RootedOp):
    """The root's result concatenates every rank's input along `dim` (group order);
    other ranks' results are zero.

    %y = comm.gather %x dim 0 root 0 group <world 2> : tensor<2x3xf32> -> tensor<4x3xf32>
    """

    name = "comm.gather"
    dim = prop_def(IntegerAttr[I64])
    input = operand_def(TensorType)
    output = result_def(TensorType)
    assembly_format = (
        "$input `dim` $dim `root` $root `group` $group attr-dict `:` type($input) `->` "
        "type($output)"
    )

    def verify_(self) -> None:
        super().verify_()
        _check_concat(self, self.input, self.output, self.dim.value.data)


def _check_concat(op: CommOp, x: SSAValue, y: SSAValue, dim: int) -> None:
    """y is x with dim `dim` n times larger."""
    op._check_dim(x, dim)  # pyright: ignore[reportPrivateUsage]
    n = op.group_size
    shape = list(_shape(x))
    shape[dim] *= n
    if _shape(y) != tuple(shape) or _element(x) != _element(y):
        raise VerifyException(
            f"{op.name}: output shape {_fmt(_shape(y))} must be the input's {_fmt(_shape(x))} "
            f"with dim {dim} times {n} ({_fmt(shape)})"
        )


def _check_split(op: CommOp, x: SSAValue, y: SSAValue, dim: int) -> None:
    """x's dim `dim` divides by n; y is x with that dim n times smaller."""
    op._check_dim(x, dim)  # pyright: ignore[reportPrivateUsage]
    n = op.group_size
    shape = list(_shape(x))
    if shape[dim] % n:
        raise VerifyException(
            f"{op.name}: input dim {dim} of size {shape[dim]} does not divide by the group size {n}"
        )
    shape[dim] //= n
    if _shape(y) != tuple(shape) or _element(x) != _element(y):
        raise VerifyException(
            f"{op.name}: output shape {_fmt(_shape(y))} must be the input's {_fmt(_shape(x))} "
            f"with dim {dim} divided by {n} ({_fmt(shape)})"
        )


@irdl_op_definition
class AllReduceOp(CommOp):
    """Every rank's results combine every rank's inputs, operand by operand (several
    operands: one bucket, one message).

    %a, %b = comm.all_reduce avg %x, %y group <world 2> : tensor<3xf32>, tensor<2x2xf32>
    """

    name = "comm.all_reduce"
    kind = prop_def(ReduceKindAttr)
    T: ClassVar = RangeVarConstraint("T", RangeOf(base(TensorType)))
    inputs = var_operand_def(T)
    outputs = var_result_def(T)
    assembly_format = "$kind $inputs `group` $group attr-dict `:` type($inputs)"

    def __init__(self, xs: Sequence[SSAValue], kind: str, group: GroupAttr):
        super().__init__(
            operands=[list(xs)],
            result_types=[[x.type for x in xs]],
            properties={"kind": ReduceKindAttr(ReduceKind(kind)), "group": group},
        )

    def verify_(self) -> None:
        if len(self.inputs) != len(self.outputs):
            raise VerifyException(
                f"{self.name}: {len(self.inputs)} operands but {len(self.outputs)} results"
            )
        for x, y in zip(self.inputs, self.outputs):
            self._check_same(x, y)


@irdl_op_definition
class AllGatherOp(CommOp):
    """Every rank's result concatenates every rank's input along `dim` (group order).

    %y = comm.all_gather %x dim 0 group <world 2> : tensor<2x3xf32> -> tensor<4x3xf32>
    """

    name = "comm.all_gather"
    dim = prop_def(IntegerAttr[I64])
    input = operand_def(TensorType)
    output = result_def(TensorType)
    assembly_format = (
        "$input `dim` $dim `group` $group attr-dict `:` type($input) `->` type($output)"
    )

    def verify_(self) -> None:
        _check_concat(self, self.input, self.output, self.dim.value.data)


@irdl_op_definition
class ReduceScatterOp(CommOp):
    """Every rank's inputs combined, then split along `dim`: group rank i gets chunk i.

    %y = comm.reduce_scatter sum %x dim 0 group <world 2> : tensor<4x3xf32> -> tensor<2x3xf32>
    """

    name = "comm.reduce_scatter"
    kind = prop_def(ReduceKindAttr)
    dim = prop_def(IntegerAttr[I64])
    input = operand_def(TensorType)
    output = result_def(TensorType)
    assembly_format = (
        "$kind $input `dim` $dim `group` $group attr-dict `:` type($input) `->` type($output)"
    )

    def verify_(self) -> None:
        _check_split(self, self.input, self.output, self.dim.value.data)


@irdl_op_definition
class AllToAllOp(CommOp):
    """Each rank splits its input into n chunks along `split_dim` and sends chunk j to
    group rank j; its result concatenates the chunks received along `concat_dim`.

    %y = comm.all_to_all %x split 0 concat 1 group <world 2> : tensor<4x3xf32> -> tensor<2x6xf32>
    """

    name = "comm.all_to_all"
    split_dim = prop_def(IntegerAttr[I64])
    concat_dim = prop_def(IntegerAttr[I64])
    input = operand_def(TensorType)
    output = result_def(TensorType)
    assembly_format = (
        "$input `split` $split_dim `concat` $concat_dim `group` $group attr-dict `:` "
        "type($input) `->` type($output)"
    )

    def verify_(self) -> None:
        split, concat = self.split_dim.value.data, self.concat_dim.value.data
        self._check_dim(self.input, split)
        self._check_dim(self.input, concat)
        n = self.group_size
        shape = list(_shape(self.input))
        if shape[split] % n:
            raise VerifyException(
                f"{self.name}: input dim {split} of size {shape[split]} does not divide by "
                f"the group size {n}"
            )
        shape[split] //= n
        shape[concat] *= n
        if _shape(self.output) != tuple(shape):
            raise VerifyException(
                f"{self.name}: output shape {_fmt(_shape(self.output))} must be "
                f"{_fmt(shape)} (dim {split} divided by {n}, dim {concat} times {n})"
            )


class _PointToPointOp(CommOp):
    """A message to or from one peer (its index in the group), matched by tag."""

    peer = prop_def(IntegerAttr[I64])
    tag = prop_def(IntegerAttr[I64])

    def verify_(self) -> None:
        self._check_rank("peer", self.peer.value.data)


@irdl_op_definition
class SendOp(_PointToPointOp):
    """Send the input to `peer` (blocking until the peer's matching recv may take it).

    comm.send %x to 1 tag 0 group <world 2> : tensor<3xf32>
    """

    name = "comm.send"
    input = operand_def(TensorType)
    assembly_format = "$input `to` $peer `tag` $tag `group` $group attr-dict `:` type($input)"

    def __init__(self, x: SSAValue, peer: int, tag: int, group: GroupAttr):
        super().__init__(
            operands=[x],
            properties={"peer": IntegerAttr(peer, 64), "tag": IntegerAttr(tag, 64), "group": group},
        )


@irdl_op_definition
class RecvOp(_PointToPointOp):
    """Receive a tensor of the result's type from `peer` with the same tag.

    %y = comm.recv from 0 tag 0 group <world 2> : tensor<3xf32>
    """

    name = "comm.recv"
    output = result_def(TensorType)
    assembly_format = "`from` $peer `tag` $tag `group` $group attr-dict `:` type($output)"

    def __init__(self, ty: Attribute, peer: int, tag: int, group: GroupAttr):
        super().__init__(
            result_types=[ty],
            properties={"peer": IntegerAttr(peer, 64), "tag": IntegerAttr(tag, 64), "group": group},
        )


@irdl_op_definition
class BarrierOp(CommOp):
    """Every rank of the group waits until all have reached it.

    comm.barrier group <world 2>
    """

    name = "comm.barrier"
    assembly_format = "`group` $group attr-dict"

    def __init__(self, group: GroupAttr):
        super().__init__(properties={"group": group})


Comm = Dialect(
    "comm",
    [
        BroadcastOp,
        ScatterOp,
        GatherOp,
        ReduceOp,
        AllReduceOp,
        AllGatherOp,
        ReduceScatterOp,
        AllToAllOp,
        SendOp,
        RecvOp,
        BarrierOp,
    ],
    [GroupAttr, ReduceKindAttr],
)
