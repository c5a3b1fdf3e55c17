// The tunejet dashboard: the experiments page, and one experiment's
// trials and learning curves kept live by the server's event stream.
"use strict";

const SVG = "http://www.w3.org/2000/svg";

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function svgEl(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

function show(id) { document.getElementById(id).hidden = false; }

function message(text) {
  const m = document.getElementById("message");
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

function counts(c) {
  const order = ["RUNNING", "PENDING", "PAUSED", "TERMINATED", "ERROR"];
  const parts = order.filter((s) => c && c[s] > 0).map((s) => c[s] + " " + s);
  return parts.length ? parts.join(", ") : "no trials";
}

// The experiments page.
async function experimentsPage() {
  document.getElementById("title").textContent = "Experiments";
  show("experiments");
  let data;
  try {
    data = await getJSON("/api/experiments");
  } catch (e) {
    message(e.message);
    return;
  }
  const tbody = document.querySelector("#experiments-table tbody");
  if (data.experiments.length === 0) message("The event log holds no experiment yet.");
  for (const x of data.experiments) {
    const tr = el("tr", { "data-experiment": x.name });
    const td = el("td");
    td.appendChild(el("a", { href: "/experiments/" + encodeURIComponent(x.name) }, x.name));
    tr.appendChild(td);
    tr.appendChild(el("td", { class: "status-" + x.status }, x.status));
    tr.appendChild(el("td", { class: "num" }, String(x.num_trials)));
    tr.appendChild(el("td", {}, counts(x.counts)));
    tr.appendChild(el("td", {}, x.metric ? x.metric + (x.mode ? " (" + x.mode + ")" : "") : ""));
    tr.appendChild(el("td", {}, x.start_time ? new Date(x.start_time).toLocaleString() : ""));
    tbody.appendChild(tr);
  }
}

// One experiment's page: its trials (by id) with their curves.
const exp = { summary: null, trials: new Map(), order: [], drawPending: false };

function applyUpdate(u) {
  exp.summary = u.experiment;
  for (const row of u.trials) {
    const had = exp.trials.get(row.trial_id);
    if (!had) exp.order.push(row.trial_id);
    let points = row.points;
    if (had && row.points_from > 0) points = had.points.slice(0, row.points_from).concat(row.points);
    exp.trials.set(row.trial_id, Object.assign({}, row, { points }));
  }
  if (u.watch_error) message("The dashboard stopped following the log: " + u.watch_error);
  scheduleDraw();
}

function scheduleDraw() {
  if (exp.drawPending) return;
  exp.drawPending = true;
  requestAnimationFrame(() => {
    exp.drawPending = false;
    drawSummary();
    drawTable();
    drawCurves();
  });
}

function drawSummary() {
  const s = exp.summary;
  const parts = [s.status, s.num_trials + " trials: " + counts(s.counts)];
  if (s.end_reason) parts.push("ended: " + s.end_reason);
  if (s.error) parts.push(s.error);
  const p = document.getElementById("summary");
  p.textContent = parts.join(" · ");
  p.className = "status-" + s.status;
  document.getElementById("metric").textContent = s.metric ? "(" + s.metric + " by training_iteration)" : "";
}

function configKeys() {
  const keys = new Set();
  for (const t of exp.trials.values()) for (const k of Object.keys(t.config || {})) keys.add(k);
  return [...keys].sort();
}

function drawTable() {
  const keys = configKeys();
  const metric = exp.summary.metric || "metric";
  const head = ["Trial", "Status", ...keys, metric, "Iteration", "Attempt", "Failures", "Runner"];
  const tr = document.querySelector("#trials-table thead tr");
  tr.replaceChildren(...head.map((h) => el("th", {}, h)));
  const rows = exp.order.map((id) => {
    const t = exp.trials.get(id);
    const r = el("tr", { id: "trial-" + t.trial_id, "data-trial": t.trial_id, "data-status": t.status });
    r.appendChild(el("td", { title: t.trial_id }, t.trial_name));
    r.appendChild(el("td", { class: "status-" + t.status, title: t.error || t.end_reason || "" }, t.status));
    for (const k of keys) r.appendChild(el("td", { class: "num" }, fmt((t.config || {})[k])));
    r.appendChild(el("td", { class: "num" }, fmt(t.last)));
    r.appendChild(el("td", { class: "num" }, String(t.training_iteration)));
    r.appendChild(el("td", { class: "num" }, String(t.attempt)));
    r.appendChild(el("td", { class: "num" }, String(t.num_failures)));
    r.appendChild(el("td", {}, t.runner || ""));
    return r;
  });
  document.querySelector("#trials-table tbody").replaceChildren(...rows);
}

const COLORS = ["#1f6feb", "#d1495b", "#2e8b57", "#edae49", "#6a4c93", "#00798c", "#b5651d", "#30638e"];

function drawCurves() {
  const svg = document.getElementById("curves");
  const W = 800, H = 320, L = 56, R = 12, T = 12, B = 28;
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (const t of exp.trials.values()) {
    for (const [x, y] of t.points) {
      x0 = Math.min(x0, x); x1 = Math.max(x1, x);
      y0 = Math.min(y0, y); y1 = Math.max(y1, y);
    }
  }
  const children = [];
  if (x0 === Infinity) {
    const text = svgEl("text", { x: L, y: H / 2, class: "label" });
    text.textContent = "No results yet.";
    svg.replaceChildren(text);
    return;
  }
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) { y0 -= 0.5; y1 += 0.5; }
  const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const sy = (y) => H - B - ((y - y0) / (y1 - y0)) * (H - T - B);
  children.push(svgEl("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  children.push(svgEl("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  const label = (x, y, s, anchor) => {
    const t = svgEl("text", { x, y, class: "label", "text-anchor": anchor });
    t.textContent = s;
    return t;
  };
  children.push(label(L - 4, T + 8, fmt(y1), "end"), label(L - 4, H - B, fmt(y0), "end"));
  children.push(label(L, H - 8, fmt(x0), "start"), label(W - R, H - 8, fmt(x1), "end"));
  exp.order.forEach((id, i) => {
    const t = exp.trials.get(id);
    if (t.points.length === 0) return;
    const pts = t.points.map(([x, y]) => sx(x).toFixed(1) + "," + sy(y).toFixed(1)).join(" ");
    const line = svgEl("polyline", { points: pts, stroke: COLORS[i % COLORS.length], "data-trial": id, "data-n": t.points.length });
    const title = svgEl("title");
    title.textContent = t.trial_name;
    line.appendChild(title);
    children.push(line);
    if (t.points.length === 1) {
      const [x, y] = t.points[0];
      children.push(svgEl("circle", { cx: sx(x), cy: sy(y), r: 2.5, fill: COLORS[i % COLORS.length] }));
    }
  });
  svg.replaceChildren(...children);
}

async function experimentPage(name) {
  document.getElementById("title").textContent = name;
  document.title = name + " · tunejet";
  const base = "/api/experiments/" + encodeURIComponent(name);
  try {
    applyUpdate(await getJSON(base));
  } catch (e) {
    message(e.message);
    return;
  }
  show("experiment");
  const live = document.getElementById("live");
  const es = new EventSource(base + "/events");
  es.addEventListener("update", (e) => {
    live.hidden = false;
    live.classList.remove("lost");
    live.textContent = "live";
    applyUpdate(JSON.parse(e.data));
  });
  es.onerror = () => {
    live.classList.add("lost");
    live.textContent = "reconnecting";
  };
}

function main() {
  const m = location.pathname.match(/^\/experiments\/([^/]+)$/);
  if (m) experimentPage(decodeURIComponent(m[1]));
  else experimentsPage();
}

main();
