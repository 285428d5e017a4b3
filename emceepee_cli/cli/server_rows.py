"""The config's servers as rows: what `servers list` and `show` print, and what `servers add`,
`enable`/`disable` and `import` check against. Every server in the file gets a row, the broken ones
too (with what is wrong, naming the file), so a server never silently disappears.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from emceepee_cli.config import ConfigProblem, ServerSpec


def problem_text(problem: ConfigProblem, path: Path) -> str:
    """A config problem, naming the file it is in (whatever file that is)."""
    where = [f"server '{problem.server}'"] if problem.server is not None else []
    where += [f"field '{problem.field}'"] if problem.field is not None else []
    return ": ".join([str(path), *([", ".join(where)] if where else []), problem.message])


def raw_servers(path: Path) -> dict[str, dict[str, Any]]:
    """Every [servers.NAME] table of the file as written, valid or not."""
    from emceepee_cli import config as config_mod

    servers = config_mod.read_toml(path).get("servers", {})
    return (
        {str(k): v if isinstance(v, dict) else {} for k, v in servers.items()}
        if isinstance(servers, dict)
        else {}
    )


def server_row(spec: ServerSpec) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": spec.name,
        "transport": spec.transport,
        "enabled": spec.enabled,
        "protocol": spec.protocol,
        "status": "enabled" if spec.enabled else "disabled",
    }
    if spec.url is not None:
        row["url"] = spec.url
    else:
        row["command"] = spec.command
        row["args"] = list(spec.args)
    return row


def _raw_row(name: str, table: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": name,
        "transport": _transport(table),
        "enabled": table.get("enabled", True) is not False,
        "protocol": table.get("protocol", "legacy"),
        "status": "invalid",
    }
    if "url" in table:
        row["url"] = table.get("url")
    else:
        row["command"] = table.get("command")
        row["args"] = [str(a) for a in table.get("args") or [] if isinstance(a, str)]
    row["problems"] = problems
    return row


def _transport(table: dict[str, Any]) -> str:
    """The transport a table means, as written (a wrong value is shown as it is, among its problems)."""
    if "url" not in table:
        return "stdio"
    return str(table.get("transport", "http"))


def target(row: dict[str, Any]) -> str:
    import shlex

    if row.get("url") is not None:
        return str(row["url"])
    return shlex.join([str(row.get("command") or ""), *row.get("args", [])])


def rows_of(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """(a row per server in the file, the problems not about one server)."""
    from emceepee_cli import config as config_mod

    loaded = config_mod.load_config(path)
    rows = []
    for name, table in raw_servers(path).items():
        problems = [problem_text(p, path) for p in loaded.problems if p.server == name]
        spec = loaded.servers.get(name)
        rows.append(
            server_row(spec) if spec is not None and not problems else _raw_row(name, table, problems)
        )
    general = [problem_text(p, path) for p in loaded.problems if p.server is None]
    return rows, general


def find_row(name: str, path: Path) -> dict[str, Any]:
    rows, _ = rows_of(path)
    for row in rows:
        if row["name"] == name:
            return row
    from emceepee_cli.errors import NotFound

    known = ", ".join(r["name"] for r in rows) or "(none)"
    raise NotFound(
        f"Unknown server '{name}' in {path}. Known: {known}.", hint="See them with: emceepee servers list"
    )
