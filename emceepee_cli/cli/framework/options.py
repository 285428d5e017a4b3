"""Options several commands share."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Config file (default: $EMCEEPEE_CONFIG, else the user config folder).",
        show_default=False,
    ),
]
JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json", help="Print JSON (the same shape the meta-tools return); an error is a JSON object too."
    ),
]
DbOpt = Annotated[
    Path | None,
    typer.Option(
        "--db",
        help="Journal file (default: $EMCEEPEE_DB, else journal.db in the user data folder).",
        show_default=False,
    ),
]
