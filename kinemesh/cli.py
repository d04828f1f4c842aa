"""The ``kinemesh`` command. Each sub-command lives in its own module under ``kinemesh/commands/``.

A command module defines ``register(subparsers)`` which adds its parser and sets ``func`` (a callable
taking the parsed ``argparse.Namespace`` and returning an exit code or None). Modules are imported lazily
by name so ``kinemesh --help`` stays fast and one broken optional dependency does not take down the others.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import signal
import sys

from kinemesh import __version__
from kinemesh.errors import KinemeshError


def _command_modules() -> list[str]:
    import kinemesh.commands as pkg

    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))


class _Parser(argparse.ArgumentParser):
    """Option errors in one line (no usage block), exit status 2; sub-command parsers inherit it."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kinemesh",
        description="Turn a static 3D object into a dynamic, interactive 4D object.",
    )
    parser.add_argument("--version", action="version", version=f"kinemesh {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="print debug logging and full tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _command_modules():
        module = importlib.import_module(f"kinemesh.commands.{name}")
        module.register(sub)
    return parser


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so every ``finally`` (atomic writes) removes its temporary files."""


def _on_sigterm(signum, frame):
    raise _Terminated()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        code = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:  # `kinemesh info big.obj | head -1`: the reader left; not an error of ours
        # Python flushes stdout again at exit: point it at devnull so that flush cannot fail either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KinemeshError as exc:
        if args.verbose:
            raise
        print(f"kinemesh {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        term = isinstance(exc, _Terminated)
        print(f"kinemesh {args.command}: {'terminated' if term else 'interrupted'}", file=sys.stderr)
        return 143 if term else 130
    return int(code or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
