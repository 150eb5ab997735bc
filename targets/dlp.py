"""The DLP-class accelerator, described by data.

Every hardware fact that `loop-to-dlp`, the DLP C emitter and the simulator use lives in
one frozen dataclass, `DlpTarget`; nothing else hard-codes a capacity, a bandwidth or a
throughput. The defaults model a textbook DLP (Cambricon-MLU-like): 4 clusters of 4 cores,
each core with private NRAM (neurons/vectors) and WRAM (weights, read by the matrix unit),
each cluster with a shared SRAM, and off-chip GDRAM reached by DMA.

A description loads from TOML or JSON (`--target-desc file`); keys are the field names,
intrinsic throughputs sit in an `[intrinsics]` table (elements, or MACs for matmul/conv,
per cycle per core):

    name = "tiny"
    clusters = 1
    cores_per_cluster = 2
    nram_bytes = 4096
    [intrinsics]
    add = 32
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

from dlpc.diagnostics import DlpcError

#: memory spaces, outermost first; the dialect's `#dlp.space<...>` uses these names
SPACES = ("gdram", "sram", "nram", "wram")

DEFAULT_INTRINSICS: tuple[tuple[str, float], ...] = (
    # elementwise vector unit, f32 elements per cycle per core
    ("add", 64),
    ("sub", 64),
    ("mul", 64),
    ("max", 64),
    ("min", 64),
    ("div", 16),
    ("add_scalar", 64),
    ("mul_scalar", 64),
    ("max_scalar", 64),
    ("cycle_add", 64),
    ("cycle_mul", 64),
    ("cycle_sub", 64),
    ("relu", 64),
    ("sigmoid", 16),
    ("tanh", 16),
    ("exp", 16),
    ("log", 16),
    ("sqrt", 16),
    ("reduce_sum", 32),
    ("reduce_max", 32),
    ("transpose", 32),
    ("pool", 64),  # window cells per cycle (max or sum pooling)
    # matrix unit, multiply-accumulates per cycle per core
    ("matmul", 256),
    ("conv", 256),
)


@dataclass(frozen=True)
class DlpTarget:
    """Every fact about a DLP-class machine that dlpc uses (see the module docstring)."""

    name: str = "dlp-default"
    clusters: int = 4
    cores_per_cluster: int = 4
    nram_bytes: int = 512 * 1024  # per core
    wram_bytes: int = 1024 * 1024  # per core
    sram_bytes: int = 2 * 1024 * 1024  # per cluster
    clock_ghz: float = 1.0
    gdram_bandwidth_gbs: float = 102.4  # whole chip, GB/s
    sram_bandwidth_gbs: float = 256.0  # per cluster, GB/s
    dma_latency_cycles: int = 200  # fixed cost of one __memcpy
    dma_align: int = 64  # bytes: on-chip buffers used by DMA start on this boundary
    vector_width: int = 64  # f32 lanes of the vector unit
    vector_align: int = 64  # bytes: intrinsic operands start on this boundary
    scalar_ops_per_cycle: float = 1.0  # scalar core, per core
    intrinsics: tuple[tuple[str, float], ...] = field(default=DEFAULT_INTRINSICS)

    # ------------------------------------------------------------------ derived facts
    @property
    def cores(self) -> int:
        """Number of tasks a kernel launches: one per core."""
        return self.clusters * self.cores_per_cluster

    def capacity(self, space: str) -> int:
        """Bytes of one instance of `space` (per core for nram/wram, per cluster for sram)."""
        caps = {"nram": self.nram_bytes, "wram": self.wram_bytes, "sram": self.sram_bytes}
        if space not in caps:
            raise DlpcError(f"error: memory space '{space}' has no fixed capacity")
        return caps[space]

    def has_intrinsic(self, name: str) -> bool:
        return any(n == name for n, _ in self.intrinsics)

    def throughput(self, name: str) -> float:
        for n, t in self.intrinsics:
            if n == name:
                return t
        raise DlpcError(f"error: target '{self.name}' has no intrinsic '{name}'")

    def intrinsic_cycles(self, name: str, work: int) -> int:
        """Cycles for `work` elements (or MACs) of intrinsic `name` on one core."""
        return math.ceil(work / self.throughput(name))

    def peak_ops_per_second(self) -> float:
        """Simulated peak: every core's matrix unit busy (2 flops per MAC)."""
        return 2 * self.throughput("matmul") * self.cores * self.clock_ghz * 1e9

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["intrinsics"] = dict(self.intrinsics)
        return d

    # ------------------------------------------------------------------ loading
    @staticmethod
    def from_dict(data: dict[str, Any], origin: str = "target description") -> DlpTarget:
        known = {f.name: f for f in dataclasses.fields(DlpTarget)}
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                raise DlpcError(f"{origin}: error: unknown target field '{key}'")
            if key == "intrinsics":
                if not isinstance(value, dict):
                    raise DlpcError(
                        f"{origin}: error: 'intrinsics' must be a table name -> throughput"
                    )
                merged = dict(DEFAULT_INTRINSICS)
                merged.update({str(k): float(v) for k, v in value.items()})
                kwargs[key] = tuple(merged.items())
                continue
            default = known[key].default
            if isinstance(default, bool) or not isinstance(value, (int, float, str)):
                raise DlpcError(f"{origin}: error: bad value for '{key}': {value!r}")
            if isinstance(default, int) and not (isinstance(value, int) and value > 0):
                raise DlpcError(
                    f"{origin}: error: '{key}' must be a positive integer, got {value!r}"
                )
            if isinstance(default, float) and not (isinstance(value, (int, float)) and value > 0):
                raise DlpcError(
                    f"{origin}: error: '{key}' must be a positive number, got {value!r}"
                )
            kwargs[key] = float(value) if isinstance(default, float) else value
        target = DlpTarget(**kwargs)
        target.validate(origin)
        return target

    @staticmethod
    def load(path: str) -> DlpTarget:
        """Read a description from a `.toml` or `.json` file."""
        if not os.path.exists(path):
            raise DlpcError(f"error: no such target description: {path}")
        try:
            if path.endswith(".json"):
                with open(path) as f:
                    data = json.load(f)
            else:
                import tomllib

                with open(path, "rb") as f:
                    data = tomllib.load(f)
        except (ValueError, OSError) as e:  # tomllib.TOMLDecodeError is a ValueError
            raise DlpcError(f"{path}: error: cannot read target description: {e}") from None
        return DlpTarget.from_dict(data, origin=path)

    def validate(self, origin: str = "target description") -> None:
        for what in ("dma_align", "vector_align"):
            v = getattr(self, what)
            if v & (v - 1):
                raise DlpcError(f"{origin}: error: '{what}' must be a power of two, got {v}")
        for needed in ("matmul",):
            if not self.has_intrinsic(needed):
                raise DlpcError(f"{origin}: error: intrinsic set lacks '{needed}'")


BUILTIN_DESCRIPTIONS = os.path.dirname(os.path.abspath(__file__))


def resolve(desc: DlpTarget | str | None) -> DlpTarget:
    """A description from a DlpTarget, a file path, a built-in name (`tiny`, `dlp`), or None
    (the default)."""
    if desc is None or desc == "":
        return DlpTarget()
    if isinstance(desc, DlpTarget):
        return desc
    builtin = os.path.join(BUILTIN_DESCRIPTIONS, f"{desc}.toml")
    if os.path.sep not in desc and os.path.exists(builtin):
        return DlpTarget.load(builtin)
    return DlpTarget.load(desc)
