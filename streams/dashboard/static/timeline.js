const OUTCOMES = [["acked", "acked"], ["partial", "partial ack"], ["retrying", "retrying"],
  ["held", "held (outage)"], ["bypassed", "bypassed"], ["replayed", "replayed"],
  ["open", "in progress"]];
const OUTCOME_LABEL = Object.fromEntries(OUTCOMES);
let selectedStream = null;  // the selected stream's id
let timelineShown = null;   // the JSON of the strip on screen, to redraw only on change
let timelineTimer = null;
let timelineAsk = 0;        // answers to an earlier selection are dropped
const timeline = buildTimeline();

function buildTimeline() {
  const id = el("span", "tl-id");
  const head = el("div", "tl-head", el("h2", null, "Window timeline"), id);
  const hint = el("p", "tl-hint", "Select a stream above to see its recent windows.");
  const legend = el("ul", "tl-legend");
  const strip = el("ol", "tl-strip");
  strip.setAttribute("aria-label", "recent windows, oldest first");
  const axis = el("div", "tl-axis");
  const detail = el("div", "tl-detail");
  detail.setAttribute("aria-live", "polite");
  const note = el("p", "tl-note");
  const section = el("section", null, head, hint, legend, strip, axis, detail, note);
  section.id = "timeline";
  for (const [node, name] of [[id, "selected"], [hint, "hint"], [legend, "legend"],
                              [strip, "strip"], [axis, "axis"], [detail, "detail"],
                              [note, "note"]]) {
    node.id = "timeline-" + name;
  }
  legend.hidden = strip.hidden = axis.hidden = detail.hidden = true;
  document.getElementById("streams").after(section);
  return {section, id, hint, legend, strip, axis, detail, note};
}

function cellLines(c) {
  const lines = [span(c.start_ms, c.end_ms) + " UTC", OUTCOME_LABEL[c.outcome] || c.outcome];
  if (c.current) lines[1] += " (current window)";
  if (c.outcome === "bypassed") lines.push("failed attempts: " + c.attempts);
  else lines.push("attempts: " + c.attempts);
  if (c.held_since_ms !== null) lines.push("held since: " + utc(c.held_since_ms) + " UTC");
  if (c.held_ms !== null) lines.push("held for " + human(c.held_ms) + " before it closed");
  if (c.first_failed_ms !== null) lines.push("first failure: " + utc(c.first_failed_ms) + " UTC");
  if (c.bypassed_ms !== null) lines.push("bypassed at: " + utc(c.bypassed_ms) + " UTC");
  if (c.committed_ms !== null) lines.push("committed at: " + utc(c.committed_ms) + " UTC");
  if (c.last_error) lines.push("last error: " + errorText(c.last_error));
  return lines;
}

function showDetail(cell, lines) {
  for (const other of timeline.strip.querySelectorAll(".tl-cell.active")) {
    other.classList.remove("active");
  }
  cell.classList.add("active");
  timeline.detail.textContent = lines.join("\n");
}

function renderLegend(counts) {
  timeline.legend.replaceChildren(...OUTCOMES.map(([outcome, label]) =>
    el("li", null, el("span", "tl-swatch tl-" + outcome), label,
       el("strong", null, String(counts[outcome] || 0)))),
    el("li", null, el("span", "tl-swatch tl-acked tl-was-held"), "acked after a hold"));
}

function renderTimeline(doc) {
  const key = JSON.stringify([doc.cells, doc.counts, doc.history]);
  if (key === timelineShown) return;
  timelineShown = key;
  timeline.hint.hidden = true;
  timeline.legend.hidden = timeline.strip.hidden = timeline.axis.hidden = false;
  timeline.detail.hidden = false;
  renderLegend(doc.counts);
  const cells = doc.cells.map((c) => {
    const lines = cellLines(c);
    const cell = el("li", "tl-cell tl-" + c.outcome);
    if (c.held_ms !== null && c.outcome !== "held") cell.classList.add("tl-was-held");
    if (c.gap_before) cell.classList.add("gap");
    if (c.current) cell.classList.add("tl-current");
    cell.tabIndex = 0;
    cell.title = lines.join("\n");
    cell.setAttribute("aria-label", lines.join("; "));
    cell.dataset.outcome = c.outcome;
    cell.dataset.startMs = String(c.start_ms);
    cell.addEventListener("mouseenter", () => showDetail(cell, lines));
    cell.addEventListener("focus", () => showDetail(cell, lines));
    return cell;
  });
  if (cells.length === 0) {
    timeline.strip.replaceChildren(el("li", "tl-hint", "No windows to show yet."));
    timeline.axis.replaceChildren();
  } else {
    timeline.strip.replaceChildren(...cells);
    const first = doc.cells[0], last = doc.cells[doc.cells.length - 1];
    timeline.axis.replaceChildren(el("span", null, utc(first.start_ms) + " UTC"),
                                  el("span", null, utc(last.end_ms) + " UTC"));
  }
  timeline.detail.textContent = "";
  const h = doc.history;
  if (h.error) {
    timeline.note.className = "tl-note bad";
    timeline.note.textContent = "Could not read commits: " + h.error +
      " (showing the current window and listed bypasses only)";
  } else if (h.partition === null) {
    timeline.note.className = "tl-note";
    timeline.note.textContent = "No commits read (no commits topic yet).";
  } else {
    timeline.note.className = "tl-note";
    timeline.note.textContent = "The last " + doc.cells.length + " windows: from the last " +
      h.records_read.toLocaleString("en") + " records of commits partition " + h.partition +
      " (it reads at most " + h.limit.toLocaleString("en") + "), the windows still listed " +
      "as bypassed, and the current window (\u25b4)" + (h.complete ? "." : "; still reading.");
  }
}

function timelineProblem(text) {
  timelineShown = null;
  timeline.note.className = "tl-note bad";
  timeline.note.textContent = text;
}

async function pollTimeline() {
  clearTimeout(timelineTimer);
  if (selectedStream === null) return;
  const ask = ++timelineAsk;
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 8000);
  try {
    const url = "/api/streams/" + encodeURIComponent(selectedStream) + "/timeline";
    const response = await fetch(url, {cache: "no-store", signal: abort.signal});
    const doc = await response.json();
    if (ask !== timelineAsk) return;
    if (!response.ok) timelineProblem(doc.error || "HTTP " + response.status);
    else renderTimeline(doc);
  } catch (err) {
    if (ask === timelineAsk) timelineProblem("Cannot load the timeline (" + err.message + ").");
  } finally {
    clearTimeout(timer);
    if (ask === timelineAsk) timelineTimer = setTimeout(pollTimeline, 2000);
  }
}

function markRows() {
  for (const tr of document.querySelectorAll("#stream-rows tr[data-stream-id]")) {
    const on = tr.dataset.streamId === selectedStream;
    tr.tabIndex = 0;
    tr.classList.toggle("selected", on);
    tr.setAttribute("aria-selected", on ? "true" : "false");
  }
}

function selectStream(streamId) {
  if (streamId === selectedStream) return;
  selectedStream = streamId;
  timelineShown = null;
  timeline.id.textContent = streamId;
  timeline.note.textContent = "Loading\u2026";
  timeline.note.className = "tl-note";
  const fragment = new URLSearchParams(location.hash.slice(1));  // the table's keys stay
  fragment.set("stream", streamId);
  history.replaceState(null, "", "#" + fragment.toString());
  markRows();
  pollTimeline();
}

function rowOf(event) {
  return event.target instanceof Element ? event.target.closest("tr[data-stream-id]") : null;
}

const streamRows = document.getElementById("stream-rows");
streamRows.addEventListener("click", (event) => {
  const tr = rowOf(event);
  if (tr) selectStream(tr.dataset.streamId);
});
streamRows.addEventListener("keydown", (event) => {
  const tr = rowOf(event);
  if (tr && (event.key === "Enter" || event.key === " ")) {
    event.preventDefault();
    selectStream(tr.dataset.streamId);
  }
});
new MutationObserver(markRows).observe(streamRows, {childList: true});
const linked = new URLSearchParams(location.hash.slice(1)).get("stream");
if (linked) selectStream(linked);
