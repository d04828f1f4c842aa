"""Read ``.npy`` / ``.npz`` files safely: never unpickle, and check the declared sizes before reading.

A small ``.npz`` can hold members that decompress to gigabytes, and a ``.npy`` header can claim a shape of
(1e12, 4, 3): NumPy allocates what the header says before it reads. :func:`check_npz` / :func:`check_npy` read
only the zip directory and the array headers, and refuse a file whose arrays would exceed
:data:`MAX_ARRAY_BYTES` in total, or whose header claims more bytes than the member holds.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np

from kinemesh.errors import InputFileError

MAX_ARRAY_BYTES = int(os.environ.get("KINEMESH_MAX_ARRAY_BYTES", 4 << 30))
"""Bound of the decompressed size of one ``.npy`` / ``.npz`` file (all arrays together), bytes: 4 GiB, or the
environment variable ``KINEMESH_MAX_ARRAY_BYTES``."""


def _header_bytes(fp, path, member: str = "") -> int:
    """Bytes the array whose ``.npy`` header starts at ``fp`` declares. Raises InputFileError."""
    where = f"member '{member}': " if member else ""
    try:
        version = np.lib.format.read_magic(fp)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(fp)
    except (ValueError, OSError, EOFError, SyntaxError) as exc:
        raise InputFileError(path, f"{where}not a valid .npy array header ({exc})") from None
    if dtype.hasobject:
        raise InputFileError(path, f"{where}holds Python objects, which kinemesh never unpickles")
    return int(np.prod(shape, dtype=object)) * dtype.itemsize


def _refuse(path, what: str, n: int) -> None:
    if n > MAX_ARRAY_BYTES:
        raise InputFileError(path, f"{what} {n / 2**30:.3g} GiB, more than the bound of "
                                   f"{MAX_ARRAY_BYTES / 2**30:.3g} GiB (KINEMESH_MAX_ARRAY_BYTES)")


def check_npz(path) -> None:
    """Check a ``.npz`` before :func:`numpy.load` reads it (see the module docstring). Raises InputFileError."""
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            _refuse(path, "arrays decompress to", sum(i.file_size for i in infos))
            for info in infos:
                with zf.open(info) as fp:
                    n = _header_bytes(fp, path, info.filename)
                _refuse(path, f"member '{info.filename}' declares", n)
                if n > info.file_size:
                    raise InputFileError(path, f"member '{info.filename}' declares {n} bytes of data but holds "
                                               f"{info.file_size} (corrupt header)")
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise InputFileError(path, f"not a readable .npz ({exc.__class__.__name__}: {exc})") from None


def load_npy(path) -> np.ndarray:
    """Read one ``.npy`` array after checking its header (size bound, no objects). Raises InputFileError."""
    path = Path(path)
    try:
        with open(path, "rb") as fp:
            n = _header_bytes(fp, path)
            _refuse(path, "array declares", n)
            if n > path.stat().st_size:
                raise InputFileError(path, f"declares {n} bytes of data but the file has {path.stat().st_size}")
            fp.seek(0)
            return np.load(fp, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise InputFileError(path, f"not a readable .npy array ({exc})") from None
