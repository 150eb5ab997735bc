# pyright: strict
"""The one size limit of dlpc: how many bytes a tensor may have (docs/security.md).

`size_error(shape, element_type)` is what the frontends, the graph verifier and the IR
parser (dialects/xdsl_fixes.py) ask; generated code checks its own sizes against it
before it multiplies them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import IntegerType
from xdsl.ir import Attribute

__all__ = ["MAX_TENSOR_BYTES", "element_bytes", "size_error"]

# The largest tensor dlpc compiles: 2^40 bytes (1 TiB), more than any host or device it
# targets has. Every size is checked against it before it is multiplied in generated code,
# and it keeps index arithmetic far from overflow: an index is below a tensor's element
# count (< 2^40) or a padded extent, so every int64 index expression stays below 2^43
# (docs/security.md).
MAX_TENSOR_BYTES = 1 << 40


def element_bytes(element_type: Attribute) -> int:
    """Bytes per element in memory (i1 takes a byte, index 8)."""
    if isinstance(element_type, IntegerType):
        return max(element_type.bitwidth // 8, 1)
    bits = getattr(element_type, "bitwidth", 64)  # index and unknown types: 8 bytes
    return max(bits // 8, 1)


def size_error(shape: Sequence[int], element_type: Attribute) -> str | None:
    """Why a tensor of this shape and element type is too big (None: it fits). The byte
    count is compared with the limit without ever being formed from an unbounded product."""
    if any(type(d) is not int or d < 0 for d in shape):  # symbolic: checked once bound
        return None
    # an empty tensor's other dims still make strides and trip counts in generated code:
    # they are checked as if the zero dims were 1, whatever their order
    size, limit = element_bytes(element_type), MAX_TENSOR_BYTES
    for d in shape:
        if d and size > limit // d:  # size * d > limit, without forming the product
            dims = "".join(f"{d}x" for d in shape)
            span = math.prod(d or 1 for d in shape) * element_bytes(element_type)  # (exact)
            if 0 in shape:
                return (
                    f"tensor<{dims}{element_type}> is empty but its other dims span {span} "
                    "bytes, over dlpc's limit of 2^40 bytes (1 TiB) for one tensor"
                )
            return (
                f"tensor<{dims}{element_type}> has {span} bytes, over dlpc's limit of "
                f"2^40 bytes (1 TiB) for one tensor"
            )
        size *= d or 1
    return None
