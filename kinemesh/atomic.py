"""Write files atomically: to a temporary name in the same folder, then rename.

A crash or an error mid-write never leaves a half-written output behind.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterator


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str | None = None) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` if the block succeeds.

    ``suffix`` defaults to the suffix of ``path`` so writers that choose a format by extension work.
    On error the temporary file is removed and ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix if suffix is None else suffix
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".tmp{suffix}", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        if tmp_path.exists():  # mkstemp creates 0600; give the file the permissions a plain open() would
            os.chmod(tmp_path, 0o666 & ~_umask())
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary folder next to ``path``; move it onto ``path`` if the block succeeds.

    An existing folder at ``path`` is replaced only after the new one is complete.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp creates 0700
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            if old.exists():
                shutil.rmtree(old)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old)
        else:
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Atomically write ``text`` (UTF-8) to ``path``."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def remove_stale(folder: str | os.PathLike) -> list[Path]:
    """Delete the temporary files and folders that :func:`atomic_path` / :func:`atomic_dir` leave when a process
    is killed mid-write (``.NAME.XXXX.tmpSUFFIX``, ``.NAME.XXXX.tmp``, ``.NAME.old``) anywhere under
    ``folder``. Call it only while no other process writes there (e.g. when resuming). Returns what was removed.
    """
    import re

    pattern = re.compile(r"^\..+\.[^.]+\.tmp(\.[^.]+)?$|^\..+\.old$")
    removed = []
    for p in sorted(Path(folder).rglob(".*"), key=lambda q: len(q.parts), reverse=True):
        if pattern.match(p.name) and (p.is_file() or p.is_dir()) and not p.is_symlink():
            shutil.rmtree(p) if p.is_dir() else p.unlink()
            removed.append(p)
    return removed


def safe_names(names, identifier: bool = False) -> dict[str, str]:
    """Map every name (part, link, group) to a distinct, safe file stem: characters outside
    ``[A-Za-z0-9_.-]`` and runs of dots become one ``_``, leading/trailing dots and ``_`` are dropped (no
    ``..``, no hidden files), empty names become ``part``, at most 100 characters; names that collide after this (case-insensitively, for case-insensitive
    file systems) get ``_2``, ``_3``, ... So ``../../tmp/x/victim`` or ``/etc/passwd`` can never leave the
    folder a writer puts ``<stem>.obj`` in. ``identifier``: ``[A-Za-z0-9_]`` only, not starting with a digit
    (USD prim names). Returns {name: stem} in input order."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for name in names:
        if name in out:
            continue
        stem = re.sub(r"[^A-Za-z0-9_]" if identifier else r"[^A-Za-z0-9_.-]", "_", str(name))
        stem = re.sub(r"_+", "_", re.sub(r"\.\.+", "_", stem)).strip("._")[:100]
        stem = "_" + stem if identifier and stem[:1].isdigit() else stem or "part"
        cand, k = stem, 2
        while cand.lower() in used:
            cand, k = f"{stem}_{k}", k + 1
        used.add(cand.lower())
        out[name] = cand
    return out
