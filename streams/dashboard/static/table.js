"use strict";
// The streams table's page, sort and search: sent to /api/streams, kept across refreshes.
const LIMITS = [25, 50, 100, 200];
const streamView = {sort: "lag_ms", order: "desc", offset: 0, limit: 50, q: ""};
let streamsAsked = 0;     // the last /api/streams request sent: older answers are dropped
let searchTimer = null;
let streamUpdates = 0;    // the table's redraws (tests wait on the section's data-updates)

function renderStreams(doc) {
  const body = document.getElementById("stream-rows");
  const rows = doc.streams.map((s) => {
    const tr = el("tr", null,
      el("td", "id", s.stream_id),
      el("td", "num", utc(s.downstream_ms)),
      el("td", "num lag", human(s.lag_ms)),
      el("td", null, badge(s.state)),
      el("td", "num", s.window ? span(s.window.start_ms, s.window.end_ms) : "—"),
      el("td", "num", String(s.attempt)),
      el("td", "num", String(s.bypasses)),
      el("td", "error", errorText(s.last_error)),
      el("td", "pipeline", s.pipeline));
    tr.dataset.streamId = s.stream_id;
    tr.dataset.state = s.state;
    return tr;
  });
  if (rows.length === 0) {
    const td = el("td", "empty",
      doc.total === 0 ? "No streams yet: create one with `tidemark streams create`."
        : doc.matching === 0 ? "No stream id contains “" + doc.q + "”."
          : "No streams on this page.");
    td.colSpan = 9;
    rows.push(el("tr", null, td));
  }
  body.replaceChildren(...rows);
  for (const th of document.querySelectorAll("#streams th[data-key]")) {
    if (th.dataset.key === doc.sort) {
      th.setAttribute("aria-sort", doc.order === "desc" ? "descending" : "ascending");
    } else {
      th.removeAttribute("aria-sort");
    }
  }
  renderPager(doc);
  document.getElementById("streams").dataset.updates = String(++streamUpdates);
}

function renderPager(doc) {
  const first = doc.matching === 0 ? 0 : Math.min(doc.offset + 1, doc.matching);
  const last = Math.min(doc.offset + doc.streams.length, doc.matching);
  const n = (x) => x.toLocaleString("en-US");
  let text = n(first) + "–" + n(last) + " of " + n(doc.matching);
  if (doc.q) text += " matching “" + doc.q + "” (" + n(doc.total) + " streams)";
  document.getElementById("stream-range").textContent = text;
  const atStart = doc.offset === 0, atEnd = doc.offset + doc.limit >= doc.matching;
  for (const [name, disabled] of [["first", atStart], ["prev", atStart], ["next", atEnd],
                                  ["last", atEnd]]) {
    document.querySelector("#stream-pager [data-page=" + name + "]").disabled = disabled;
  }
  streamView.matching = doc.matching;
}

function streamsUrl() {
  const params = new URLSearchParams({sort: streamView.sort, order: streamView.order,
    offset: String(streamView.offset), limit: String(streamView.limit)});
  if (streamView.q) params.set("q", streamView.q);
  return "/api/streams?" + params.toString();
}

function saveStreamView() {  // in the #fragment (beside others' keys): a reload keeps them
  const params = new URLSearchParams(location.hash.slice(1));
  for (const key of ["sort", "order", "offset", "limit"]) params.set(key, String(streamView[key]));
  if (streamView.q) params.set("q", streamView.q);
  else params.delete("q");
  history.replaceState(null, "", "#" + params.toString());
}

function loadStreamView() {
  const params = new URLSearchParams(location.hash.slice(1));
  const keys = [...document.querySelectorAll("#streams th[data-key]")].map((th) => th.dataset.key);
  if (keys.includes(params.get("sort"))) streamView.sort = params.get("sort");
  if (["asc", "desc"].includes(params.get("order"))) streamView.order = params.get("order");
  const offset = Number(params.get("offset"));
  if (Number.isInteger(offset) && offset >= 0 && offset <= 1e9) streamView.offset = offset;
  const limit = Number(params.get("limit"));
  if (LIMITS.includes(limit)) streamView.limit = limit;
  streamView.q = (params.get("q") || "").slice(0, 200);
  document.getElementById("stream-search").value = streamView.q;
  document.getElementById("stream-limit").value = String(streamView.limit);
}

async function fetchStreams() {
  const asked = ++streamsAsked;
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 5000);
  try {
    const response = await fetch(streamsUrl(), {cache: "no-store", signal: abort.signal});
    if (!response.ok) throw new Error("HTTP " + response.status);
    const doc = await response.json();
    if (asked === streamsAsked) renderStreams(doc);  // a newer request is on its way
  } finally {
    clearTimeout(timer);
  }
}

function changeStreamView(change) {
  Object.assign(streamView, change);
  saveStreamView();
  fetchStreams().catch(() => {});  // the next poll says if the server is gone
}

function setupStreamControls() {
  loadStreamView();
  for (const th of document.querySelectorAll("#streams th[data-key]")) {
    th.querySelector("button").addEventListener("click", () => {
      const key = th.dataset.key;
      const order = key === streamView.sort ? (streamView.order === "desc" ? "asc" : "desc")
        : (key === "stream_id" ? "asc" : "desc");
      changeStreamView({sort: key, order: order, offset: 0});
    });
  }
  const search = document.getElementById("stream-search");
  search.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      if (search.value !== streamView.q) changeStreamView({q: search.value, offset: 0});
    }, 250);
  });
  document.getElementById("stream-limit").addEventListener("change", (event) => {
    changeStreamView({limit: Number(event.target.value), offset: 0});
  });
  for (const button of document.querySelectorAll("#stream-pager [data-page]")) {
    button.addEventListener("click", () => {
      const {offset, limit} = streamView, matching = streamView.matching || 0;
      const lastPage = Math.max(0, Math.ceil(matching / limit) - 1) * limit;
      const to = {first: 0, prev: Math.max(0, offset - limit), next: offset + limit,
                  last: lastPage}[button.dataset.page];
      changeStreamView({offset: to});
    });
  }
}
