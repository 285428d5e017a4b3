"""The meta-tools: their schemas (written for a model to read) and thin handlers, one module per group."""

from __future__ import annotations

from emceepee_cli.server.meta_tools import heard, questions, resources, servers, tasks
from emceepee_cli.server.meta_tools.registry import Call, MetaTool

# The order tools/list shows them in.
TOOLS: dict[str, MetaTool] = {
    **servers.group.tools,
    **tasks.group.tools,
    **resources.group.tools,
    **questions.group.tools,
    **heard.group.tools,
}

__all__ = ["TOOLS", "Call", "MetaTool"]
