"""Write the generated sources of the five examples (C, OpenCL at 8 and 16 lanes, DLP C;
batch 1, 4 and 32) to a folder, or compare them with a folder written before: the check
behind "the generated programs do not change" of a refactor.

    python bench/emit_snapshot.py write /tmp/before
    python bench/emit_snapshot.py compare /tmp/before   # exit 1 naming each file that differs

The sources come through the public tools: `dlpc --emit=c|opencl|dlp-c` for C, OpenCL (the
8-lane plan, no device) and DLP C, and `dlpc.compile(..., target='opencl')`'s program
where an OpenCL platform exists (the device's lanes: 16 on an AVX-512 CPU).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = ("mlp", "lenet", "transformer", "mobilenet", "resnet")
BATCHES = (1, 4, 32)
EMITS = ("c", "opencl", "dlp-c")
ROOT = Path(__file__).resolve().parent.parent


def sources() -> dict[str, str]:
    out: dict[str, str] = {}
    for example in EXAMPLES:
        for batch in BATCHES:
            for emit in EMITS:
                res = subprocess.run(
                    [
                        "dlpc",
                        str(ROOT / "examples" / f"{example}.dlpc"),
                        f"--emit={emit}",
                        "--batch",
                        str(batch),
                    ],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if res.returncode:
                    sys.exit(f"dlpc {example} --emit={emit} --batch {batch}: {res.stderr.strip()}")
                out[f"{example}-b{batch}.{emit}"] = res.stdout
    out.update(runtime_programs())
    return out


def runtime_programs() -> dict[str, str]:
    try:
        import dlpc
        from dlpc.backends.runtime import opencl_rt

        opencl_rt.devices()
    except Exception as e:  # noqa: BLE001 - no OpenCL here: the CLI's sources only
        print(f"(no OpenCL runtime programs: {e})", file=sys.stderr)
        return {}
    out = {}
    for example in EXAMPLES:
        for batch in BATCHES:
            model = dlpc.load(ROOT / "examples" / f"{example}.dlpc", batch=batch)
            compiled = dlpc.compile(model, target="opencl")
            out[f"{example}-b{batch}.runtime.cl"] = getattr(compiled.artifact, "source", "")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("write", "compare"):
        print(__doc__, file=sys.stderr)
        return 2
    folder = Path(argv[1])
    now = sources()
    if argv[0] == "write":
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in now.items():
            (folder / name).write_text(text)
        print(f"{len(now)} sources written to {folder}")
        return 0
    differ = [
        n for n, t in now.items() if not (folder / n).is_file() or (folder / n).read_text() != t
    ]
    missing = sorted({p.name for p in folder.iterdir()} - set(now))
    for name in differ:
        print(f"differs: {name}")
    for name in missing:
        print(f"missing now: {name}")
    print(f"{len(now) - len(differ)} / {len(now)} sources byte-identical")
    return 1 if differ or missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
