"""Signing in to remote backends that require OAuth 2.1: the tokens kept for each (store.py), the
loopback listener that receives the authorization redirect (loopback.py), the SDK's OAuth client
set up for one server (provider.py) and a sign-in from start to end (flow.py)."""
