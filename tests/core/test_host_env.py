"""What a host's backends take from where emceepee runs is the host's in the fleet, and emceepee's
own in-process: a remote backend's proxies and CA (backends/connect.py's `network`, read as httpx
reads the process's own), a relative root and `~` (config's `PathBase`), the sharing key of each,
and the browser a sign-in opens (signin/browser.py)."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
import pytest
from httpx2._utils import get_environment_proxies  # the reading `proxies` must match
from mcp import ClientSession

from emceepee_cli.backends import connect
from emceepee_cli.backends.launch import Launch
from emceepee_cli.config import PathBase, ServerSpec, load_config
from emceepee_cli.session.sharing import sharing_key
from emceepee_cli.signin import browser
from tests.core.test_remote_transports import backend
from tests.proxy import recording_proxy
from tests.support import until

pytestmark = pytest.mark.anyio

NETWORK_VARS = ("REQUEST_METHOD", "SSL_CERT_FILE", "SSL_CERT_DIR")
NO_PROXY_ENTRIES = (
    "localhost, 127.0.0.1,::1,.example.com,*.corp,10.0.0.0/8,fe80::/10,[::2],http://direct.test,"
    "foo bar,bad/path,10.0.0.0/abc,*:x,all://[::1/x, ,"
)


def without_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's environment without a proxy or CA variable (the test sets its own)."""
    for name in list(os.environ):
        if name.lower().endswith("_proxy") or name in NETWORK_VARS:
            monkeypatch.delenv(name)


@pytest.mark.parametrize(
    "environ",
    [
        {"HTTP_PROXY": "proxy.test:3128"},
        {"HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:2"},
        {"http_proxy": "http://lower:1", "HTTP_PROXY": ""},
        {"HTTP_PROXY": "http://p:1", "http_proxy": ""},
        {"ALL_PROXY": "s:1080", "NO_PROXY": NO_PROXY_ENTRIES},
        {"HTTP_PROXY": "http://p:1", "NO_PROXY": "a.test,*"},
        {"HTTP_PROXY": "http://p:1", "HTTPS_PROXY": "http://q:2", "REQUEST_METHOD": "GET"},
        {"no_proxy": "a.test", "NO_PROXY": "b.test", "HTTP_PROXY": "http://p"},
        {"FTP_PROXY": "http://f:1", "X_PROXY": "http://x:1"},
        {},
    ],
)
def test_a_hosts_proxies_are_read_as_httpx_reads_its_own_environment(
    environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    without_network(monkeypatch)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert connect.proxies(environ) == get_environment_proxies()
    verify, mounts = connect.network(environ)
    assert verify is True and set(mounts) == set(get_environment_proxies())
    httpx2.AsyncClient(trust_env=False, mounts=mounts)  # every pattern is one httpx takes


def test_a_hosts_ca_is_its_ssl_cert_file_else_its_ssl_cert_dir(tmp_path: Path) -> None:
    bundle = ssl.get_default_verify_paths().openssl_cafile
    if not os.path.isfile(bundle):
        pytest.skip("no CA bundle on this machine")
    assert connect.trusted_ca({"SSL_CERT_FILE": bundle, "SSL_CERT_DIR": "/x"}) == ("SSL_CERT_FILE", bundle)
    assert connect.trusted_ca({"SSL_CERT_FILE": "", "SSL_CERT_DIR": "/x"}) == ("SSL_CERT_DIR", "/x")
    assert connect.trusted_ca({"REQUESTS_CA_BUNDLE": bundle}) is None  # httpx does not read it either
    verify, _ = connect.network({"SSL_CERT_FILE": bundle})
    assert isinstance(verify, ssl.SSLContext) and verify.cert_store_stats()["x509_ca"] > 0
    with pytest.raises(OSError):  # a bundle the host names but that is not there: the start fails
        connect.network({"SSL_CERT_FILE": str(tmp_path / "missing.pem")})


@pytest.mark.parametrize(
    ("script", "path", "transport"), [("http_echo.py", "mcp", "http"), ("sse_echo.py", "sse", "sse")]
)
async def test_a_remote_backend_goes_through_the_hosts_proxy_and_not_emceepees(
    script: str, path: str, transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_network(monkeypatch)
    with backend(script) as port, recording_proxy() as proxy:
        url = f"http://127.0.0.1:{port}/{path}"
        spec = ServerSpec("remote", url=url, remote_transport=transport)  # type: ignore[arg-type]
        proxied = Launch({"HTTP_PROXY": proxy.url, "NO_PROXY": "example.com"}, "/")
        with anyio.fail_after(20):
            with pytest.raises(Exception):  # the proxy answers 502  # noqa: B017
                await _whoami(spec, proxied)
            assert proxy.seen and all(line.split()[1].startswith(url) for line in proxy.seen), proxy.seen
            proxy.seen.clear()
            monkeypatch.setenv("HTTP_PROXY", proxy.url)  # emceepee's own: not the host's
            assert await _whoami(spec, Launch({"PATH": "/usr/bin"}, "/")) == "none"
            skipped = Launch({"HTTP_PROXY": proxy.url, "no_proxy": "127.0.0.1"}, "/")
            assert await _whoami(spec, skipped) == "none"
            assert proxy.seen == []
            with pytest.raises(Exception):  # in-process, emceepee's own environment  # noqa: B017
                await _whoami(spec, None)
            assert proxy.seen


def test_hosts_with_different_proxies_or_cas_do_not_share_a_remote_backend() -> None:
    spec = ServerSpec("remote", url="https://api.example/mcp")
    keys = {
        sharing_key(spec, Launch(environ, "/"), "s1")
        for environ in (
            {},
            {"HTTPS_PROXY": "http://p:1"},
            {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "api.example"},
            {"SSL_CERT_FILE": "/etc/a.pem"},
        )
    }
    assert len(keys) == 4
    same = [
        sharing_key(spec, Launch({"HTTPS_PROXY": "http://p:1", "UNRELATED": u}, c), s)
        for u, c, s in (("1", "/a", "s1"), ("2", "/b", "s2"))
    ]
    assert same[0] == same[1]  # a remote backend does not depend on the host's cwd or other variables


async def _whoami(spec: ServerSpec, launch: Launch | None) -> str:
    async with (
        connect.open_transport(spec, log=None, on_stderr=print, on_problem=print, launch=launch) as (
            (read, write),
            _,
        ),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        result = await session.call_tool("whoami", {})
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def test_a_relative_root_and_home_are_the_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    host = PathBase(str(project), {"HOME": str(home) + "/"})
    assert host.directory("sub") == project / "sub"
    assert host.directory("./a/../b") == project / "b"
    assert host.directory("~/docs") == home / "docs" and host.directory("~") == home
    assert host.directory("/etc") == Path("/etc").resolve()
    assert PathBase(str(project), {}).directory("~/x") == Path(os.path.expanduser("~/x")).resolve()
    monkeypatch.chdir(tmp_path)
    assert PathBase().directory("sub") == tmp_path.resolve() / "sub"  # in-process: emceepee's own
    spec = ServerSpec("s", command="tool", args=("~/a", "--at=~/b", "~other"), cwd="~/work")
    expanded = spec.expanded({"HOME": str(home)})
    assert (
        expanded.args == (f"{home}/a", "--at=~/b", os.path.expanduser("~other"))
        and expanded.cwd == f"{home}/work"
    )


def test_the_config_checks_a_relative_root_where_the_host_is(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    config = tmp_path / "config.toml"
    config.write_text('[defaults]\nroots = ["sub"]\n[servers.s]\ncommand = "tool"\nroots = ["sub", "~/h"]\n')
    (tmp_path / "h").mkdir()
    seen = load_config(config, {"HOME": str(tmp_path)}, str(project))
    assert (
        seen.problems == () and seen.defaults.roots == ("sub",) and seen.servers["s"].roots == ("sub", "~/h")
    )
    elsewhere = load_config(config, {"HOME": str(tmp_path)}, str(tmp_path))
    assert [p.message for p in elsewhere.problems] == [
        "'sub' is not a directory; roots must be existing directories"
    ] * 2


def test_hosts_in_other_directories_share_a_backend_unless_its_configured_roots_are_relative() -> None:
    fixed = ServerSpec("fixed", command="/bin/true", cwd="/", roots=("/tmp",))
    relative = ServerSpec("relative", command="/bin/true", cwd="/", roots=("sub",))
    bare = ServerSpec("bare", command="/bin/true", cwd="/")
    one, two = Launch({"PATH": "/bin"}, "/one"), Launch({"PATH": "/bin"}, "/two")

    def shared(spec: ServerSpec, default_roots: tuple[str, ...] = ()) -> bool:
        return sharing_key(spec, one, "s1", default_roots) == sharing_key(spec, two, "s2", default_roots)

    assert shared(fixed) and shared(fixed, ("sub",))  # its own roots win over the defaults
    assert not shared(relative)
    assert shared(bare) and shared(bare, ("/tmp",)) and not shared(bare, ("sub",))


async def test_the_browser_a_host_names_is_run_with_its_environment(tmp_path: Path) -> None:
    opener = tmp_path / "bin" / "xdg-open"
    opener.parent.mkdir()
    opener.write_text("#!/bin/sh\nexit 0\n")
    opener.chmod(0o755)
    path = str(opener.parent)  # the host's PATH: only its own xdg-open
    desktop = {"BROWSER": "mine:/opt/other", "DISPLAY": ":0", "PATH": path}
    assert browser.browser_commands(desktop) == [["mine"], ["/opt/other"], [str(opener)]]
    assert browser.browser_commands({"BROWSER": "mine", "PATH": path}) == [["mine"]]  # no display
    assert browser.browser_commands({"WAYLAND_DISPLAY": "w", "PATH": "/nowhere"}) == []
    missing, failing, mine = tmp_path / "missing", tmp_path / "failing", tmp_path / "browser"
    failing.write_text("#!/bin/sh\nexit 3\n")
    mine.write_text('#!/bin/sh\nprintf "%s %s" "$MARK" "$1" > "$OUT"\n')
    for script in (failing, mine):
        script.chmod(0o755)
    out = tmp_path / "opened"
    host = {"BROWSER": os.pathsep.join(map(str, (missing, failing, mine))), "MARK": "host", "OUT": str(out)}
    browser.open_browser("https://auth.example/?a=1&b=$(x)", host)  # tried in turn until one opens it
    with anyio.fail_after(10):
        await until(lambda: out.exists() and out.read_text() != "")
    assert out.read_text() == "host https://auth.example/?a=1&b=$(x)"
