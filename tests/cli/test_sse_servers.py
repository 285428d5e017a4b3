"""A server on the legacy HTTP+SSE transport from the command line: `servers add --url … --sse`
writes `transport = "sse"`, `servers list`/`show` say the transport (and `show` the oauth table,
a literal secret in it hidden), and `import` brings a host's SSE servers in, however the host
writes one."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from emceepee_cli.hosts import catalog
from tests.cli.clirun import cli
from tests.support import write_config

SECRET = "sk-live-0123456789abcdef"


@pytest.fixture
def config(emceepee_home: Path) -> Path:
    emceepee_home.mkdir(exist_ok=True)
    return emceepee_home / "config.toml"


def test_add_with_sse_writes_the_transport_and_list_and_show_say_it(config: Path) -> None:
    added = cli("servers", "add", "legacy", "--url", "https://old.example.com/sse", "--sse")
    plain = cli("servers", "add", "modern", "--url", "https://new.example.com/mcp")
    listed = cli("servers", "list", "--json").json()["servers"]
    shown = cli("servers", "show", "legacy", "--json").json()["server"]
    table = cli("servers", "list").out
    assert added.code == plain.code == 0, added.err + plain.err
    servers = tomllib.loads(config.read_text())["servers"]
    assert servers == {
        "legacy": {"url": "https://old.example.com/sse", "transport": "sse"},
        "modern": {"url": "https://new.example.com/mcp"},
    }
    assert [(row["name"], row["transport"]) for row in listed] == [("legacy", "sse"), ("modern", "http")]
    assert shown["transport"] == "sse" and shown["url"] == "https://old.example.com/sse"
    assert any(line.split()[:3] == ["legacy", "enabled", "sse"] for line in table.splitlines()), table


def test_sse_with_a_command_is_refused_naming_the_option_and_nothing_is_written(config: Path) -> None:
    done = cli("servers", "add", "local", "--sse", "--", "uvx", "thing")
    assert done.code == 2, done.err
    assert (
        "--sse: is only for a remote server (one with a 'url')" in done.err and "config.toml" not in done.err
    )
    assert not config.exists()


def test_a_refused_secret_is_retyped_with_sse_kept(config: Path) -> None:
    done = cli(
        "servers",
        "add",
        "legacy",
        "--url",
        "https://old.example.com/sse",
        "--sse",
        "-H",
        f"Authorization=Bearer {SECRET}",
    )
    assert done.code == 2 and SECRET not in done.err + done.out
    assert (
        "emceepee servers add legacy --url https://old.example.com/sse -H 'Authorization=Bearer "
        "${LEGACY_AUTHORIZATION}' --sse" in done.err
    ), done.err
    assert not config.exists()


def test_show_prints_the_oauth_table_with_a_literal_secret_hidden(config: Path) -> None:
    write_config(
        config,
        '[servers.ok]\nurl = "https://a.example/mcp"\n[servers.ok.oauth]\nclient_id = "abc"\n'
        'client_secret = "${OK_SECRET}"\nredirect_port = 8765\n\n'
        '[servers.leaky]\nurl = "https://b.example/mcp"\ntransport = "sse"\n'
        f'oauth = {{ client_id = "abc", client_secret = "{SECRET}" }}\n',
    )
    ok = cli("servers", "show", "ok", "--json").json()["server"]
    leaky = cli("servers", "show", "leaky", "--json").json()["server"]
    leaky_text = cli("servers", "show", "leaky")
    assert ok["oauth"] == {"client_id": "abc", "client_secret": "${OK_SECRET}", "redirect_port": 8765}
    assert leaky["transport"] == "sse" and leaky["status"] == "invalid"
    assert leaky["oauth"] == {"client_id": "abc", "client_secret": f"<hidden: {len(SECRET)} characters>"}
    assert any("field 'oauth.client_secret': looks like a secret" in problem for problem in leaky["problems"])
    assert SECRET not in json.dumps([ok, leaky]) + leaky_text.out + leaky_text.err


def test_import_brings_in_a_hosts_sse_servers_however_it_writes_them(emceepee_home: Path) -> None:
    host = catalog.HOSTS["cursor"]
    path = host.path()
    path.parent.mkdir(parents=True)
    servers = {
        "by-path": {"url": "https://a.example/sse"},  # no type: its URL says SSE
        "typed": {
            "type": "sse",
            "url": "https://b.example/events",
            "headers": {"Authorization": f"Bearer {SECRET}"},
        },
        "by-transport": {"transport": "sse", "url": "https://c.example/stream"},
        "streamable": {"url": "https://d.example/mcp"},
    }
    path.write_text(json.dumps({host.servers_key: servers}))
    done = cli("import", "cursor", "--json")
    assert done.code == 0 and done.json()["skipped"] == [], done.out
    written = tomllib.loads((emceepee_home / "config.toml").read_text())["servers"]
    assert written == {
        "by-path": {"url": "https://a.example/sse", "transport": "sse"},
        "typed": {
            "url": "https://b.example/events",
            "headers": {"Authorization": "${TYPED_AUTHORIZATION}"},
            "transport": "sse",
        },
        "by-transport": {"url": "https://c.example/stream", "transport": "sse"},
        "streamable": {"url": "https://d.example/mcp"},
    }
    assert json.loads(path.read_text())[host.servers_key]["emceepee"]["env"] == {
        "TYPED_AUTHORIZATION": f"Bearer {SECRET}"
    }
    assert SECRET not in (emceepee_home / "config.toml").read_text() + done.out
