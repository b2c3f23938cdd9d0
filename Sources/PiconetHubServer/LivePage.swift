/// The live page at `/`: one card per node with heart-rate and activity plots,
/// fed by `/events` (server-sent events). Self-contained: no CDN, no external
/// script, because a hub on a bench network often has no internet.
enum LivePage {
    /// The page with `snapshotJSON` inlined for the first paint. `<` is escaped
    /// so a node name (untrusted: it comes from the network) cannot close the script.
    static func html(snapshotJSON: String) -> String {
        let safe = snapshotJSON.replacing("<", with: "\\u003c")
        return template.replacing("/*INITIAL-SNAPSHOT*/null", with: safe)
    }

    static let template = #"""
<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Piconet hub</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
 body{font:14px system-ui,sans-serif;margin:1.2em;background:#0f1419;color:#e6e6e6}
 h1{font-size:1.3em;margin:0 0 .3em} #status{color:#8a9;margin-bottom:1em}
 #nodes{display:grid;grid-template-columns:repeat(auto-fill,minmax(360px,1fr));gap:1em}
 .card{background:#1a2129;border-radius:8px;padding:.8em}
 .card h2{font-size:1.05em;margin:0 0 .4em;display:flex;justify-content:space-between}
 .state{font-size:.8em;padding:.1em .5em;border-radius:4px;background:#444}
 .state.connected{background:#1f6f3f} .state.connecting{background:#8a6d1f}
 .nums{display:grid;grid-template-columns:repeat(4,1fr);gap:.3em;margin-bottom:.5em}
 .nums div{background:#121820;border-radius:4px;padding:.25em .4em}
 .nums b{display:block;font-size:1.2em} canvas{width:100%;height:130px;background:#121820;border-radius:4px}
 .label{font-size:.8em;color:#9aa} .kind{font-size:.8em;color:#9aa;margin:-.2em 0 .4em}
 #group{background:#1a2129;border-radius:8px;padding:.6em .8em;margin-bottom:1em} #group[hidden]{display:none}
 #markers{margin:.4em 0;padding-left:1.4em;max-height:12em;overflow-y:auto} #markers .t{color:#9aa;margin-right:.6em}
 #marker-form input{width:24em;max-width:70%;background:#121820;color:#e6e6e6;border:1px solid #2a3440;border-radius:4px;padding:.2em .4em}
 .upd{font-size:.85em;margin:-.2em 0 .4em} .upd:empty{display:none} .upd progress{width:8em;vertical-align:middle}
</style></head>
<body>
<h1>Piconet hub</h1>
<div id="status">connecting to the hub…</div>
<div id="group" hidden><b>Markers</b> <span id="group-status" class="label"></span>
 <ol id="markers"></ol>
 <form id="marker-form"><input id="marker-text" maxlength="200" placeholder="interval 3 start" autocomplete="off">
 <button type="submit">Add marker</button> <span id="marker-result" class="label"></span></form></div>
<div id="nodes"></div>
<script>
"use strict";
const cards = {};
// Plot geometry, in canvas pixels: room on the left for the value axis, below for the time axis.
const AX = {left: 40, right: 8, top: 18, bottom: 20, window: 60};
function fmt(v, d) { return (v === null || v === undefined || Number.isNaN(v)) ? "–" : v.toFixed(d); }
function card(n) {
  if (cards[n.id]) return cards[n.id];
  const el = document.createElement("div");
  el.className = "card"; el.id = "node-" + n.id;
  el.innerHTML = `<h2><span class="name"></span><span class="state"></span></h2>
   <div class="kind"></div><div class="upd"></div>
   <div class="nums"><div>bpm<b class="bpm"></b></div><div>min/avg/max<b class="mam"></b></div>
   <div>RMSSD ms<b class="rmssd"></b></div><div>loss<b class="loss"></b></div>
   <div>steps<b class="steps"></b></div><div>cadence<b class="cad"></b></div>
   <div>activity mg<b class="act"></b></div><div>SDNN ms<b class="sdnn"></b></div></div>
   <div class="label">heart rate (bpm) over the last minute</div><canvas class="hr" width="600" height="130"></canvas>
   <div class="label">motion activity (mg: mean deviation from 1 g over 10 s) over the last minute</div><canvas class="mo" width="600" height="130"></canvas>`;
  cards[n.id] = el; return el;
}
// Draws `key` of the points over the last AX.window seconds (or the whole series if longer ago):
// a value axis with numbers and `unit`, a time axis in seconds before the newest point (labels
// "-60 s" … "now", the newest point's clock time in the corner), grid lines on both.
// lo/hi null: auto-scale with a margin, so a resting 60 bpm is not a flat line.
function plot(canvas, pts, key, lo, hi, unit, color) {
  const g = canvas.getContext("2d"), w = canvas.width, h = canvas.height;
  const x0 = AX.left, x1 = w - AX.right, y0 = h - AX.bottom, y1 = AX.top;
  g.clearRect(0, 0, w, h);
  g.font = "11px sans-serif"; g.lineWidth = 1;
  const ps = pts.filter(p => p[key] !== null && p[key] !== undefined);
  const newest = ps.length ? ps[ps.length - 1].t : Date.now() / 1000;
  const span = Math.max(AX.window, ps.length ? newest - ps[0].t : 0);
  if (lo === null) {
    const vs = ps.map(p => p[key]);
    // round ticks: lo a multiple of 10, the range a multiple of 20 (4 steps of 5, 10, 15…)
    lo = vs.length ? Math.floor((Math.min(...vs) - 5) / 10) * 10 : 40;
    hi = vs.length ? lo + Math.max(20, Math.ceil((Math.max(...vs) + 5 - lo) / 20) * 20) : 200;
  }
  // value axis: 5 ticks with numbers, the unit above
  g.strokeStyle = "#2a3440"; g.fillStyle = "#9aa"; g.textAlign = "right"; g.textBaseline = "middle";
  for (let i = 0; i <= 4; i++) {
    const v = lo + (hi - lo) * i / 4, y = y0 - (y0 - y1) * i / 4;
    g.beginPath(); g.moveTo(x0, y); g.lineTo(x1, y); g.stroke();
    g.fillText(v.toFixed(0), x0 - 4, y);
  }
  g.textAlign = "left"; g.textBaseline = "top"; g.fillText(unit, 2, 2);
  // time axis: a tick every span/6 seconds, labelled in seconds before the newest point
  g.textAlign = "center";
  for (let i = 0; i <= 6; i++) {
    const ago = span * (6 - i) / 6, x = x0 + (x1 - x0) * i / 6;
    g.beginPath(); g.moveTo(x, y1); g.lineTo(x, y0 + 3); g.stroke();
    g.fillText(i === 6 ? "now" : `-${ago.toFixed(0)} s`, Math.min(x, x1 - 12), y0 + 5);
  }
  g.textAlign = "right"; g.textBaseline = "top";
  if (ps.length) g.fillText("now = " + new Date(newest * 1000).toLocaleTimeString(), x1, 2);
  if (ps.length < 2) return 0;
  g.strokeStyle = color; g.lineWidth = 2; g.beginPath();
  ps.forEach((p, i) => {
    const x = x0 + (p.t - (newest - span)) / span * (x1 - x0);
    const y = y0 - (Math.min(hi, Math.max(lo, p[key])) - lo) / (hi - lo) * (y0 - y1);
    if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
  });
  g.stroke();
  return ps.length;
}
// A node's update line: what its last report said (the text is the node's: set as text, never HTML).
function update(el, u) {
  const box = el.querySelector(".upd");
  box.replaceChildren();
  if (!u) return;
  let t = `update: ${u.state}` + (u.version ? ` ${u.version}` : "");
  if (u.percent !== undefined) t += ` · ${u.percent}% (${fmt(u.bytesDone / 1024, 0)} of ${fmt(u.bytesTotal / 1024, 0)} KiB)`;
  if (u.detail) t += ` · ${u.detail}`;
  box.append(t);
  if (u.state === "receiving" && u.percent !== undefined) {
    const bar = document.createElement("progress"); bar.max = 100; bar.value = u.percent; box.append(" ", bar);
  }
}
// The server sends nodes by name, then id; sorting here too keeps the cards still if it did not.
function byNameThenId(a, b) { return a.name < b.name ? -1 : a.name > b.name ? 1 : (a.id < b.id ? -1 : a.id > b.id ? 1 : 0); }
// The group's markers: text set with textContent (a marker comes from another hub: never markup).
function renderMarkers(g) {
  const box = document.getElementById("group");
  if (!g) { box.hidden = true; return; }
  box.hidden = false;
  document.getElementById("group-status").textContent =
    `group ${g.name} · ${g.connected + 1} of ${g.members} hubs · ` + (g.leader ? `leader ${g.leader.slice(0, 8)}` : "no leader") +
    (g.pending ? ` · ${g.pending} pending` : "");
  const list = document.getElementById("markers");
  if (list.dataset.ids === g.markers.map(m => m.id).join(",")) return;
  list.dataset.ids = g.markers.map(m => m.id).join(",");
  list.replaceChildren(...g.markers.map(m => {
    const li = document.createElement("li"), t = document.createElement("span");
    t.className = "t"; t.textContent = m.timeMs ? new Date(m.timeMs).toLocaleTimeString() : "";
    li.append(t, document.createTextNode(m.text)); li.dataset.id = m.id; return li;
  }));
  document.body.dataset.markers = g.markers.length;
}
document.getElementById("marker-form").onsubmit = async e => {
  e.preventDefault();
  const input = document.getElementById("marker-text"), out = document.getElementById("marker-result");
  const text = input.value.trim();
  if (!text) return;
  out.textContent = "adding…";
  try {
    const r = await fetch("/api/markers", {method: "POST", headers: {"Content-Type": "application/json"},
                                             body: JSON.stringify({text}), credentials: "same-origin"});
    const body = await r.json().catch(() => ({}));
    if (r.status === 201 || r.status === 202) { input.value = ""; out.textContent = r.status === 201 ? "added" : "pending: no leader yet, retrying"; }
    else out.textContent = body.error || `refused (HTTP ${r.status})`;
  } catch (err) { out.textContent = "hub unreachable: " + err; }
};
function render(s) {
  renderMarkers(s.hub.group);
  document.getElementById("status").textContent =
    `${s.nodes.length} node(s) · ${s.hub.messagesTotal} messages · updated ${new Date(s.generatedAt * 1000).toLocaleTimeString()}` +
    (s.hub.storeHealthy ? "" : " · STORE: " + (s.hub.storeMessage || "unavailable"));
  let plotted = 0;
  const box = document.getElementById("nodes");
  for (const n of [...s.nodes].sort(byNameThenId)) {
    const el = card(n);
    box.appendChild(el);  // (re)placed in display order: a new node never reshuffles the others
    el.querySelector(".kind").textContent =
      `simulated profile: ${n.profile || "unknown"} · board: ${n.board || "unknown"}` +
      (n.via ? ` · via relay ${n.via.name || n.via.address}` : "");
    el.querySelector(".name").textContent = n.name;
    update(el, n.update);
    const st = el.querySelector(".state"); st.textContent = n.state; st.className = "state " + n.state;
    el.querySelector(".bpm").textContent = fmt(n.bpm, 0);
    el.querySelector(".mam").textContent = `${fmt(n.min, 0)}/${fmt(n.avg, 0)}/${fmt(n.max, 0)}`;
    el.querySelector(".rmssd").textContent = fmt(n.rmssd, 1);
    el.querySelector(".sdnn").textContent = fmt(n.sdnn, 1);
    el.querySelector(".loss").textContent = fmt(n.loss * 100, 1) + "%";
    el.querySelector(".steps").textContent = n.steps;
    el.querySelector(".cad").textContent = fmt(n.cadence, 0);
    el.querySelector(".act").textContent = fmt(n.activity, 0);
    plotted += plot(el.querySelector(".hr"), n.series, "bpm", null, null, "bpm", "#ff6b6b");
    plotted += plot(el.querySelector(".mo"), n.series, "activity", 0, 800, "mg", "#4dabf7");
  }
  document.body.dataset.plottedPoints = plotted;
}
// First paint from the snapshot the server inlined; then live updates over server-sent events.
const initial = /*INITIAL-SNAPSHOT*/null;
if (initial) render(initial);
const es = new EventSource("/events");
es.onmessage = e => render(JSON.parse(e.data));
es.onerror = () => { document.getElementById("status").textContent = "hub unreachable, retrying…"; };
</script>
</body></html>
"""#
}
