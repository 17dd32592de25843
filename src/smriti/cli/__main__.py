"""``python -m smriti.cli``: the same as ``smriti``."""

from smriti.cli.commands import main

main()
