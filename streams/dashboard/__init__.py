"""The status page (`tidemark dashboard`): a read-only HTTP view of the whole cluster.

It is built from the public topics through `streams.readmodel.ReadModel`, refreshed by one
background thread (refresher.py); `/` is the page (static/, page.py), `/api/state` its summary
(state.py), `/api/streams` one page of the streams table (api.py: sorted and searched on the
server, table.py), `/api/sources` the Sources view (sources.py), `/healthz` a liveness check
(routes.py says which path is what).
"""

from streams.dashboard.cli import main, serve
from streams.dashboard.server import DashboardServer

__all__ = ["DashboardServer", "main", "serve"]
