"""The tuning log: one JSON object per line, appended as measurements arrive.

    {"sig": "3f2a...", "kernel": "matmul_0", "target": "c", "script": "decompose ...",
     "params": {...}, "time": 0.0123, "ok": true, "error": null, "dlpc": "0.1.0",
     "template": "gemm", "flops": 2147483648, "default": "9c41..."}

`sig` is the kernel signature: a hash of the kernel's structure (ops, attributes, loop
bounds and names, and the types of the buffers it touches) that ignores SSA names and
the kernel's own name, so identical layers of a model share records. Failed candidates
are logged with `ok: false` and the error, so a resumed run does not retry them.

`default` is the digest of the kernel's default schedule when the record was measured
(`schedule_digest` of `default_scripts`). A record is only applied while today's default
for its kernel has the same digest: when a template improves, the schedules tuned against
the old one (which beat the old default, not necessarily the new one) are stale, and the
kernel takes today's default until it is re-tuned (`dlpc-tune` resumes the log). Records
written before the field existed have `default: ""` and are stale the same way.

`machine` is the identity of the CPU class the record was measured on
(`machine_fingerprint()`: architecture, vendor, family, model and widest SIMD level, e.g.
`x86_64 AuthenticAMD family 26 model 2 avx512f`). A record is only applied on a machine
with the same fingerprint: a schedule that is fastest on one CPU (its vector width, its
caches) can be slower than the default on another, and the kernel takes the default
there until it is tuned on that machine (`dlpc-tune` resumes the log, measuring again
what it measured elsewhere). Records written before the field existed have `machine: ""`:
measured on an unknown machine, they match no machine. `DLPC_TUNING_MACHINE` overrides
the fingerprint (tests; a user who knows two machines are alike).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import platform
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from xdsl.ir import Operation, SSAValue

from dlpc import settings
from dlpc.diagnostics import DlpcError
from dlpc.dialects.loop import KernelOp


def dlpc_version() -> str:
    try:
        from importlib.metadata import version

        return version("dlpc")
    except Exception:  # noqa: BLE001 - metadata is optional
        return "unknown"


SIMD_LEVELS = ("avx512f", "avx2", "avx", "sse4_2")  # widest first


def machine_fingerprint() -> str:
    """A short, readable identity of the CPU class a measurement is valid for (see the
    module docstring), never empty, never raising. On Linux from /proc/cpuinfo (the first
    processor's vendor, family, model and widest SIMD level among its flags) with
    `platform.machine()`; elsewhere, or when cpuinfo lacks those keys (non-x86) or cannot
    be read, `platform.machine()` and `platform.processor()`. The environment variable
    `DLPC_TUNING_MACHINE`, when set and not empty, replaces it: for tests, and for a user
    who knows two machines are alike (records of one then apply on the other). It is
    read at every call; what is read from the system is cached per process."""
    override = settings.get("DLPC_TUNING_MACHINE")
    return override or cpu_fingerprint()


@functools.cache
def cpu_fingerprint() -> str:
    """`machine_fingerprint` as read from the system, without the override: what a
    binary built with `-march=native` depends on (cbuild's library cache key)."""
    try:
        arch = platform.machine()
    except Exception:  # noqa: BLE001 - a fingerprint never raises
        arch = ""
    try:
        cpu = _cpuinfo_fingerprint()
    except Exception:  # noqa: BLE001 - an unreadable or odd cpuinfo falls back
        cpu = None
    if cpu is not None:
        return " ".join(p for p in (arch, cpu) if p)
    try:
        processor = platform.processor()
    except Exception:  # noqa: BLE001
        processor = ""
    parts = [p for p in (arch, processor) if p]
    return " ".join(dict.fromkeys(parts)) or "unknown"


def _cpuinfo_fingerprint(path: str = "/proc/cpuinfo") -> str | None:
    """`vendor family F model M simd` of the first processor in `path`, or None when the
    file is missing or lacks the vendor, family or model (non-x86 kernels)."""
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # the end of the first processor's block
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    vendor, family, model = (fields.get(k) for k in ("vendor_id", "cpu family", "model"))
    if not (vendor and family and model):
        return None
    flags = set(fields.get("flags", "").split())
    simd = next((level for level in SIMD_LEVELS if level in flags), "")
    return " ".join(p for p in (vendor, "family", family, "model", model, simd) if p)


def kernel_signature(kernel: KernelOp) -> str:
    """A structural hash of a kernel (see the module docstring)."""
    ids: dict[int, str] = {}
    parts: list[str] = []

    def ref(v: SSAValue) -> str:
        if id(v) not in ids:
            owner = v.owner
            where = owner if isinstance(owner, Operation) else owner.parent_op()
            inside = where is not None and kernel.is_ancestor(where)
            ids[id(v)] = f"v{len(ids)}" if inside else f"ext{len(ids)}:{v.type}"
        return ids[id(v)]

    for op in kernel.walk():
        if op is kernel:
            continue
        for region in op.regions:
            for block in region.blocks:
                for arg in block.args:
                    ref(arg)
        attrs = sorted(f"{k}={v}" for k, v in {**op.properties, **op.attributes}.items())
        operands = ",".join(ref(o) for o in op.operands)
        results = ",".join(ref(r) for r in op.results)
        parts.append(f"{op.name}({operands})->{results}[{';'.join(attrs)}]")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def schedule_digest(scripts: list[str], kernel: str) -> str:
    """The digest a record keeps of its kernel's default schedules (see the module
    docstring), independent of the kernel's name (identical layers share records)."""
    text = "\n---\n".join(rename_script(s, kernel, "KERNEL") for s in scripts)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def rename_script(script: str, old: str, new: str) -> str:
    """Re-target a one-kernel script from kernel `old` to kernel `new`."""
    if old == new:
        return script
    pattern = re.compile(rf"(?<![A-Za-z0-9_.$]){re.escape(old)}(?=[/:\s_]|$)", re.M)
    return pattern.sub(new, script)


@dataclass
class Record:
    sig: str
    kernel: str
    target: str
    script: str
    time: float | None
    ok: bool
    error: str | None = None
    params: dict = field(default_factory=dict)
    template: str = ""
    flops: int = 0
    dlpc: str = ""
    default: str = ""
    machine: str = ""  # machine_fingerprint() of the machine that measured it

    def to_json(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)

    @classmethod
    def from_json(cls, data: object) -> Record:
        """A record from a decoded log line; TypeError unless every field has its type and
        an `ok` record has a positive time (the tuner takes its logarithm)."""
        if not isinstance(data, dict):
            raise TypeError("not a JSON object")
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for key, types in _FIELD_TYPES.items():
            if key in fields and not _is(fields[key], types):
                raise TypeError(f"field {key!r} has the wrong type")
        record = cls(**fields)
        if record.ok and (record.time is None or not 0 < record.time < math.inf):
            raise TypeError(f"ok record with time {record.time}")
        return record


_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "sig": (str,),
    "kernel": (str,),
    "target": (str,),
    "script": (str,),
    "time": (int, float, type(None)),
    "ok": (bool,),
    "error": (str, type(None)),
    "params": (dict,),
    "template": (str,),
    "flops": (int,),
    "dlpc": (str,),
    "default": (str,),
    "machine": (str,),
}


def _is(value: object, types: tuple[type, ...]) -> bool:
    """isinstance, except that a JSON `true` is not a number."""
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


class TuningLog:
    """Read (and append to) a JSON-lines tuning log; malformed lines are skipped."""

    def __init__(self, path: str | os.PathLike | None):
        self.path = Path(path) if path else None
        self.records: list[Record] = []
        if self.path is not None and self.path.exists():
            text = self.path.read_text()
            lines = text.splitlines()
            for n, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    self.records.append(Record.from_json(json.loads(line)))
                except (json.JSONDecodeError, TypeError, KeyError):
                    if n == len(lines) and not text.endswith("\n"):
                        break  # a record cut short by an interrupted run
                    raise DlpcError(
                        f"error: tuning log {self.path} line {n}: not a tuning record"
                    ) from None

    def append(self, record: Record) -> None:
        record.dlpc = record.dlpc or dlpc_version()
        record.machine = record.machine or machine_fingerprint()
        self.records.append(record)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as f:
                f.write(record.to_json() + "\n")

    def for_kernel(self, sig: str, target: str, machine: str | None = None) -> list[Record]:
        """The records of a kernel signature and target (with `machine`: measured on
        that machine; a record without one matches none)."""
        return [r for r in self.records if r.sig == sig and r.target == target and _on(r, machine)]

    def best(
        self,
        sig: str,
        target: str = "c",
        default: str | None = None,
        machine: str | None = None,
    ) -> Record | None:
        """The record of the fastest schedule: scripts measured several times (the tuner
        re-measures its top candidates) are ranked by their median time, so one lucky
        measurement on a loaded machine does not win. With `default`, only records
        tuned against the default schedule of that digest count; with `machine`, only
        records measured on that machine (see the module docstring)."""
        times: dict[str, list[float]] = {}
        last: dict[str, Record] = {}
        for r in self.for_kernel(sig, target, machine):
            if default is not None and r.default != default:
                continue
            if r.ok and r.time is not None:
                times.setdefault(r.script, []).append(r.time)
                last[r.script] = r
        if not times:
            return None
        script = min(times, key=lambda s: statistics.median(times[s]))
        rec = last[script]
        return Record(**{**rec.__dict__, "time": statistics.median(times[script])})

    def seen(
        self, sig: str, target: str, default: str | None = None, machine: str | None = None
    ) -> set[str]:
        """The scripts already measured (with `default`: against that default schedule;
        with `machine`: on that machine)."""
        return {
            r.script
            for r in self.for_kernel(sig, target, machine)
            if default is None or r.default == default
        }


def _on(record: Record, machine: str | None) -> bool:
    """Whether `record` counts for `machine` (None: any; a record without a machine
    was measured on an unknown one and counts for none)."""
    return machine is None or (record.machine != "" and record.machine == machine)
