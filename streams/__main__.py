"""`python -m streams ...` is the `tidemark` command."""

from streams.cli import main

main()
