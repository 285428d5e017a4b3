"""What `servers add`, `enable`, `disable` and `show` do to the config, apart from printing it.

Input from the command line is checked as command-line input: a bad value names the option it
came from (`--url`, `--env NAME`), not a field of the config file, and nothing is written. A value
that looks like a secret is refused the same way, with the `${VAR}` form to type instead (the test
`import` uses to keep secrets out of the config). A bare command is saved by the full path this
shell finds when a host, with its own PATH, would run another program or none.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emceepee_cli.errors import ConfigError, NotFound, UsageError

if TYPE_CHECKING:
    from emceepee_cli.config import ServerSpec
    from emceepee_cli.hosts.catalog import Resolved

EXAMPLE = "Example: emceepee servers add git -- uvx mcp-server-git --repository ~/src/app"


@dataclass(frozen=True)
class Fields:
    """`servers add`'s input, as typed."""

    name: str
    command: list[str] | None
    url: str | None
    env: list[str]
    headers: list[str]
    cwd: str | None
    protocol: str
    enabled: bool
    sse: bool = False  # the --url server speaks the legacy HTTP+SSE transport


@dataclass
class Added:
    spec: ServerSpec
    path: Path
    warnings: list[str] = field(default_factory=list)


def pairs(values: list[str], option: str) -> dict[str, str]:
    """`NAME=VALUE` options as a dict; the value may itself contain '='."""
    out: dict[str, str] = {}
    for pair in values:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            problem = "has no '='" if not sep else "has an empty name"
            raise UsageError(
                f"{option} '{pair}' {problem}; expected NAME=VALUE.",
                hint=f"Write it as {option} NAME=value, e.g. {option} 'TOKEN=${{GIT_TOKEN}}'. "
                "Nothing was written.",
            )
        out[key] = value
    return out


def _option(name: str) -> str:
    """Where on the command line the value of config field `name` came from."""
    if name.startswith("env."):
        return f"--env {name[4:]}"
    if name.startswith("headers."):
        return f"--header {name[8:]}"
    if name.startswith("args["):
        return f"argument {int(name[5:-1]) + 1} after --"
    if name == "transport":
        return "--sse"
    return "the command after --" if name == "command" else f"--{name}"


def check(spec: ServerSpec) -> None:
    from emceepee_cli import config as config_mod

    _, problems = config_mod.parse_server(spec.name, spec.to_toml())
    if problems:
        shown = spec.name if spec.name.isprintable() else repr(spec.name)[1:-1]
        lines = [f"{_option(p.field)}: {p.message}" if p.field else p.message for p in problems]
        raise UsageError(
            f"Cannot add server '{shown}': " + "; ".join(lines) + ".", hint="Nothing was written. " + EXAMPLE
        )


def add(
    fields: Fields, *, resolve: bool, replace: bool, config: Path | None, allow_secrets: bool = False
) -> Added:
    from emceepee_cli import config as config_mod
    from emceepee_cli import paths
    from emceepee_cli.config import ServerSpec

    if bool(fields.command) == bool(fields.url):
        raise UsageError("Give either a command after `--` or --url, not both and not neither.", hint=EXAMPLE)
    spec = ServerSpec(
        name=fields.name,
        command=fields.command[0] if fields.command else None,
        args=tuple(fields.command[1:]) if fields.command else (),
        env=pairs(fields.env, "--env"),
        headers=pairs(fields.headers, "--header"),
        cwd=fields.cwd,
        url=fields.url,
        protocol=fields.protocol,  # type: ignore[arg-type]  # checked just below, naming --protocol
        enabled=fields.enabled,
        remote_transport="sse" if fields.sse else "http",
    )
    check(spec)
    if not allow_secrets:
        refuse_secrets(spec, fields, _options(resolve, replace, config))
    warnings: list[str] = []
    if spec.command is not None:
        spec = _resolved(spec, resolve, warnings)
    warnings += _unset(spec)
    path = config_mod.add_server(spec, paths.config_path(config), replace=replace)
    return Added(spec, path, warnings)


def _options(resolve: bool, replace: bool, config: Path | None) -> list[str]:
    """The options of `servers add` that `Fields` does not hold, as typed."""
    typed = ["--no-resolve"] if not resolve else []
    typed += ["--replace"] if replace else []
    return typed + (["--config", str(config)] if config else [])


def refuse_secrets(spec: ServerSpec, fields: Fields, options: list[str]) -> None:
    """Refuse a value that looks like a secret, as `import` would keep it out of the config: the
    command to run instead (the value as `${VAR}`), and where the value goes."""
    from emceepee_cli.hosts import entry_env, importing

    secrets = importing.secrets_in(spec)
    if not secrets:
        return
    line = _typed(spec, fields.command, options, {secret.field: secret.form for secret in secrets})
    files = entry_env.read().files
    where = ", ".join(map(str, files)) if files else "none yet: `emceepee install HOST` adds one"
    names = " and ".join(_option(secret.field) for secret in secrets)
    what, it = ("value of", "it") if len(secrets) == 1 else ("values of", "them")
    looks = "looks like a secret" if len(secrets) == 1 else "look like secrets"
    raise UsageError(
        f"Cannot add server '{spec.name}': the {what} {names} {looks}, and emceepee keeps secrets out "
        "of its config file. Nothing was written.",
        hint=f"Refer to {it} as ${{VAR}} instead:\n  {line}\n"
        f'then set {" and ".join(secret.var for secret in secrets)} in the "env" block of emceepee\'s '
        f"entry in your MCP host's config (here: {where}), where the host gives {it} to emceepee "
        f"(`tools`, `call` and `doctor` read {it} there too). "
        "Not a secret? --allow-secrets saves the value as typed.",
    )


def _typed(spec: ServerSpec, command: list[str] | None, options: list[str], forms: dict[str, str]) -> str:
    """The `servers add` command line that adds `spec`, each field in `forms` written that way."""
    import shlex

    line = ["emceepee", "servers", "add", spec.name, *options]
    line += ["--url", forms.get("url", spec.url)] if spec.url is not None else []
    line += [x for k, v in spec.env.items() for x in ("-e", f"{k}={forms.get(f'env.{k}', v)}")]
    line += [x for k, v in spec.headers.items() for x in ("-H", f"{k}={forms.get(f'headers.{k}', v)}")]
    line += ["--cwd", spec.cwd] if spec.cwd else []
    line += ["--sse"] if spec.transport == "sse" else []
    line += ["--protocol", spec.protocol] if spec.protocol != "legacy" else []
    line += ["--disabled"] if not spec.enabled else []
    return shlex.join(line + (["--", *command] if command else []))


def _resolved(spec: ServerSpec, resolve: bool, warnings: list[str]) -> ServerSpec:
    """The spec with a bare command replaced by its full path when this shell finds it and a host
    would not run the same program (no program at all, or another one: the system's `python3`
    instead of a venv's)."""
    from emceepee_cli.hosts import catalog

    assert spec.command is not None
    if "${" in spec.command:
        return spec
    found = catalog.resolve(spec.command)
    if not found.bare:
        if not found.in_shell:
            warnings.append(
                f"'{spec.command}' does not exist or is not executable; '{spec.name}' will fail to start."
            )
        return spec
    if found.for_host and not found.elsewhere_for_host:
        return spec
    if found.in_shell is None:
        warnings.append(
            f"'{spec.command}' was not found on PATH (this shell's: {os.environ.get('PATH', '')}; "
            f"a host's: {found.host_path}). '{spec.name}' will fail to start until it is installed, "
            "or given as a full path."
        )
        return spec
    warnings.append(_resolution(found, resolve))
    return replace(spec, command=found.in_shell) if resolve else spec


def _resolution(found: Resolved, resolve: bool) -> str:
    """What `servers add` says when a host would not run what this shell runs."""
    here = f"'{found.command}' is {found.in_shell} on this shell's PATH"
    if found.for_host:
        there = (
            f"{here}, but a host, with the PATH it usually gives emceepee ({found.host_path}), "
            f"would run {found.for_host} instead"
        )
    else:
        there = f"{here}, but not on the PATH an MCP host usually gives emceepee ({found.host_path})"
    if not resolve:
        ending = "" if found.for_host else ": a host will not find it"
        return f"{there}{ending}. Kept as typed (--no-resolve)."
    return f"{there}; saved its full path {found.in_shell}. --no-resolve keeps the name."


def _unset(spec: ServerSpec) -> list[str]:
    """A warning for a `${VAR}` that neither this shell nor any host's entry for emceepee sets."""
    from emceepee_cli.hosts import entry_env

    try:
        spec.expanded()
    except ConfigError:
        hosts = entry_env.read()
        try:
            spec.expanded({**{name: var.value for name, var in hosts.found.items()}, **os.environ})
        except ConfigError as exc:
            files = f" ({', '.join(map(str, hosts.files))})" if hosts.files else ""
            return [
                f"{exc.message} emceepee expands ${{VAR}} from its own environment: set it in the "
                f"\"env\" block of emceepee's entry in your MCP host's config{files}. Until it is set, "
                "the server stays off."
            ]
    return []


def switch(name: str, on: bool, config: Path | None) -> tuple[Path, bool, list[str]]:
    """Set `enabled` of server `name`; (the file, whether it changed, its problems now)."""
    from emceepee_cli import config as config_mod
    from emceepee_cli import paths
    from emceepee_cli.cli.server_rows import find_row, raw_servers

    path = paths.config_path(config)
    table = raw_servers(path).get(name)
    if table is None:
        find_row(name, path)  # raises NotFound with the known names
        raise NotFound(f"Unknown server '{name}' in {path}.")
    spec, problems = config_mod.parse_server(name, table)
    if spec is None:
        from emceepee_cli.cli.server_rows import problem_text

        raise ConfigError(
            f"Server '{name}' cannot be switched {'on' if on else 'off'}: "
            + "; ".join(problem_text(p, path) for p in problems),
            hint=f"Fix its table in {path} first (emceepee servers show {name}).",
        )
    changed = spec.enabled != on
    if changed:
        config_mod.add_server(replace(spec, enabled=on), path, replace=True)
    return path, changed, find_row(name, path).get("problems", [])


def masked(table: dict[str, Any]) -> dict[str, str]:
    from emceepee_cli.hosts.importing import looks_secret

    return {
        str(k): f"<hidden: {len(str(v))} characters>" if looks_secret(str(k), str(v)) else str(v)
        for k, v in table.items()
    }


def _strings(table: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in table.items() if isinstance(value, str)}


def details(row: dict[str, Any], table: dict[str, Any], path: Path) -> dict[str, Any]:
    from emceepee_cli import paths
    from emceepee_cli.hosts import catalog

    out: dict[str, Any] = {
        "name": row["name"],
        "status": row["status"],
        "transport": row["transport"],
        "config": str(path),
    }
    if row["transport"] == "stdio":
        command = str(table.get("command") or "")
        found = catalog.resolve(command)
        out["command"] = command
        out["args"] = [str(a) for a in table.get("args") or []]
        out["found_for_host"] = found.for_host
        out["found_in_shell"] = found.in_shell
        out["host_path"] = found.host_path
        if table.get("cwd"):
            out["cwd"] = table["cwd"]
        out["env"] = masked(table.get("env") or {})
        out["log"] = str(paths.logs_dir() / f"{row['name']}.log")
    else:
        out["url"] = table.get("url")
        out["headers"] = masked(table.get("headers") or {})
        if isinstance(table.get("oauth"), dict):  # its client_secret is a ${VAR}, else a problem
            out["oauth"] = {**table["oauth"], **masked(_strings(table["oauth"]))}
    for key in ("protocol", "elicitation", "sampling"):
        if key in table:
            out[key] = table[key]
    out["enabled"] = row["enabled"]
    if row.get("problems"):
        out["problems"] = row["problems"]
    return out
