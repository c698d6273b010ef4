"""The window timeline's part of the status page: its style and script (static/timeline.css,
static/timeline.js; streams.dashboard.page adds them to its own, so one inline block of each
stays under the Content-Security-Policy).

A click on a stream row (or Enter on it) selects the stream; its strip comes from
`/api/streams/<id>/timeline` every 2 s (streams.dashboard.timeline) and is redrawn only when
it changed, so a hover survives. The section is built by the script, after the streams table,
and the selection is kept in the URL hash (`stream=<id>`, beside the table's keys). As in the
rest of the page, data goes into the DOM as text only (`textContent`, `title`,
`append(string)`). The script uses the page's helpers (`el`, `utc`, `span`, `human`,
`errorText`).
"""

from __future__ import annotations

from streams.dashboard import resources

TIMELINE_STYLE = resources.read("timeline.css")
TIMELINE_SCRIPT = resources.read("timeline.js")
