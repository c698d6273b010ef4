"""The worker side of Tidemark: the handler API and the runtime that drives handlers."""
