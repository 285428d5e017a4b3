"""The MCP hosts emceepee can install itself into: where each keeps its config, and its JSON shape.

Each host keeps its MCP servers in one JSON object of a user-level file; the entry for a local
(stdio) server is `{command, args, env}` (some want `"type": "stdio"` too), and a remote one has a
URL under a host-specific key. Where each file lives, per platform, is what the host's own
documentation says (`Host.source`):

- Claude Desktop: `claude_desktop_config.json` in `~/Library/Application Support/Claude` (macOS),
  `%APPDATA%\\Claude` (Windows), `$XDG_CONFIG_HOME/Claude` (Linux); servers under `mcpServers`.
- Claude Code: `~/.claude.json` (its user scope); `mcpServers`, entries typed.
- Cursor: `~/.cursor/mcp.json`; `mcpServers`.
- VS Code: `mcp.json` in the user profile (`~/Library/Application Support/Code/User`,
  `%APPDATA%\\Code\\User`, `~/.config/Code/User`); `servers`, entries typed.
- Windsurf: `~/.codeium/windsurf/mcp_config.json`; `mcpServers`, a remote URL as `serverUrl`.
- Gemini CLI: `~/.gemini/settings.json`; `mcpServers`, a Streamable HTTP URL as `httpUrl`.
- LM Studio: `~/.lmstudio/mcp.json`; `mcpServers`.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emceepee_cli.errors import UsageError

ENTRY_NAME = "emceepee"


@dataclass(frozen=True)
class Host:
    key: str
    title: str
    servers_key: str  # the object that maps server names to entries
    url_key: str  # where a remote (Streamable HTTP) server's URL goes
    typed: bool  # entries carry "type": "stdio" / "http"
    source: str  # the documentation this shape and location come from
    aliases: tuple[str, ...] = ()

    def path(
        self, platform: str | None = None, home: Path | None = None, env: Mapping[str, str] | None = None
    ) -> Path:
        """The user-level config file on `platform` (default: this one)."""
        platform = platform or sys.platform
        home = home or Path.home()
        env = os.environ if env is None else env
        return _LOCATIONS[self.key](platform, home, env)

    def stdio_entry(self, command: list[str], existing: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The entry that starts `command`, keeping whatever else an existing entry has (env above all)."""
        entry = dict(existing or {})
        for key in ("url", "serverUrl", "httpUrl", "headers"):
            entry.pop(key, None)
        if self.typed:
            entry["type"] = "stdio"
        entry["command"], entry["args"] = command[0], command[1:]
        return entry

    def url_of(self, entry: Mapping[str, Any]) -> tuple[str | None, str | None]:
        """(the entry's URL, its transport: "http", "sse" or None for a local server)."""
        for key in ("httpUrl", "serverUrl", "url"):
            url = entry.get(key)
            if isinstance(url, str):
                kind = str(entry.get("type") or entry.get("transport") or "")
                if kind in ("sse",) or (key == "url" and self.key == "gemini-cli"):
                    return url, "sse"  # Gemini CLI's `url` is its SSE transport; `httpUrl` is HTTP
                if not kind and url.rstrip("/").endswith("/sse"):
                    return url, "sse"
                return url, "http"
        return None, None


_DOCS = {
    "claude-desktop": "modelcontextprotocol.io/quickstart/user (Settings > Developer > Edit Config); "
    "Linux as the MCP SDK's mcp.cli.claude.get_claude_config_path()",
    "claude-code": "code.claude.com/docs/en/mcp (installation scopes: user scope in ~/.claude.json)",
    "cursor": "docs.cursor.com/context/model-context-protocol (global ~/.cursor/mcp.json)",
    "vscode": "code.visualstudio.com/docs/copilot/reference/mcp-configuration (user profile mcp.json) and "
    "code.visualstudio.com/docs/getstarted/settings#_settings-file-locations",
    "windsurf": "docs.windsurf.com/windsurf/cascade/mcp (~/.codeium/windsurf/mcp_config.json, serverUrl)",
    "gemini-cli": "geminicli.com/docs/tools/mcp-server (~/.gemini/settings.json; httpUrl = Streamable HTTP)",
    "lm-studio": "lmstudio.ai/docs/app/mcp (~/.lmstudio/mcp.json, Cursor's notation)",
}

HOSTS: dict[str, Host] = {
    h.key: h
    for h in (
        Host(
            "claude-desktop",
            "Claude Desktop",
            "mcpServers",
            "url",
            False,
            _DOCS["claude-desktop"],
            ("claude",),
        ),
        Host("claude-code", "Claude Code", "mcpServers", "url", True, _DOCS["claude-code"]),
        Host("cursor", "Cursor", "mcpServers", "url", False, _DOCS["cursor"]),
        Host("vscode", "VS Code", "servers", "url", True, _DOCS["vscode"], ("code", "vs-code")),
        Host("windsurf", "Windsurf", "mcpServers", "serverUrl", False, _DOCS["windsurf"]),
        Host("gemini-cli", "Gemini CLI", "mcpServers", "httpUrl", False, _DOCS["gemini-cli"], ("gemini",)),
        Host("lm-studio", "LM Studio", "mcpServers", "url", False, _DOCS["lm-studio"], ("lmstudio",)),
    )
}


def _app_support(platform: str, home: Path, env: Mapping[str, str], folder: str) -> Path:
    """The per-user application folder a desktop app named `folder` writes its settings to."""
    if platform == "darwin":
        return home / "Library" / "Application Support" / folder
    if platform == "win32":
        return Path(env.get("APPDATA") or home / "AppData" / "Roaming") / folder
    return Path(env.get("XDG_CONFIG_HOME") or home / ".config") / folder


_LOCATIONS: dict[str, Callable[[str, Path, Mapping[str, str]], Path]] = {
    "claude-desktop": lambda p, h, e: _app_support(p, h, e, "Claude") / "claude_desktop_config.json",
    "claude-code": lambda p, h, e: h / ".claude.json",
    "cursor": lambda p, h, e: h / ".cursor" / "mcp.json",
    "vscode": lambda p, h, e: _app_support(p, h, e, "Code") / "User" / "mcp.json",
    "windsurf": lambda p, h, e: h / ".codeium" / "windsurf" / "mcp_config.json",
    "gemini-cli": lambda p, h, e: h / ".gemini" / "settings.json",
    "lm-studio": lambda p, h, e: h / ".lmstudio" / "mcp.json",
}


def find(name: str) -> Host:
    wanted = name.strip().lower().replace("_", "-").replace(" ", "-")
    for host in HOSTS.values():
        if wanted == host.key or wanted in host.aliases:
            return host
    close = difflib.get_close_matches(wanted, [*HOSTS, *(a for h in HOSTS.values() for a in h.aliases)], n=1)
    suggestion = f" Did you mean '{close[0]}'?" if close else ""
    raise UsageError(
        f"Unknown MCP host '{name}'.{suggestion}",
        hint=f"Known hosts: {', '.join(HOSTS)}. For another host, give its config file with --file "
        "and the host whose format it uses.",
    )


def serve_command() -> list[str]:
    """How a host should start this very emceepee: the absolute path of the running executable."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name.startswith("emceepee") and argv0.is_file():
        return [os.path.abspath(argv0), "serve"]  # not resolved: a stable symlink stays the one named
    beside = Path(sys.executable).parent / ("emceepee.exe" if os.name == "nt" else "emceepee")
    if beside.exists():
        return [str(beside), "serve"]
    return [sys.executable, "-m", "emceepee_cli", "serve"]


def is_emceepee(name: str, entry: Mapping[str, Any]) -> bool:
    """The entry starts emceepee itself (by its name, or by what it runs)."""
    if name == ENTRY_NAME:
        return True
    command = str(entry.get("command") or "")
    args = [str(a) for a in entry.get("args") or [] if isinstance(a, str)]
    stem = Path(command).name.removesuffix(".exe")
    return (stem == "emceepee" and "serve" in args) or "emceepee_cli" in args


# The PATH an app started from the desktop (not from a shell) usually has: macOS gives GUI apps
# launchd's default; a Linux desktop session rarely adds what a shell's rc files add (~/.local/bin,
# nvm, pyenv…). A host passes emceepee what it has, and emceepee passes it to backends.
HOST_PATHS = {"darwin": "/usr/bin:/bin:/usr/sbin:/sbin", "linux": "/usr/local/bin:/usr/bin:/bin"}
HOST_PATH_ENV = "EMCEEPEE_HOST_PATH"


def host_path(env: Mapping[str, str] | None = None) -> str:
    """The PATH to assume a host starts emceepee with (`EMCEEPEE_HOST_PATH` overrides)."""
    env = os.environ if env is None else env
    if env.get(HOST_PATH_ENV):
        return env[HOST_PATH_ENV]
    return HOST_PATHS.get(sys.platform, HOST_PATHS["linux"]) if os.name != "nt" else env.get("PATH", "")


@dataclass(frozen=True)
class Resolved:
    """Where a backend's command is found: on the PATH a host gives emceepee, and on this shell's."""

    command: str
    for_host: str | None
    in_shell: str | None
    host_path: str

    @property
    def bare(self) -> bool:
        return os.sep not in self.command and not (os.altsep and os.altsep in self.command)

    @property
    def elsewhere_for_host(self) -> bool:
        """A host would run another program than this shell does: both find one, but not the same.

        Compared by the folder each is found in (its links resolved) and the name, never by the
        file the name links to: a venv's `python3` links to the system's, yet runs with the venv's
        packages; an nvm `node` or a pyenv shim differs by folder too. `/bin` and `/usr/bin` on a
        merged-/usr system are one folder."""
        if self.for_host is None or self.in_shell is None:
            return False
        return _where(self.for_host) != _where(self.in_shell)


def _where(found: str) -> tuple[str, str]:
    folder, name = os.path.split(os.path.abspath(found))
    return os.path.realpath(folder), name


def resolve(command: str, *, for_host: str | None = None, shell_path: str | None = None) -> Resolved:
    """Where `command` is found on a host's PATH (`for_host`, default `host_path()`) and on this
    shell's (`shell_path`, default $PATH)."""
    import shutil

    path = for_host if for_host is not None else host_path()
    shell = shell_path if shell_path is not None else os.environ.get("PATH", "")
    return Resolved(command, shutil.which(command, path=path), shutil.which(command, path=shell), path)
