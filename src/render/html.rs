//! `kdiag diagnose --report html FILE`: one self-contained page (no network,
//! no external script, style or font) to hand a colleague: the verdict and
//! its evidence, the drill-downs' findings, a chart per time series, the
//! CPU and off-CPU flame graphs (inferno's SVG inline, its zoom and search
//! kept working), and what watching cost. One function per section, each
//! drawn from the same `DiagnoseRun` the text report is.

use std::fmt::Write as _;
use std::io::Write;

use crate::model::diagnose_run::DiagnoseRun;
use crate::model::diagnosis::{Confidence, ThreadState};
use crate::model::drill::Why;
use crate::model::flame::Flame;
use crate::render::offcpu::{duration, one_line};
use crate::render::svg_chart::{Bars, Series, bar_chart, escape as esc, line_chart};

pub fn diagnose(out: &mut impl Write, run: &DiagnoseRun) -> anyhow::Result<()> {
    let mut page = String::new();
    head(&mut page, run);
    verdict(&mut page, run);
    evidence(&mut page, run);
    why(&mut page, run.why.as_ref());
    charts(&mut page, run, &series(run));
    flame_graphs(&mut page, run.why.as_ref());
    heat_map(&mut page, run.why.as_ref())?;
    iosnoop(&mut page, run);
    next(&mut page, run);
    cost(&mut page, run);
    text_report(&mut page, run)?;
    page.push_str("</main>\n</body>\n</html>\n");
    out.write_all(page.as_bytes())?;
    Ok(())
}

/// The page's style. Class names avoid inferno's (`hide`, `parent`), whose
/// style applies to the whole page once its SVG is inline.
const STYLE: &str = "
body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #222; background: #fafafa; }
main { max-width: 1200px; margin: 0 auto; padding: 1em 1.5em 3em; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; }
h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
.meta, .cost { color: #666; font-size: 0.9em; }
.verdict { font-size: 1.25em; padding: 0.6em 0.8em; background: #fff3cd; border-left: 6px solid #e0a800; }
.verdict b { text-transform: uppercase; }
code, pre, .stack { font-family: ui-monospace, monospace; font-size: 0.85em; }
.stack { word-break: break-all; }
table.states { border-collapse: collapse; }
table.states td, table.states th { padding: 0.15em 0.8em; text-align: left; }
table.states td.num { text-align: right; }
span.bar { display: inline-block; height: 0.8em; background: #c0392b; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; }
figure.chart { margin: 0; background: #fff; border: 1px solid #ddd; }
figure.chart figcaption { font-size: 0.8em; color: #555; padding: 0 0.5em 0.3em; }
.chart text { font: 11px sans-serif; fill: #333; }
.chart .chart-title { font-weight: bold; }
.flame { background: #fff; border: 1px solid #ddd; }
.flame > svg { width: 100%; display: block; }
details pre { background: #fff; border: 1px solid #ddd; padding: 0.8em; overflow-x: auto; }
";

fn head(page: &mut String, run: &DiagnoseRun) {
    let (o, m) = (&run.observation, &run.meta);
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>kdiag diagnose: PID {} ({})</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n\
         <h1>kdiag diagnose: PID {} ({})</h1>\n\
         <p class=\"meta\">Watched for {:.1} s from {} on {} (Linux {}) by kdiag {}</p>\n",
        o.pid,
        esc(&o.comm),
        o.pid,
        esc(&o.comm),
        o.window_s,
        esc(&m.started),
        esc(&m.host),
        esc(&m.kernel),
        esc(&m.kdiag)
    );
}

fn verdict(page: &mut String, run: &DiagnoseRun) {
    let d = &run.diagnosis;
    let confidence = match d.confidence {
        Confidence::High => "high",
        Confidence::Medium => "medium",
        Confidence::Low => "low",
    };
    let _ = write!(
        page,
        "<section id=\"verdict\">\n<p class=\"verdict\">Verdict: <b>{}</b>: {}</p>\n\
         <p>Confidence: {confidence}.</p>\n",
        d.verdict.name(),
        esc(&crate::render::verdict::summary(d))
    );
    if !d.states.is_empty() {
        page.push_str(
            "<table class=\"states\"><tr><th>Thread state</th><th>seconds</th>\
             <th>of the thread time</th><th></th><th>of the working time</th></tr>\n",
        );
        for s in &d.states {
            let _ = writeln!(
                page,
                "<tr><td>{}</td><td class=\"num\">{:.2}</td><td class=\"num\">{:.0}%</td>\
                 <td><span class=\"bar\" style=\"width: {:.0}px\"></span></td>\
                 <td class=\"num\">{}</td></tr>",
                s.state.describe(),
                s.seconds,
                s.share * 100.0,
                (s.share * 200.0).clamp(0.0, 200.0),
                if s.state == ThreadState::Sleeping {
                    String::new()
                } else {
                    format!("{:.0}%", s.working_share * 100.0)
                }
            );
        }
        page.push_str("</table>\n");
    }
    page.push_str("</section>\n");
}

fn evidence(page: &mut String, run: &DiagnoseRun) {
    page.push_str("<section id=\"evidence\">\n<h2>Evidence</h2>\n<ul>\n");
    for e in crate::render::verdict::evidence(&run.diagnosis) {
        let _ = writeln!(page, "<li>{}</li>", esc(&e));
    }
    page.push_str("</ul>\n</section>\n");
}

/// The drill-downs' findings, as the text report gives them.
fn why(page: &mut String, why: Option<&Why>) {
    let Some(w) = why else { return };
    let _ = writeln!(
        page,
        "<section id=\"why\">\n<h2>{}</h2>",
        esc(&crate::render::diagnose::why_heading(w))
    );
    if let Some(cpu) = &w.cpu {
        let _ = writeln!(
            page,
            "<p>On the CPU: {} samples, {:.0}% in the kernel; {}</p>",
            cpu.samples,
            cpu.kernel_percent,
            esc(&crate::render::diagnose::hottest(w, cpu))
        );
        stacks(
            page,
            cpu.hottest.iter().map(|s| (s.percent, one_line(&s.frames))),
        );
    }
    if let Some(off) = &w.offcpu {
        let _ = writeln!(
            page,
            "<p>Off the CPU: {} blocked in {} blocks, summed over threads</p>\n<ul>",
            duration(off.total_ns),
            off.blocks
        );
        for p in off.wait_points.iter().filter(|p| p.percent >= 0.5) {
            let _ = writeln!(
                page,
                "<li>waits in <code>{}</code> ({}): {:.1}%</li>",
                esc(&p.function),
                p.state.letter(),
                p.percent
            );
        }
        page.push_str("</ul>\n");
        stacks(
            page,
            off.paths.iter().map(|p| (p.percent, one_line(&p.frames))),
        );
    }
    // Who else had the CPUs, and the execs that failed: as the text
    // report gives them.
    let mut text = Vec::new();
    if let Some(c) = &w.competition {
        let _ = crate::render::drill::competition(&mut text, c);
    }
    if let Some(e) = &w.exec {
        let _ = crate::render::drill::exec(&mut text, e);
    }
    for a in &w.perf_maps {
        let _ = crate::render::drill::perf_map(&mut text, a);
    }
    for p in &w.python {
        let _ = crate::render::drill::python(&mut text, p);
    }
    for u in &w.unnamed {
        let _ = crate::render::drill::unnamed(&mut text, u, &w.perf_maps);
    }
    if !text.is_empty() {
        let _ = writeln!(page, "<pre>{}</pre>", esc(&String::from_utf8_lossy(&text)));
    }
    for s in &w.skipped {
        let _ = writeln!(page, "<p>Not run: {}</p>", esc(s));
    }
    page.push_str("</section>\n");
}

fn stacks(page: &mut String, rows: impl Iterator<Item = (f64, String)>) {
    page.push_str("<table class=\"states\">\n");
    for (percent, line) in rows {
        let _ = writeln!(
            page,
            "<tr><td class=\"num\">{percent:.1}%</td><td class=\"stack\">{}</td></tr>",
            esc(&line)
        );
    }
    page.push_str("</table>\n");
}

/// Every time series of the run, in the order charted: the trend's series
/// (one point per --interval), or in a record without them the busy
/// threads and the memory series of the observation.
pub fn series(run: &DiagnoseRun) -> Vec<Series> {
    let o = &run.observation;
    if !o.trend.series.is_empty() {
        return o
            .trend
            .series
            .iter()
            .map(|s| Series {
                id: s.name.clone(),
                title: s.name.clone(),
                unit: s.unit.clone(),
                points: s.points.clone(),
            })
            .collect();
    }
    let mut all = vec![Series {
        id: "busy-threads".into(),
        title: "Working threads".into(),
        unit: "threads".into(),
        points: o
            .busy
            .iter()
            .enumerate()
            .map(|(i, &b)| (i as f64 * o.bucket_s, b))
            .collect(),
    }];
    let mib = |kib: u64| kib as f64 / 1024.0;
    type Pick = fn(&crate::model::diagnosis::MemoryPoint) -> u64;
    let memory: [(&str, &str, Pick); 4] = [
        ("rss-anon", "RSS, anonymous", |p| p.anon_kib),
        ("rss-file", "RSS, file-backed", |p| p.file_kib),
        ("rss-shmem", "RSS, shared memory", |p| p.shmem_kib),
        ("swap", "Swapped out", |p| p.swap_kib),
    ];
    for (id, title, pick) in memory {
        all.push(Series {
            id: id.into(),
            title: title.into(),
            unit: "MiB".into(),
            points: o
                .memory
                .series
                .iter()
                .map(|p| (p.t, mib(pick(p))))
                .collect(),
        });
    }
    all
}

fn charts(page: &mut String, run: &DiagnoseRun, series: &[Series]) {
    page.push_str("<section id=\"series\">\n<h2>Over the window</h2>\n<div class=\"charts\">\n");
    for s in series {
        let caption = shape_of(run, &s.id)
            .map(|c| format!("<figcaption>{}</figcaption>", esc(&c)))
            .unwrap_or_default();
        let _ = writeln!(
            page,
            "<figure class=\"chart\" data-series=\"{}\">{}{caption}</figure>",
            esc(&s.id),
            line_chart(s)
        );
    }
    page.push_str("</div>\n</section>\n");
}

/// What the trend said of series `name`, for its chart's caption.
fn shape_of(run: &DiagnoseRun, name: &str) -> Option<String> {
    let t = &run.diagnosis.trend;
    let s = t.series.iter().find(|s| s.name == name)?;
    Some(super::diagnose::shape_text(s, t.memory_limit.as_ref()))
}

/// The drill-downs' flame graphs: inferno's SVG inline, with its script
/// run on that graph alone.
fn flame_graphs(page: &mut String, why: Option<&Why>) {
    let graphs = [
        (
            "flame-cpu",
            "CPU flame graph",
            why.and_then(|w| w.cpu_flame.as_ref()),
        ),
        (
            "flame-offcpu",
            "Off-CPU flame graph",
            why.and_then(|w| w.offcpu_flame.as_ref()),
        ),
    ];
    if graphs.iter().all(|g| g.2.is_none()) {
        return;
    }
    page.push_str("<section id=\"flame-graphs\">\n");
    let _ = writeln!(page, "<script>{FLAME_SCOPE}</script>");
    for (id, title, flame) in graphs {
        if let Some(f) = flame {
            flame_graph(page, id, title, f);
        }
    }
    page.push_str("</section>\n");
}

/// When the time went: the drill-down's window per thread as a heat map,
/// a range of which redraws a flame graph in the page (`profile --wall
/// --html`'s, from `render::wall_html`).
fn heat_map(page: &mut String, why: Option<&Why>) -> anyhow::Result<()> {
    let Some(wall) = why.and_then(|w| w.wall.as_ref()) else {
        return Ok(());
    };
    let _ = writeln!(
        page,
        "<section id=\"when\">\n<p class=\"meta\">The drill-down's {:.1} s again, per thread: \
         on CPU sampled at {} Hz, {}.</p>",
        wall.window_ns as f64 / 1e9,
        wall.freq_hz,
        esc(&crate::render::wall::offcpu_source(wall))
    );
    page.push_str(&crate::render::wall_html::section(wall)?);
    page.push_str("</section>\n");
    Ok(())
}

fn flame_graph(page: &mut String, id: &str, title: &str, flame: &Flame) {
    use crate::model::profile::WeightUnit;
    let width = match flame.unit {
        WeightUnit::Samples => "CPU samples".to_string(),
        WeightUnit::Nanoseconds => "time blocked".to_string(),
        WeightUnit::Events => format!("{} counted", esc(&flame.event)),
    };
    let _ = writeln!(
        page,
        "<h2>{title}</h2>\n<p class=\"meta\">Click a frame to zoom, \"Search\" to highlight \
         functions; width is {width}.</p>"
    );
    match crate::render::flamegraph::svg_of(flame) {
        Ok(svg) => {
            let (svg, script) = inline_flame(&String::from_utf8_lossy(&svg), id);
            let _ = writeln!(
                page,
                "<div class=\"flame\">{svg}</div>\n<script>kdiagFlame(\"{id}\", function (document, window, history) {{\n\
                 var total_samples, text, originalContent, bangWidth, wWidth;\n{script}\ninit();\n}});</script>"
            );
        }
        Err(e) => {
            let _ = writeln!(page, "<p>{}</p>", esc(&e.to_string()));
        }
    }
}

/// Runs an inline flame graph's own script against that graph alone:
/// inferno's script looks its elements up in the document and listens on
/// the window, which a page with two graphs shares. Zoom state is not put
/// in the page's address (two graphs would share it).
const FLAME_SCOPE: &str = r#"
function kdiagFlame(id, graph) {
  var root = document.getElementById(id);
  var doc = {
    getElementById: function (i) { return root.querySelector('[id="' + i + '"]'); },
    getElementsByTagName: function (t) { return t === "svg" ? [root] : root.getElementsByTagName(t); },
    querySelector: function (s) { return root.querySelector(s); },
    querySelectorAll: function (s) { return root.querySelectorAll(s); }
  };
  var win = {
    addEventListener: function (type, f, c) {
      if (type === "resize") { window.addEventListener(type, f, c); }
      else if (type !== "keydown") { root.addEventListener(type, f, c); }
    },
    location: { search: "", href: "" }
  };
  graph(doc, win, { replaceState: function () {} });
}
"#;

/// Inferno's standalone SVG made an inline element: no XML prologue, an
/// id, its own gradient id, and its script taken out (returned, to run
/// through `kdiagFlame`) with the `onload` that called it.
fn inline_flame(svg: &str, id: &str) -> (String, String) {
    let mut s = svg[svg.find("<svg").unwrap_or(0)..].to_string();
    s = s.replacen("<svg", &format!("<svg id=\"{id}\""), 1);
    s = s.replacen(" onload=\"init(evt)\"", "", 1);
    s = s.replace("id=\"background\"", &format!("id=\"{id}-background\""));
    s = s.replace("url(#background)", &format!("url(#{id}-background)"));
    let mut script = String::new();
    if let Some(start) = s.find("<script") {
        let end = s[start..]
            .find("</script>")
            .map_or(s.len(), |e| start + e + "</script>".len());
        let element = &s[start..end];
        let body = element
            .find('>')
            .map_or("", |b| &element[b + 1..])
            .trim_end_matches("</script>");
        script = body.replace("<![CDATA[", "").replace("]]>", "");
        s.replace_range(start..end, "");
    }
    // Nothing in the script may end the page's <script> element.
    (s, script.replace("</", "<\\/"))
}

/// The storage drill-down (iosnoop's summary of the target's block I/O):
/// its latency histogram as a chart, and the summary as the text report
/// gives it.
fn iosnoop(page: &mut String, run: &DiagnoseRun) {
    let Some(s) = run.why.as_ref().and_then(|w| w.storage.as_ref()) else {
        return;
    };
    let bars = Bars {
        id: "latency".into(),
        title: "Block I/O latency".into(),
        unit: "requests".into(),
        bars: s
            .latency_us
            .iter()
            .enumerate()
            .map(|(k, &n)| (bucket(k), n as f64))
            .collect(),
    };
    let mut text = Vec::new();
    let _ = crate::render::drill::storage(&mut text, s);
    let _ = writeln!(
        page,
        "<section id=\"storage\">\n<h2>Storage (the block I/O it caused)</h2>\n\
         <figure class=\"histogram\" data-histogram=\"latency\">{}</figure>\n<pre>{}</pre>\n</section>",
        bar_chart(&bars),
        esc(&String::from_utf8_lossy(&text))
    );
}

/// The label of log2 latency bucket `k` (2^k to 2^(k+1)-1 us): its lower
/// bound.
fn bucket(k: usize) -> String {
    let us = 1u64 << k.min(63);
    if us >= 1_000_000 {
        format!("{} s", us / 1_000_000)
    } else if us >= 1000 {
        format!("{} ms", us / 1000)
    } else {
        format!("{us} us")
    }
}

fn next(page: &mut String, run: &DiagnoseRun) {
    if run.diagnosis.next.is_empty() {
        return;
    }
    page.push_str("<section id=\"next\">\n<h2>To look further</h2>\n<ul>\n");
    for n in &run.diagnosis.next {
        let _ = writeln!(page, "<li><code>{}</code></li>", esc(n));
    }
    page.push_str("</ul>\n</section>\n");
}

fn cost(page: &mut String, run: &DiagnoseRun) {
    let _ = writeln!(
        page,
        "<p class=\"cost\" id=\"cost\">{}</p>",
        esc(&crate::render::diagnose::cost_line(&run.observation))
    );
}

/// The text report too, folded away: everything it says is in the page.
fn text_report(page: &mut String, run: &DiagnoseRun) -> anyhow::Result<()> {
    let mut text = Vec::new();
    crate::render::diagnose::report(
        &mut text,
        &run.observation,
        &run.diagnosis,
        run.why.as_ref(),
    )?;
    let _ = writeln!(
        page,
        "<details id=\"text-report\"><summary>The text report</summary><pre>{}</pre></details>",
        esc(&String::from_utf8_lossy(&text))
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_buckets_are_named_by_their_lower_bound() {
        assert_eq!(bucket(0), "1 us");
        assert_eq!(bucket(10), "1 ms");
        assert_eq!(bucket(20), "1 s");
    }

    #[test]
    fn an_inline_flame_graph_keeps_its_frames_and_gives_up_its_script() {
        let flame = Flame {
            target: "PID 7 (burn)".into(),
            samples: 3,
            lines: vec!["burn;main;hot 3".into()],
            ..Default::default()
        };
        let svg = crate::render::flamegraph::svg_of(&flame).unwrap();
        let (svg, script) = inline_flame(&String::from_utf8(svg).unwrap(), "flame-cpu");
        assert!(svg.starts_with("<svg id=\"flame-cpu\""), "{svg}");
        assert!(!svg.contains("<script") && !svg.contains("onload"), "{svg}");
        assert!(svg.contains("url(#flame-cpu-background)"), "{svg}");
        assert!(
            svg.contains("<title>hot (3 samples, 100.00%)</title>"),
            "{svg}"
        );
        assert!(script.contains("function init(evt)") && !script.contains("CDATA"));
        assert!(!script.contains("</"), "{script}");
    }
}
