//! `kdiag profile --wall --html FILE`: one self-contained page (no server,
//! no network) with a heat map per root of when its time went (a column a
//! second, a row per slice of it, as in Netflix's FlameScope) and a flame
//! graph of the range selected in it, redrawn in the page. The data is the
//! profile's stacks with their slices (`WallStack::slices`), as JSON in the
//! page; the script only sums and draws. [`section`] is the same heat map
//! and flame graph without the page around them: diagnose's HTML report
//! holds it (`render::html`).

use serde::Serialize;

use crate::analysis::fold::folded_frame;
use crate::model::wall::{TimeKind, Wall};
use crate::render::svg_chart::escape;
use crate::render::wall::{colour, offcpu_source};

/// What the page's script reads.
#[derive(Serialize)]
struct Data<'a> {
    window_ns: u64,
    slice_ns: u64,
    /// Each root's label.
    roots: Vec<String>,
    /// Each kind's name and colour (`TimeKind::ALL`'s order).
    kinds: Vec<(&'static str, String)>,
    stacks: Vec<PageStack<'a>>,
}

#[derive(Serialize)]
struct PageStack<'a> {
    /// Root and kind: indexes into `roots` and `kinds`.
    r: usize,
    k: usize,
    /// Frames, outermost first (a waker's after `--`).
    f: Vec<String>,
    /// Time in the whole window, ns, and by slice.
    ns: u64,
    s: &'a [(u32, u64)],
}

pub fn page(wall: &Wall) -> anyhow::Result<Vec<u8>> {
    let title = escape(&format!("Wall-clock time of {}", wall.target));
    let page = format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font:14px sans-serif;margin:1em 2em}}</style></head>
<body>
<h1>{title}</h1>
<p>{window:.3} s window, on CPU sampled at {freq} Hz, {source}.</p>
{section}</body></html>
"#,
        window = wall.window_ns as f64 / 1e9,
        freq = wall.freq_hz,
        source = escape(&offcpu_source(wall)),
        section = section(wall)?,
    );
    Ok(page.into_bytes())
}

/// The heat map per root and the flame graph of the range selected in it,
/// with their style, data and script: HTML for inside a page's body (one
/// per page: its elements have ids).
pub fn section(wall: &Wall) -> anyhow::Result<String> {
    let data = Data {
        window_ns: wall.window_ns,
        slice_ns: wall.slice_ns.max(1),
        roots: wall.roots.iter().map(|r| r.root.label()).collect(),
        kinds: TimeKind::ALL
            .iter()
            .map(|&k| {
                let (r, g, b) = colour(k);
                (k.name(), format!("rgb({r},{g},{b})"))
            })
            .collect(),
        stacks: wall
            .stacks
            .iter()
            .filter(|s| s.ns > 0)
            .map(|s| PageStack {
                r: s.root,
                k: TimeKind::ALL.iter().position(|&k| k == s.kind).unwrap_or(0),
                f: s.graph_frames().iter().map(folded_frame).collect(),
                ns: s.ns,
                s: &s.slices,
            })
            .collect(),
    };
    // `<` escaped: no `</script>` can end the data early.
    let json = serde_json::to_string(&data)?.replace('<', "\\u003c");
    // The page opens on the kind of time that dominates: a backend that
    // mostly waits opens on its waits, not on a near-blank on-cpu map.
    let mut by_kind = [0u64; TimeKind::ALL.len()];
    for s in &data.stacks {
        by_kind[s.k] += s.ns;
    }
    let most = (0..by_kind.len())
        .rev()
        .max_by_key(|&k| by_kind[k])
        .unwrap_or(0);
    let kinds: String = TimeKind::ALL
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let selected = if i == most { " selected" } else { "" };
            format!("<option{selected}>{}</option>", k.name())
        })
        .collect();
    Ok(format!(
        r#"<style>{STYLE}</style>
<h2>When: each thread's <select id="heat-kind">{kinds}</select> time</h2>
<p class="heat-note">A column is a second, a row {slice_ms} ms of it, top to bottom; the darker, the more
of that slice the thread spent so. Click a cell to start a range and another to end it: the flame
graph below shows that range only. <button id="heat-all">Whole window</button></p>
<div id="heat"></div>
<h2 id="range">Flame graph: the whole window</h2>
<div id="flame"></div>
<script id="wall-data" type="application/json">{json}</script>
<script>{SCRIPT}</script>
"#,
        slice_ms = wall.slice_ns / 1_000_000,
    ))
}

const STYLE: &str = ".heat-note{color:#555;max-width:60em}
#heat .root{display:inline-block;margin:0 1.5em 1em 0;vertical-align:top}
#heat .root div{font-size:12px}
#heat svg{background:#f4f4f4}
#heat rect{stroke:#fff;stroke-width:.5;cursor:pointer}
#heat rect.in{stroke:#000;stroke-width:1}
#flame{position:relative;font:11px monospace}
#flame div{position:absolute;height:16px;overflow:hidden;white-space:nowrap;
box-sizing:border-box;border:1px solid #fff;padding-left:2px;color:#000}";

/// Sums the stacks' slices of the selected range into a tree and draws it
/// (root at the top, as an icicle); draws the heat maps of the chosen kind.
/// In a function of its own: no name of it clashes with another script's
/// in the page (diagnose's report holds inferno's too).
const SCRIPT: &str = r##"(() => {
"use strict";
const D = JSON.parse(document.getElementById("wall-data").textContent);
const rows = Math.max(1, Math.round(1e9 / D.slice_ns));
const slices = Math.max(1, Math.ceil(D.window_ns / D.slice_ns));
const cols = Math.ceil(slices / rows);
const CELL = 9;
const NS = "http://www.w3.org/2000/svg";
let range = null, anchor = null;

function heat() {
  const kind = D.kinds.findIndex(k => k[0] === document.getElementById("heat-kind").value);
  const box = document.getElementById("heat");
  box.textContent = "";
  D.roots.forEach((label, r) => {
    const sum = new Float64Array(slices);
    for (const s of D.stacks) {
      if (s.r !== r || s.k !== kind) continue;
      for (const [i, ns] of s.s) if (i < slices) sum[i] += ns;
    }
    const div = document.createElement("div");
    div.className = "root";
    div.dataset.root = r;
    const name = document.createElement("div");
    name.textContent = label;
    div.appendChild(name);
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("width", cols * CELL);
    svg.setAttribute("height", rows * CELL);
    for (let i = 0; i < slices; i++) {
      const c = document.createElementNS(NS, "rect");
      c.setAttribute("x", Math.floor(i / rows) * CELL);
      c.setAttribute("y", (i % rows) * CELL);
      c.setAttribute("width", CELL);
      c.setAttribute("height", CELL);
      c.setAttribute("fill", D.kinds[kind][1]);
      c.setAttribute("fill-opacity", Math.min(1, sum[i] / D.slice_ns).toFixed(3));
      c.dataset.slice = i;
      const t = document.createElementNS(NS, "title");
      t.textContent = `${(i * D.slice_ns / 1e9).toFixed(2)} s: ${(sum[i] / 1e6).toFixed(1)} ms`;
      c.appendChild(t);
      svg.appendChild(c);
    }
    div.appendChild(svg);
    box.appendChild(div);
  });
  mark();
}

function mark() {
  for (const c of document.querySelectorAll("#heat rect")) {
    const i = +c.dataset.slice;
    c.classList.toggle("in", range !== null && i >= range[0] && i <= range[1]);
  }
}

function select(a, b) {
  range = a === null ? null : [Math.min(a, b), Math.max(a, b)];
  mark();
  flame();
}

function flame() {
  const top = {name: "all", v: 0, kids: new Map()};
  for (const s of D.stacks) {
    let v = s.ns;
    if (range !== null) {
      v = 0;
      for (const [i, ns] of s.s) if (i >= range[0] && i <= range[1]) v += ns;
    }
    if (v === 0) continue;
    top.v += v;
    let n = top;
    for (const name of [D.roots[s.r], "[" + D.kinds[s.k][0] + "]", ...s.f]) {
      // The root (a thread) is no kind of time: grey.
      if (!n.kids.has(name)) n.kids.set(name, {name, k: n === top ? -1 : s.k, v: 0, kids: new Map()});
      n = n.kids.get(name);
      n.v += v;
    }
  }
  const box = document.getElementById("flame");
  box.textContent = "";
  const head = range === null ? "the whole window"
    : `${(range[0] * D.slice_ns / 1e9).toFixed(2)} s to ${((range[1] + 1) * D.slice_ns / 1e9).toFixed(2)} s`;
  document.getElementById("range").textContent =
    `Flame graph: ${head}, ${(top.v / 1e9).toFixed(3)} s of thread time`;
  let depth = 0;
  const draw = (n, x, d) => {
    depth = Math.max(depth, d + 1);
    let at = x;
    for (const k of [...n.kids.values()].sort((a, b) => b.v - a.v)) {
      const w = k.v / top.v;
      if (w < 0.001) continue;
      const f = document.createElement("div");
      f.className = "f";
      f.style.left = (at * 100) + "%";
      f.style.width = (w * 100) + "%";
      f.style.top = (d * 17) + "px";
      f.style.background = k.k < 0 ? "#ccc" : D.kinds[k.k][1];
      f.title = `${k.name}: ${(k.v / 1e6).toFixed(1)} ms, ${(w * 100).toFixed(1)}%`;
      f.textContent = k.name;
      box.appendChild(f);
      draw(k, at, d + 1);
      at += w;
    }
  };
  if (top.v > 0) draw(top, 0, 0);
  box.style.height = (depth * 17) + "px";
}

document.getElementById("heat").addEventListener("click", e => {
  const i = e.target.dataset && e.target.dataset.slice;
  if (i === undefined) return;
  if (anchor === null) { anchor = +i; select(+i, +i); }
  else { select(anchor, +i); anchor = null; }
});
document.getElementById("heat-all").addEventListener("click", () => { anchor = null; select(null); });
document.getElementById("heat-kind").addEventListener("change", heat);
heat();
flame();
})();
"##;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::wall::{Merged, plain};
    use crate::model::wall::{OffcpuFrom, WallStack};

    fn stack(kind: TimeKind, ns: u64) -> WallStack {
        WallStack {
            root: 0,
            kind,
            state: None,
            frames: Vec::new(),
            waker: None,
            ongoing: false,
            count: 1,
            ns,
            slices: vec![(0, ns)],
        }
    }

    /// The kind the heat map's menu opens on.
    fn opens_on(stacks: Vec<WallStack>) -> String {
        let merged = Merged {
            roots: Vec::new(),
            stacks: Vec::new(),
            modules: Vec::new(),
        };
        let mut w = plain(
            "PID 1".into(),
            merged,
            1e9 as u64,
            2e7 as u64,
            99,
            OffcpuFrom::Bpf,
        );
        w.stacks = stacks;
        let html = section(&w).unwrap();
        let selected: Vec<&str> = html
            .match_indices("<option selected>")
            .map(|(i, _)| &html[i..])
            .collect();
        assert_eq!(selected.len(), 1, "{html}");
        let after = &selected[0]["<option selected>".len()..];
        after[..after.find('<').unwrap()].to_string()
    }

    #[test]
    fn the_page_opens_on_the_kind_of_time_that_dominates() {
        // A backend waiting 56% of its time in a stack cut off in libc.
        let waits = vec![
            stack(TimeKind::OnCpu, 300),
            stack(TimeKind::Wait, 560),
            stack(TimeKind::RunQueue, 140),
        ];
        assert_eq!(opens_on(waits), "wait");
        assert_eq!(
            opens_on(vec![stack(TimeKind::OnCpu, 9), stack(TimeKind::Lock, 3)]),
            "on-cpu"
        );
        assert_eq!(opens_on(Vec::new()), "on-cpu");
    }
}
