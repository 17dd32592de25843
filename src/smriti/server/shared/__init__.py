"""One memory per user, shared by every local client.

``daemon``: the user's shared server on a 0600 unix socket; ``client``: finding or starting it
(also what the CLI uses); ``relay``: ``smriti-mcp`` on stdio, forwarding a client's session to it.
"""
