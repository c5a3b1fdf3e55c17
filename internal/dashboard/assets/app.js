// The tunejet dashboard: the experiments page, the runners page, and one
// experiment's trials, its charts (learning curves, optimisation history,
// Pareto front, parallel coordinates, parameters against the metric,
// importance) and trial details, kept live by the server's event stream.
// Plain JavaScript and SVG, no build step.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const PAGE_SIZE = 100;
const FINISHED = new Set(["TERMINATED", "ERROR"]);

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function svgEl(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function $(id) { return document.getElementById(id); }
function show(id) { $(id).hidden = false; }

function message(text) {
  const m = $("message");
  m.textContent = text;
  m.hidden = false;
}

async function getJSON(url) {
  const r = await fetch(url, { credentials: "same-origin" });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || r.status + " " + r.statusText);
  return body;
}

function fmt(v) {
  if (v === undefined || v === null) return "";
  if (typeof v === "number") {
    const a = Math.abs(v);
    if (a >= 1e5 || (a > 0 && a < 1e-3)) return v.toExponential(3);
    return Number.isInteger(v) ? String(v) : v.toPrecision(5);
  }
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

function duration(ms) {
  if (!(ms >= 0)) return "";
  const s = Math.round(ms / 1000);
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
  return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
}

function counts(c) {
  const order = ["RUNNING", "PENDING", "PAUSED", "TERMINATED", "ERROR"];
  const parts = order.filter((s) => c && c[s] > 0).map((s) => c[s] + " " + s);
  return parts.length ? parts.join(", ") : "no trials";
}

// progress is the server's words for the trials ended of the total the
// search creates, with an ETA: "30/200 trials done (15%), ETA 5m20s".
function progress(x) {
  return x.progress || "";
}

function elapsed(x) {
  if (!x.start_time) return "";
  const end = x.end_time ? new Date(x.end_time) : new Date();
  return duration(end - new Date(x.start_time));
}

// ---- The experiments page, kept live by its stream.

async function experimentsPage() {
  $("title").textContent = "Experiments";
  show("experiments");
  const es = new EventSource("/api/stream/experiments");
  es.addEventListener("update", (e) => {
    $("message").hidden = true;
    const live = $("live");
    live.hidden = false;
    live.classList.remove("lost");
    live.textContent = "live";
    drawExperiments(JSON.parse(e.data));
  });
  es.onerror = async () => {
    $("live").classList.add("lost");
    $("live").textContent = "reconnecting";
    if (es.readyState === EventSource.CLOSED) {
      try {
        await getJSON("/api/experiments");
      } catch (e) {
        message(e.message);
      }
    }
  };
}

function drawExperiments(data) {
  if (data.experiments.length === 0) message("The event log holds no experiment yet.");
  const rows = data.experiments.map((x) => {
    const tr = el("tr", { "data-experiment": x.name, "data-status": x.status });
    const td = el("td");
    td.appendChild(el("a", { href: "/experiments/" + encodeURIComponent(x.name) }, x.name));
    tr.appendChild(td);
    tr.appendChild(el("td", { class: "status-" + x.status, "data-col": "status" }, x.status));
    tr.appendChild(el("td", { class: "num" }, String(x.num_trials)));
    tr.appendChild(el("td", {}, counts(x.counts)));
    tr.appendChild(el("td", { class: "num" }, progress(x)));
    tr.appendChild(el("td", {}, x.metric ? x.metric + (x.mode ? " (" + x.mode + ")" : "") : ""));
    tr.appendChild(el("td", { class: "num", "data-col": "best" }, fmt(x.best)));
    tr.appendChild(el("td", {}, x.start_time ? new Date(x.start_time).toLocaleString() : ""));
    tr.appendChild(el("td", { class: "num" }, elapsed(x)));
    return tr;
  });
  document.querySelector("#experiments-table tbody").replaceChildren(...rows);
}

// ---- The runners page, kept live by its stream: each runner with
// whatever fields it publishes.

function runnersPage() {
  $("title").textContent = "Runners";
  show("runners");
  const es = new EventSource("/api/stream/runners");
  es.addEventListener("update", (e) => {
    const live = $("live");
    live.hidden = false;
    live.classList.remove("lost");
    live.textContent = "live";
    drawRunners(JSON.parse(e.data));
  });
  es.onerror = () => {
    $("live").classList.add("lost");
    $("live").textContent = "reconnecting";
  };
}

// amounts writes resources as "cpu 2, gpu 0.5, memory 4.0 GiB".
function amounts(m) {
  return Object.entries(m).map(([k, v]) => k + " " + (k === "memory" && typeof v === "number" ? bytes(v) : fmt(v))).join(", ");
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + units[i];
}

// inUse sums the resources of a runner's trials against its capacity.
function inUse(r) {
  if (!r.capacity) return "";
  const used = {};
  for (const t of r.trials || []) for (const [k, v] of Object.entries(t.resources || {})) used[k] = (used[k] || 0) + v;
  return Object.keys(r.capacity).map((k) => {
    const u = used[k] || 0, c = r.capacity[k];
    return k === "memory" ? "memory " + bytes(u) + " / " + bytes(c) : k + " " + fmt(u) + "/" + fmt(c);
  }).join(", ");
}

function drawRunners(data) {
  const note = $("runners-note");
  note.hidden = !data.note;
  note.textContent = data.note || "";
  const keys = [];
  for (const r of data.runners) for (const k of Object.keys(r)) if (!keys.includes(k)) keys.push(k);
  const first = ["name", "hostname", "slots", "capacity"].filter((k) => keys.includes(k));
  const cols = first.concat(keys.filter((k) => !first.includes(k) && k !== "trials"));
  if (keys.includes("capacity")) cols.splice(cols.indexOf("capacity") + 1, 0, "in use");
  if (keys.includes("trials")) cols.push("trials");
  document.querySelector("#runners-table thead tr").replaceChildren(...cols.map((k) => el("th", {}, k)));
  const rows = data.runners.map((r) => {
    const tr = el("tr", { "data-runner": r.name || "" });
    for (const k of cols) {
      const td = el("td", { "data-col": k });
      const v = r[k];
      if (k === "in use") {
        td.textContent = inUse(r);
      } else if (k === "trials" && !v) {
        td.textContent = "idle";
      } else if (k === "trials" && Array.isArray(v)) {
        v.forEach((t, i) => {
          if (i > 0) td.appendChild(document.createTextNode(", "));
          const href = "/experiments/" + encodeURIComponent(t.experiment) + "#trial=" + encodeURIComponent(t.trial_id);
          td.appendChild(el("a", { href }, t.experiment + "/" + t.trial_id + (t.attempt ? " #" + t.attempt : "")));
          if (t.resources) td.appendChild(document.createTextNode(" (" + amounts(t.resources) + ")"));
        });
        if (v.length === 0) td.textContent = "idle";
      } else if (v && typeof v === "object" && !Array.isArray(v)) {
        td.textContent = amounts(v);
      } else if (k === "started" && typeof v === "string") {
        td.textContent = new Date(v).toLocaleString();
      } else {
        td.textContent = fmt(v);
      }
      tr.appendChild(td);
    }
    return tr;
  });
  document.querySelector("#runners-table tbody").replaceChildren(...rows);
}

// ---- One experiment's page.

const exp = {
  name: "", summary: null, info: {}, trials: new Map(), order: [],
  dirty: new Set(), drawPending: false, configVersion: 0, keys: null,
  // finishedVersion counts the changes to finished trials: the views of
  // finished trials (all but the curves) redraw only when it moves.
  finishedVersion: 0,
};
const view = {
  sortKey: "index", sortDir: 1, status: "", filterText: "", filter: () => true, page: 0, selected: null,
  shownIds: new Set(), drawnTrials: -1,
  // brushes are the parallel-coordinates ranges, by axis name: {lo, hi}
  // for a numeric axis, {cats: Set of JSON values} for a categorical one.
  brushes: new Map(),
  // filterVersion counts the changes to the filter (status, text,
  // brushes): one filter drives the table and every chart.
  filterVersion: 0,
  rows: [], // the filtered, sorted trials of the last table drawn
  left: "curves", right: "parcoords", historyByTime: false, logY: false,
};

function applyUpdate(u) {
  exp.summary = u.experiment;
  for (const row of u.trials) {
    const had = exp.trials.get(row.trial_id);
    if (!had) {
      row.index = exp.order.length;
      exp.order.push(row.trial_id);
    } else {
      row.index = had.index;
    }
    if (!had || JSON.stringify(had.config) !== JSON.stringify(row.config)) exp.configVersion++;
    let points = row.points;
    if (had && row.points_from > 0) points = had.points.slice(0, row.points_from).concat(row.points);
    if (FINISHED.has(row.status) || (had && FINISHED.has(had.status))) exp.finishedVersion++;
    exp.trials.set(row.trial_id, Object.assign({}, row, { points }));
    exp.dirty.add(row.trial_id);
  }
  exp.filtered = null;
  if (u.watch_error) message("The dashboard stopped following the log: " + u.watch_error);
  if (view.selected && exp.dirty.has(view.selected)) loadTrial(view.selected);
  scheduleDraw();
}

function scheduleDraw() {
  if (exp.drawPending) return;
  exp.drawPending = true;
  requestAnimationFrame(() => {
    exp.drawPending = false;
    const dirty = exp.dirty;
    exp.dirty = new Set();
    drawSummary();
    if (tableChanged(dirty)) drawTable();
    openOnHistory();
    drawViews(dirty);
  });
}

function drawSummary() {
  const s = exp.summary;
  const parts = [s.status, s.num_trials + " trials: " + counts(s.counts)];
  if (s.progress) parts.push(s.progress);
  if (s.best !== undefined) parts.push("best " + (s.metric || "") + " " + fmt(s.best));
  if (s.start_time) parts.push("elapsed " + elapsed(s));
  if (s.end_reason) parts.push("ended: " + s.end_reason);
  if (s.error) parts.push(s.error);
  if (s.waiting) parts.push("the experiment " + s.waiting);
  if (s.source === "files") parts.push("read from its files");
  const p = $("summary");
  p.textContent = parts.join(" · ");
  p.className = "status-" + s.status;
  $("metric").textContent = s.metric ? "(the best trial by " + s.metric + " in bold)" : "";
  $("tab-pareto").hidden = !((s.objectives || []).length >= 2);
  drawCurveChoices(s);
  // Without --allow-actions the buttons are not on the page at all.
  const actions = $("actions");
  if (actions && !exp.info.allow_actions) {
    actions.remove();
    if ($("stop-trial")) $("stop-trial").remove();
  }
  else if (actions) actions.hidden = !(s.status === "RUNNING" || s.status === "PENDING");
}

// varyingKeys are the config keys whose values differ between trials (all
// of them when no key varies).
function varyingKeys() {
  if (exp.keys && exp.keys.version === exp.configVersion) return exp.keys.list;
  const seen = new Map();
  for (const t of exp.trials.values()) {
    for (const [k, v] of Object.entries(t.config || {})) {
      const s = JSON.stringify(v);
      if (!seen.has(k)) seen.set(k, new Set());
      const vals = seen.get(k);
      if (vals.size < 2) vals.add(s);
    }
  }
  const all = [...seen.keys()].sort();
  const varying = all.filter((k) => seen.get(k).size > 1);
  exp.keys = { version: exp.configVersion, list: varying.length ? varying : all };
  return exp.keys.list;
}

// paramScale is how a config key is drawn: "log", "linear" or "category"
// from the experiment's param space, "" when the space does not say.
function paramScale(key) {
  return ((exp.summary && exp.summary.params) || {})[key] || "";
}

function metricName() {
  return (exp.summary && exp.summary.metric) || "metric";
}

function isMax() {
  return !!(exp.summary && exp.summary.mode === "max");
}

function columns(keys) {
  const m = exp.summary.metric || "metric";
  return [
    { id: "trial", label: "Trial", get: (t) => t.trial_name },
    { id: "status", label: "Status", get: (t) => t.status },
    ...keys.map((k) => ({ id: "config." + k, label: k, get: (t) => (t.config || {})[k], num: true })),
    { id: "last", label: m + " (last)", get: (t) => t.last, num: true },
    { id: "best", label: m + " (best)", get: (t) => t.best, num: true },
    { id: "iter", label: "Iterations", get: (t) => t.training_iteration, num: true },
    { id: "time", label: "Time (s)", get: (t) => t.time_total_s, num: true },
    { id: "attempt", label: "Attempts", get: (t) => t.attempt, num: true },
    { id: "failures", label: "Failures", get: (t) => t.num_failures, num: true },
    { id: "runner", label: "Runner", get: (t) => t.runner },
  ];
}

// One collator for every comparison: localeCompare with options builds
// one per call, which made a sort of 10,000 names take half a second.
const collator = new Intl.Collator(undefined, { numeric: true });

function compareValues(a, b) {
  const ua = a === undefined || a === null, ub = b === undefined || b === null;
  if (ua || ub) return ua && ub ? 0 : ua ? 1 : -1; // missing values last
  if (typeof a === "number" && typeof b === "number") return a - b;
  return collator.compare(String(a), String(b));
}

// ---- The filter: whitespace-separated terms, all of which must hold. A
// term is NAME OP VALUE, OP one of = != < <= > >= ~ (~: contains), NAME a
// config key (or config.KEY), the metric's name or "last", "best",
// "iter", "time", "attempt", "failures", "status", "runner", "trial";
// or a bare word, found in the trial's name, id, status, runner or config.

const FIELDS = {
  last: (t) => t.last, best: (t) => t.best, iter: (t) => t.training_iteration, training_iteration: (t) => t.training_iteration,
  time: (t) => t.time_total_s, attempt: (t) => t.attempt, attempts: (t) => t.attempt, failures: (t) => t.num_failures,
  status: (t) => t.status, runner: (t) => t.runner, trial: (t) => t.trial_name, id: (t) => t.trial_id,
};

function fieldGetter(name) {
  if (exp.summary && name === exp.summary.metric) return FIELDS.last;
  if (name.startsWith("config.")) {
    const k = name.slice(7);
    return (t) => (t.config || {})[k];
  }
  for (const t of exp.trials.values()) if (t.config && name in t.config) return (t2) => (t2.config || {})[name];
  if (FIELDS[name]) return FIELDS[name];
  throw new Error("unknown name " + JSON.stringify(name) + ": use a config key, the metric, or one of " + Object.keys(FIELDS).join(", "));
}

// searchText is what a bare word is looked for in, made once per version
// of the trial's row (a row is a new object after each update).
function searchText(t) {
  if (t.searchText === undefined) {
    t.searchText = [t.trial_name, t.trial_id, t.status, t.runner || "", JSON.stringify(t.config || {})].join(" ").toLowerCase();
  }
  return t.searchText;
}

function parseFilter(text) {
  const preds = text.trim().split(/\s+/).filter(Boolean).map((term) => {
    const m = term.match(/^([^<>=!~]+)(<=|>=|!=|==|=|<|>|~)(.*)$/);
    if (!m) {
      const word = term.toLowerCase();
      return (t) => searchText(t).includes(word);
    }
    const [, name, op, raw] = m;
    const get = fieldGetter(name);
    const num = raw.trim() !== "" && !isNaN(Number(raw)) ? Number(raw) : null;
    const lower = raw.toLowerCase();
    return (t) => {
      const v = get(t);
      if (v === undefined || v === null) return op === "!=";
      if (op === "~") return String(typeof v === "object" ? JSON.stringify(v) : v).toLowerCase().includes(lower);
      let c;
      if (typeof v === "number" && num !== null) c = v - num;
      else if (typeof v === "boolean" && (raw === "true" || raw === "false")) c = String(v) === raw ? 0 : 1;
      else c = String(v).toLowerCase() === lower ? 0 : collator.compare(String(v), raw);
      switch (op) {
        case "=": case "==": return c === 0;
        case "!=": return c !== 0;
        case "<": return c < 0;
        case "<=": return c <= 0;
        case ">": return c > 0;
        case ">=": return c >= 0;
      }
      return false;
    };
  });
  return (t) => preds.every((p) => p(t));
}

function setFilter(text) {
  view.filterText = text;
  try {
    view.filter = parseFilter(text);
    $("filter-error").textContent = "";
  } catch (e) {
    view.filter = () => true;
    $("filter-error").textContent = e.message;
  }
  filterChanged();
}

// filterChanged redraws what the filter drives: the table now, the
// charts shown in the next frame.
function filterChanged() {
  const before = exp.filtered;
  exp.filtered = null;
  // A keystroke that keeps the same trials ("lr<0.0" → "lr<0.00") leaves
  // the charts as they are.
  if (!before || !sameTrials(before, filtered())) view.filterVersion++;
  view.page = 0;
  drawTable();
  drawBrushNote();
  scheduleDraw();
}

function sameTrials(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

// brushValue is the value a parallel-coordinates axis reads of a trial.
function brushValue(t, name) {
  return name === PC_METRIC ? t.last : (t.config || {})[name];
}

function inBrushes(t) {
  for (const [name, b] of view.brushes) {
    const v = brushValue(t, name);
    if (v === undefined || v === null) return false;
    if (b.cats ? !b.cats.has(JSON.stringify(v)) : !(typeof v === "number" && v >= b.lo && v <= b.hi)) return false;
  }
  return true;
}

function matches(t) {
  return (!view.status || t.status === view.status) && view.filter(t) && (view.brushes.size === 0 || inBrushes(t));
}

// filtered are the trials the filter keeps, in creation order; computed
// once per update or filter change, whichever view asks first.
function filtered() {
  if (!exp.filtered) {
    const out = [];
    for (const id of exp.order) {
      const t = exp.trials.get(id);
      if (matches(t)) out.push(t);
    }
    exp.filtered = out;
  }
  return exp.filtered;
}

function drawBrushNote() {
  const parts = [...view.brushes].map(([name, b]) => name + (b.cats ? " ∈ {" + [...b.cats].map((c) => fmt(JSON.parse(c))).join(", ") + "}" : " in [" + fmt(b.lo) + ", " + fmt(b.hi) + "]"));
  $("brushes").textContent = parts.length ? "brushed: " + parts.join(" and ") : "";
  $("clear-brushes").hidden = parts.length === 0;
}

// tableChanged reports whether the trials that changed can change the
// table: in creation order, unfiltered, with no new trial, only when one of
// them is on the page shown (at 10,000 trials, a redraw is some 50 ms).
function tableChanged(dirty) {
  if (view.sortKey !== "index" || view.sortDir < 0 || view.filterText.trim() || view.status || view.brushes.size || exp.order.length !== view.drawnTrials) return true;
  for (const id of dirty) if (view.shownIds.has(id)) return true;
  return false;
}

// sortedRows are the filtered trials in the table's order. Each row's
// sort key is read once, not at each comparison.
function sortedRows(cols) {
  const rows = filtered();
  const col = cols.find((c) => c.id === view.sortKey);
  if (!col || (view.sortKey === "index" && view.sortDir > 0)) return rows;
  const keyed = rows.map((t) => [col.get(t), t]);
  keyed.sort((a, b) => compareValues(a[0], b[0]) * view.sortDir || a[1].index - b[1].index);
  return keyed.map((k) => k[1]);
}

// drawTable draws the page of rows the sort, the filter and the pager
// select: at most PAGE_SIZE rows are in the document, however many trials.
function drawTable() {
  view.drawnTrials = exp.order.length;
  const keys = varyingKeys();
  const cols = columns(keys);
  const head = document.querySelector("#trials-table thead tr");
  const headKey = cols.map((c) => c.id).join("\n") + "\n" + view.sortKey + view.sortDir + metricName();
  if (head.dataset.key !== headKey) {
    head.dataset.key = headKey;
    head.replaceChildren(...cols.map((c) => {
      const arrow = view.sortKey === c.id ? (view.sortDir > 0 ? " ▲" : " ▼") : "";
      const th = el("th", { "data-col": c.id, class: "sortable" }, c.label + arrow);
      th.onclick = () => {
        view.sortDir = view.sortKey === c.id ? -view.sortDir : 1;
        view.sortKey = c.id;
        drawTable();
      };
      return th;
    }));
  }
  const rows = sortedRows(cols);
  view.rows = rows;
  const pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
  view.page = Math.min(view.page, pages - 1);
  const start = view.page * PAGE_SIZE;
  const shown = rows.slice(start, start + PAGE_SIZE);
  view.shownIds = new Set(shown.map((t) => t.trial_id));
  $("filter-count").textContent = rows.length + " of " + exp.order.length + " trials";
  $("page-info").textContent = rows.length ? "rows " + (start + 1) + "–" + (start + shown.length) + " of " + rows.length + ", page " + (view.page + 1) + "/" + pages : "no row";
  $("prev").disabled = view.page === 0;
  $("next").disabled = view.page >= pages - 1;
  const trs = shown.map((t) => {
    const r = el("tr", { id: "trial-" + t.trial_id, "data-trial": t.trial_id, "data-status": t.status });
    if (t.trial_id === view.selected) r.classList.add("selected");
    for (const c of cols) {
      const v = c.get(t);
      const attrs = { "data-col": c.id };
      if (c.num) attrs.class = "num";
      if (c.id === "status") {
        attrs.class = "status-" + t.status;
        attrs.title = t.error || t.end_reason || "";
      }
      if (c.id === "trial") attrs.title = t.trial_id;
      r.appendChild(el("td", attrs, c.id === "time" && typeof v === "number" ? v.toFixed(1) : fmt(v)));
    }
    r.onclick = () => selectTrial(t.trial_id, { scroll: true });
    return r;
  });
  document.querySelector("#trials-table tbody").replaceChildren(...trs);
}

// showRowOf moves the pager to the page that holds the trial's row, when
// the filter keeps it.
function showRowOf(id) {
  const i = view.rows.findIndex((t) => t.trial_id === id);
  if (i >= 0) view.page = Math.floor(i / PAGE_SIZE);
}

// ---- Scales and axes, shared by every chart. A scale maps a domain
// [lo, hi] to a pixel range and back (invert, for zoom and brushes);
// "log" maps log10 of the value; "band" spreads categories in equal bands.

function niceStep(span, count) {
  const raw = span / Math.max(1, count);
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  const m = raw / p;
  return (m < 1.5 ? 1 : m < 3 ? 2 : m < 7 ? 5 : 10) * p;
}

// linearTicks are round numbers (1, 2 or 5 times a power of ten apart)
// between lo and hi.
function linearTicks(lo, hi, count) {
  if (!(hi > lo)) return [lo];
  const step = niceStep(hi - lo, count);
  const out = [];
  for (let i = Math.ceil(lo / step - 1e-9); i * step <= hi + step * 1e-9; i++) out.push(Number((i * step).toPrecision(12)));
  return out;
}

// logTicks are the powers of ten between lo and hi (every other one, or
// fewer, when there are many); under two decades' powers, 1, 2 and 5
// times them.
function logTicks(lo, hi, count) {
  const e0 = Math.ceil(Math.log10(lo) - 1e-9), e1 = Math.floor(Math.log10(hi) + 1e-9);
  const every = Math.max(1, Math.ceil((e1 - e0 + 1) / count));
  let out = [];
  for (let e = e0; e <= e1; e += every) out.push(Number("1e" + e));
  if (out.length >= 2) return out;
  out = [];
  for (let e = e0 - 1; e <= e1 + 1; e++) {
    for (const m of [1, 2, 5]) {
      const v = Number(m + "e" + e);
      if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) out.push(v);
    }
  }
  return out.length >= 2 ? out : linearTicks(lo, hi, count);
}

// tickLabel writes a tick's value short: 0.0057, 250, 1e-4, 2.5e+6.
function tickLabel(v) {
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e5 || a < 1e-3) return Number(v.toPrecision(3)).toExponential().replace("e+", "e");
  return String(Number(v.toPrecision(4)));
}

function scale(kind, lo, hi, r0, r1) {
  const log = kind === "log" && lo > 0 && hi > 0;
  const f = log ? Math.log10 : (v) => v;
  let a = f(lo), b = f(hi);
  if (!(b > a)) {
    const pad = log ? 0.5 : Math.abs(a) * 0.1 || 0.5;
    a -= pad;
    b += pad;
  }
  const s = {
    kind: log ? "log" : "linear", r0, r1,
    lo: log ? Math.pow(10, a) : a, hi: log ? Math.pow(10, b) : b,
    map: (v) => r0 + ((f(v) - a) / (b - a)) * (r1 - r0),
    invert: (p) => {
      const u = a + ((p - r0) / (r1 - r0)) * (b - a);
      return log ? Math.pow(10, u) : u;
    },
    ticks: (n) => (log ? logTicks(s.lo, s.hi, n) : linearTicks(s.lo, s.hi, n)),
  };
  return s;
}

// bandScale spreads categories (JSON strings, in order) in equal bands.
function bandScale(cats, r0, r1) {
  const index = new Map(cats.map((c, i) => [c, i]));
  const step = (r1 - r0) / Math.max(1, cats.length);
  return {
    kind: "band", cats, step, r0, r1,
    map: (v) => r0 + ((index.get(JSON.stringify(v)) ?? 0) + 0.5) * step,
  };
}

// orderCats sorts category values: numbers by value, the others as text.
function orderCats(values) {
  const cats = [...new Set(values.map((v) => JSON.stringify(v)))];
  return cats.sort((a, b) => compareValues(JSON.parse(a), JSON.parse(b)));
}

// extent is [min, max] of the numbers, padded by pad of their span (in
// log space for a log scale); null when there is none.
function extent(vals, kind, pad) {
  let lo = Infinity, hi = -Infinity;
  for (const v of vals) {
    if (typeof v !== "number" || !isFinite(v) || (kind === "log" && v <= 0)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (lo === Infinity) return null;
  if (kind === "log") {
    const a = Math.log10(lo), b = Math.log10(hi), d = (b - a) * pad;
    return [Math.pow(10, a - d), Math.pow(10, b + d)];
  }
  const d = (hi - lo) * pad;
  return [lo - d, hi + d];
}

// thin keeps at most max of the items, evenly spaced: tick labels that
// would overlap.
function thin(items, max) {
  if (items.length <= max) return items;
  const every = Math.ceil(items.length / max);
  return items.filter((_, i) => i % every === 0);
}

// axisX draws a horizontal axis at y with its ticks and labels, and its
// name; the group says its scale (data-scale="log").
function axisX(s, y, name, count) {
  const g = svgEl("g", { class: "axis-x", "data-scale": s.kind });
  g.appendChild(svgEl("line", { class: "axis", x1: s.r0, y1: y, x2: s.r1, y2: y }));
  const ticks = s.kind === "band" ? thin(s.cats.map((c) => JSON.parse(c)), Math.floor((s.r1 - s.r0) / 50) || 1) : s.ticks(count);
  for (const v of ticks) {
    const x = s.map(v);
    g.appendChild(svgEl("line", { class: "tick", x1: x, y1: y, x2: x, y2: y + 4 }));
    g.appendChild(svgEl("text", { x, y: y + 15, class: "label tick-label", "text-anchor": "middle" }, s.kind === "band" ? short(fmt(v)) : tickLabel(v)));
  }
  if (name) g.appendChild(svgEl("text", { x: (s.r0 + s.r1) / 2, y: y + 29, class: "label axis-name", "text-anchor": "middle" }, name));
  return g;
}

// axisY draws a vertical axis at x, labels to its left.
function axisY(s, x, name, count) {
  const g = svgEl("g", { class: "axis-y", "data-scale": s.kind });
  g.appendChild(svgEl("line", { class: "axis", x1: x, y1: s.r0, x2: x, y2: s.r1 }));
  const ticks = s.kind === "band" ? thin(s.cats.map((c) => JSON.parse(c)), Math.floor(Math.abs(s.r0 - s.r1) / 14) || 1) : s.ticks(count);
  for (const v of ticks) {
    const y = s.map(v);
    g.appendChild(svgEl("line", { class: "tick", x1: x - 4, y1: y, x2: x, y2: y }));
    g.appendChild(svgEl("line", { class: "grid", x1: x, y1: y, x2: 10000, y2: y }));
    g.appendChild(svgEl("text", { x: x - 6, y: y + 4, class: "label tick-label", "text-anchor": "end" }, s.kind === "band" ? short(fmt(v)) : tickLabel(v)));
  }
  if (name) g.appendChild(svgEl("text", { x: 4, y: s.r1 - 4, class: "label axis-name" }, name));
  return g;
}

function short(s) {
  return s.length > 12 ? s.slice(0, 11) + "…" : s;
}

// dotsPath is one path of round dots, far cheaper than a circle each at
// thousands of points.
function dotsPath(pts) {
  return pts.map(([x, y]) => "M" + x.toFixed(1) + " " + y.toFixed(1) + "h0.01").join("");
}

// ---- Hover, click, zoom: each chart's svg keeps its hit targets
// (svg.hits, [x, y, trial id] in its own coordinates), its scales
// (svg.scales) and a redraw; the listeners are bound once.

function svgPoint(svg, e) {
  const m = svg.getScreenCTM();
  if (!m) return { x: 0, y: 0 };
  const p = new DOMPoint(e.clientX, e.clientY).matrixTransform(m.inverse());
  return { x: p.x, y: p.y };
}

// nearestHit is the trial of the hit target nearest p, within r pixels.
function nearestHit(svg, p, r) {
  let best = null, bd = r * r;
  for (const h of svg.hits || []) {
    const dx = h[0] - p.x, dy = h[1] - p.y, d = dx * dx + dy * dy;
    if (d <= bd) { bd = d; best = h[2]; }
  }
  return best;
}

// clientPointOf is where a trial's hit target is on screen (the browser
// tests aim the mouse with it); null when the chart has none.
function clientPointOf(svgId, id) {
  const svg = $(svgId);
  const h = (svg.hits || []).find((x) => x[2] === id);
  const m = svg.getScreenCTM();
  if (!h || !m) return null;
  const p = new DOMPoint(h[0], h[1]).matrixTransform(m);
  return { x: p.x, y: p.y };
}

function tooltipText(t) {
  const lines = [t.trial_name + " (" + t.status + ")"];
  const keys = varyingKeys();
  for (const k of keys) lines.push(k + " = " + fmt((t.config || {})[k]));
  for (const [k, v] of Object.entries(t.config || {})) if (!keys.includes(k)) lines.push(k + " = " + fmt(v));
  if (t.values) for (const [k, v] of Object.entries(t.values)) if (k !== metricName()) lines.push(k + " " + fmt(v));
  if (typeof t.last === "number") lines.push(metricName() + " " + fmt(t.last) + (typeof t.best === "number" ? " (best " + fmt(t.best) + ")" : ""));
  lines.push("iterations " + t.training_iteration);
  return lines.join("\n");
}

function showTooltip(id, e) {
  const t = exp.trials.get(id);
  const tip = $("tooltip");
  if (!t) { tip.hidden = true; return; }
  tip.textContent = tooltipText(t);
  tip.dataset.trial = id;
  tip.hidden = false;
  tip.style.left = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 4) + "px";
  tip.style.top = Math.min(e.clientY + 14, window.innerHeight - tip.offsetHeight - 4) + "px";
}

function hideTooltip() {
  $("tooltip").hidden = true;
}

// interactive binds a chart's svg: hover shows the nearest trial's
// tooltip, a click selects it, and on a zoomable chart a dragged rectangle
// zooms in, the wheel zooms about the pointer, a double click resets.
function interactive(svg) {
  if (svg.bound) return;
  svg.bound = true;
  let drag = null;
  svg.addEventListener("mousemove", (e) => {
    if (drag) return;
    const id = nearestHit(svg, svgPoint(svg, e), 10);
    if (id) showTooltip(id, e);
    else hideTooltip();
  });
  svg.addEventListener("mouseleave", hideTooltip);
  svg.addEventListener("mousedown", (e) => {
    if (e.button !== 0) return;
    const p = svgPoint(svg, e);
    if (svg.onBrushStart && svg.onBrushStart(p)) {
      e.preventDefault();
      return;
    }
    drag = { p, rect: null };
    e.preventDefault();
  });
  window.addEventListener("mousemove", (e) => {
    if (!drag || !svg.scales) return;
    const p = svgPoint(svg, e);
    const x = Math.min(p.x, drag.p.x), y = Math.min(p.y, drag.p.y);
    if (!drag.rect) {
      drag.rect = svgEl("rect", { class: "zoom-rect" });
      svg.appendChild(drag.rect);
    }
    for (const [k, v] of Object.entries({ x, y, width: Math.abs(p.x - drag.p.x), height: Math.abs(p.y - drag.p.y) })) drag.rect.setAttribute(k, v);
  });
  window.addEventListener("mouseup", (e) => {
    if (!drag) return;
    const d = drag;
    drag = null;
    if (d.rect) d.rect.remove();
    const p = svgPoint(svg, e);
    if (svg.scales && Math.abs(p.x - d.p.x) > 6 && Math.abs(p.y - d.p.y) > 6) {
      zoomTo(svg, [d.p.x, p.x], [d.p.y, p.y]);
      return;
    }
    const id = nearestHit(svg, p, 10);
    if (id) selectTrial(id, { fromChart: true });
  });
  svg.addEventListener("wheel", (e) => {
    if (!svg.scales) return;
    e.preventDefault();
    const p = svgPoint(svg, e), k = e.deltaY < 0 ? 0.8 : 1.25;
    const { x, y } = svg.scales;
    const xs = x.kind === "band" ? null : [p.x - (p.x - x.r0) * k, p.x + (x.r1 - p.x) * k];
    zoomTo(svg, xs, [p.y - (p.y - y.r0) * k, p.y + (y.r1 - p.y) * k]);
  }, { passive: false });
  svg.addEventListener("dblclick", () => resetZoom(svg));
}

// zoomTo sets the chart's domain to the pixels xs and ys span (null: that
// axis as it is) and redraws it.
function zoomTo(svg, xs, ys) {
  const { x, y } = svg.scales;
  const z = svg.zoom || {};
  if (xs && x.kind !== "band") z.x = [x.invert(Math.min(...xs)), x.invert(Math.max(...xs))];
  if (ys) z.y = [y.invert(Math.max(...ys)), y.invert(Math.min(...ys))];
  svg.zoom = z;
  svg.dataset.zoomed = "true";
  svg.redraw();
}

function resetZoom(svg) {
  if (!svg.zoom) return;
  svg.zoom = null;
  delete svg.dataset.zoomed;
  svg.redraw();
}

// domainOf is the chart's zoomed domain of an axis, or the data's.
function domainOf(svg, axis, data) {
  return (svg.zoom && svg.zoom[axis]) || data;
}

// clip gives a chart a clip path for its plot area; returns its url.
function clip(svg, x, y, w, h) {
  const id = "clip-" + svg.id;
  const defs = svgEl("defs");
  const cp = svgEl("clipPath", { id });
  cp.appendChild(svgEl("rect", { x, y, width: w, height: h }));
  defs.appendChild(cp);
  svg.appendChild(defs);
  return "url(#" + id + ")";
}

// ---- The views: two figures, each showing one view at a time; only the
// views shown are drawn, each again when what it draws changed.

const VIEWS = {
  curves: { figure: "left", draw: (dirty) => drawCurves(dirty) },
  history: { figure: "left", draw: () => drawHistory() },
  pareto: { figure: "left", draw: () => drawPareto() },
  parcoords: { figure: "right", draw: () => drawParcoords() },
  scatter: { figure: "right", draw: () => drawScatter() },
  importance: { figure: "right", draw: () => drawImportance() },
};

// drawViews draws the views shown; each but the curves (which follow
// each report) redraws when the finished trials, the filter, the
// selection or its options changed.
function drawViews(dirty) {
  for (const name of [view.left, view.right]) {
    if (name === "curves") {
      drawCurves(dirty);
      continue;
    }
    const key = [exp.finishedVersion, view.filterVersion, view.selected, view.historyByTime, view.logY, exp.configVersion].join("|");
    const v = VIEWS[name];
    if (v.drawn === key) continue;
    v.drawn = key;
    v.draw();
  }
}

// redrawViews draws the views shown again, whatever changed.
function redrawViews() {
  for (const v of Object.values(VIEWS)) v.drawn = null;
  curves.key = "";
  drawViews(new Set());
}

// openOnHistory: an experiment that ended with every trial at one
// iteration (or none) would show its curves as one column of dots; its
// left figure opens on the optimisation history instead, unless the
// reader chose a view.
function openOnHistory() {
  if (view.leftChosen || view.left !== "curves" || !exp.summary || ["RUNNING", "PENDING"].includes(exp.summary.status)) return;
  let any = false;
  for (const t of exp.trials.values()) {
    if (t.points.length > 1) return;
    if (t.points.length === 1) any = true;
  }
  if (any) showView("history");
}

function showView(name) {
  const v = VIEWS[name];
  if (!v) return;
  view[v.figure] = name;
  for (const [n, w] of Object.entries(VIEWS)) {
    if (w.figure !== v.figure) continue;
    $("view-" + n).hidden = n !== name;
    $("tab-" + n).classList.toggle("active", n === name);
    $("tab-" + n).setAttribute("aria-selected", String(n === name));
  }
  if (name === "importance") importance.fetched = false; // asked again each time it is shown
  v.drawn = null;
  if (name === "curves") curves.key = "";
  drawViews(new Set());
}

function setupViews() {
  for (const name of Object.keys(VIEWS)) {
    $("tab-" + name).onclick = () => {
      if (VIEWS[name].figure === "left") view.leftChosen = true;
      showView(name);
    };
  }
  $("history-by-time").onchange = (e) => { view.historyByTime = e.target.checked; resetZoom($("history")); redrawViews(); };
  $("log-y").onchange = (e) => {
    view.logY = e.target.checked;
    for (const id of ["curves", "history"]) $(id).zoom = null;
    redrawViews();
  };
  $("reset-zoom-left").onclick = () => { for (const id of ["curves", "history", "pareto"]) resetZoom($(id)); };
  $("reset-zoom-right").onclick = () => { for (const svg of document.querySelectorAll("#view-scatter svg")) resetZoom(svg); };
  $("clear-brushes").onclick = () => { view.brushes.clear(); filterChanged(); };
  for (const id of ["curves", "history", "pareto", "parcoords"]) {
    interactive($(id));
  }
  $("curves").redraw = () => { curves.key = ""; drawCurves(new Set()); };
  $("history").redraw = drawHistory;
  $("pareto").redraw = drawPareto;
  $("parcoords").redraw = drawParcoords;
}

// ---- Learning curves: one polyline per trial the filter keeps, redrawn
// only for the trials that changed unless the axes did.

const COLORS = ["#1f6feb", "#d1495b", "#2e8b57", "#edae49", "#6a4c93", "#00798c", "#b5651d", "#30638e"];
const CW = 800, CH = 320, CL = 64, CR = 14, CT = 12, CB = 42;
const curves = { key: "", lines: new Map(), group: null, best: null };

function bestTrial() {
  const max = isMax();
  let best = null;
  for (const t of exp.trials.values()) {
    if (typeof t.best !== "number") continue;
    if (!best || (max ? t.best > best.best : t.best < best.best)) best = t;
  }
  return best;
}

// niceCeil is the least round number >= v: 1, 1.2, 1.5, 2, 2.5, 3, 4, 5,
// 6 or 8 times a power of ten.
function niceCeil(v) {
  if (!(v > 0)) return v;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= v - 1e-9 * p) return m * p;
  return 10 * p;
}

// MAX_CURVES bounds the curves drawn: past it, the chart shows the trials
// still running, the selected one, and the best finished ones up to it.
const MAX_CURVES = 500;

// curveSet is the ids of the trials whose curves are drawn: those the
// filter keeps, bounded by MAX_CURVES.
function curveSet() {
  const kept = filtered();
  if (kept.length <= MAX_CURVES) return { ids: new Set(kept.map((t) => t.trial_id)), all: true };
  const set = new Set();
  const done = [];
  for (const t of kept) {
    if (t.points.length === 0) continue;
    if (!FINISHED.has(t.status)) set.add(t.trial_id);
    else if (typeof t.best === "number") done.push(t);
  }
  if (view.selected && exp.trials.has(view.selected)) set.add(view.selected);
  const max = isMax();
  done.sort((a, b) => (max ? b.best - a.best : a.best - b.best));
  for (const t of done) {
    if (set.size >= MAX_CURVES) break;
    set.add(t.trial_id);
  }
  return { ids: set, all: false };
}

function drawCurves(dirty) {
  const svg = $("curves");
  const { ids: only, all } = curveSet();
  const drawn = [...only].map((id) => exp.trials.get(id)).filter(Boolean);
  const xs = [], ys = [];
  let longest = 0;
  for (const t of drawn) {
    longest = Math.max(longest, t.points.length);
    for (const [x, y] of t.points) { xs.push(x); ys.push(y); }
  }
  const kept = filtered().length;
  $("curves-shown").textContent = !all ? "; " + only.size + " of " + kept + " trials drawn: the running ones, the selected one and the best" :
    kept < exp.order.length ? "; the " + kept + " of " + exp.order.length + " trials the filter keeps" : "";
  const yKind = view.logY ? "log" : "linear";
  const xe = extent(xs, "linear", 0), ye = extent(ys, yKind, 0.04);
  if (!xe || !ye) {
    curves.key = "";
    svg.hits = [];
    svg.scales = null;
    svg.replaceChildren(svgEl("text", { x: CL, y: CH / 2, class: "label" }, drawn.length || !kept ? "No results yet." : "No trial the filter keeps."));
    return;
  }
  // The x axis ends at a round number, so that a trial's next iteration
  // rarely moves it (which redraws every line). When every trial has one
  // iteration, the points sit in the middle, drawn as dots.
  let [x0, x1] = xe;
  if (x1 > x0) x1 = niceCeil(x1);
  else { x0 -= 1; x1 += 1; }
  const dots = longest <= 1;
  const xd = domainOf(svg, "x", [x0, x1]), yd = domainOf(svg, "y", ye);
  const sx = scale("linear", xd[0], xd[1], CL, CW - CR), sy = scale(yKind, yd[0], yd[1], CH - CB, CT);
  const key = [xd, yd, yKind, view.filterVersion, all].join(",");
  let ids = [...dirty];
  if (key !== curves.key) {
    // New axes: every line again.
    curves.key = key;
    curves.lines = new Map();
    curves.hits = new Map();
    svg.replaceChildren();
    const url = clip(svg, CL, CT, CW - CR - CL, CH - CB - CT);
    curves.group = svgEl("g", { class: "lines", "clip-path": url });
    svg.append(axisX(sx, CH - CB, $("curve-x").value || "training_iteration", 8), axisY(sy, CL, $("curve-metric").value || metricName(), 6), curves.group);
    svg.scales = { x: sx, y: sy };
    ids = drawn.map((t) => t.trial_id);
  } else {
    // Lines that left the set go; those that joined it come.
    for (const [id, line] of curves.lines) {
      if (!only.has(id)) {
        line.remove();
        curves.lines.delete(id);
        curves.hits.delete(id);
      }
    }
    for (const id of only) if (!curves.lines.has(id)) ids.push(id);
  }
  const { x: cx, y: cy } = svg.scales;
  for (const id of ids) {
    const t = exp.trials.get(id);
    if (!t || t.points.length === 0 || !only.has(id)) continue;
    const color = COLORS[t.index % COLORS.length];
    const px = t.points.filter(([, y]) => yKind !== "log" || y > 0).map(([x, y]) => [cx.map(x), cy.map(y)]);
    const pts = px.map(([x, y]) => x.toFixed(1) + "," + y.toFixed(1)).join(" ");
    let line = curves.lines.get(id);
    if (!line) {
      line = svgEl("polyline", { stroke: color, "data-trial": id });
      curves.group.appendChild(line);
      curves.lines.set(id, line);
    }
    // A single point is drawn as a dot, to be seen.
    line.setAttribute("points", px.length === 1 ? pts + " " + (px[0][0] + 0.01).toFixed(2) + "," + px[0][1].toFixed(1) : pts);
    line.classList.toggle("dot", dots || px.length === 1);
    line.dataset.n = t.points.length;
    curves.hits.set(id, px);
  }
  svg.hits = [];
  for (const [id, px] of curves.hits) for (const [x, y] of px) svg.hits.push([x, y, id]);
  svg.dataset.drawn = curves.lines.size;
  svg.dataset.metric = (exp.summary && exp.summary.curve_metric) || "";
  svg.dataset.x = (exp.summary && exp.summary.curve_x) || "";
  $("curves-note").textContent = dots ? "Every trial has one iteration so far: the optimisation history shows them by trial number." : "";
  const best = bestTrial();
  const bestLine = best && curves.lines.get(best.trial_id);
  for (const line of curves.group.querySelectorAll("polyline.best, polyline.selected")) line.classList.remove("best", "selected");
  if (bestLine) {
    bestLine.classList.add("best");
    curves.group.appendChild(bestLine); // drawn on top
  }
  const sel = view.selected && curves.lines.get(view.selected);
  if (sel) {
    sel.classList.add("selected");
    curves.group.appendChild(sel);
  }
}

// ---- Point charts: the optimisation history, the parameters against
// the metric, the Pareto front. Each point is a trial; hover, click and
// zoom as every chart.

// pointChart draws points {x, y, id, cls} on svg with the axes given
// ({kind, name, cats for a band}); opts.overlay(svg, sx, sy) adds lines
// and marks. The selected trial is ringed.
function pointChart(svg, pts, xa, ya, opts) {
  const W = opts.W, H = opts.H, L = opts.L || 64, R = 14, T = 12, B = opts.B || 42;
  svg.replaceChildren();
  svg.hits = [];
  if (pts.length === 0) {
    svg.scales = null;
    svg.appendChild(svgEl("text", { x: L, y: H / 2, class: "label" }, opts.empty));
    return;
  }
  const sx = xa.kind === "band" ? bandScale(xa.cats, L, W - R) : (() => {
    const d = domainOf(svg, "x", extent(pts.map((p) => p.x), xa.kind, 0.04));
    return scale(xa.kind, d[0], d[1], L, W - R);
  })();
  const yd = domainOf(svg, "y", extent(pts.map((p) => p.y), ya.kind, 0.06));
  const sy = scale(ya.kind, yd[0], yd[1], H - B, T);
  svg.scales = { x: sx, y: sy };
  const url = clip(svg, L, T, W - R - L, H - B - T);
  svg.append(axisX(sx, H - B, xa.name, Math.max(4, Math.floor((W - L) / 90))), axisY(sy, L, ya.name, Math.max(3, Math.floor(H / 60))));
  const g = svgEl("g", { "clip-path": url });
  const byClass = new Map();
  for (const p of pts) {
    let x = sx.map(p.x);
    // Categories spread across their band, the same way on each draw.
    if (xa.kind === "band") x += (((p.index * 2654435761) % 1000) / 1000 - 0.5) * sx.step * 0.6;
    const y = sy.map(p.y);
    if (!isFinite(x) || !isFinite(y)) continue;
    svg.hits.push([x, y, p.id]);
    const cls = p.cls || "pts";
    if (!byClass.has(cls)) byClass.set(cls, []);
    byClass.get(cls).push([x, y]);
  }
  for (const [cls, list] of byClass) g.appendChild(svgEl("path", { class: "dots " + cls, d: dotsPath(list) }));
  if (opts.overlay) opts.overlay(g, sx, sy);
  const sel = view.selected && svg.hits.find((h) => h[2] === view.selected);
  if (sel) g.appendChild(svgEl("circle", { class: "selected-ring", cx: sel[0], cy: sel[1], r: 6, "data-trial": view.selected }));
  svg.appendChild(g);
}

// finishedWithMetric are the finished trials the filter keeps that
// reported the metric.
function finishedWithMetric() {
  return filtered().filter((t) => FINISHED.has(t.status) && typeof t.last === "number");
}

// drawHistory: every finished trial's value by trial number (or by the
// time of its last report), and the best so far as a step line.
function drawHistory() {
  const svg = $("history");
  const start = exp.summary && exp.summary.start_time ? Date.parse(exp.summary.start_time) : 0;
  const xOf = view.historyByTime ? (t) => (t.last_result_time ? (Date.parse(t.last_result_time) - start) / 1000 : undefined) : (t) => t.index;
  const yKind = view.logY ? "log" : "linear";
  const pts = finishedWithMetric().map((t) => ({ x: xOf(t), y: t.last, id: t.trial_id, index: t.index, cls: t.status === "ERROR" ? "pts err" : "pts" }))
    .filter((p) => typeof p.x === "number" && (yKind !== "log" || p.y > 0));
  pts.sort((a, b) => a.x - b.x);
  const max = isMax();
  pointChart(svg, pts, { kind: "linear", name: view.historyByTime ? "seconds since the start" : "trial number" }, { kind: yKind, name: metricName() }, {
    W: 800, H: 320, empty: "No finished trial yet.",
    overlay: (g, sx, sy) => {
      // The best so far: a step line from each new best to the next.
      let best = null, d = "";
      for (const p of pts) {
        if (best === null || (max ? p.y > best : p.y < best)) {
          d += (d ? "H" + sx.map(p.x).toFixed(1) + "V" : "M" + sx.map(p.x).toFixed(1) + " ") + sy.map(p.y).toFixed(1);
          best = p.y;
        }
      }
      if (pts.length) d += "H" + sx.map(pts[pts.length - 1].x).toFixed(1);
      g.appendChild(svgEl("path", { class: "best-so-far", d }));
    },
  });
  svg.dataset.points = pts.length;
}

// drawScatter: a small chart per varying config key, the key's value
// against the metric (log x for a log domain, a band per category).
function drawScatter() {
  const box = $("scatter");
  const trials = finishedWithMetric();
  const keys = varyingKeys();
  const have = new Map([...box.querySelectorAll("svg")].map((s) => [s.dataset.param, s]));
  const svgs = keys.map((k) => {
    let svg = have.get(k);
    if (!svg) {
      svg = svgEl("svg", { id: "scatter-" + k.replace(/[^\w-]/g, "_"), class: "scatter", viewBox: "0 0 390 230", width: 390, height: 230, role: "img", "aria-label": k + " against the metric", "data-param": k });
      svg.redraw = () => drawScatterOf(svg, k, finishedWithMetric());
      interactive(svg);
    }
    drawScatterOf(svg, k, trials);
    return svg;
  });
  box.replaceChildren(...svgs);
  if (svgs.length === 0) box.textContent = "No config key varies.";
}

function drawScatterOf(svg, key, trials) {
  const vals = trials.map((t) => (t.config || {})[key]);
  const numeric = paramScale(key) !== "category" && vals.every((v) => typeof v === "number");
  const kind = !numeric ? "band" : paramScale(key) === "log" && vals.every((v) => v > 0) ? "log" : "linear";
  const xa = { kind, name: key, cats: kind === "band" ? orderCats(vals) : null };
  const pts = trials.map((t) => ({ x: (t.config || {})[key], y: t.last, id: t.trial_id, index: t.index, cls: t.status === "ERROR" ? "pts err" : "pts" }));
  pointChart(svg, pts, xa, { kind: view.logY && pts.every((p) => p.y > 0) ? "log" : "linear", name: metricName() }, { W: 390, H: 230, L: 60, empty: "No finished trial yet." });
}

// paretoFront are the ids of the points no other point dominates: sorted
// by the first objective (better first), a point is on the front when its
// second beats every point before it. Both are made "lower is better" by
// the modes.
function paretoFront(pts) {
  const sorted = [...pts].sort((a, b) => a.a - b.a || a.b - b.b);
  const front = new Set();
  let bestB = Infinity, frontA = NaN;
  for (const p of sorted) {
    // Equal points are all on the front, or none of them.
    if (p.b < bestB || (p.b === bestB && p.a === frontA)) {
      front.add(p.id);
      bestB = p.b;
      frontA = p.a;
    }
  }
  return front;
}

// drawPareto: the first two of the experiment's metrics, one point per
// finished trial, the non-dominated ones marked and joined.
function drawPareto() {
  const svg = $("pareto");
  const objs = (exp.summary && exp.summary.objectives) || [];
  if (objs.length < 2) {
    svg.replaceChildren(svgEl("text", { x: 64, y: 160, class: "label" }, "The experiment optimizes one metric: no Pareto front."));
    return;
  }
  const [A, B] = objs;
  const sign = (o) => (o.mode === "max" ? -1 : 1);
  const trials = filtered().filter((t) => FINISHED.has(t.status) && t.values && typeof t.values[A.metric] === "number" && typeof t.values[B.metric] === "number");
  const front = paretoFront(trials.map((t) => ({ id: t.trial_id, a: sign(A) * t.values[A.metric], b: sign(B) * t.values[B.metric] })));
  const pts = trials.map((t) => ({ x: t.values[A.metric], y: t.values[B.metric], id: t.trial_id, index: t.index, cls: front.has(t.trial_id) ? "pts on-front" : "pts" }));
  pointChart(svg, pts, { kind: "linear", name: A.metric + " (" + A.mode + ")" }, { kind: "linear", name: B.metric + " (" + B.mode + ")" }, {
    W: 800, H: 320, empty: "No finished trial with both metrics yet.",
    overlay: (g, sx, sy) => {
      const on = pts.filter((p) => front.has(p.id)).sort((p, q) => p.x - q.x);
      g.appendChild(svgEl("polyline", { class: "front-line", points: on.map((p) => sx.map(p.x).toFixed(1) + "," + sy.map(p.y).toFixed(1)).join(" ") }));
      for (const p of on) g.appendChild(svgEl("circle", { class: "front", cx: sx.map(p.x), cy: sy.map(p.y), r: 4.5, "data-trial": p.id }));
    },
  });
  $("pareto-note").textContent = "; " + front.size + " of " + trials.length + " trials on the front (" + A.metric + " " + A.mode + ", " + B.metric + " " + B.mode + ")";
}

// ---- Hyperparameter importance, from the server's
// /api/experiments/NAME/importance?metric=M, asked when the view is shown.

const importance = { fetched: false, pending: false, data: null, error: "" };

async function drawImportance() {
  const box = $("importance");
  if (importance.pending) return; // the answer draws it
  if (!importance.fetched) {
    importance.fetched = true;
    importance.pending = true;
    box.replaceChildren(el("p", { class: "note" }, "importance: computing…"));
    try {
      const r = await fetch("/api/experiments/" + encodeURIComponent(exp.name) + "/importance?metric=" + encodeURIComponent(metricName()), { credentials: "same-origin" });
      // 404 (or 405: no GET route there) when this server has no such
      // endpoint.
      if (r.status === 404 || r.status === 405) throw new Error("not available");
      const body = await r.json().catch(() => ({}));
      if (!r.ok) throw new Error(body.error || r.status + " " + r.statusText);
      importance.data = body;
      importance.error = "";
    } catch (e) {
      importance.data = null;
      importance.error = e.message;
    } finally {
      importance.pending = false;
    }
  }
  if (!importance.data) {
    box.replaceChildren(el("p", { class: "note", id: "importance-missing" }, "importance: " + importance.error));
    return;
  }
  const d = importance.data;
  const items = d.importances || [];
  const W = 800, rowH = 24, L = 160, R = 70, T = 8;
  const H = T * 2 + rowH * Math.max(1, items.length);
  const svg = svgEl("svg", { id: "importance-chart", width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "hyperparameter importance" });
  const top = Math.max(...items.map((i) => i.importance), 1e-12);
  items.forEach((it, i) => {
    const y = T + i * rowH;
    const w = ((W - L - R) * it.importance) / top;
    const g = svgEl("g", { class: "bar", "data-param": it.param });
    g.appendChild(svgEl("text", { x: L - 8, y: y + rowH / 2 + 4, class: "label", "text-anchor": "end" }, short(it.param)));
    g.appendChild(svgEl("rect", { x: L, y: y + 3, width: Math.max(1, w), height: rowH - 6 }));
    g.appendChild(svgEl("text", { x: L + w + 6, y: y + rowH / 2 + 4, class: "label" }, it.importance.toFixed(3)));
    g.appendChild(svgEl("title", {}, it.param + ": " + it.importance));
    svg.appendChild(g);
  });
  const note = el("p", { class: "note" }, "Importance of each parameter for " + d.metric + " (" + d.mode + ") by " + d.method + ", over " + d.trials + " trials.");
  box.replaceChildren(note, svg);
}

// ---- Parallel coordinates: an axis per varying config key and one for
// the metric; a line per finished trial that reported the metric. A drag
// along an axis brushes a range of it; the brushes AND together and join
// the filter, driving the table and every chart.

const PC = { W: 800, H: 300, L: 50, R: 70, T: 24, B: 34 };
const PC_METRIC = "\u0000metric"; // the metric's axis, named apart from any config key
// LINE_CAP bounds the lines drawn: past it, the best PC_TOP trials and an
// even sample of the others.
const LINE_CAP = 1000, PC_TOP = 200;
const parcoords = { axes: [] };

// pcAxes builds the axes from every finished trial (not only those the
// filter keeps: a brush must not move the axes it is drawn on).
function pcAxes(trials) {
  const axes = varyingKeys().map((k) => ({ name: k, label: k, get: (t) => (t.config || {})[k], space: paramScale(k) }));
  axes.push({ name: PC_METRIC, label: metricName(), get: (t) => t.last, space: "" });
  const r0 = PC.H - PC.B, r1 = PC.T;
  for (const a of axes) {
    const vals = trials.map(a.get);
    const numeric = a.space !== "category" && vals.every((v) => typeof v === "number");
    if (numeric) {
      const kind = a.space === "log" && vals.every((v) => v > 0) ? "log" : "linear";
      const e = extent(vals, kind, 0);
      a.scale = scale(kind, e[0], e[1], r0, r1);
    } else {
      a.scale = bandScale(orderCats(vals), r0, r1);
    }
  }
  const step = axes.length > 1 ? (PC.W - PC.L - PC.R) / (axes.length - 1) : 0;
  axes.forEach((a, i) => { a.x = axes.length > 1 ? PC.L + i * step : PC.W / 2; });
  return axes;
}

// pcSample bounds the lines: all up to LINE_CAP, else the best PC_TOP by
// the metric and an even sample of the rest.
function pcSample(trials) {
  if (trials.length <= LINE_CAP) return { lines: trials, note: "" };
  const max = isMax();
  const ranked = [...trials].sort((a, b) => (max ? b.last - a.last : a.last - b.last));
  const rest = ranked.slice(PC_TOP);
  const every = rest.length / (LINE_CAP - PC_TOP);
  const sample = [];
  for (let i = 0; i < LINE_CAP - PC_TOP; i++) sample.push(rest[Math.floor(i * every)]);
  return { lines: ranked.slice(0, PC_TOP).concat(sample), note: "; " + LINE_CAP + " of " + trials.length + " lines drawn: the best " + PC_TOP + " and an even sample of the others" };
}

function drawParcoords() {
  const svg = $("parcoords");
  const all = exp.order.map((id) => exp.trials.get(id)).filter((t) => FINISHED.has(t.status) && typeof t.last === "number");
  svg.hits = [];
  if (all.length === 0) {
    parcoords.axes = [];
    svg.replaceChildren(svgEl("text", { x: PC.L, y: PC.H / 2, class: "label" }, "No finished trial yet."));
    return;
  }
  const axes = pcAxes(all);
  parcoords.axes = axes;
  const kept = all.filter(matches);
  const { lines: drawn, note } = pcSample(kept);
  $("parcoords-note").textContent = note || (kept.length < all.length ? "; " + kept.length + " of " + all.length + " kept by the filter" : "");
  const m = axes[axes.length - 1];
  const max = isMax();
  let best = null;
  for (const t of kept) if (!best || (max ? t.last > best.last : t.last < best.last)) best = t;
  // Many lines are drawn thin and faint, so that where they gather reads
  // as density rather than a solid block.
  const group = svgEl("g", { class: drawn.length > 300 ? "lines many" : "lines" });
  // The trials the filter leaves out, in grey behind, while few.
  if (all.length <= LINE_CAP) {
    for (const t of all) {
      if (!matches(t)) group.appendChild(svgEl("polyline", { class: "dim", points: axes.map((a) => a.x.toFixed(1) + "," + a.scale.map(a.get(t)).toFixed(1)).join(" ") }));
    }
  }
  let bestLine = null, selLine = null;
  for (const t of drawn) {
    const px = axes.map((a) => [a.x, a.scale.map(a.get(t))]);
    // Hit targets where the line crosses each axis and halfway between.
    px.forEach(([x, y], i) => {
      svg.hits.push([x, y, t.trial_id]);
      if (i > 0) svg.hits.push([(x + px[i - 1][0]) / 2, (y + px[i - 1][1]) / 2, t.trial_id]);
    });
    // Colour by the metric: blue for the better end, red for the worse.
    let q = (m.scale.map(t.last) - m.scale.r0) / (m.scale.r1 - m.scale.r0);
    if (!max) q = 1 - q;
    const line = svgEl("polyline", { points: px.map(([x, y]) => x.toFixed(1) + "," + y.toFixed(1)).join(" "), stroke: "hsl(" + Math.round(q * 220) + ",70%,45%)", "data-trial": t.trial_id });
    if (t === best) { line.classList.add("best"); bestLine = line; }
    if (t.trial_id === view.selected) { line.classList.add("selected"); selLine = line; }
    group.appendChild(line);
  }
  if (bestLine) group.appendChild(bestLine);
  if (selLine) group.appendChild(selLine);
  const children = [group];
  for (const a of axes) children.push(pcAxis(a));
  svg.replaceChildren(...children);
  svg.dataset.lines = drawn.length;
}

// pcAxis draws an axis with its ticks (categories thinned so that their
// labels do not overlap), its name and its brush.
function pcAxis(a) {
  const g = svgEl("g", { class: "pc-axis", "data-axis": a.label, "data-scale": a.scale.kind });
  const s = a.scale;
  g.appendChild(svgEl("line", { class: "axis", x1: a.x, y1: PC.T, x2: a.x, y2: PC.H - PC.B }));
  const ticks = s.kind === "band" ? thin(s.cats.map((c) => JSON.parse(c)), Math.floor((PC.H - PC.T - PC.B) / 14)) : s.ticks(5);
  for (const v of ticks) {
    const y = s.map(v);
    g.appendChild(svgEl("line", { class: "tick", x1: a.x - 3, y1: y, x2: a.x + 3, y2: y }));
    g.appendChild(svgEl("text", { x: a.x + 5, y: y + 4, class: "label tick-label halo" }, s.kind === "band" ? short(fmt(v)) : tickLabel(v)));
  }
  g.appendChild(svgEl("text", { x: a.x, y: PC.H - 12, class: "label axis-name", "text-anchor": "middle" }, short(a.label)));
  const b = view.brushes.get(a.name);
  if (b) {
    let y0, y1;
    if (b.cats) {
      const ys = [...b.cats].map((c) => s.map(JSON.parse(c)));
      y0 = Math.max(...ys) + (s.step || 0) / 2;
      y1 = Math.min(...ys) - (s.step || 0) / 2;
    } else {
      y0 = s.map(b.lo);
      y1 = s.map(b.hi);
    }
    g.appendChild(svgEl("rect", { class: "brush", x: a.x - 7, y: Math.min(y0, y1), width: 14, height: Math.max(2, Math.abs(y1 - y0)) }));
  }
  return g;
}

// pcBrush turns a drag from y0 to y1 on an axis into a brush of its values.
function pcBrush(a, y0, y1) {
  const top = Math.min(y0, y1), bottom = Math.max(y0, y1);
  const s = a.scale;
  if (s.kind === "band") {
    const cats = new Set(s.cats.filter((c) => { const y = s.map(JSON.parse(c)); return y >= top && y <= bottom; }));
    view.brushes.set(a.name, { cats });
  } else {
    view.brushes.set(a.name, { lo: s.invert(bottom), hi: s.invert(top) });
  }
}

// pcClientPoint is where an axis's value is on screen (the browser tests
// drag brushes with it).
function pcClientPoint(label, value) {
  const a = parcoords.axes.find((x) => x.label === label);
  const m = $("parcoords").getScreenCTM();
  if (!a || !m) return null;
  const p = new DOMPoint(a.x, a.scale.map(value)).matrixTransform(m);
  return { x: p.x, y: p.y };
}

function setupBrushes() {
  const svg = $("parcoords");
  let drag = null;
  svg.onBrushStart = (p) => {
    const a = parcoords.axes.find((x) => Math.abs(x.x - p.x) <= 12);
    if (!a) return false;
    drag = { a, y0: p.y, rect: svgEl("rect", { class: "brush", x: a.x - 7, y: p.y, width: 14, height: 0 }) };
    svg.appendChild(drag.rect);
    return true;
  };
  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    const y = svgPoint(svg, e).y;
    drag.rect.setAttribute("y", Math.min(y, drag.y0));
    drag.rect.setAttribute("height", Math.abs(y - drag.y0));
  });
  window.addEventListener("mouseup", (e) => {
    if (!drag) return;
    const d = drag;
    drag = null;
    const p = svgPoint(svg, e);
    if (Math.abs(p.y - d.y0) >= 3) pcBrush(d.a, d.y0, p.y);
    else if (view.brushes.has(d.a.name)) view.brushes.delete(d.a.name); // a click clears the axis's brush
    else {
      // A click on an axis without a brush selects the line there.
      d.rect.remove();
      const id = nearestHit(svg, p, 10);
      if (id) selectTrial(id, { fromChart: true });
      return;
    }
    filterChanged();
  });
}

// ---- One trial: its timeline, error.txt and checkpoints.

// selectTrial selects a trial in every view; from a chart, the table
// shows the page of its row; from a row, the trial's panel scrolls into
// view.
function selectTrial(id, opts) {
  opts = opts || {};
  view.selected = id;
  history.replaceState(null, "", "#trial=" + encodeURIComponent(id));
  if (opts.fromChart) showRowOf(id);
  drawTable();
  curves.key = "";
  drawViews(new Set());
  trialScroll = opts.scroll ? id : null;
  loadTrial(id);
}

let trialLoading = null;
let trialScroll = null;

async function loadTrial(id) {
  if (trialLoading === id) return;
  trialLoading = id;
  let d;
  try {
    d = await getJSON("/api/experiments/" + encodeURIComponent(exp.name) + "/trials/" + encodeURIComponent(id));
  } catch (e) {
    message(e.message);
    return;
  } finally {
    trialLoading = null;
  }
  if (view.selected !== id) return;
  show("trial");
  $("trial").dataset.trial = id;
  if (trialScroll === id) {
    trialScroll = null;
    $("trial").scrollIntoView({ block: "start" });
  }
  $("trial-name").textContent = d.trial.trial_name;
  const st = $("trial-status");
  st.textContent = d.trial.status + (d.trial.end_reason ? " (" + d.trial.end_reason + ")" : "");
  st.className = "status-" + d.trial.status;
  $("trial-path").textContent = d.path || "";
  const stop = $("stop-trial");
  if (stop) {
    // Only with --allow-actions, and only while the trial can still stop.
    stop.hidden = !(exp.info.allow_actions && ["PENDING", "RUNNING", "PAUSED"].includes(d.trial.status));
    stop.onclick = async () => {
      const r = await fetch("/api/experiments/" + encodeURIComponent(exp.name) + "/trials/" + encodeURIComponent(id) + "/stop",
        { method: "POST", credentials: "same-origin" });
      const body = await r.json().catch(() => ({}));
      $("trial-action-result").textContent = r.ok ? "Stop requested." : "Refused: " + (body.error || r.status);
    };
  }
  $("timeline-source").textContent = "from the " + d.timeline_source;
  $("timeline").replaceChildren(...d.timeline.map((e) => {
    const li = el("li", { "data-kind": e.kind, class: "kind-" + e.kind.replace(/\./g, "-") });
    li.appendChild(el("span", { class: "when" }, e.time ? new Date(e.time).toLocaleTimeString() : ""));
    li.appendChild(el("span", { class: "kind" }, e.kind));
    li.appendChild(el("span", { class: "text" }, e.text));
    if (e.detail) {
      const det = el("details", { class: "detail" });
      det.appendChild(el("summary", {}, "inputs"));
      det.appendChild(el("code", {}, JSON.stringify(e.detail, null, 1)));
      li.appendChild(det);
    }
    return li;
  }));
  const failed = d.error_text || d.error_note;
  $("errors").hidden = !failed;
  $("error-text").textContent = d.error_text || "";
  $("error-note").hidden = !d.error_note;
  $("error-note").textContent = d.error_note || "";
  const rows = d.checkpoints.map((c) => {
    const tr = el("tr", { "data-checkpoint": c.name });
    tr.appendChild(el("td", {}, c.name));
    tr.appendChild(el("td", { class: "num" }, String(c.iteration)));
    tr.appendChild(el("td", { class: "num" }, c.size + " B"));
    tr.appendChild(el("td", {}, [c.persisted ? "storage" : "", c.staged ? "Object Store" : ""].filter(Boolean).join(", ") || "not stored yet"));
    const td = el("td");
    td.appendChild(el("a", { href: c.download, download: "" }, "download .tar"));
    tr.appendChild(td);
    return tr;
  });
  document.querySelector("#checkpoints tbody").replaceChildren(...(d.checkpoints.length ? rows : [emptyRow(5, "No checkpoint kept.")]));
}

function emptyRow(n, text) {
  const tr = el("tr");
  tr.appendChild(el("td", { colspan: n, class: "note" }, text));
  return tr;
}

// ---- What the curves draw: any reported metric against the iteration or
// a time. A change asks the server for the curves again (a new stream).

const X_AXES = ["training_iteration", "time_total_s", "time_since_restore"];
const NOT_METRICS = new Set([...X_AXES, "timestamp", "pid", "done", "iterations_since_restore"]);

function drawCurveChoices(s) {
  const fill = (sel, names, current) => {
    if (sel.dataset.names === names.join(",") && sel.value === current) return;
    sel.dataset.names = names.join(",");
    sel.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
    sel.value = current;
  };
  const metrics = (s.metrics || []).filter((m) => !NOT_METRICS.has(m) || m === s.curve_metric);
  if (s.curve_metric && !metrics.includes(s.curve_metric)) metrics.unshift(s.curve_metric);
  fill($("curve-metric"), metrics, s.curve_metric || "");
  fill($("curve-x"), X_AXES.filter((x) => x === "training_iteration" || (s.metrics || []).includes(x)), s.curve_x || "training_iteration");
}

function curveParams() {
  const p = new URLSearchParams();
  const m = $("curve-metric").value, x = $("curve-x").value;
  if (m && exp.summary && m !== exp.summary.metric) p.set("metric", m);
  if (x && x !== "training_iteration") p.set("x", x);
  const q = p.toString();
  return q ? "?" + q : "";
}

// ---- Actions.

function setupActions(base) {
  if (!$("stop-experiment")) return;
  $("stop-experiment").onclick = () => { $("stop-confirm").hidden = false; };
  $("stop-confirm").onclick = async () => {
    $("stop-confirm").hidden = true;
    const r = await fetch(base + "/stop", { method: "POST", credentials: "same-origin" });
    const body = await r.json().catch(() => ({}));
    $("action-result").textContent = r.ok ? "Stop requested." : "Refused: " + (body.error || r.status);
  };
}

async function experimentPage(name) {
  exp.name = name;
  $("title").textContent = name;
  document.title = name + " · tunejet";
  const base = "/api/experiments/" + encodeURIComponent(name);
  try {
    exp.info = await getJSON("/api/info");
  } catch (e) {
    message(e.message);
    return;
  }
  let shown = false;
  const start = () => {
    shown = true;
    show("experiment");
    setupActions(base);
    $("status-filter").onchange = (e) => { view.status = e.target.value; filterChanged(); };
    setupViews();
    setupBrushes();
    $("filter").oninput = (e) => setFilter(e.target.value);
    $("prev").onclick = () => { view.page--; drawTable(); };
    $("next").onclick = () => { view.page++; drawTable(); };
    const m = location.hash.match(/^#trial=(.+)$/);
    if (m) selectTrial(decodeURIComponent(m[1]));
  };
  if (exp.info.source === "files") {
    // Nothing to follow: the experiment as its files had it.
    const load = async () => {
      try {
        applyUpdate(await getJSON(base + curveParams()));
      } catch (e) {
        message(e.message);
        return false;
      }
      return true;
    };
    $("curve-metric").onchange = () => { curves.key = ""; load(); };
    $("curve-x").onchange = () => { curves.key = ""; load(); };
    if (await load()) start();
    return;
  }
  // The stream's first update is the whole experiment; each next one, what
  // changed. Choosing another metric or x axis opens a new stream, whose
  // first update replaces every curve.
  const live = $("live");
  let es = null;
  const open = () => {
    if (es) es.close();
    const stream = new EventSource(base + "/events" + curveParams());
    es = stream;
    stream.addEventListener("update", (e) => {
      live.hidden = false;
      live.classList.remove("lost");
      live.textContent = "live";
      applyUpdate(JSON.parse(e.data));
      if (!shown) start();
    });
    stream.onerror = async () => {
      live.classList.add("lost");
      live.textContent = "reconnecting";
      if (!shown && stream.readyState === EventSource.CLOSED) {
        // Refused (no such experiment): say why.
        try {
          await getJSON(base);
        } catch (e) {
          message(e.message);
        }
      }
    };
  };
  $("curve-metric").onchange = () => { curves.key = ""; open(); };
  $("curve-x").onchange = () => { curves.key = ""; open(); };
  open();
}

function main() {
  const m = location.pathname.match(/^\/experiments\/([^/]+)$/);
  if (m) experimentPage(decodeURIComponent(m[1]));
  else if (location.pathname === "/runners") runnersPage();
  else experimentsPage();
}

main();
