"""Sub-commands of the ``kinemesh`` CLI, one module each (see ``kinemesh/cli.py``)."""
