#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The live page at `/`: one card per node with heart-rate and activity plots,
/// fed by `/events` (server-sent events). Self-contained: no CDN, no external
/// script, because a hub on a bench network often has no internet.
enum LivePage {
    /// The page with `snapshotJSON` inlined for the first paint. `<` is escaped
    /// so a node name (untrusted: it comes from the network) cannot close the script.
    static func html(snapshotJSON: String) -> String {
        let safe = snapshotJSON.replacingOccurrences(of: "<", with: "\\u003c")
        return template.replacingOccurrences(of: "/*INITIAL-SNAPSHOT*/null", with: safe)
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
 .nums b{display:block;font-size:1.2em} canvas{width:100%;height:110px;background:#121820;border-radius:4px}
 .label{font-size:.8em;color:#9aa}
</style></head>
<body>
<h1>Piconet hub</h1>
<div id="status">connecting to the hub…</div>
<div id="nodes"></div>
<script>
"use strict";
const cards = {};
function fmt(v, d) { return (v === null || v === undefined || Number.isNaN(v)) ? "–" : v.toFixed(d); }
function card(n) {
  if (cards[n.id]) return cards[n.id];
  const el = document.createElement("div");
  el.className = "card"; el.id = "node-" + n.id;
  el.innerHTML = `<h2><span class="name"></span><span class="state"></span></h2>
   <div class="nums"><div>bpm<b class="bpm"></b></div><div>min/avg/max<b class="mam"></b></div>
   <div>RMSSD ms<b class="rmssd"></b></div><div>loss<b class="loss"></b></div>
   <div>steps<b class="steps"></b></div><div>cadence<b class="cad"></b></div>
   <div>activity mg<b class="act"></b></div><div>SDNN ms<b class="sdnn"></b></div></div>
   <div class="label">heart rate (bpm)</div><canvas class="hr" width="600" height="110"></canvas>
   <div class="label">motion activity (mg)</div><canvas class="mo" width="600" height="110"></canvas>`;
  document.getElementById("nodes").appendChild(el);
  cards[n.id] = el; return el;
}
function plot(canvas, pts, key, lo, hi, color) {
  const g = canvas.getContext("2d"), w = canvas.width, h = canvas.height;
  g.clearRect(0, 0, w, h);
  g.strokeStyle = "#2a3440"; g.lineWidth = 1;
  for (let i = 1; i < 4; i++) { g.beginPath(); g.moveTo(0, h * i / 4); g.lineTo(w, h * i / 4); g.stroke(); }
  const ps = pts.filter(p => p[key] !== null && p[key] !== undefined);
  if (ps.length < 2) return 0;
  if (lo === null) {  // auto-scale with a margin, so a resting 60 bpm is not a flat line
    const vs = ps.map(p => p[key]);
    lo = Math.min(...vs) - 5; hi = Math.max(...vs) + 5;
    g.fillStyle = "#9aa"; g.font = "11px sans-serif";
    g.fillText(hi.toFixed(0), 4, 12); g.fillText(lo.toFixed(0), 4, h - 4);
  }
  const t1 = ps[ps.length - 1].t, t0 = Math.min(ps[0].t, t1 - 60);
  g.strokeStyle = color; g.lineWidth = 2; g.beginPath();
  ps.forEach((p, i) => {
    const x = (p.t - t0) / (t1 - t0) * (w - 4) + 2;
    const y = h - 4 - (Math.min(hi, Math.max(lo, p[key])) - lo) / (hi - lo) * (h - 8);
    if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
  });
  g.stroke();
  return ps.length;
}
function render(s) {
  document.getElementById("status").textContent =
    `${s.nodes.length} node(s) · ${s.hub.messagesTotal} messages · updated ${new Date(s.generatedAt * 1000).toLocaleTimeString()}` +
    (s.hub.storeHealthy ? "" : " · STORE: " + (s.hub.storeMessage || "unavailable"));
  let plotted = 0;
  for (const n of s.nodes) {
    const el = card(n);
    el.querySelector(".name").textContent = n.name;
    const st = el.querySelector(".state"); st.textContent = n.state; st.className = "state " + n.state;
    el.querySelector(".bpm").textContent = fmt(n.bpm, 0);
    el.querySelector(".mam").textContent = `${fmt(n.min, 0)}/${fmt(n.avg, 0)}/${fmt(n.max, 0)}`;
    el.querySelector(".rmssd").textContent = fmt(n.rmssd, 1);
    el.querySelector(".sdnn").textContent = fmt(n.sdnn, 1);
    el.querySelector(".loss").textContent = fmt(n.loss * 100, 1) + "%";
    el.querySelector(".steps").textContent = n.steps;
    el.querySelector(".cad").textContent = fmt(n.cadence, 0);
    el.querySelector(".act").textContent = fmt(n.activity, 0);
    plotted += plot(el.querySelector(".hr"), n.series, "bpm", null, null, "#ff6b6b");
    plotted += plot(el.querySelector(".mo"), n.series, "activity", 0, 800, "#4dabf7");
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
