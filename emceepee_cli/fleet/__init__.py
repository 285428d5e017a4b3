"""The fleet (on unless EMCEEPEE_FLEET=0 or `[fleet] enabled = false`): one per-user process serving
every host, sharing their backends (emceepee_cli/session/pool.py).

`front.py` is what `serve` becomes: it reaches the fleet (`starter.py`: connect, or start one under
a lock), greets it (`hello.py`) and relays lines (`relay.py`; a dead fleet is replaced and the host's
handshake replayed: `replay.py`), loading no MCP SDK; the fleet itself is `daemon.py`, which also
answers the command line's requests (`control.py`). Where the two meet, and what makes that
safe, is emceepee_cli/rendezvous.py.
"""
