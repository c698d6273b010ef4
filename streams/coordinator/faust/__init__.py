"""The Faust engine: the coordinator as a Faust app, at least once (--engine faust)."""
