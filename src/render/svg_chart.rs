//! Small inline SVG line charts, one per time series, for HTML reports:
//! drawn here (no script, no library), from zero to a rounded maximum.

use std::fmt::Write;

/// One time series to chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// A short name, unique in the page (`rss-anon`).
    pub id: String,
    pub title: String,
    /// The unit of the values (`MiB`, `threads`).
    pub unit: String,
    /// (seconds since the start, value), in time order.
    pub points: Vec<(f64, f64)>,
}

const W: f64 = 360.0;
const H: f64 = 150.0;
/// Plot area: left, right, top, bottom.
const L: f64 = 48.0;
const R: f64 = 352.0;
const T: f64 = 24.0;
const B: f64 = 126.0;

/// The chart of `s`: an `<svg>` element with the title, the y axis from 0
/// to a round maximum, the x axis in seconds, and the line.
pub fn line_chart(s: &Series) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg class="chart-svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{}" xmlns="http://www.w3.org/2000/svg">"#,
        escape(&s.title)
    );
    let _ = write!(
        out,
        r#"<text class="chart-title" x="{L}" y="14">{} ({})</text>"#,
        escape(&s.title),
        escape(&s.unit)
    );
    let _ = write!(
        out,
        r##"<path class="axis" d="M{L} {T}V{B}H{R}" fill="none" stroke="#888"/>"##
    );
    if s.points.is_empty() {
        let _ = write!(
            out,
            r#"<text class="chart-empty" x="{}" y="{}">no data</text></svg>"#,
            (L + R) / 2.0 - 20.0,
            (T + B) / 2.0
        );
        return out;
    }
    let t_end = s.points.iter().map(|p| p.0).fold(0.0, f64::max).max(1e-9);
    let top = nice_max(s.points.iter().map(|p| p.1).fold(0.0, f64::max));
    let x = |t: f64| L + (R - L) * t / t_end;
    let y = |v: f64| B - (B - T) * v.max(0.0) / top;
    for (label, v) in [(number(top), top), ("0".to_string(), 0.0)] {
        let _ = write!(
            out,
            r#"<text class="tick" x="{}" y="{:.1}" text-anchor="end">{label}</text>"#,
            L - 4.0,
            y(v) + 4.0
        );
    }
    let _ = write!(
        out,
        r#"<text class="tick" x="{L}" y="{}">0 s</text><text class="tick" x="{R}" y="{}" text-anchor="end">{} s</text>"#,
        B + 16.0,
        B + 16.0,
        number(t_end)
    );
    let line: Vec<String> = s
        .points
        .iter()
        .map(|&(t, v)| format!("{:.1},{:.1}", x(t), y(v)))
        .collect();
    if line.len() == 1 {
        let (t, v) = s.points[0];
        let _ = write!(
            out,
            r##"<circle class="line" cx="{:.1}" cy="{:.1}" r="3" fill="#c0392b"/>"##,
            x(t),
            y(v)
        );
    } else {
        let _ = write!(
            out,
            r##"<polyline class="line" points="{}" fill="none" stroke="#c0392b" stroke-width="1.5"/>"##,
            line.join(" ")
        );
    }
    out.push_str("</svg>");
    out
}

/// A round number at or above `v` (1, 2 or 5 times a power of ten), for
/// the y axis; 1 for an all-zero series.
fn nice_max(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|&c| c >= v * (1.0 - 1e-12))
        .unwrap_or(10.0 * p)
}

/// A short label: no trailing zeros.
fn number(v: f64) -> String {
    let s = if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Text safe in HTML and SVG content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_are_round_and_the_line_has_every_point() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(3.2), 5.0);
        assert_eq!(nice_max(20.0), 20.0);
        assert_eq!(nice_max(0.07), 0.1);
        let s = Series {
            id: "busy".into(),
            title: "Working threads".into(),
            unit: "threads".into(),
            points: vec![(0.0, 1.0), (0.1, 2.0), (0.2, 1.5)],
        };
        let svg = line_chart(&s);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"), "{svg}");
        let points = svg
            .split("points=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert_eq!(points.split(' ').count(), 3, "{svg}");
        assert!(svg.contains(">2</text>"), "the y axis tops at 2: {svg}");
    }

    #[test]
    fn empty_and_single_point_series_still_draw() {
        let mut s = Series {
            id: "x".into(),
            title: "A <b>".into(),
            unit: "MiB".into(),
            points: vec![],
        };
        assert!(line_chart(&s).contains("no data"));
        assert!(line_chart(&s).contains("A &lt;b&gt;"));
        s.points.push((0.0, 4.0));
        assert!(line_chart(&s).contains("<circle"));
    }
}
