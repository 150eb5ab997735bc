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
import difflib
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
    # asynchronous copies a core keeps in flight: up to this many issued back to back
    # before one wait share one latency (the simulator charges ceil(n / depth) of them)
    dma_queue_depth: int = 8
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

    def __post_init__(self) -> None:
        check_fields(dataclasses.asdict(self) | {"intrinsics": self.intrinsics})

    # ------------------------------------------------------------------ loading
    @staticmethod
    def from_dict(data: dict[str, Any], origin: str = "target description") -> DlpTarget:
        """A description from a table (TOML/JSON): every key known, every value in
        `RANGES`; `[intrinsics]` overrides throughputs of `KNOWN_INTRINSICS` by name."""
        known = {f.name: f for f in dataclasses.fields(DlpTarget)}
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                raise DlpcError(f"{origin}: error: unknown target field {_show(key)}")
            if key == "intrinsics":
                if not isinstance(value, dict):
                    raise DlpcError(
                        f"{origin}: error: 'intrinsics' must be a table name -> throughput"
                    )
                merged = dict(DEFAULT_INTRINSICS)
                for name, tp in value.items():
                    merged[name] = _check_intrinsic(name, tp, origin)
                kwargs[key] = tuple(merged.items())
                continue
            kwargs[key] = _check_value(key, value, known[key].default, origin)
        check_fields({name: f.default for name, f in known.items()} | kwargs, origin)
        return DlpTarget(**kwargs)

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
        check_fields(dataclasses.asdict(self) | {"intrinsics": self.intrinsics}, origin)


#: names an `[intrinsics]` table may set (the simulator and loop-to-dlp know these)
KNOWN_INTRINSICS = tuple(name for name, _ in DEFAULT_INTRINSICS)
#: the range of every number in a description, inclusive: sizes the simulator can
#: allocate, core counts it can start threads for, finite positive rates
RANGES: dict[str, tuple[float, float]] = {
    "clusters": (1, 64),
    "cores_per_cluster": (1, 64),
    "nram_bytes": (1, 2**30),
    "wram_bytes": (1, 2**30),
    "sram_bytes": (1, 2**30),
    "clock_ghz": (1e-3, 1e3),
    "gdram_bandwidth_gbs": (1e-3, 1e6),
    "sram_bandwidth_gbs": (1e-3, 1e6),
    "dma_latency_cycles": (1, 10**9),
    "dma_queue_depth": (1, 1024),
    "dma_align": (1, 4096),
    "vector_width": (1, 65536),
    "vector_align": (1, 4096),
    "scalar_ops_per_cycle": (1e-3, 1e6),
    "intrinsics": (1e-3, 1e9),  # each throughput, per cycle per core
}
MAX_CORES = 256
MAX_NAME = 200


def _show(item: Any) -> str:
    """A key or value from a file on one line (its repr, at most 60 characters)."""
    text = repr(item)
    return text if len(text) <= 60 else text[:57] + "..."


def _number_in_range(key: str, value: Any, what: str, origin: str, integer: bool = False):
    low, high = RANGES[key]
    if integer:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise DlpcError(
                f"{origin}: error: {what} must be a positive integer at most {high}, "
                f"got {_show(value)}"
            )
        return value
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or isinstance(value, float) and not math.isfinite(value) or not low <= value <= high:
        raise DlpcError(
            f"{origin}: error: {what} must be a finite number in [{low:g}, {high:g}], "
            f"got {_show(value)}"
        )
    return value


def _check_intrinsic(name: Any, tp: Any, origin: str) -> float:
    if name not in KNOWN_INTRINSICS:
        close = difflib.get_close_matches(str(name), KNOWN_INTRINSICS, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise DlpcError(f"{origin}: error: unknown intrinsic {_show(name)}{hint}")
    return float(_number_in_range("intrinsics", tp, f"intrinsic '{name}'", origin))


def _check_value(key: str, value: Any, default: Any, origin: str) -> Any:
    if isinstance(default, str):
        if not isinstance(value, str) or len(value) > MAX_NAME:
            raise DlpcError(
                f"{origin}: error: '{key}' must be a string of at most {MAX_NAME} characters"
            )
        return value
    integer = isinstance(default, int)
    value = _number_in_range(key, value, f"'{key}'", origin, integer)
    return value if integer else float(value)


def check_fields(fields: dict[str, Any], origin: str = "target description") -> None:
    """Every field of a description in range (one-line DlpcError naming the field)."""
    for key, value in fields.items():
        if key == "intrinsics":
            for name, tp in value:
                _check_intrinsic(name, tp, origin)
        elif key in RANGES or key == "name":
            _check_value(key, value, DlpTarget.__dataclass_fields__[key].default, origin)
    cores = fields["clusters"] * fields["cores_per_cluster"]
    if cores > MAX_CORES:
        raise DlpcError(
            f"{origin}: error: {cores} cores (clusters x cores_per_cluster) > {MAX_CORES}"
        )
    for what in ("dma_align", "vector_align"):
        v = fields[what]
        if v & (v - 1):
            raise DlpcError(f"{origin}: error: '{what}' must be a power of two, got {v}")
    if "matmul" not in {n for n, _ in fields["intrinsics"]}:
        raise DlpcError(f"{origin}: error: intrinsic set lacks 'matmul'")


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
