"""The fleet (experimental, opt-in with EMCEEPEE_FLEET=1): one per-user process serving every host.

`front.py` is what `serve` becomes: it reaches the fleet (`starter.py`: connect, or start one under
a lock), greets it (`hello.py`) and relays bytes (`relay.py`), loading no MCP SDK; the fleet itself
is `daemon.py`. Where the two meet, and what makes that safe, is emceepee_cli/rendezvous.py.
"""
