"""A `${VAR}` the terminal lacks, taken from the hosts' entries for emceepee (hosts/entry_env.py) for
one command, and said on stderr: which variable, from which file; never its value."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from emceepee_cli.cli.terminal import render


@contextlib.contextmanager
def from_hosts(config: Path) -> Iterator[dict[str, str]]:
    """Within it, the config's `${VAR}`s are set as a host sets them; yields {VAR: the host file}."""
    from emceepee_cli.hosts import entry_env

    with entry_env.filled(config) as filling:
        for var in filling.used:
            render.note(
                f'(${{{var.name}}} is not set in this shell: using the value in the "env" block of '
                f"emceepee's entry in {var.file})"
            )
        for problem in filling.unreadable:
            render.warn(f'{problem} Its "env" block for emceepee was not read.')
        yield {var.name: str(var.file) for var in filling.used}
