"""A host's file keeps what its user wrote: `install` and `import` (real CLI processes, dry run and
for real) change only emceepee's entry and, with --replace, the servers that moved; comments,
indentation (tabs, 2 or 4 spaces), trailing commas and CRLF stay byte for byte, and the diff shows
only that. A file that cannot be edited safely is refused with the entry to paste, untouched."""

from __future__ import annotations

import difflib
import json
import sys
import time
from pathlib import Path

import pytest

from emceepee_cli.errors import ConfigError
from emceepee_cli.hosts import catalog, config_file, jsonc
from tests.cli.clirun import cli
from tests.support import run_cli

EXE = str(Path(sys.executable).parent / "emceepee")  # the console script of this environment
TOKEN = "ghp_0123456789abcdefghijKLMN"

# VS Code's mcp.json as a user writes it: comments next to every entry, trailing commas.
VSCODE = """\
{
\t// MCP servers for every workspace
\t"servers": {
\t\t// GitHub, with my token
\t\t"github": {
\t\t\t"type": "stdio",
\t\t\t"command": "npx", // the launcher
\t\t\t"args": ["-y", "@modelcontextprotocol/server-github"],
\t\t\t"env": { "GITHUB_TOKEN": "%TOKEN%" },
\t\t},
\t\t/* emceepee, installed last year */
\t\t"emceepee": {
\t\t\t"type": "stdio",
\t\t\t"command": "/old/bin/emceepee", // moved since
\t\t\t"args": ["serve"],
\t\t},
\t\t"ask": { "type": "stdio", "command": "x", "env": { "KEY": "${input:key}" } }, // only VS Code can start it
\t},
\t"inputs": [ /* none yet */ ],
}
""".replace("%TOKEN%", TOKEN)


def styled(text: str, style: str) -> str:
    """`text` (tab-indented) in another style."""
    if style == "tabs":
        return text
    if style == "crlf":
        return text.replace("\n", "\r\n")
    return text.replace("\t", " " * int(style[0]))


STYLES = ["tabs", "2 spaces", "4 spaces", "crlf"]


def host_file(key: str, text: str) -> Path:
    path = catalog.HOSTS[key].path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())
    return path


def changed(diff: str) -> list[str]:
    """The removed (-) and added (+) lines of a unified diff."""
    return [
        line.rstrip("\r\n")
        for line in diff.splitlines(True)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def diff_of(before: str, after: str) -> list[str]:
    return changed("".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), n=0)))


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".*.bak"))


@pytest.mark.parametrize("style", STYLES)
def test_install_changes_only_the_command_of_emceepees_entry(style: str) -> None:
    before = styled(VSCODE, style)
    path = host_file("vscode", before)
    dry = run_cli("install", "vscode", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert path.read_bytes() == before.encode() and backups(path) == []
    indent = "\t\t\t" if style in ("tabs", "crlf") else " " * 3 * int(style[0])
    assert changed(dry.stdout.split("\n(dry run")[0]) == [
        f'-{indent}"command": "/old/bin/emceepee", // moved since',
        f'+{indent}"command": {json.dumps(EXE)}, // moved since',
    ]
    done = run_cli("install", "vscode")
    assert done.returncode == 0, done.stderr
    assert path.read_bytes() == before.replace('"/old/bin/emceepee"', json.dumps(EXE)).encode()
    assert [b.read_bytes() for b in backups(path)] == [before.encode()]
    assert TOKEN not in dry.stdout + done.stdout + done.stderr


@pytest.mark.parametrize("style", STYLES)
def test_import_replace_takes_out_the_moved_server_and_adds_only_the_env_block(
    style: str, emceepee_home: Path
) -> None:
    before = styled(VSCODE, style)
    path = host_file("vscode", before)
    dry = run_cli("import", "vscode", "--replace", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert path.read_bytes() == before.encode() and not (emceepee_home / "config.toml").exists()
    done = run_cli("import", "vscode", "--replace")
    assert done.returncode == 0, done.stderr
    after = path.read_bytes().decode()
    nl = "\r\n" if style == "crlf" else "\n"
    unit = "\t" if style in ("tabs", "crlf") else " " * int(style[0])
    github = before[before.index(f"{unit * 2}// GitHub") : before.index(f"{unit * 2}/* emceepee")]
    env = f"{nl}{unit * 3}" + f'"env": {{{nl}{unit * 4}"GITHUB_TOKEN": "{TOKEN}"{nl}{unit * 3}}},'
    expected = (
        before.replace(github, "")
        .replace('"/old/bin/emceepee"', json.dumps(EXE))
        .replace(f'"args": ["serve"],{nl}', f'"args": ["serve"],{env}{nl}', 1)
    )
    assert after == expected
    shown = changed(dry.stdout[dry.stdout.index("---") :].split("\n(dry run")[0])
    assert [line.replace(TOKEN, "<hidden>") for line in diff_of(before, after)] == shown
    assert TOKEN not in dry.stdout + done.stdout + done.stderr


def test_a_new_entry_goes_after_the_last_one_with_its_indentation_and_comments_stay() -> None:
    before = (
        '{\n    "mcpServers": {\n        "a": { "command": "x" } // mine\n    },\n    "theme": "dark"\n}\n'
    )
    path = host_file("cursor", before)
    assert run_cli("install", "cursor").returncode == 0
    entry = (
        f'        "emceepee": {{\n            "command": {json.dumps(EXE)},\n'
        '            "args": ["serve"]\n        }'
    )
    assert path.read_text() == before.replace("} // mine\n", "}, // mine\n" + entry + "\n")


def test_uninstall_takes_the_entry_with_its_comment_and_the_comma_before_it() -> None:
    before = (
        '{\n  "mcpServers": {\n    "a": {"command": "x"}, // a\n'
        '    // ours\n    "emceepee": {"command": "/e"}\n  }\n}\n'
    )
    path = host_file("cursor", before)
    assert run_cli("install", "cursor", "--uninstall").returncode == 0
    assert path.read_text() == '{\n  "mcpServers": {\n    "a": {"command": "x"} // a\n  }\n}\n'


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{\n  "mcpServers": {} /* never closed\n}\n', "a comment that is never closed"),
        ("[]\n", "does not hold a JSON object"),
        ('{"mcpServers": []}\n', "'mcpServers' is not an object"),
        ('{"mcpServers": {"a": {}}, "mcpServers": {"b": {}}}\n', 'the key "mcpServers" is written 2 times'),
        ('{"mcpServers": {"emceepee": {"command": "/a"}, "emceepee": {"command": "/b"}}}', "written 2 times"),
        ('{"mcpServers": {"emceepee": {"command": "/a", "command": "/b"}}}', 'the key "command" is written'),
    ],
)
def test_a_file_that_cannot_be_edited_safely_is_refused_with_the_entry_to_paste(text: str, says: str) -> None:
    path = host_file("cursor", text)
    done = run_cli("install", "cursor")
    assert done.returncode == 2 and says in done.stderr, done.stderr
    assert "Nothing was changed" in done.stderr and 'put this entry in the "mcpServers" object' in done.stderr
    assert (
        f'"emceepee": {{\n    "command": {json.dumps(EXE)},\n    "args": [\n      "serve"\n    ]'
        in done.stderr
    )
    assert path.read_text() == text and backups(path) == []


def test_an_entry_with_secrets_to_paste_shows_them_hidden() -> None:
    text = (
        f'{{"mcpServers": {{"emceepee": {{"command": "/a", "command": "/b", "env": {{"T": "{TOKEN}"}}}}}}}}'
    )
    path = host_file("cursor", text)
    done = cli("install", "cursor")
    assert done.code == 2 and '"T": "<hidden>"' in done.err and TOKEN not in done.err
    assert path.read_text() == text


def test_import_from_a_file_that_cannot_take_the_change_writes_nothing(emceepee_home: Path) -> None:
    gh = f'{{"gh": {{"command": "npx", "env": {{"GITHUB_TOKEN": "{TOKEN}"}}}}}}'
    text = f'{{"mcpServers": {gh}, "mcpServers": {gh}}}'
    path = host_file("cursor", text)
    done = run_cli("import", "cursor", "--replace")
    assert done.returncode == 2 and 'the key "mcpServers" is written 2 times' in done.stderr
    assert path.read_text() == text and not (emceepee_home / "config.toml").exists()


def test_a_huge_host_file_changes_only_the_entry() -> None:
    projects = {
        f"/home/me/src/project-{i}": {"history": ["x" * 40] * 20, "allowedTools": []} for i in range(5000)
    }
    text = json.dumps({"projects": projects, "mcpServers": {"a": {"command": "x"}}}, indent=2) + "\n"
    path = host_file("claude-code", text)
    started = time.monotonic()
    done = run_cli("install", "claude-code")
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    entry = f'    "emceepee": {{\n      "type": "stdio",\n      "command": {json.dumps(EXE)},\n'
    entry += '      "args": ["serve"]\n    }\n'
    assert path.read_text() == text.replace('"x"\n    }\n', '"x"\n    },\n' + entry)
    print(f"install into a {len(text) // 1_000_000} MB host file took {took:.1f} s")


def test_a_file_saved_by_the_host_meanwhile_is_edited_again_or_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = host_file("cursor", '{\n  "mcpServers": {}\n}\n')
    doc = config_file.read(path)
    doc.servers("mcpServers")["emceepee"] = {"command": "/e"}
    path.write_text('{\n  // saved by the host\n  "mcpServers": {}\n}\n')  # only a comment: edited again
    config_file.write(doc)
    entry = '    "emceepee": {\n      "command": "/e"\n    }\n'
    assert path.read_text() == '{\n  // saved by the host\n  "mcpServers": {\n' + entry + "  }\n}\n"
    doc.servers("mcpServers")["other"] = {"command": "/o"}
    path.write_text(path.read_text().replace('"/e"', '"/changed"'))  # what it says changed: refused
    with pytest.raises(ConfigError) as refused:
        config_file.write(doc)
    assert "changed while emceepee was editing it" in refused.value.message
    assert '"/changed"' in path.read_text() and "other" not in path.read_text()


def test_the_parser_reads_what_json_reads_and_says_where_it_stops() -> None:
    sample: dict[str, object] = {"a": [1, -2.5e3, True, None, 'é\\n"', {"b": []}], "c": {}}
    assert jsonc.parse(json.dumps(sample)).data == sample
    assert jsonc.parse('\ufeff// c\n{/* x */"a": [1,],}').data == {"a": [1]}
    with pytest.raises(jsonc.JsoncError) as bad:
        jsonc.parse('{\n  "a": 1\n  "b": 2\n}')
    assert "line 3 column 3" in bad.value.message
    with pytest.raises(jsonc.JsoncError) as deep:
        jsonc.parse("[" * 1000 + "]" * 1000)
    assert "nested too deeply" in deep.value.message
