"""The status page: one static HTML document with inline CSS and vanilla JS, no CDN.

It fetches `/api/state` (counts, banners, bypasses) and one page of `/api/streams` every second
and redraws in place. The streams table is paged, sorted and searched on the server (its
controls keep their page, sort and search across refreshes, and in the address's #fragment
across reloads). Every piece of data is put in the DOM as text (`textContent`,
`append(string)`), never as HTML, because stream ids and error messages are user input. The
Content-Security-Policy allows only these exact inline blocks.
"""

from __future__ import annotations

import base64
import hashlib

from streams.dashboard import table_page
from streams.dashboard.timeline_page import TIMELINE_SCRIPT, TIMELINE_STYLE

STYLE = """
:root { --fg: #1d2330; --muted: #667085; --line: #e4e7ec; --bg: #f7f8fa; --card: #fff;
  --live: #067647; --live-bg: #dcfae6; --catch: #175cd3; --catch-bg: #d1e9ff;
  --retry: #b54708; --retry-bg: #fef0c7; --pause: #475467; --pause-bg: #eaecf0;
  --bad: #b42318; --bad-bg: #fee4e2; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: var(--fg); background: var(--bg); }
header { display: flex; flex-wrap: wrap; align-items: center; gap: 12px 24px;
  padding: 14px 24px; background: var(--card); border-bottom: 1px solid var(--line); }
h1 { font-size: 18px; margin: 0; }
h2 { font-size: 15px; margin: 0 0 8px; }
main { padding: 16px 24px 32px; display: grid; gap: 20px; }
section { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: 14px 16px; overflow-x: auto; }
.counts { display: flex; gap: 8px; flex-wrap: wrap; }
.meta { margin-left: auto; color: var(--muted); display: flex; gap: 16px; align-items: center; }
.age { padding: 2px 8px; border-radius: 999px; background: var(--live-bg); color: var(--live); }
.age.old { background: var(--retry-bg); color: var(--retry); }
.age.dead { background: var(--bad-bg); color: var(--bad); }
.banner { background: var(--bad-bg); color: var(--bad); padding: 8px 12px; border-radius: 6px; }
.banner[hidden] { display: none; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line);
  vertical-align: top; white-space: nowrap; }
th { font-weight: 600; color: var(--muted); font-size: 12px; text-transform: uppercase; }
th button { all: unset; cursor: pointer; }
th button:focus-visible { outline: 2px solid var(--catch); }
th[aria-sort] button::after { content: " \\25BE"; }
th[aria-sort="ascending"] button::after { content: " \\25B4"; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.id { font-weight: 600; }
td.error { white-space: normal; min-width: 200px; max-width: 380px; overflow-wrap: anywhere;
  color: var(--bad); }
td.command { white-space: normal; min-width: 320px; }
td.empty { color: var(--muted); text-align: center; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px;
  font-weight: 600; background: var(--pause-bg); color: var(--pause); }
.badge.live { background: var(--live-bg); color: var(--live); }
.badge.catching-up { background: var(--catch-bg); color: var(--catch); }
.badge.retrying { background: var(--retry-bg); color: var(--retry); }
.badge.paused { background: var(--pause-bg); color: var(--pause); }
.badge.finished { background: var(--pause-bg); color: var(--live); }
.replay { display: flex; gap: 6px; align-items: flex-start; }
.replay code { white-space: pre-wrap; overflow-wrap: anywhere; }
code { font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; background: var(--bg);
  border: 1px solid var(--line); border-radius: 4px; padding: 2px 6px; user-select: all;
  white-space: pre; }
.copy { font-size: 12px; padding: 2px 8px; cursor: pointer; }
"""

SCRIPT = """
"use strict";
const STATES = ["live", "catching up", "retrying", "paused", "finished"];
let latest = null;        // {doc, fetchedAt}: the last good /api/state and when it arrived
let bypassesShown = null; // the JSON of the bypasses on screen, to redraw only on change
let updates = 0;

function el(tag, cls, ...children) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);  // strings become text
  }
  return node;
}

function utc(ms) {
  if (ms === null || ms === undefined) return "\\u2014";
  try { return new Date(ms).toISOString().slice(0, 19).replace("T", " "); }
  catch (e) { return String(ms); }
}

function span(startMs, endMs) {
  const start = utc(startMs), end = utc(endMs);
  return start + " \\u2192 " + (start.slice(0, 10) === end.slice(0, 10) ? end.slice(11) : end);
}

function human(ms) {
  if (ms === null || ms === undefined) return "\\u2014";
  const sign = ms < 0 ? "-" : "";
  const s = Math.floor(Math.abs(ms) / 1000);
  const units = [["d", 86400], ["h", 3600], ["m", 60], ["s", 1]];
  let i = units.findIndex(([, size]) => s >= size);
  if (i < 0) i = units.length - 1;
  const parts = units.slice(i, i + 2).map(([name, size], n) =>
    (n === 0 ? Math.floor(s / size) : Math.floor((s % units[i][1]) / size)) + name);
  return sign + parts.join(" ");  // the two largest units: "42s", "5m 0s", "3h 12m", "2d 4h"
}

function errorText(err) {
  if (!err) return "";
  return err.message ? err.kind + ": " + err.message : err.kind;
}

function badge(state) {
  return el("span", "badge " + String(state).replace(/[^a-z]+/g, "-"), state);
}

function copyButton(command) {
  const button = el("button", "copy", "Copy");
  button.type = "button";
  button.title = "Copy the replay command";
  button.addEventListener("click", () => {
    const done = () => {
      button.textContent = "Copied";
      setTimeout(() => { button.textContent = "Copy"; }, 3000);
    };
    const fallback = () => {
      const range = document.createRange();
      range.selectNodeContents(button.previousElementSibling);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      button.textContent = "Press Ctrl+C";
    };
    if (navigator.clipboard) navigator.clipboard.writeText(command).then(done, fallback);
    else fallback();
  });
  return button;
}

function renderBypasses(bypasses) {
  const key = JSON.stringify(bypasses);
  if (key === bypassesShown) return;  // keep selections and "Copied" labels between polls
  bypassesShown = key;
  document.getElementById("bypass-count").textContent = String(bypasses.length);
  const body = document.getElementById("bypass-rows");
  const rows = bypasses.map((b) => {
    const tr = el("tr", null,
      el("td", "id", b.stream_id),
      el("td", "num", span(b.start_ms, b.end_ms)),
      el("td", "num", String(b.attempts)),
      el("td", "num", utc(b.bypassed_ms)),
      el("td", "error", errorText(b.last_error)),
      el("td", "command", el("div", "replay", el("code", null, b.replay_command),
                         copyButton(b.replay_command))));
    tr.dataset.streamId = b.stream_id;
    return tr;
  });
  if (rows.length === 0) {
    const td = el("td", "empty", "No bypassed windows.");
    td.colSpan = 6;
    rows.push(el("tr", null, td));
  }
  body.replaceChildren(...rows);
}

function renderHeader(doc) {
  const counts = document.getElementById("counts");
  const total = doc.total;
  counts.replaceChildren(
    el("span", "badge", total.toLocaleString("en-US") + (total === 1 ? " stream" : " streams")),
    ...STATES.map((state) => el("span", "badge " + state.replace(/ /g, "-"),
                                state + " " + (doc.counts[state] || 0).toLocaleString("en-US"))),
    ...(doc.caught_up === false ? [el("span", "badge retrying", "still reading the topics")] : []));
  document.getElementById("refreshed").textContent = utc(doc.refreshed_ms) + " UTC";
  const banner = document.getElementById("problem");
  banner.hidden = !doc.refresh_error;
  banner.textContent = doc.refresh_error ? "Read model refresh failed: " + doc.refresh_error : "";
  const outage = document.getElementById("outage");
  const lines = (doc.outages || []).map((o) => o.line);
  outage.hidden = lines.length === 0;
  outage.textContent = lines.join("; ");
}

function renderAge() {
  const age = document.getElementById("age");
  if (!latest || latest.doc.refreshed_ms === null) {
    age.textContent = "waiting for data";
    age.className = "age old";
    return;
  }
  const ms = latest.doc.now_ms - latest.doc.refreshed_ms + (Date.now() - latest.fetchedAt);
  age.textContent = "updated " + Math.max(0, Math.floor(ms / 1000)) + " s ago";
  age.className = ms > 10000 ? "age dead" : ms > 3000 ? "age old" : "age";
}

function render() {
  const doc = latest.doc;
  renderHeader(doc);
  renderBypasses(doc.bypasses);
  renderAge();
  document.body.dataset.updates = String(++updates);
}

async function poll() {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 5000);
  try {
    const [response] = await Promise.all([
      fetch("/api/state", {cache: "no-store", signal: abort.signal}), fetchStreams()]);
    if (!response.ok) throw new Error("HTTP " + response.status);
    latest = {doc: await response.json(), fetchedAt: Date.now()};
    document.getElementById("offline").hidden = true;
    render();
  } catch (err) {
    const offline = document.getElementById("offline");
    offline.textContent = "Cannot reach the status server (" + err.message + "); retrying.";
    offline.hidden = false;
  } finally {
    clearTimeout(timer);
    setTimeout(poll, 1000);
  }
}

setupStreamControls();  // streams.dashboard.table_page
setInterval(renderAge, 1000);
poll();
"""


# The window timeline's own style and script (streams.dashboard.timeline_page), after the page's.
STYLE += TIMELINE_STYLE
SCRIPT += TIMELINE_SCRIPT


def _column(key: str, title: str) -> str:
    return f'<th data-key="{key}" scope="col"><button type="button">{title}</button></th>'


_STREAM_COLUMNS = "".join(
    _column(key, title)
    for key, title in [
        ("stream_id", "Stream"),
        ("downstream_ms", "Downstream (UTC)"),
        ("lag_ms", "Lag"),
        ("state", "State"),
        ("window", "Current window (UTC)"),
        ("attempt", "Attempt"),
        ("bypasses", "Bypasses"),
        ("last_error", "Last error"),
    ]
)

HTML = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tidemark status</title>
<link rel="icon" href="data:,">
<style>{STYLE}</style>
<style>{table_page.STYLE}</style>
</head>
<body data-updates="0">
<header>
  <h1>Tidemark status</h1>
  <div class="counts" id="counts"></div>
  <div class="meta">
    <span>Last refresh <strong id="refreshed">&mdash;</strong></span>
    <span class="age old" id="age">waiting for data</span>
  </div>
</header>
<main>
  <div class="banner" id="offline" role="alert" hidden></div>
  <div class="banner" id="problem" role="alert" hidden></div>
  <div class="banner" id="outage" role="alert" hidden></div>
  <section id="streams" data-updates="0">
    {table_page.SEARCH}
    <table>
      <thead><tr>{_STREAM_COLUMNS}</tr></thead>
      <tbody id="stream-rows"><tr><td class="empty" colspan="8">Loading&hellip;</td></tr></tbody>
    </table>
    {table_page.PAGER}
  </section>
  <section id="bypasses">
    <h2>Recent bypasses (<span id="bypass-count">0</span>)</h2>
    <table>
      <thead><tr><th scope="col">Stream</th><th scope="col">Window (UTC)</th>
        <th scope="col">Attempts</th><th scope="col">Bypassed at (UTC)</th>
        <th scope="col">Last error</th><th scope="col">Replay command</th></tr></thead>
      <tbody id="bypass-rows"><tr><td class="empty" colspan="6">Loading&hellip;</td></tr></tbody>
    </table>
  </section>
</main>
<script>{table_page.SCRIPT}</script>
<script>{SCRIPT}</script>
</body>
</html>
""".encode()


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


CONTENT_SECURITY_POLICY = (
    "default-src 'none'; "
    f"script-src {_sha256(table_page.SCRIPT)} {_sha256(SCRIPT)}; "
    f"style-src {_sha256(STYLE)} {_sha256(table_page.STYLE)}; "
    "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
