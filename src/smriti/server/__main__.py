"""``python -m smriti.server``: the same as ``smriti-mcp``."""

from smriti.server.launch import main

main()
