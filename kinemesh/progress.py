"""The one place that decides whether progress bars are drawn: only on a terminal.

Import ``tqdm`` from here, not from the tqdm package: the same bar, but off when its stream is not a
terminal (a log file, a pipe, CI), where the ``\\r`` updates would pile up as lines.
"""

from __future__ import annotations

from tqdm import tqdm as _tqdm


def tqdm(*args, disable: bool | None = False, **kwargs):
    """``tqdm.tqdm`` drawn only on a terminal; ``disable=True`` still turns it off everywhere."""
    return _tqdm(*args, disable=True if disable else None, **kwargs)  # None: tqdm's "off unless a TTY"
