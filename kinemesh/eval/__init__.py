"""kinemesh.eval: the benchmarks behind ``kinemesh eval`` as a library, configs in and rows out.

Each module ``kinemesh.eval.<name>`` defines a config dataclass (its fields are the command's options, their
help in the field metadata, checked when it is built), ``evaluate(cfg) -> Result`` (prints nothing but progress
bars, writes only the artifacts the config names) and ``render`` (rows -> markdown).
:mod:`kinemesh.commands.eval` builds the config from the command line, prints the table and writes the files.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from kinemesh.errors import ConfigError


def option(default, help: str | None = None, **cli):
    """A config field: its default, its command-line help and argparse extras (``type`` where the default is
    None, ``choices``, ``metavar``, ``action``, ``required``) and ``min`` / ``max``, the range :func:`check`
    accepts."""
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"help": help, **cli})
    return field(default=default, metadata={"help": help, **cli})


def check(cfg) -> None:
    """Raise ConfigError naming the option when a field of ``cfg`` is outside its ``choices`` or below its
    ``min``."""
    for f in fields(cfg):
        v, m, flag = getattr(cfg, f.name), f.metadata, "--" + f.name.replace("_", "-")
        if "choices" in m and v not in m["choices"]:
            raise ConfigError(f"{flag} {v!r}: expected one of {', '.join(map(str, m['choices']))}")
        if "min" in m and v is not None and v < m["min"]:
            raise ConfigError(f"{flag} must be >= {m['min']}, got {v}")
        if "max" in m and v is not None and v > m["max"]:
            raise ConfigError(f"{flag} must be <= {m['max']}, got {v}")


@dataclass
class Result:
    """What ``evaluate`` returns: ``rows`` (one dict per instance, target and method, or object), the
    evaluated model's ``model_info`` (checkpoint metadata), ``notes`` for the report and the wall time in
    ``seconds``."""

    rows: list[dict]
    model_info: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
