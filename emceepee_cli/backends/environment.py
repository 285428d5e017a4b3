"""What a stdio backend sees of emceepee's environment.

Only a short allowlist, so a secret meant for one backend (set for emceepee by the host) never
reaches another: the SDK's own basics (HOME, LOGNAME, PATH, SHELL, TERM, USER), and what a
launcher like `uvx` or `npx` needs to reach a package registry behind a proxy or a company CA
(the CA bundle, proxy and locale variables, TMPDIR). `pass_env` in the config adds names or
prefixes (`[defaults]` for every backend, or one server's table); the server's own `env` table
comes last and wins.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS, get_default_environment

PASSED = (
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "LANG",
    "LC_*",
    "TMPDIR",
)


def backend_env(
    own: Mapping[str, str], pass_env: Iterable[str] = (), environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a stdio backend: the SDK's basics, the allowlist and `pass_env` from
    `environ` (default emceepee's), then the backend's `own` table."""
    basics = get_default_environment()  # from os.environ, as the SDK reads them
    if environ is not None:  # another environment's (a host's, for `doctor`): the same names from it
        inherited = [k for k in DEFAULT_INHERITED_ENV_VARS if k in environ]
        basics = {k: environ[k] for k in inherited if not environ[k].startswith("()")}  # not a function
    environ = os.environ if environ is None else environ
    wanted = (*PASSED, *pass_env)
    names = {w for w in wanted if not w.endswith("*")}
    prefixes = tuple(w[:-1] for w in wanted if w.endswith("*"))
    passed = {k: v for k, v in environ.items() if k in names or (prefixes and k.startswith(prefixes))}
    return {**basics, **passed, **own}
