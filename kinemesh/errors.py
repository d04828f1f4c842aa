"""Errors a user can cause. The CLI prints them in one line and exits non-zero."""

from __future__ import annotations


class KinemeshError(Exception):
    """Base class of every user-facing error (bad file, wrong shape, missing part, bad option)."""


class InputFileError(KinemeshError):
    """A file is missing, empty, truncated, corrupt or holds values that fail validation."""

    def __init__(self, path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class UnsafePathError(InputFileError):
    """A path inside an asset escapes the asset's folder (e.g. '../../etc/passwd')."""


class ConfigError(KinemeshError):
    """An option or configuration value is invalid."""


class SimulationDivergedError(KinemeshError):
    """A simulation produced non-finite or exploding states and nothing was written."""


class MissingDependencyError(KinemeshError):
    """An optional dependency is not installed."""

    def __init__(self, package: str, feature: str, extra: str | None = None):
        how = f"pip install 'kinemesh[{extra}]'" if extra else f"pip install {package}"
        super().__init__(f"{feature} needs the optional package '{package}': {how}")
