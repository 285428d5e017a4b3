from __future__ import annotations

import stat
import tomllib
from pathlib import Path

import pytest

from emceepee_cli import paths
from emceepee_cli.config import (
    Config,
    ConfigProblem,
    Defaults,
    ServerSpec,
    add_server,
    load_config,
    parse_env_pairs,
    remove_server,
)
from emceepee_cli.errors import ConfigError, NotFound, UsageError

EXAMPLE = """\
[defaults]
timeout_ms = 45000
max_wait_ms = 50000
task_ttl_ms = 300000
task_ttl_max_ms = 1800000
retention_s = 86400
pending_timeout_ms = 600000
elicitation = "auto"
sampling = "auto"

[servers.git]
command = "uvx"
args = ["mcp-server-git", "--repository", "~/src/app"]
env = { GIT_TOKEN = "${GIT_TOKEN}" }
cwd = "~/src"
enabled = true
protocol = "legacy"
elicitation = "park"
sampling = "auto"

[servers.remote]
url = "https://example.com/mcp"
headers = { Authorization = "Bearer ${API_TOKEN}" }
"""


def write_config(text: str) -> Path:
    path = paths.config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(text: str) -> list[str]:
    write_config(text)
    return [str(problem) for problem in load_config().problems]


@pytest.fixture
def tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_TOKEN", "ghp_secret")
    monkeypatch.setenv("API_TOKEN", "api_secret")


# -- loading -------------------------------------------------------------------------------------


def test_a_missing_file_is_a_valid_config_with_zero_servers(emceepee_home: Path) -> None:
    config = load_config()

    assert config == Config(emceepee_home / "config.toml", Defaults(), {}, ())
    assert not (emceepee_home / "config.toml").exists()


def test_the_documented_example_loads_every_field(tokens: None) -> None:
    write_config(EXAMPLE)

    config = load_config()

    assert config.problems == ()
    assert config.defaults == Defaults()
    assert config.servers["git"] == ServerSpec(
        name="git",
        command="uvx",
        args=("mcp-server-git", "--repository", "~/src/app"),
        env={"GIT_TOKEN": "${GIT_TOKEN}"},
        cwd="~/src",
        elicitation="park",
        sampling="auto",
    )
    assert config.servers["remote"] == ServerSpec(
        name="remote", url="https://example.com/mcp", headers={"Authorization": "Bearer ${API_TOKEN}"}
    )


def test_defaults_have_the_documented_values_when_the_table_is_absent() -> None:
    write_config('[servers.a]\ncommand = "a"\n')

    defaults = load_config().defaults

    assert (defaults.timeout_ms, defaults.max_wait_ms) == (45_000, 50_000)
    assert (defaults.task_ttl_ms, defaults.task_ttl_max_ms) == (300_000, 1_800_000)
    assert (defaults.retention_s, defaults.pending_timeout_ms) == (86_400, 600_000)
    assert (defaults.elicitation, defaults.sampling) == ("auto", "auto")


def test_a_changed_default_is_read_and_the_others_keep_their_values() -> None:
    write_config('[defaults]\ntimeout_ms = 20000\nsampling = "park"\n')

    config = load_config()

    assert config.problems == ()
    assert config.defaults == Defaults(timeout_ms=20_000, sampling="park")


def test_load_reads_an_explicit_path_instead_of_the_default(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.toml"
    other.write_text('[servers.x]\ncommand = "x"\n', encoding="utf-8")

    config = load_config(other)

    assert config.path == other
    assert list(config.servers) == ["x"]


def test_transport_is_http_for_a_url_and_stdio_for_a_command() -> None:
    assert ServerSpec("a", command="a").transport == "stdio"
    assert ServerSpec("b", url="https://b.example/mcp").transport == "http"


def test_the_repr_of_a_spec_never_shows_env_or_header_values() -> None:
    spec = ServerSpec("a", command="a", env={"T": "s3cret"}, headers={"H": "s3cret"})

    assert "s3cret" not in repr(spec)
    assert "command='a'" in repr(spec)


# -- adding and removing -------------------------------------------------------------------------


def test_add_then_remove_round_trips_and_keeps_other_tables_and_defaults() -> None:
    path = write_config('[defaults]\ntimeout_ms = 1000\n\n[servers.keep]\ncommand = "k"\n')
    spec = ServerSpec("git", command="uvx", args=("mcp-server-git",), env={"T": "${T}"}, protocol="modern")

    assert add_server(spec) == path
    after_add = tomllib.loads(path.read_text(encoding="utf-8"))
    remove_server("git")
    after_remove = tomllib.loads(path.read_text(encoding="utf-8"))

    assert after_add == {
        "defaults": {"timeout_ms": 1000},
        "servers": {
            "keep": {"command": "k"},
            "git": {"command": "uvx", "args": ["mcp-server-git"], "env": {"T": "${T}"}, "protocol": "modern"},
        },
    }
    assert after_remove == {"defaults": {"timeout_ms": 1000}, "servers": {"keep": {"command": "k"}}}


def test_an_added_server_loads_back_equal_to_what_was_added(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKEN", "t")
    spec = ServerSpec(
        "remote",
        url="https://example.com/mcp",
        headers={"Authorization": "Bearer ${TOKEN}"},
        enabled=False,
        protocol="auto",
        elicitation="forward",
        sampling="park",
    )

    add_server(spec)

    assert load_config().servers == {"remote": spec}


def test_to_toml_holds_only_non_default_fields_unexpanded() -> None:
    assert ServerSpec("a", command="a").to_toml() == {"command": "a"}
    assert ServerSpec("b", url="https://b/${P}", enabled=False).to_toml() == {
        "url": "https://b/${P}",
        "enabled": False,
    }


def test_add_refuses_a_name_that_exists_and_says_how_to_replace_or_remove_it() -> None:
    add_server(ServerSpec("git", command="one"))

    with pytest.raises(UsageError) as caught:
        add_server(ServerSpec("git", command="two"))

    assert "Server 'git' already exists" in caught.value.message
    assert caught.value.hint == (
        "Add --replace to replace it (emceepee servers add git --replace …), "
        "or remove it first: emceepee servers remove git"
    )
    assert load_config().servers["git"].command == "one"


def test_add_with_replace_overwrites_the_existing_server_entirely() -> None:
    add_server(ServerSpec("git", command="one", args=("--old",), env={"A": "1"}))

    add_server(ServerSpec("git", command="two"), replace=True)

    assert load_config().servers == {"git": ServerSpec("git", command="two")}


def test_add_refuses_an_invalid_spec_and_writes_nothing(emceepee_home: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        add_server(ServerSpec("bad name", command="x"))

    assert "server 'bad name'" in caught.value.message
    assert "bad name: use 1-64 letters" in caught.value.message
    assert not emceepee_home.exists()


def test_add_refuses_a_spec_with_both_command_and_url() -> None:
    with pytest.raises(ConfigError, match="has both 'command' and 'url'"):
        add_server(ServerSpec("x", command="x", url="https://x"))


def test_add_accepts_an_unset_var_reference_but_refuses_a_malformed_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NOT_SET_YET", raising=False)
    add_server(ServerSpec("later", command="x", env={"K": "${NOT_SET_YET}"}))

    with pytest.raises(ConfigError) as caught:
        add_server(ServerSpec("broken", command="x", env={"K": "${NOT_CLOSED"}))

    assert "field 'env.K'" in caught.value.message
    assert "has no closing '}'" in caught.value.message
    raw = tomllib.loads(paths.config_path().read_text(encoding="utf-8"))
    assert raw["servers"] == {"later": {"command": "x", "env": {"K": "${NOT_SET_YET}"}}}


def test_remove_an_unknown_server_lists_the_known_ones() -> None:
    add_server(ServerSpec("fs", command="fs"))
    add_server(ServerSpec("git", command="git"))

    with pytest.raises(NotFound) as caught:
        remove_server("gh")

    assert caught.value.message == "Unknown server 'gh'. Known: fs, git."


def test_remove_from_a_missing_file_says_none_are_known_and_creates_nothing(emceepee_home: Path) -> None:
    with pytest.raises(NotFound, match=r"Known: \(none\)\."):
        remove_server("gh")

    assert not emceepee_home.exists()


def test_remove_can_delete_a_server_that_fails_to_load() -> None:
    write_config('[servers.ok]\ncommand = "ok"\n\n[servers.broken]\nprotocol = "v2"\n')

    remove_server("broken")

    assert load_config().problems == ()


def test_config_server_for_an_unknown_name_lists_known_and_says_how_to_add() -> None:
    add_server(ServerSpec("fs", command="fs"))
    add_server(ServerSpec("git", command="git"))
    config = load_config()

    with pytest.raises(NotFound) as caught:
        config.server("gh")

    assert caught.value.message == "Unknown server 'gh'. Known: fs, git."
    assert caught.value.hint == "Add it with: emceepee servers add gh -- <command> [args…]"
    assert config.server("git").command == "git"


def test_a_written_config_is_0600_in_a_new_0700_folder_with_no_temp_file_left(emceepee_home: Path) -> None:
    path = add_server(ServerSpec("a", command="a"))

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(emceepee_home.stat().st_mode) == 0o700
    # The lock file stays: deleting it would let a waiter and a newcomer lock two different files.
    assert sorted(p.name for p in emceepee_home.iterdir()) == ["config.toml", "config.toml.lock"]
    assert stat.S_IMODE((emceepee_home / "config.toml.lock").stat().st_mode) == 0o600


def test_rewriting_a_world_readable_file_makes_it_0600() -> None:
    path = write_config('[servers.a]\ncommand = "a"\n')
    path.chmod(0o644)

    remove_server("a")

    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_add_to_an_explicit_path_writes_there(tmp_path: Path) -> None:
    target = tmp_path / "nested" / "my.toml"

    assert add_server(ServerSpec("a", command="a"), target) == target

    assert tomllib.loads(target.read_text(encoding="utf-8")) == {"servers": {"a": {"command": "a"}}}
    assert not paths.config_path().exists()


# -- ${VAR} and ~ expansion ----------------------------------------------------------------------


def test_expanded_fills_vars_in_env_headers_args_url_and_cwd() -> None:
    spec = ServerSpec(
        "s",
        command="run",
        args=("--token=${T}", "${T}"),
        env={"TOKEN": "${T}", "PLAIN": "x"},
        cwd="/srv/${D}",
        url="https://${HOST}/mcp",
        headers={"Authorization": "Bearer ${T}"},
    )

    out = spec.expanded({"T": "tok", "D": "app", "HOST": "h.example"})

    assert out.args == ("--token=tok", "tok")
    assert out.env == {"TOKEN": "tok", "PLAIN": "x"}
    assert out.cwd == "/srv/app"
    assert out.url == "https://h.example/mcp"
    assert out.headers == {"Authorization": "Bearer tok"}
    assert spec.env == {"TOKEN": "${T}", "PLAIN": "x"}  # the original is untouched


def test_expanded_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMCEEPEE_TEST_VAR", "from-env")

    assert ServerSpec("s", command="x", env={"V": "${EMCEEPEE_TEST_VAR}"}).expanded().env == {"V": "from-env"}


def test_a_double_dollar_brace_is_a_literal_dollar_brace() -> None:
    spec = ServerSpec("s", command="x", env={"V": "$${HOME} and ${A}", "W": "cost $5"})

    assert spec.expanded({"A": "a"}).env == {"V": "${HOME} and a", "W": "cost $5"}


def test_tilde_expands_in_cwd_and_in_args_that_start_with_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    spec = ServerSpec("s", command="x", args=("~/src/app", "--repo=~/src", "~"), cwd="~/work")

    out = spec.expanded({})

    assert out.args == (f"{tmp_path}/src/app", "--repo=~/src", str(tmp_path))
    assert out.cwd == f"{tmp_path}/work"


def test_expanded_with_an_unset_var_names_server_field_and_var() -> None:
    spec = ServerSpec("git", command="uvx", env={"GIT_TOKEN": "${GIT_TOKEN}"})

    with pytest.raises(ConfigError) as caught:
        spec.expanded({})

    assert caught.value.message == "Server 'git', field 'env.GIT_TOKEN': ${GIT_TOKEN} is not set."
    assert caught.value.hint is not None and '"env" block of the host' in caught.value.hint


def test_an_unset_var_on_load_is_a_problem_and_the_other_servers_still_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GIT_TOKEN", raising=False)
    monkeypatch.setenv("API_TOKEN", "a")
    write_config(EXAMPLE)

    config = load_config()

    assert list(config.servers) == ["remote"]
    [problem] = config.problems
    assert (problem.server, problem.field) == ("git", "env.GIT_TOKEN")
    assert problem.message.startswith("${GIT_TOKEN} is not set; set it in emceepee's environment")


def test_a_disabled_server_loads_without_its_vars_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LATER", raising=False)
    write_config('[servers.off]\ncommand = "x"\nenabled = false\nenv = { T = "${LATER}" }\n')

    config = load_config()

    assert config.problems == ()
    assert config.servers["off"].enabled is False


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("${NOPE", "'${' has no closing '}'"),
        ("${1BAD}", "'${1BAD}' is not a valid variable reference"),
        ("${}", "'${}' is not a valid variable reference"),
    ],
)
def test_a_malformed_var_reference_is_a_problem_naming_the_field(value: str, expected: str) -> None:
    write_config(f'[servers.s]\ncommand = "x"\nargs = ["{value}"]\n')

    [problem] = load_config().problems

    assert (problem.server, problem.field) == ("s", "args[0]")
    assert expected in problem.message


# -- bad config ----------------------------------------------------------------------------------


def test_a_toml_syntax_error_names_the_file_and_line() -> None:
    path = write_config('[servers.git]\ncommand = "uvx"\nargs = [mcp-server-git]\n')

    with pytest.raises(ConfigError) as caught:
        load_config()

    assert str(path) in caught.value.message
    assert "line 3" in caught.value.message
    assert caught.value.hint is not None and "strings need quotes" in caught.value.hint


def test_add_to_a_file_with_a_syntax_error_refuses_and_leaves_it_alone() -> None:
    path = write_config("[servers.git\n")

    with pytest.raises(ConfigError, match="line 1"):
        add_server(ServerSpec("a", command="a"))

    assert path.read_text(encoding="utf-8") == "[servers.git\n"


def test_an_unknown_server_field_suggests_the_closest_known_one() -> None:
    assert problems_of('[servers.git]\ncomand = "uvx"\n') == [
        "config.toml: server 'git', field 'comand': unknown field; did you mean 'command'?",
        "config.toml: server 'git': needs a non-empty 'command' (a local server) or 'url' (a remote one)",
    ]


def test_an_unknown_field_with_no_close_match_lists_the_known_ones() -> None:
    [problem] = problems_of('[servers.git]\ncommand = "uvx"\nzzz = 1\n')

    known = (
        "command, args, env, cwd, url, headers, enabled, protocol, elicitation, sampling, pass_env, "
        "follow_next_tool, max_chain_depth, auto_resume, auto_resume_limit, auto_resume_interval_ms, "
        "confirm_destructive, tools, confirm, approval_by, roots, expose, transport, oauth, per_host"
    )
    assert problem.endswith(f"unknown field; known: {known}")


@pytest.mark.parametrize(
    ("body", "field", "expected"),
    [
        ("command = 5", "command", "must be a string (got 5)"),
        ('command = "x"\nargs = "one"', "args", "must be an array of strings (got 'one')"),
        ('command = "x"\nargs = ["a", 1]', "args", "must be an array of strings (got ['a', 1])"),
        ('command = "x"\ncwd = ["/"]', "cwd", "must be a string (got ['/'])"),
        ('command = "x"\nenabled = "yes"', "enabled", "must be true or false (got 'yes')"),
        ('command = "x"\nenv = ["A=1"]', "env", 'must be a table of strings, like { K = "v" }'),
        ('command = "x"\nenv = { A = 1 }', "env", 'must be a table of strings, like { K = "v" }'),
        ('url = "https://x"\nheaders = "x"', "headers", 'must be a table of strings, like { K = "v" }'),
        ('command = "x"\nsampling = true', "sampling", "must be one of auto, forward, park (got True)"),
    ],
)
def test_a_wrong_type_is_a_problem_naming_the_field_and_what_it_must_be(
    body: str, field: str, expected: str
) -> None:
    write_config(f'[servers.ok]\ncommand = "ok"\n\n[servers.bad]\n{body}\n')

    config = load_config()

    assert list(config.servers) == ["ok"]
    [problem] = config.problems
    assert (problem.server, problem.field) == ("bad", field)
    assert expected in problem.message


def test_a_server_with_both_command_and_url_is_left_out() -> None:
    write_config('[servers.x]\ncommand = "x"\nurl = "https://x"\n')

    config = load_config()

    assert config.servers == {}
    assert [str(p) for p in config.problems] == [
        "config.toml: server 'x': has both 'command' and 'url'; keep 'command' (local) or 'url' (remote)"
    ]


def test_a_server_with_neither_command_nor_url_is_left_out() -> None:
    write_config('[servers.x]\nargs = ["a"]\n')

    config = load_config()

    assert config.servers == {}
    assert [(p.server, p.field) for p in config.problems] == [("x", None)]
    assert "needs a non-empty 'command'" in config.problems[0].message


def test_an_empty_command_is_a_problem() -> None:
    assert problems_of('[servers.x]\ncommand = ""\n') == [
        "config.toml: server 'x': needs a non-empty 'command' (a local server) or 'url' (a remote one)"
    ]


def test_a_url_that_is_not_http_is_a_problem() -> None:
    assert problems_of('[servers.x]\nurl = "ftp://x"\n') == [
        "config.toml: server 'x', field 'url': must start with http:// or https:// (got 'ftp://x')"
    ]


def test_a_bad_protocol_reads_as_one_line_naming_server_field_choices_and_value() -> None:
    assert problems_of('[servers.git]\ncommand = "uvx"\nprotocol = "v2"\n') == [
        "config.toml: server 'git', field 'protocol': must be one of legacy, modern, auto (got 'v2')"
    ]


@pytest.mark.parametrize("policy_field", ["elicitation", "sampling"])
def test_a_bad_policy_is_a_problem(policy_field: str) -> None:
    assert problems_of(f'[servers.git]\ncommand = "uvx"\n{policy_field} = "ask"\n') == [
        f"config.toml: server 'git', field '{policy_field}': must be one of auto, forward, park (got 'ask')"
    ]


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("bad name", "use 1-64 letters"),
        ("-leading", "use 1-64 letters"),
        ("dotted.name", "use 1-64 letters"),
        ("x" * 65, "use 1-64 letters"),
        ("git__hub", "'__' is reserved"),
        ("emceepee", "emceepee's own questions"),
        ("EmceePee", "emceepee's own questions"),
    ],
)
def test_a_bad_server_name_is_a_problem(name: str, reason: str) -> None:
    write_config(f'[servers."{name}"]\ncommand = "x"\n')

    config = load_config()

    assert config.servers == {}
    [problem] = config.problems
    assert (problem.server, problem.field) == (name, None)
    assert problem.message.startswith("bad name: ") and reason in problem.message


@pytest.mark.parametrize("name", ["a", "Git-2", "my_server", "0day", "x" * 64])
def test_a_good_server_name_loads(name: str) -> None:
    write_config(f'[servers."{name}"]\ncommand = "x"\n')

    assert list(load_config().servers) == [name]


def test_a_server_that_is_not_a_table_is_a_problem() -> None:
    assert problems_of('[servers]\ngit = "uvx"\n') == [
        "config.toml: server 'git': must be a table like [servers.git] (got 'uvx')"
    ]


@pytest.mark.parametrize(
    ("line", "field", "expected"),
    [
        ("timeout_ms = -5", "defaults.timeout_ms", "must be a positive integer (got -5)"),
        ('max_wait_ms = "50s"', "defaults.max_wait_ms", "must be a positive integer (got '50s')"),
        ("retention_s = true", "defaults.retention_s", "must be a positive integer (got True)"),
        ('elicitation = "ask"', "defaults.elicitation", "must be one of auto, forward, park (got 'ask')"),
        ('pass_env = "UV_*"', "defaults.pass_env", "must be an array of strings (got 'UV_*')"),
        (
            'pass_env = ["UV_*", "A B"]',
            "defaults.pass_env",
            "must be variable names or prefixes ending in '*', like LC_* (got 'A B')",
        ),
        ('expose = "all"', "defaults.expose", "must be one of meta, direct, both (got 'all')"),
        (
            'roots = ["/no/such/dir"]',
            "defaults.roots",
            "'/no/such/dir' is not a directory; roots must be existing directories",
        ),
    ],
)
def test_a_bad_defaults_value_falls_back_to_the_default_with_a_problem(
    line: str, field: str, expected: str
) -> None:
    write_config(f'[defaults]\npending_timeout_ms = 1000\n{line}\n\n[servers.a]\ncommand = "a"\n')

    config = load_config()

    assert config.defaults == Defaults(pending_timeout_ms=1000)
    assert list(config.servers) == ["a"]
    assert [(p.server, p.field, p.message) for p in config.problems] == [(None, field, expected)]


def test_a_task_ttl_above_its_max_is_a_problem_and_falls_back() -> None:
    write_config("[defaults]\ntask_ttl_ms = 90000\ntask_ttl_max_ms = 60000\n")

    config = load_config()

    assert (config.defaults.task_ttl_ms, config.defaults.task_ttl_max_ms) == (60_000, 60_000)
    assert [str(p) for p in config.problems] == [
        "config.toml: field 'defaults.task_ttl_ms': must not exceed task_ttl_max_ms (got 90000)"
    ]


def test_an_unknown_defaults_key_suggests_the_closest_one() -> None:
    assert problems_of("[defaults]\ntimout_ms = 1\n") == [
        "config.toml: field 'defaults.timout_ms': unknown field; did you mean 'timeout_ms'?"
    ]


def test_defaults_that_is_not_a_table_is_a_problem_and_every_default_applies() -> None:
    write_config("defaults = 5\n")

    config = load_config()

    assert config.defaults == Defaults()
    assert [str(p) for p in config.problems] == ["config.toml: field 'defaults': must be a table (got 5)"]


def test_an_unknown_top_level_table_is_a_problem_with_a_suggestion() -> None:
    write_config('[server.git]\ncommand = "uvx"\n\n[servers.ok]\ncommand = "ok"\n')

    config = load_config()

    assert list(config.servers) == ["ok"]
    assert [str(p) for p in config.problems] == [
        "config.toml: field 'server': unknown top-level table; did you mean 'servers'?"
    ]


def test_servers_that_is_not_a_table_is_a_problem() -> None:
    write_config('servers = ["git"]\n')

    config = load_config()

    assert config.servers == {}
    assert [str(p) for p in config.problems] == [
        "config.toml: field 'servers': must be a table of [servers.NAME] tables (got ['git'])"
    ]


def test_add_to_a_file_whose_servers_is_not_a_table_refuses() -> None:
    write_config('servers = "nope"\n')

    with pytest.raises(ConfigError, match="'servers' is not a table"):
        add_server(ServerSpec("a", command="a"))


def test_a_problem_without_server_or_field_is_just_the_message() -> None:
    assert str(ConfigProblem(None, None, "something")) == "config.toml: something"


# -- --env pairs ---------------------------------------------------------------------------------


def test_parse_env_pairs_splits_on_the_first_equals_and_keeps_empty_values() -> None:
    pairs = ["A=1", "URL=https://x/?a=b", "EMPTY=", "TOKEN=${TOKEN}"]

    assert parse_env_pairs(pairs) == {"A": "1", "URL": "https://x/?a=b", "EMPTY": "", "TOKEN": "${TOKEN}"}


def test_parse_env_pairs_of_nothing_is_empty() -> None:
    assert parse_env_pairs([]) == {}


@pytest.mark.parametrize(
    ("pair", "expected"),
    [
        ("NOEQUALS", "--env 'NOEQUALS' has no '='; expected NAME=value."),
        ("=value", "--env '=value' has an empty name; expected NAME=value."),
    ],
)
def test_parse_env_pairs_refuses_a_pair_without_equals_or_name(pair: str, expected: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_env_pairs(["OK=1", pair])

    assert caught.value.message == expected
    assert caught.value.hint is not None and "--env NAME=value" in caught.value.hint


def test_pass_env_is_read_from_the_defaults_and_from_a_server() -> None:
    write_config(
        '[defaults]\npass_env = ["UV_*"]\n\n[servers.a]\ncommand = "a"\npass_env = ["PIP_INDEX_URL"]\n'
    )

    config = load_config()

    assert config.defaults.pass_env == ("UV_*",) and config.servers["a"].pass_env == ("PIP_INDEX_URL",)
    assert config.problems == ()


def test_a_server_root_that_is_not_a_directory_leaves_the_server_out(tmp_path: Path) -> None:
    write_config(f'[servers.a]\ncommand = "a"\nroots = ["{tmp_path}", "/no/such/dir"]\n')

    config = load_config()

    assert config.servers == {}
    assert [(p.server, p.field) for p in config.problems] == [("a", "roots")]


def test_approval_by_names_people_by_default_and_takes_only_known_answerers() -> None:
    write_config(
        '[defaults]\napproval_by = ["cli"]\n\n[servers.a]\ncommand = "a"\napproval_by = ["host", "model"]\n'
        '[servers.b]\ncommand = "b"\n'
    )
    config = load_config()
    assert config.defaults.approval_by == ("cli",) and config.problems == ()
    assert config.servers["a"].approval_by == ("host", "model") and config.servers["b"].approval_by is None
    assert Defaults().approval_by == ("host", "cli")  # a person, not the model that made the call
    assert problems_of('[servers.a]\ncommand = "a"\napproval_by = ["robot"]\n') == [
        "config.toml: server 'a', field 'approval_by': must list some of host, cli, model (got 'robot')"
    ]
    assert problems_of('[servers.a]\ncommand = "a"\napproval_by = []\n') == [
        "config.toml: server 'a', field 'approval_by': must list some of host, cli, model (got an empty list)"
    ]
    assert problems_of('[defaults]\napproval_by = "cli"\n') == [
        "config.toml: field 'defaults.approval_by': must be an array of strings (got 'cli')"
    ]


def test_model_adds_servers_asks_a_person_by_default_and_a_bad_value_keeps_asking() -> None:
    assert Defaults().model_adds_servers == "approve"
    for value in ("approve", "allow", "deny"):
        write_config(f'[defaults]\nmodel_adds_servers = "{value}"\n')
        config = load_config()
        assert config.defaults.model_adds_servers == value and config.problems == ()
    assert problems_of('[defaults]\nmodel_adds_servers = "yes"\n') == [
        "config.toml: field 'defaults.model_adds_servers': must be one of approve, allow, deny (got 'yes')"
    ]
    assert load_config().defaults.model_adds_servers == "approve"  # the typo falls back to asking
    assert problems_of("[defaults]\nmodel_adds_servers = true\n") == [
        "config.toml: field 'defaults.model_adds_servers': must be one of approve, allow, deny (got True)"
    ]
