"""emceepee: a single-user MCP multiplexer."""

__version__ = "0.1.0"
