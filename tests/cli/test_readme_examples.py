"""Every `emceepee` line of the README's bash examples runs as written, in order, in a fresh home.

The home has what the examples assume of a reader's machine: a Cursor config with a server in it
(for `import`), `uvx` on the PATH (a stand-in that runs the example backend), and a host's PATH
that has it too. The shell is in the README's venv, whose `python3` comes first; the host's PATH
finds another `python3`, without the venv's packages, so the echo example passes `doctor` only
when `servers add` saved the venv's. `emceepee demo` (tests/cli/test_demo.py) and `emceepee
serve` (it waits for a host) are tested elsewhere.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.clirun import VENV_BIN
from tests.support import EXAMPLES, ROOT

ELSEWHERE = ("demo", "serve")


def readme_commands() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    lines = [line.strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line.startswith("emceepee ") and line.split()[1] not in ELSEWHERE]


@pytest.fixture
def machine(tmp_path: Path) -> dict[str, str]:
    home, tools, system = tmp_path / "home", tmp_path / "bin", tmp_path / "system-bin"
    (home / ".cursor").mkdir(parents=True)
    (home / ".cursor" / "mcp.json").write_text(
        json.dumps({"mcpServers": {"fetch": {"command": "uvx", "args": ["mcp-server-fetch"]}}})
    )
    for folder, name, body in (
        (tools, "uvx", f"exec {shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLES / 'echo.py'))}"),
        (system, "python3", "echo \"ModuleNotFoundError: No module named 'mcp'\" >&2; exit 1"),
    ):
        folder.mkdir(exist_ok=True)
        script = folder / name
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    system_path = f"{system}{os.pathsep}/usr/bin:/bin"
    return {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "EMCEEPEE_HOME": str(tmp_path / "emceepee"),
        # a shell in the README's venv; `uvx` is the stand-in for both (a venv may hold a real one)
        "PATH": f"{tools}{os.pathsep}{VENV_BIN}{os.pathsep}{system_path}",
        "EMCEEPEE_HOST_PATH": f"{tools}{os.pathsep}{system_path}",  # another python3, without mcp
    }


def test_the_readme_has_examples_of_every_command_group() -> None:
    commands = " ".join(readme_commands())
    for word in (
        "install",
        "import",
        "servers add",
        "servers list",
        "tools",
        "call",
        "doctor",
        "logs",
        "events",
        "journal status",
        "paths",
        "auth status",
    ):
        assert f"emceepee {word}" in commands


def test_every_readme_example_runs_as_written(machine: dict[str, str]) -> None:
    for line in readme_commands():
        done = subprocess.run(
            ["bash", "-c", line], cwd=ROOT, env=machine, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr, line
    listed = subprocess.run(
        ["bash", "-c", "emceepee servers list --json"],
        env=machine,
        capture_output=True,
        text=True,
        timeout=60,
    )
    servers = {s["name"]: s for s in json.loads(listed.stdout)["servers"]}
    assert set(servers) >= {"git", "remote", "echo", "fetch"}
    assert servers["echo"]["command"] == str(Path(VENV_BIN) / "python3")  # so `doctor` passed it
