"""emceepee's TOML config: the [defaults] table and one [servers.NAME] table per backend.

`model.py` is its shape, `load.py` reads and checks the file, `expand.py` fills in `${VAR}`,
`write.py` edits the file under a lock.
"""

from __future__ import annotations

from emceepee_cli.config.load import check_spec, load_config, parse_server, read_toml
from emceepee_cli.config.model import (
    POLICIES,
    PROTOCOLS,
    Config,
    ConfigProblem,
    Defaults,
    Expose,
    PathBase,
    Policy,
    Protocol,
    ServerSpec,
    exposure,
    forwarding_policy,
    root_uris,
)
from emceepee_cli.config.write import add_server, discard_server, parse_env_pairs, remove_server

__all__ = [
    "POLICIES",
    "PROTOCOLS",
    "Config",
    "ConfigProblem",
    "Defaults",
    "Expose",
    "PathBase",
    "Policy",
    "Protocol",
    "ServerSpec",
    "add_server",
    "check_spec",
    "discard_server",
    "exposure",
    "forwarding_policy",
    "load_config",
    "parse_env_pairs",
    "parse_server",
    "read_toml",
    "remove_server",
    "root_uris",
]
