"""The status page: one static HTML document with inline CSS and vanilla JS, no CDN.

It fetches `/api/state` (counts, banners, bypasses) and one page of `/api/streams` every second
and redraws in place. The streams table is paged, sorted and searched on the server (its
controls keep their page, sort and search across refreshes, and in the address's #fragment
across reloads). Every piece of data is put in the DOM as text (`textContent`,
`append(string)`), never as HTML, because stream ids and error messages are user input.

The document is static/index.html with the files' CSS and JS put in its four `{{ name }}`
blocks (streams.dashboard.resources), once, at import. They stay inline so that the
Content-Security-Policy can allow exactly these blocks, by the hash of the text served: no
other script or style runs, even one injected into the page.
"""

from __future__ import annotations

import base64
import hashlib

from streams.dashboard import resources, table_page
from streams.dashboard.timeline_page import TIMELINE_SCRIPT, TIMELINE_STYLE

# The page's own style and script, the window timeline's and the Sources panel's after them
# (one block of each). The Sources panel polls /api/sources on its own (static/sources.js).
STYLE = resources.read("page.css") + TIMELINE_STYLE + resources.read("sources.css")
SCRIPT = resources.read("page.js") + TIMELINE_SCRIPT + resources.read("sources.js")

# What each `{{ name }}` of index.html becomes: the table's script before the page's, whose
# last lines start it.
BLOCKS = {
    "page.css": STYLE,
    "table.css": table_page.STYLE,
    "table.js": table_page.SCRIPT,
    "page.js": SCRIPT,
}


def render(template: str, blocks: dict[str, str]) -> str:
    """`template` with each `{{ name }}` replaced by its block; ValueError if a block's place
    is missing or repeated, or a block could end its element early."""
    for name, text in blocks.items():
        place = "{{ " + name + " }}"
        if template.count(place) != 1:
            raise ValueError(f"index.html must hold {place} exactly once")
        if "</" in text:  # a closing tag inside would end the block early
            raise ValueError(f"static/{name} must not contain '</'")
        template = template.replace(place, text)
    return template


HTML = render(resources.read("index.html"), BLOCKS).encode()


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


CONTENT_SECURITY_POLICY = (
    "default-src 'none'; "
    f"script-src {_sha256(table_page.SCRIPT)} {_sha256(SCRIPT)}; "
    f"style-src {_sha256(STYLE)} {_sha256(table_page.STYLE)}; "
    "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
