"""The `tidemark` CLI's commands, one module per group; `streams.cli` assembles them."""
