"""A stdio backend gets emceepee's CA, proxy and locale variables (and those `pass_env` names),
never anything else from emceepee's environment."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.support import home_env, hostile_table, serve_command, still_answering, texts, write_config

pytestmark = pytest.mark.anyio

HOST_ENV = {
    "SSL_CERT_FILE": "/etc/ssl/company.pem",
    "NODE_EXTRA_CA_CERTS": "/etc/ssl/company.pem",
    "HTTPS_PROXY": "http://proxy.example:3128",
    "no_proxy": "localhost",
    "LANG": "de_DE.UTF-8",
    "LC_TIME": "de_DE.UTF-8",
    "TMPDIR": "/tmp",
    "UV_INDEX_URL": "https://mirror.example/simple",
    "PIP_INDEX_URL": "https://mirror.example/simple",
    "npm_config_registry": "https://mirror.example/npm",
    "GITHUB_TOKEN": "ghp_not_for_every_backend",
    "AWS_SECRET_ACCESS_KEY": "not-for-any-backend",
}


async def backend_sees(config: Path, server: str) -> set[str]:
    params = StdioServerParameters(
        command=sys.executable,
        args=serve_command(config)[1:],
        env={**home_env(), "PATH": os.environ["PATH"], **HOST_ENV},
    )
    async with Client(params, mode="legacy") as client:
        with anyio.fail_after(30):
            await client.call_tool("list_servers", {})
            seen = await client.call_tool("execute_tool", {"server": server, "tool": "environment"})
            await still_answering(client)
    return set(json.loads(texts(seen)[0]))


async def test_a_backend_gets_the_ca_proxy_and_locale_variables_and_no_other(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", hostile_table("plain", env={"OWN": "its own"}))
    seen = await backend_sees(config, "plain")
    passed = {"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "HTTPS_PROXY", "no_proxy", "LANG", "LC_TIME", "TMPDIR"}
    assert passed | {"OWN", "PATH"} <= seen
    assert not {"UV_INDEX_URL", "PIP_INDEX_URL", "npm_config_registry", "GITHUB_TOKEN"} & seen
    assert not {name for name in seen if "SECRET" in name or name.startswith("EMCEEPEE")}


async def test_pass_env_adds_names_and_prefixes_for_every_backend_or_one(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "config.toml",
        '[defaults]\npass_env = ["UV_*", "npm_config_*"]\n',
        hostile_table("mirrored", pass_env=["PIP_INDEX_URL"]),
    )
    seen = await backend_sees(config, "mirrored")
    assert {"UV_INDEX_URL", "npm_config_registry", "PIP_INDEX_URL", "SSL_CERT_FILE"} <= seen
    assert not {"GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY"} & seen
