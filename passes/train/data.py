"""Training data: what `Trainer.fit` reads, and `.npy` / `.npz` files memory-mapped.

    fit(x, y)                          arrays (or tuples of arrays: several inputs/targets)
    fit(dataset)                       anything with __len__ and __getitem__(i) -> a sample:
                                       a tuple (inputs..., targets...) of arrays/scalars
    fit(batches)                       any other iterable of batches (tuples of arrays):
                                       a generator or iterator (a list is a data set of
                                       samples), taken as it comes (no shuffling)
    fit("data.npz")                    arrays from a file, memory-mapped (`load_arrays`)

A data set larger than memory streams: a memory-mapped array is indexed batch by batch
(`ArrayDataset.batch` gathers the batch's rows only). `.npz` members stored uncompressed
(np.savez) are memory-mapped at their offset in the zip; compressed members
(np.savez_compressed) cannot be and are read into memory.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dlpc.diagnostics import DlpcError


class ArrayDataset:
    """Samples i of equally long arrays: (a[i], b[i], ...)."""

    def __init__(self, *arrays):
        if not arrays:
            raise DlpcError("error: a data set needs at least one array")
        self.arrays = [a if isinstance(a, np.ndarray) else np.asarray(a) for a in arrays]
        n = {len(a) for a in self.arrays}
        if len(n) != 1:
            raise DlpcError(f"error: the data's arrays have different lengths {sorted(n)}")

    def __len__(self) -> int:
        return len(self.arrays[0])

    def __getitem__(self, i):
        return tuple(a[i] for a in self.arrays)

    def batch(self, indices: np.ndarray) -> list[np.ndarray]:
        """The rows `indices` of every array (a memory-mapped array reads only those)."""
        return [np.asarray(a[indices]) for a in self.arrays]


def is_dataset(data: Any) -> bool:
    return (
        hasattr(data, "__len__")
        and hasattr(data, "__getitem__")
        and not isinstance(data, np.ndarray | str | bytes | os.PathLike)
    )


def gather(dataset: Any, indices: np.ndarray) -> list[np.ndarray]:
    """A batch of `dataset`'s samples `indices`, each position of the samples stacked."""
    if isinstance(dataset, ArrayDataset):
        return dataset.batch(indices)
    samples = [dataset[int(i)] for i in indices]
    first = samples[0]
    if not isinstance(first, tuple | list):
        raise DlpcError(
            f"error: a data set's sample must be a tuple (inputs..., targets...), got "
            f"{type(first).__name__}"
        )
    if any(len(s) != len(first) for s in samples):
        raise DlpcError("error: the data set's samples have different lengths")
    return [np.stack([np.asarray(s[k]) for s in samples]) for k in range(len(first))]


def iterate_batches(batches: Iterable) -> Iterable[list[np.ndarray]]:
    for k, item in enumerate(batches):
        if not isinstance(item, tuple | list):
            raise DlpcError(
                f"error: batch {k} must be a tuple (inputs..., targets...), got {type(item).__name__}"
            )
        yield [np.asarray(a) for a in item]


def load_arrays(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The arrays of a `.npy` (named "x") or `.npz` file, memory-mapped read-only where
    the file stores them raw."""
    path = Path(path)
    if not path.is_file():
        raise DlpcError(f"error: no such data file: {path}")
    try:
        if path.suffix == ".npy":
            return {"x": np.load(path, mmap_mode="r", allow_pickle=False)}
        if path.suffix != ".npz":
            raise DlpcError(f"error: data file {path} must be .npy or .npz")
        out: dict[str, np.ndarray] = {}
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                name = info.filename.removesuffix(".npy")
                out[name] = _member(path, z, info)
        return out
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise DlpcError(f"error: cannot read data {path}: {e}") from None


def _member(path: Path, z: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray:
    """One .npz member: a memmap at its offset when stored uncompressed."""
    if info.compress_type != zipfile.ZIP_STORED:
        with z.open(info) as f:
            return np.lib.format.read_array(f, allow_pickle=False)
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        local = f.read(30)  # the local file header: its name and extra field lengths
        start = info.header_offset + 30 + int.from_bytes(local[26:28], "little")
        start += int.from_bytes(local[28:30], "little")
        f.seek(start)
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        if dtype.hasobject:
            raise DlpcError(f"error: data {path}: member {info.filename} holds Python objects")
        offset = f.tell()
    order = "F" if fortran else "C"
    if int(np.prod(shape)) == 0:
        return np.zeros(shape, dtype, order=order)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order=order)


def columns(arrays: dict[str, np.ndarray], names: Sequence[str], path) -> list[np.ndarray]:
    """The arrays `names` of a loaded file, in order (a missing one: a one-line error)."""
    missing = [n for n in names if n not in arrays]
    if missing:
        raise DlpcError(
            f"error: data {path} has no '{missing[0]}' array (it has {', '.join(arrays)})"
        )
    return [arrays[n] for n in names]
