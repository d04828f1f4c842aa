"""Sub-commands of the ``kinemesh`` CLI, one module each (see ``kinemesh/cli.py``)."""

from __future__ import annotations


def kinds_arg(text: str) -> tuple[str, ...]:
    """An argparse ``type`` for a comma-separated list of object kinds (``kinemesh.geometry.kind.parse_kinds``);
    argparse names the option and exits 2 on a bad one."""
    import argparse

    from kinemesh.errors import ConfigError
    from kinemesh.geometry.kind import parse_kinds

    try:
        return parse_kinds(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
