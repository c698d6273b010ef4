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
  if (ms === null || ms === undefined) return "\u2014";
  try { return new Date(ms).toISOString().slice(0, 19).replace("T", " "); }
  catch (e) { return String(ms); }
}

function span(startMs, endMs) {
  const start = utc(startMs), end = utc(endMs);
  return start + " \u2192 " + (start.slice(0, 10) === end.slice(0, 10) ? end.slice(11) : end);
}

function human(ms) {
  if (ms === null || ms === undefined) return "\u2014";
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

function renderPipelines(pipelines) {
  document.getElementById("pipeline-count").textContent = String(pipelines.length);
  const rows = pipelines.map((p) => el("tr", null,
    el("td", "id", p.pipeline),
    el("td", "num", String(p.live_workers.length)),
    el("td", null, p.versions.join(", ") || "\u2014"),
    el("td", "num", p.lag === null ? "\u2014" : p.lag.toLocaleString("en-US")),
    el("td", "num", String(p.streams.length))));
  if (rows.length === 0) {
    const td = el("td", "empty", "No pipeline announced (workers of this version announce theirs).");
    td.colSpan = 5;
    rows.push(el("tr", null, td));
  }
  document.getElementById("pipeline-rows").replaceChildren(...rows);
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
  renderPipelines(doc.pipelines || []);
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
