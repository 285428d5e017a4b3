"""How the `emceepee` command works as a command line: typer's layer (typer_api.py, the only module
that reaches into typer), commands loaded lazily, values converted and completed on TAB, options
several commands share, and the generated reference."""
