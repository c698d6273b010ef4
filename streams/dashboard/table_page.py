"""The status page's streams table: its style and script (static/table.css, static/table.js);
its search box and pager are in static/index.html.

The table shows one page of `/api/streams` (streams.dashboard.api): the server sorts, searches
and pages, so the browser holds `limit` rows whatever the number of streams. `streamView` is
the page, sort and search: every poll asks for it again, and the #fragment keeps it across a
reload. streams.dashboard.page puts these pieces in the page, each block before the page's
own (so that its `let`s are set when the page's script starts it with `setupStreamControls()`),
and its policy allows them by hash.
"""

from __future__ import annotations

from streams.dashboard import resources

STYLE = resources.read("table.css")
SCRIPT = resources.read("table.js")
