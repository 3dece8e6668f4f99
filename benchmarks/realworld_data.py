"""Tiny synthetic data sets for the training scripts benchmarks/realworld.py runs: just enough
records, in the file format the script's loader reads, for a few steps on two replicas. The
records are random; the runs check that the migrated code runs, not what it learns.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from pathlib import Path

SEED = 14
TRAIN_RECORDS = 512
TEST_RECORDS = 128


def generate_data(kind: str, folder: Path, root: str = ".") -> Path:
    """Write data set `kind` under `root` (relative to the script's folder, or absolute) and
    return that folder."""
    target = (folder / root).resolve()
    GENERATORS[kind](target)
    return target


def mnist(root: Path) -> None:
    """torchvision's MNIST layout (ROOT/MNIST/raw/*-ubyte, the IDX format): with these files
    present, MNIST(root, download=True) reads them and downloads nothing."""
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    rng = random.Random(SEED)
    for prefix, count in (("train", TRAIN_RECORDS), ("t10k", TEST_RECORDS)):
        pixels = bytes(rng.randrange(256) for _ in range(count * 28 * 28))
        labels = bytes(rng.randrange(10) for _ in range(count))
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(
            struct.pack(">IIII", 0x803, count, 28, 28) + pixels)
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(struct.pack(">II", 0x801, count) + labels)


GENERATORS: dict[str, Callable[[Path], None]] = {"mnist": mnist}
