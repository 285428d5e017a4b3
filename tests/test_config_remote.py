"""A remote server's `transport` and its [servers.NAME.oauth] table: what loads, what is refused
(and what to do instead), how they are written back and expanded, and that a change restarts it."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from emceepee_cli import paths
from emceepee_cli.config import ServerSpec, add_server, load_config, parse_server
from emceepee_cli.config.model import OAuthSpec
from emceepee_cli.config.reload import plan
from emceepee_cli.errors import ConfigError

URL = "https://mcp.example.com/mcp"
OAUTH: dict[str, Any] = {
    "client_id": "${TRACKER_ID}",
    "client_secret": "${TRACKER_SECRET}",
    "client_metadata_url": "https://example.com/client.json",
    "redirect_port": 8765,
    "token_endpoint_auth_method": "client_secret_basic",
}
TABLE = f"""\
[servers.tracker]
url = "{URL}"
transport = "sse"

[servers.tracker.oauth]
client_id = "${{TRACKER_ID}}"
client_secret = "${{TRACKER_SECRET}}"
client_metadata_url = "https://example.com/client.json"
redirect_port = 8765
token_endpoint_auth_method = "client_secret_basic"
"""


@pytest.fixture(autouse=True)
def client_vars(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACKER_ID", "client-abc")
    monkeypatch.setenv("TRACKER_SECRET", "s3cr3t-client-value")


def write(text: str) -> Path:
    path = paths.config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def problems(table: dict[str, Any]) -> list[str]:
    spec, found = parse_server("tracker", table)
    assert (spec is None) == bool(found)
    return [str(problem) for problem in found]


# -- transport -----------------------------------------------------------------------------------


def test_a_url_is_streamable_http_unless_its_transport_says_sse() -> None:
    assert ServerSpec("a", url=URL).transport == "http" and ServerSpec("a", url=URL).remote
    assert ServerSpec("a", command="a").transport == "stdio" and not ServerSpec("a", command="a").remote
    sse, _ = parse_server("a", {"url": URL, "transport": "sse"})
    http, _ = parse_server("a", {"url": URL, "transport": "http"})
    assert sse is not None and sse.transport == "sse" and sse.to_toml() == {"url": URL, "transport": "sse"}
    assert http == ServerSpec("a", url=URL) and http.to_toml() == {"url": URL}


@pytest.mark.parametrize("value", ["SSE", "", "ws", "sse\n", 1, True, ["sse"], {"kind": "sse"}])
def test_any_other_transport_is_refused_saying_the_two_there_are(value: object) -> None:
    (said,) = problems({"url": URL, "transport": value})
    assert 'field \'transport\': must be "http" (Streamable HTTP, the default for a url) or "sse"' in said


@pytest.mark.parametrize("value", ["sse", "http", "stdio"])
def test_a_command_server_has_no_transport(value: str) -> None:
    said = problems({"command": "uvx", "transport": value})
    assert said[-1] == (
        "config.toml: server 'tracker', field 'transport': is only for a remote server (one with a "
        "'url'); a 'command' server runs locally: remove 'transport'"
    )


# -- oauth -----------------------------------------------------------------------------------------


def test_the_documented_table_loads_and_expands_only_the_client_id_and_secret() -> None:
    write(TABLE)
    config = load_config()
    assert config.problems == ()
    spec = config.servers["tracker"]
    assert spec.transport == "sse"
    assert spec.oauth == OAuthSpec(**OAUTH)
    expanded = spec.expanded()
    assert expanded.oauth == OAuthSpec(
        **{**OAUTH, "client_id": "client-abc", "client_secret": "s3cr3t-client-value"}
    )
    assert "s3cr3t-client-value" not in repr(expanded) and "client-abc" in repr(expanded)


def test_an_empty_oauth_table_is_sign_in_with_every_default() -> None:
    spec, found = parse_server("tracker", {"url": URL, "oauth": {}})
    assert found == [] and spec is not None and spec.oauth == OAuthSpec()
    assert ServerSpec("tracker", url=URL).oauth is None


def test_written_and_read_back_it_is_the_same_server_and_the_file_keeps_the_reference() -> None:
    spec = ServerSpec("tracker", url=URL, remote_transport="sse", oauth=OAuthSpec(**OAUTH))
    path = add_server(spec)
    assert load_config().servers == {"tracker": spec}
    written = tomllib.loads(path.read_text(encoding="utf-8"))["servers"]["tracker"]
    assert written == {"url": URL, "transport": "sse", "oauth": OAUTH}
    assert "s3cr3t" not in path.read_text(encoding="utf-8")


def test_editing_a_server_keeps_its_oauth_sub_table_as_written() -> None:
    path = write("# mine\n" + TABLE)
    spec = load_config().servers["tracker"]
    add_server(ServerSpec(**{**vars(spec), "enabled": False}), replace=True)
    text = path.read_text(encoding="utf-8")
    assert text == "# mine\n" + TABLE.replace('transport = "sse"\n', 'transport = "sse"\nenabled = false\n')


def test_an_unset_client_secret_variable_leaves_only_that_server_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACKER_SECRET")
    write(TABLE + '\n[servers.other]\ncommand = "x"\n')
    config = load_config()
    assert list(config.servers) == ["other"]
    (problem,) = config.problems
    assert problem.field == "oauth.client_secret" and "${TRACKER_SECRET} is not set" in problem.message
    with pytest.raises(ConfigError, match=r"field 'oauth.client_secret': \$\{TRACKER_SECRET\} is not set"):
        parse_server("tracker", {"url": URL, "oauth": OAUTH})[0].expanded({"TRACKER_ID": "x"})  # type: ignore[union-attr]


@pytest.mark.parametrize("secret", ["hunter2-very-secret", "Bearer ${X}", "${X}${Y}", "${X", "$${X}", ""])
def test_a_client_secret_that_is_not_one_var_reference_is_refused_and_never_repeated(secret: str) -> None:
    said = problems({"url": URL, "oauth": {"client_id": "abc", "client_secret": secret}})
    assert len(said) == 1, said
    assert said[0].startswith("config.toml: server 'tracker', field 'oauth.client_secret': ")
    assert (
        'write client_secret = "${TRACKER_CLIENT_SECRET}" and set TRACKER_CLIENT_SECRET in the "env"'
        in said[0]
    )
    assert "emceepee keeps secrets out of its config file" in said[0]
    assert secret not in said[0] or secret in ("", "$${X}")


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("client_metadata_url", "http://example.com/client.json", "must be an https URL with a path"),
        ("client_metadata_url", "https://example.com/", "must be an https URL with a path"),
        ("client_metadata_url", "https://example.com", "must be an https URL with a path"),
        ("client_metadata_url", "https:///client.json", "must be an https URL with a path"),
        ("client_metadata_url", "https://example.com/c.json#x", "must be an https URL with a path"),
        ("client_metadata_url", "https://example.com/c.json\n", "must be an https URL with a path"),
        ("client_metadata_url", "https://[::1/c.json", "must be an https URL with a path"),
        ("client_metadata_url", "file:///etc/passwd", "must be an https URL with a path"),
        ("redirect_port", 0, "must be a port number from 1 to 65535 (got 0)"),
        ("redirect_port", 65536, "must be a port number from 1 to 65535 (got 65536)"),
        ("redirect_port", -1, "must be a port number from 1 to 65535"),
        ("redirect_port", "8765", "must be a port number from 1 to 65535 (got '8765')"),
        ("redirect_port", True, "must be a port number from 1 to 65535 (got True)"),
        ("redirect_port", 8765.0, "must be a port number from 1 to 65535"),
        (
            "token_endpoint_auth_method",
            "private_key_jwt",
            "must be one of client_secret_basic, client_secret_post, none",
        ),
        (
            "token_endpoint_auth_method",
            "NONE",
            "must be one of client_secret_basic, client_secret_post, none",
        ),
        ("client_id", 42, "must be a string (got 42)"),
    ],
)
def test_a_bad_oauth_value_is_refused_naming_the_field_and_what_it_must_be(
    key: str, value: object, expected: str
) -> None:
    said = problems({"url": URL, "oauth": {key: value}})
    assert len(said) == 1, said
    assert (
        said[0].startswith(f"config.toml: server 'tracker', field 'oauth.{key}': ") and expected in said[0]
    ), said


def test_the_good_values_of_each_oauth_key_load() -> None:
    for port in (1, 65535):
        assert problems({"url": URL, "oauth": {"redirect_port": port}}) == []
    assert problems({"url": URL, "oauth": {"client_id": "abc", "token_endpoint_auth_method": "none"}}) == []
    assert problems({"url": URL, "oauth": {"client_metadata_url": "https://a.example/x?y=1"}}) == []
    assert problems({"url": URL, "oauth": {"scope": "read"}})  # the server says which scopes: not the config


def test_an_unknown_oauth_key_suggests_the_closest_known_one() -> None:
    (said,) = problems({"url": URL, "oauth": {"client_secrets": "${X}"}})
    assert said == (
        "config.toml: server 'tracker', field 'oauth.client_secrets': unknown field; "
        "did you mean 'client_secret'?"
    )


@pytest.mark.parametrize("value", ["yes", 1, ["client_id"], True])
def test_oauth_that_is_not_a_table_is_refused(value: object) -> None:
    (said,) = problems({"url": URL, "oauth": value})
    assert "field 'oauth': must be a table like [servers.tracker.oauth]" in said


def test_a_secret_needs_a_client_and_a_secret_method_needs_a_secret() -> None:
    assert problems({"url": URL, "oauth": {"client_secret": "${S}"}}) == [
        "config.toml: server 'tracker', field 'oauth.client_secret': needs client_id: a client secret "
        "belongs to a pre-registered client"
    ]
    (said,) = problems(
        {"url": URL, "oauth": {"client_id": "a", "token_endpoint_auth_method": "client_secret_post"}}
    )
    assert said.endswith("field 'oauth.token_endpoint_auth_method': client_secret_post needs client_secret")


def test_a_command_server_has_no_oauth() -> None:
    (said,) = problems({"command": "uvx", "oauth": {"client_id": "a"}})
    assert said.endswith(
        "field 'oauth': is only for a remote server (one with a 'url'); a 'command' server runs "
        "locally: remove 'oauth'"
    )


@pytest.mark.parametrize("header", ["Authorization", "authorization", "AUTHORIZATION"])
def test_an_authorization_header_and_oauth_are_refused_together_saying_which_to_remove(header: str) -> None:
    (said,) = problems({"url": URL, "headers": {header: "Bearer ${T}"}, "oauth": {}})
    assert said == (
        f"config.toml: server 'tracker', field 'oauth': cannot go with the {header} header: a server "
        "given a token in a header is never signed in to; remove the header to sign in, or the oauth "
        "table to keep the token"
    )
    assert problems({"url": URL, "headers": {"X-Team": "a"}, "oauth": {}}) == []


# -- reload ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changed",
    [
        TABLE.replace('transport = "sse"\n', ""),
        TABLE.replace("redirect_port = 8765", "redirect_port = 8766"),
        TABLE.replace("redirect_port = 8765\n", ""),
        TABLE[: TABLE.index("[servers.tracker.oauth]")],
    ],
)
def test_a_changed_transport_or_oauth_table_restarts_the_server_and_nothing_else(changed: str) -> None:
    path = write(TABLE + '\n[servers.other]\ncommand = "x"\n')
    loaded = load_config(path)
    write(changed + '\n[servers.other]\ncommand = "x"\n')
    done = plan(loaded.servers, loaded, load_config(path))
    assert [spec.name for spec in done.restart] == ["tracker"] and not done.start and not done.stop
    write(TABLE + '\n[servers.other]\ncommand = "x"\n')
    assert plan(loaded.servers, loaded, load_config(path)).empty
