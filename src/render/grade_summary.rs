//! `kdiag grade … --summary --format html`: the class at a glance as one
//! self-contained page (no script, no network): the score distribution as
//! a bar chart, each check's pass rate with the most missed first, the
//! flags and why submissions could not be graded.

use std::fmt::Write as _;

use crate::model::class_summary::{Summary, round};
use crate::render::svg_chart::{Bars, bar_chart, escape as esc};

pub fn html(s: &Summary) -> String {
    let mut out =
        String::from("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    let _ = writeln!(
        out,
        "<title>kdiag: lab {} at a glance</title>\n<style>body{{font-family:sans-serif;margin:2em;max-width:60em}}\
         table{{border-collapse:collapse}}td,th{{padding:.2em .8em;text-align:left}}\
         .rate{{display:inline-block;height:.8em;background:#4a7}}</style></head><body>",
        esc(&s.lab)
    );
    let _ = writeln!(
        out,
        "<h1>Lab {}</h1>\n<p>Checks version <code>{}</code>: {} graded, {} could not be graded, {} missing.</p>",
        esc(&s.lab),
        esc(&s.checks_version),
        s.graded,
        s.not_gradable.len(),
        s.missing.len()
    );
    let bars = Bars {
        id: "scores".into(),
        title: format!("Scores (of {} points)", s.max_score),
        unit: "submissions".into(),
        bars: (0..s.distribution.len())
            .map(|i| (s.bin_label(i), s.distribution[i] as f64))
            .collect(),
    };
    let _ = writeln!(out, "<h2>Scores</h2>\n{}", bar_chart(&bars));
    if let (Some(mean), Some(median)) = (s.mean, s.median) {
        let _ = writeln!(out, "<p>mean {mean:.2}, median {median}</p>");
    }
    out.push_str("<h2>Checks, the most missed first</h2>\n<table><tr><th>check</th><th>name</th><th>passed</th><th>missed by</th><th>attempts per submission</th></tr>\n");
    for c in &s.checks {
        let pct = c.rate() * 100.0;
        let _ = writeln!(
            out,
            "<tr><td><code>{}</code></td><td>{}</td><td><span class=\"rate\" style=\"width:{:.0}px\"></span> {pct:.0}%</td><td>{}</td><td>{}</td></tr>",
            esc(&c.id),
            esc(&c.name),
            pct,
            c.missed,
            c.mean_attempts()
                .map(|m| format!("mean {}, most {}", round(m), c.most_attempts))
                .unwrap_or_else(|| "not recorded".into())
        );
    }
    out.push_str("</table>\n");
    let _ = writeln!(out, "<h2>Flags ({})</h2>\n<ul>", s.flags.len());
    for f in &s.flags {
        let _ = writeln!(out, "<li>{}</li>", esc(f));
    }
    let _ = writeln!(
        out,
        "</ul>\n<h2>Not gradable ({})</h2>\n<ul>",
        s.not_gradable.len()
    );
    for (sub, why) in &s.not_gradable {
        let _ = writeln!(out, "<li><code>{}</code>: {}</li>", esc(sub), esc(why));
    }
    let _ = writeln!(
        out,
        "</ul>\n<h2>Missing ({})</h2>\n<p>{}</p>",
        s.missing.len(),
        esc(&s.missing.join(", "))
    );
    out.push_str("</body></html>\n");
    out
}
