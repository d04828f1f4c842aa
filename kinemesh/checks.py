"""Checks of command-line options shared by every command, run before any work starts.

* :func:`number` builds argparse types for finite numbers within a range (``--fps 0`` or ``--height nan`` are
  refused by argparse with a one-line message naming the option, exit status 2);
* :func:`out_dir` / :func:`out_file` check an output path: not on a virtual file system (``/proc``), not under
  a file, not the working folder or one of its parents, a folder where a folder is expected and a file where a
  file is expected, writable, and not an existing non-empty folder or existing file unless ``--force``.

Each raises :class:`~kinemesh.errors.ConfigError` (one line naming the option and the path).
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from pathlib import Path

from kinemesh.errors import ConfigError

VIRTUAL_ROOTS = ("/proc", "/sys", "/dev")


def number(kind=float, lo: float | None = None, hi: float | None = None, lo_open: bool = False):
    """An argparse ``type`` accepting a finite ``kind`` (int or float) with ``lo <= x <= hi`` (``lo < x`` when
    ``lo_open``). Raises argparse.ArgumentTypeError (argparse names the option and exits 2)."""

    def parse(text: str):
        try:
            x = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                             f"got {text!r}") from None
        if not math.isfinite(x):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if lo is not None and (x <= lo if lo_open else x < lo):
            raise argparse.ArgumentTypeError(f"must be {'>' if lo_open else '>='} {lo}, got {text}")
        if hi is not None and x > hi:
            raise argparse.ArgumentTypeError(f"must be <= {hi}, got {text}")
        return x

    parse.__name__ = kind.__name__  # argparse says "invalid float value" when a type raises ValueError
    return parse


def _check_writable_place(path: Path, option: str) -> None:
    """Refuse virtual file systems, a file among the parents, and a place where nothing can be created."""
    resolved = path.resolve()
    for v in VIRTUAL_ROOTS:
        if resolved == Path(v) or Path(v) in resolved.parents:
            raise ConfigError(f"{option} {path}: lies on the virtual file system {v}, not a place for outputs")
    parent = resolved.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{option} {path}: {parent} is a file, not a folder")
    try:  # the only honest test of writability (permissions, read-only mounts, quotas)
        os.rmdir(tempfile.mkdtemp(prefix=".kinemesh-probe.", dir=parent))
    except OSError as exc:
        raise ConfigError(f"{option} {path}: cannot write in {parent} ({exc.strerror})") from None


def out_dir(path, force: bool = False, option: str = "--out") -> Path:
    """Check an output folder before the work starts; returns it as a Path.

    Refused: the working folder or one of its parents (replacing it would delete the caller's files), a file,
    an existing non-empty folder unless ``force`` (then it is replaced atomically when the work is done),
    and the places :func:`_check_writable_place` refuses. Raises ConfigError."""
    path = Path(path)
    resolved = path.resolve()
    if resolved == Path.cwd().resolve() or resolved in Path.cwd().resolve().parents:
        raise ConfigError(f"{option} {path}: is the working folder or one of its parents; name a new folder")
    _check_writable_place(path, option)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {path}: is a file, expected a folder")
    if path.is_dir() and any(path.iterdir()) and not force:
        raise ConfigError(f"{option} {path}: folder exists and is not empty; pass --force to replace it")
    return path


def out_file(path, force: bool = False, option: str = "--out", suffixes: tuple[str, ...] = ()) -> Path:
    """Check an output file before the work starts (suffix among ``suffixes`` when given); returns a Path.

    Refused: a folder, an existing file unless ``force``, a wrong suffix and the places
    :func:`_check_writable_place` refuses. Raises ConfigError."""
    path = Path(path)
    if suffixes and path.suffix.lower() not in suffixes:
        raise ConfigError(f"{option} {path}: expected a file ending in {' or '.join(suffixes)}")
    if path.is_dir():
        raise ConfigError(f"{option} {path}: is a folder, expected a file")
    _check_writable_place(path, option)
    if path.exists() and not force:
        raise ConfigError(f"{option} {path}: exists; pass --force to overwrite it")
    return path


def add_part_arguments(p) -> None:
    """``--labels`` and ``--no-auto-parts``: the segmentation of an input mesh (``kinemesh.geometry.segments``),
    shared by simulate, sample, ik, view and demo."""
    p.add_argument("--labels", default=None, metavar="FILE",
                   help="part label per face or per vertex (.npy integers or text, one per line); a part made of "
                        "several components moves as one (URDF / PartNet folders use their links, OBJ files "
                        "their o/g groups, GLB files their nodes)")
    p.add_argument("--no-auto-parts", action="store_true",
                   help="do not group the connected components of a plain mesh into parts (every component "
                        "then moves on its own)")
