// The tunejet dashboard: the experiments page, the runners page, and one
// experiment's trials, curves, parallel coordinates and trial details,
// kept live by the server's event stream. Plain JavaScript, no build step.
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
  dirty: new Set(), parcoordsDirty: true, drawPending: false, configVersion: 0, keys: null,
};
const view = {
  sortKey: "index", sortDir: 1, status: "", filterText: "", filter: () => true, page: 0, selected: null,
  shownIds: new Set(), drawnTrials: -1,
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
    if (FINISHED.has(row.status) || (had && FINISHED.has(had.status))) exp.parcoordsDirty = true;
    exp.trials.set(row.trial_id, Object.assign({}, row, { points }));
    exp.dirty.add(row.trial_id);
  }
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
    drawCurves(dirty);
    if (exp.parcoordsDirty) {
      exp.parcoordsDirty = false;
      drawParcoords();
    }
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

function compareValues(a, b) {
  const ua = a === undefined || a === null, ub = b === undefined || b === null;
  if (ua || ub) return ua && ub ? 0 : ua ? 1 : -1; // missing values last
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b), undefined, { numeric: true });
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

function parseFilter(text) {
  const preds = text.trim().split(/\s+/).filter(Boolean).map((term) => {
    const m = term.match(/^([^<>=!~]+)(<=|>=|!=|==|=|<|>|~)(.*)$/);
    if (!m) {
      const word = term.toLowerCase();
      return (t) => [t.trial_name, t.trial_id, t.status, t.runner || "", JSON.stringify(t.config || {})].join(" ").toLowerCase().includes(word);
    }
    const [, name, op, raw] = m;
    const get = fieldGetter(name);
    const num = raw.trim() !== "" && !isNaN(Number(raw)) ? Number(raw) : null;
    return (t) => {
      const v = get(t);
      if (v === undefined || v === null) return op === "!=";
      if (op === "~") return String(typeof v === "object" ? JSON.stringify(v) : v).toLowerCase().includes(raw.toLowerCase());
      let c;
      if (typeof v === "number" && num !== null) c = v - num;
      else if (typeof v === "boolean" && (raw === "true" || raw === "false")) c = String(v) === raw ? 0 : 1;
      else c = String(v).toLowerCase() === raw.toLowerCase() ? 0 : String(v).localeCompare(raw);
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
  view.page = 0;
  drawTable();
}

// tableChanged reports whether the trials that changed can change the
// table: in creation order, unfiltered, with no new trial, only when one of
// them is on the page shown (at 10,000 trials, a redraw is some 50 ms).
function tableChanged(dirty) {
  if (view.sortKey !== "index" || view.sortDir < 0 || view.filterText.trim() || view.status || exp.order.length !== view.drawnTrials) return true;
  for (const id of dirty) if (view.shownIds.has(id)) return true;
  return false;
}

// drawTable draws the page of rows the sort, the filter and the pager
// select: at most PAGE_SIZE rows are in the document, however many trials.
function drawTable() {
  view.drawnTrials = exp.order.length;
  const keys = varyingKeys();
  const cols = columns(keys);
  const head = document.querySelector("#trials-table thead tr");
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
  let rows = [];
  for (const id of exp.order) {
    const t = exp.trials.get(id);
    if ((!view.status || t.status === view.status) && view.filter(t)) rows.push(t);
  }
  const col = cols.find((c) => c.id === view.sortKey);
  if (col && !(view.sortKey === "index" && view.sortDir > 0)) rows.sort((a, b) => compareValues(col.get(a), col.get(b)) * view.sortDir || a.index - b.index);
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
    r.onclick = () => selectTrial(t.trial_id);
    return r;
  });
  document.querySelector("#trials-table tbody").replaceChildren(...trs);
}

// ---- Learning curves: one polyline per trial, redrawn only for the trials
// that changed unless the axes did.

const COLORS = ["#1f6feb", "#d1495b", "#2e8b57", "#edae49", "#6a4c93", "#00798c", "#b5651d", "#30638e"];
const CW = 800, CH = 320, CL = 56, CR = 12, CT = 12, CB = 28;
const curves = { key: "", lines: new Map(), group: null, best: null };

function bestTrial() {
  const max = exp.summary && exp.summary.mode === "max";
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

// curveSet is the ids of the trials whose curves are drawn; null for all.
function curveSet() {
  if (exp.order.length <= MAX_CURVES) return null;
  const set = new Set();
  const done = [];
  for (const t of exp.trials.values()) {
    if (t.points.length === 0) continue;
    if (!FINISHED.has(t.status)) set.add(t.trial_id);
    else if (typeof t.best === "number") done.push(t);
  }
  if (view.selected) set.add(view.selected);
  const max = exp.summary && exp.summary.mode === "max";
  done.sort((a, b) => (max ? b.best - a.best : a.best - b.best));
  for (const t of done) {
    if (set.size >= MAX_CURVES) break;
    set.add(t.trial_id);
  }
  return set;
}

function drawCurves(dirty) {
  const svg = $("curves");
  const only = curveSet();
  const drawn = only ? [...only].map((id) => exp.trials.get(id)).filter(Boolean) : [...exp.trials.values()];
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (const t of drawn) {
    for (const [x, y] of t.points) {
      if (x < x0) x0 = x;
      if (x > x1) x1 = x;
      if (y < y0) y0 = y;
      if (y > y1) y1 = y;
    }
  }
  $("curves-shown").textContent = only ? "; " + only.size + " of " + exp.order.length + " trials drawn: the running ones, the selected one and the best" : "";
  if (x0 === Infinity) {
    curves.key = "";
    svg.replaceChildren(svgEl("text", { x: CL, y: CH / 2, class: "label" }, "No results yet."));
    return;
  }
  // The x axis ends at a round number, so that a trial's next iteration
  // rarely moves it (which redraws every line).
  x1 = niceCeil(x1);
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 === y0) { y0 -= 0.5; y1 += 0.5; }
  const sx = (x) => CL + ((x - x0) / (x1 - x0)) * (CW - CL - CR);
  const sy = (y) => CH - CB - ((y - y0) / (y1 - y0)) * (CH - CT - CB);
  const key = [x0, x1, y0, y1].join(",");
  let ids = [...dirty];
  if (key !== curves.key) {
    // New axes: every line again.
    curves.key = key;
    curves.lines = new Map();
    curves.group = svgEl("g", { class: "lines" });
    const label = (x, y, s, anchor) => svgEl("text", { x, y, class: "label", "text-anchor": anchor }, s);
    svg.replaceChildren(
      svgEl("line", { class: "axis", x1: CL, y1: CH - CB, x2: CW - CR, y2: CH - CB }),
      svgEl("line", { class: "axis", x1: CL, y1: CT, x2: CL, y2: CH - CB }),
      label(CL - 4, CT + 8, fmt(y1), "end"), label(CL - 4, CH - CB, fmt(y0), "end"),
      label(CL, CH - 8, fmt(x0), "start"), label(CW - CR, CH - 8, fmt(x1), "end"),
      curves.group);
    ids = drawn.map((t) => t.trial_id);
  } else if (only) {
    // Lines that left the set go; those that joined it come.
    for (const [id, line] of curves.lines) {
      if (!only.has(id)) {
        line.remove();
        curves.lines.delete(id);
      }
    }
    for (const id of only) if (!curves.lines.has(id)) ids.push(id);
  }
  for (const id of ids) {
    const t = exp.trials.get(id);
    if (!t || t.points.length === 0 || (only && !only.has(id))) continue;
    const color = COLORS[t.index % COLORS.length];
    const pts = t.points.map(([x, y]) => sx(x).toFixed(1) + "," + sy(y).toFixed(1)).join(" ");
    let line = curves.lines.get(id);
    if (!line) {
      line = svgEl("polyline", { stroke: color, "data-trial": id });
      line.appendChild(svgEl("title", {}, t.trial_name));
      curves.group.appendChild(line);
      curves.lines.set(id, line);
    }
    // A single point is drawn as a short segment, to be seen.
    line.setAttribute("points", t.points.length === 1 ? pts + " " + (sx(t.points[0][0]) + 0.5).toFixed(1) + "," + sy(t.points[0][1]).toFixed(1) : pts);
    line.dataset.n = t.points.length;
  }
  svg.dataset.drawn = curves.lines.size;
  svg.dataset.metric = (exp.summary && exp.summary.curve_metric) || "";
  svg.dataset.x = (exp.summary && exp.summary.curve_x) || "";
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

// ---- Parallel coordinates: an axis per varying config key and one for
// the metric; a line per finished trial that reported the metric.

function drawParcoords() {
  const svg = $("parcoords");
  const W = 800, H = 280, L = 40, R = 60, T = 24, B = 30;
  const trials = exp.order.map((id) => exp.trials.get(id)).filter((t) => FINISHED.has(t.status) && typeof t.last === "number");
  if (trials.length === 0) {
    svg.replaceChildren(svgEl("text", { x: L, y: H / 2, class: "label" }, "No finished trial yet."));
    return;
  }
  const metric = (exp.summary && exp.summary.metric) || "metric";
  const axes = varyingKeys().map((k) => ({ name: k, get: (t) => (t.config || {})[k] }));
  axes.push({ name: metric, get: (t) => t.last });
  for (const a of axes) {
    const vals = trials.map(a.get);
    a.numeric = vals.every((v) => typeof v === "number");
    if (a.numeric) {
      a.min = Math.min(...vals);
      a.max = Math.max(...vals);
      if (a.min === a.max) { a.min -= 0.5; a.max += 0.5; }
      a.pos = (v) => (v - a.min) / (a.max - a.min);
    } else {
      a.cats = [...new Set(vals.map((v) => JSON.stringify(v)))].sort();
      a.pos = (v) => (a.cats.length === 1 ? 0.5 : a.cats.indexOf(JSON.stringify(v)) / (a.cats.length - 1));
    }
  }
  const step = axes.length > 1 ? (W - L - R) / (axes.length - 1) : 0;
  const ax = (i) => (axes.length > 1 ? L + i * step : W / 2);
  const ay = (p) => H - B - p * (H - T - B);
  const children = [];
  const lines = svgEl("g", { class: "lines" });
  const max = exp.summary && exp.summary.mode === "max";
  let best = null;
  for (const t of trials) if (!best || (max ? t.last > best.last : t.last < best.last)) best = t;
  const m = axes[axes.length - 1];
  for (const t of trials) {
    const pts = axes.map((a, i) => ax(i).toFixed(1) + "," + ay(a.pos(a.get(t))).toFixed(1)).join(" ");
    // Colour by the metric: blue for the better end, red for the worse.
    let q = m.pos(t.last);
    if (!max) q = 1 - q;
    const hue = Math.round(q * 220);
    const line = svgEl("polyline", { points: pts, stroke: "hsl(" + hue + ",70%,45%)", "data-trial": t.trial_id });
    if (t === best) line.classList.add("best");
    line.appendChild(svgEl("title", {}, t.trial_name + ": " + metric + " " + fmt(t.last)));
    lines.appendChild(line);
  }
  if (best) lines.appendChild(lines.querySelector("polyline.best"));
  children.push(lines);
  axes.forEach((a, i) => {
    const x = ax(i);
    children.push(svgEl("line", { class: "axis", x1: x, y1: T, x2: x, y2: H - B }));
    children.push(svgEl("text", { x, y: H - 10, class: "label axis-name", "text-anchor": "middle" }, a.name));
    if (a.numeric) {
      children.push(svgEl("text", { x: x + 3, y: T - 4, class: "label" }, fmt(a.max)));
      children.push(svgEl("text", { x: x + 3, y: H - B + 12, class: "label" }, fmt(a.min)));
    } else {
      a.cats.forEach((c, j) => children.push(svgEl("text", { x: x + 3, y: ay(a.pos(JSON.parse(c))) + 4, class: "label" }, fmt(JSON.parse(c)))));
    }
  });
  svg.replaceChildren(...children);
}

// ---- One trial: its timeline, error.txt and checkpoints.

function selectTrial(id) {
  view.selected = id;
  history.replaceState(null, "", "#trial=" + encodeURIComponent(id));
  drawTable();
  drawCurves(new Set());
  loadTrial(id);
}

let trialLoading = null;

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
    $("status-filter").onchange = (e) => { view.status = e.target.value; view.page = 0; drawTable(); };
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
