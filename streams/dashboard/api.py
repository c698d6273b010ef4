"""`GET /api/streams`: one page of the streams table, sorted and searched on the server.

    /api/streams?offset=0&limit=50&sort=lag_ms&order=desc&q=cluster-12

| parameter | meaning                                                  | default          |
|-----------|----------------------------------------------------------|------------------|
| `offset`  | rows to skip, 0 to 1,000,000,000                         | 0                |
| `limit`   | rows to return, 1 to `MAX_LIMIT` (500)                   | 50               |
| `sort`    | one of streams.dashboard.table.SORT_FIELDS               | lag_ms           |
| `order`   | `asc` or `desc`                                          | asc by stream_id,|
|           |                                                          | else desc        |
| `q`       | streams whose id contains it (case-sensitive), at most   | none             |
|           | 200 characters                                           |                  |

The answer: `{"now_ms", "refreshed_ms", "caught_up", "total", "matching", "offset", "limit",
"sort", "order", "q", "counts", "streams"}`; `total` and `counts` cover every stream,
`matching` those `q` matched, `streams` is the page (rows as in `/api/state`). An unknown,
repeated or bad parameter is a 400 `{"error", "parameter", "reason"}` naming it. What each
request costs is in streams.dashboard.table's docstring: never a sort of every stream.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs

from streams.dashboard.state import Snapshot
from streams.dashboard.table import SORT_FIELDS

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
MAX_OFFSET = 1_000_000_000
MAX_QUERY_CHARS = 200  # a stream id's own bound
PARAMETERS = ("offset", "limit", "sort", "order", "q")


class BadParameter(ValueError):
    """A query parameter the API refuses: `parameter` names it, `reason` says why."""

    def __init__(self, parameter: str, reason: str) -> None:
        super().__init__(f"{parameter}: {reason}")
        self.parameter = parameter
        self.reason = reason


@dataclass(frozen=True)
class StreamsQuery:
    offset: int = 0
    limit: int = DEFAULT_LIMIT
    sort: str = "lag_ms"
    descending: bool = True
    q: str = ""

    @classmethod
    def parse(cls, query: str) -> StreamsQuery:
        """Parse a URL's query string; BadParameter for anything but the parameters above."""
        if not query:
            return cls()
        try:
            values = parse_qs(query, keep_blank_values=True, strict_parsing=True, max_num_fields=10)
        except ValueError as exc:
            raise BadParameter("query", f"is not a valid query string ({exc})") from None
        for name, given in values.items():
            if name not in PARAMETERS:
                raise BadParameter(name, f"is not a parameter (those are {', '.join(PARAMETERS)})")
            if len(given) > 1:
                raise BadParameter(name, "is given more than once")
        one = {name: given[0] for name, given in values.items()}
        sort = one.get("sort", "lag_ms")
        if sort not in SORT_FIELDS:
            raise BadParameter("sort", f"must be one of {', '.join(SORT_FIELDS)}")
        order = one.get("order", "asc" if sort == "stream_id" else "desc")
        if order not in ("asc", "desc"):
            raise BadParameter("order", "must be asc or desc")
        q = one.get("q", "")
        if len(q) > MAX_QUERY_CHARS:
            raise BadParameter("q", f"must be at most {MAX_QUERY_CHARS} characters")
        return cls(
            offset=_integer(one, "offset", 0, 0, MAX_OFFSET),
            limit=_integer(one, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT),
            sort=sort,
            descending=order == "desc",
            q=q,
        )


def _integer(values: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    text = values.get(name)
    if text is None:
        return default
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(high))):
        raise BadParameter(name, f"must be an integer from {low:,} to {high:,}")
    value = int(text)
    if not low <= value <= high:
        raise BadParameter(name, f"must be an integer from {low:,} to {high:,}")
    return value


def streams_document(snapshot: Snapshot, query: StreamsQuery, now_ms: int) -> dict[str, Any]:
    """The JSON body of `/api/streams` for a parsed query, at `now_ms`."""
    table = snapshot.table
    page = table.page(now_ms, query.sort, query.descending, query.offset, query.limit, query.q)
    return {
        "now_ms": now_ms,
        "refreshed_ms": snapshot.refreshed_ms,
        "caught_up": snapshot.caught_up,
        "total": len(table),
        "matching": page.matching,
        "offset": query.offset,
        "limit": query.limit,
        "sort": query.sort,
        "order": "desc" if query.descending else "asc",
        "q": query.q,
        "counts": table.counts(now_ms),
        "streams": [row.to_json(now_ms) for row in page.rows],
    }


def streams_response(
    snapshot: Snapshot, query: str, now_ms: int
) -> tuple[HTTPStatus, dict[str, Any]]:
    """The status and body for `/api/streams?{query}`."""
    try:
        parsed = StreamsQuery.parse(query)
    except BadParameter as exc:
        return HTTPStatus.BAD_REQUEST, {
            "error": f"bad parameter {exc.parameter}: {exc.reason}",
            "parameter": exc.parameter,
            "reason": exc.reason,
        }
    return HTTPStatus.OK, streams_document(snapshot, parsed, now_ms)
