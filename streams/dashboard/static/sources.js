// The Sources panel: /api/sources?history=0 every second, the histories (/api/sources) only
// when a new sample was taken (or a source appeared); one small SVG chart per source, plain
// elements, text as text.
const SVG = "http://www.w3.org/2000/svg";
const CHART_W = 200, CHART_H = 36;
let sourcesSampled = null;   // the sampled_ms of the histories held
let sourceHistories = new Map();  // source -> {history, chart}
let sourceUpdates = 0;

function svg(tag, cls, attrs) {
  const node = document.createElementNS(SVG, tag);
  if (cls) node.setAttribute("class", cls);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
  return node;
}

function count(n) { return Number(n).toLocaleString("en-US"); }

function rate(r) {
  if (r === null || r === undefined) return "\u2014";
  return (r >= 10 ? r.toFixed(0) : r >= 1 ? r.toFixed(1) : r > 0 ? r.toFixed(2) : "0") + "/s";
}

// One series: polylines broken where a value is null (a lone point is a dot); x from its
// time over the window, y scaled to `peak`.
function lines(history, values, peak, cls, fromMs, windowMs) {
  const out = [];
  let points = [];
  const flush = () => {
    if (points.length === 1) {
      out.push(svg("circle", cls, {cx: points[0][0], cy: points[0][1], r: 1.5}));
    } else if (points.length > 1) {
      out.push(svg("polyline", cls, {points: points.map((p) => p.join(",")).join(" ")}));
    }
    points = [];
  };
  history.at_ms.forEach((at, i) => {
    const v = values[i];
    if (v === null || v === undefined) { flush(); return; }
    const x = Math.max(0, Math.min(CHART_W, (at - fromMs) / windowMs * CHART_W));
    const y = CHART_H - 2 - (peak > 0 ? v / peak : 0) * (CHART_H - 4);
    points.push([x.toFixed(1), y.toFixed(1)]);
  });
  flush();
  return out;
}

function chart(history, sampledMs, windowMs) {
  const rates = history.dispatches_per_s.filter((r) => r !== null);
  const peakRate = Math.max(0, ...rates), peakFailing = Math.max(0, ...history.failing);
  const fromMs = (sampledMs || 0) - windowMs;
  const node = svg("svg", "src-chart", {viewBox: "0 0 " + CHART_W + " " + CHART_H,
    width: CHART_W, height: CHART_H, role: "img"});
  const n = history.at_ms.length;
  const label = n === 0 ? "no samples yet"
    : "last hour: dispatches peak " + rate(peakRate) + ", now " +
      rate(history.dispatches_per_s[n - 1]) + "; failing streams peak " + count(peakFailing) +
      ", now " + count(history.failing[n - 1]);
  node.setAttribute("aria-label", label);
  const title = svg("title");
  title.textContent = label;
  const base = svg("line", "src-base", {x1: 0, y1: CHART_H - 1, x2: CHART_W, y2: CHART_H - 1});
  node.append(title, base,
    ...lines(history, history.failing, peakFailing, "src-failing", fromMs, windowMs),
    ...lines(history, history.dispatches_per_s, peakRate, "src-rate", fromMs, windowMs));
  const peaks = "peak " + rate(peakRate) + " \u00b7 " + count(peakFailing) + " failing";
  return el("div", "src-last-hour", node, el("span", "src-peaks", peaks));
}

function healthCell(s, nowMs) {
  if (s.partitions === 0) return el("td", "src-quiet", "no fresh health");
  const text = count(s.failing) + " of " + count(s.total) + " failing";
  if (!s.in_outage) return el("td", null, el("span", "badge live", "ok"), " ", text);
  const since = s.outage_since_ms === null ? "" : " " + human(nowMs - s.outage_since_ms);
  return el("td", null, el("span", "badge src-outage", "outage" + since), " ", text);
}

function limitText(limits) {
  if (!limits) return "none";
  const parts = [];
  if (limits.max_in_flight !== null) parts.push(count(limits.max_in_flight) + " in flight");
  if (limits.rate_per_s !== null) parts.push(limits.rate_per_s + "/s (burst " + limits.burst + ")");
  return parts.join(", ") || "pacing only";
}

function renderSources(doc) {
  document.getElementById("source-count").textContent = String(doc.sources.length);
  const note = document.getElementById("source-note");
  note.textContent = "Charts: dispatches per second (blue) and failing streams (red) over the " +
    "last " + doc.window_ms / 60000 + " min, a point per " + doc.sample_ms / 1000 + " s, each " +
    "series to its own peak." +
    (doc.omitted > 0 ? " " + count(doc.omitted) + " more sources not listed." : "");
  const rows = doc.sources.map((s) => {
    const held = sourceHistories.get(s.source);
    const limits = s.limits;
    const limitCell = el("td", null, limitText(limits));
    if (limits) limitCell.title = "backfill share " + limits.backfill_share + ", pace start " +
      limits.pace_start + "; set " + utc(limits.updated_ms) + " UTC";
    const cap = limits && limits.max_in_flight !== null ? " / " + count(limits.max_in_flight) : "";
    const tr = el("tr", null,
      el("td", "id", s.source),
      healthCell(s, doc.now_ms),
      limitCell,
      el("td", "num", count(s.in_flight) + cap),
      el("td", "num", count(s.waiting)),
      el("td", "num", s.pacing === null ? "\u2014" : count(s.pacing)),
      el("td", "chart", held ? held.chart : "\u2026"));
    tr.dataset.source = s.source;
    return tr;
  });
  if (rows.length === 0) {
    const td = el("td", "empty", "No source seen yet: streams name theirs with --source, " +
      "limits are set with `tidemark sources set`.");
    td.colSpan = 7;
    rows.push(el("tr", null, td));
  }
  document.getElementById("source-rows").replaceChildren(...rows);
  document.getElementById("sources").dataset.updates = String(++sourceUpdates);
}

async function getJson(url, signal) {
  const response = await fetch(url, {cache: "no-store", signal});
  if (!response.ok) throw new Error("HTTP " + response.status);
  return response.json();
}

async function pollSources() {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 5000);
  const problem = document.getElementById("source-problem");
  try {
    let doc = await getJson("/api/sources?history=0", abort.signal);
    // A new sample, or a source new since the last one: fetch the histories (once).
    const unknown = doc.sources.some((s) => !sourceHistories.has(s.source));
    if (doc.sampled_ms !== sourcesSampled || unknown) {
      doc = await getJson("/api/sources", abort.signal);
      sourceHistories = new Map(doc.sources.map((s) => [s.source,
        {chart: chart(s.history, doc.sampled_ms, doc.window_ms)}]));
      sourcesSampled = doc.sampled_ms;
    }
    renderSources(doc);
    problem.hidden = true;
  } catch (err) {
    problem.textContent = "Sources not updated (" + err.message + ").";
    problem.hidden = false;
  } finally {
    clearTimeout(timer);
    setTimeout(pollSources, 1000);
  }
}

pollSources();
