"""The status page (`tidemark dashboard`): a read-only HTTP view of the whole cluster.

It is built from the public topics through `streams.readmodel.ReadModel`, refreshed by one
background thread; `/` is the page, `/api/state` its summary, `/api/streams` one page of the
streams table (sorted and searched on the server), `/healthz` a liveness check.
"""

from streams.dashboard.server import DashboardServer, main, serve

__all__ = ["DashboardServer", "main", "serve"]
