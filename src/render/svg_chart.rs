//! Small inline SVG charts for HTML reports, drawn here (no script, no
//! library), from zero to a rounded maximum: a line chart per time series,
//! a bar chart per histogram.

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

/// A histogram to chart: one bar per bucket, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Bars {
    pub id: String,
    pub title: String,
    /// What the bars count (`requests`).
    pub unit: String,
    /// (the bucket's label, its count).
    pub bars: Vec<(String, f64)>,
}

/// The chart of `b`: an `<svg>` element with a bar per bucket, each with
/// its count in a tooltip, the first, middle and last labels under them.
pub fn bar_chart(b: &Bars) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg class="chart-svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{}" xmlns="http://www.w3.org/2000/svg"><text class="chart-title" x="{L}" y="14">{} ({})</text>"#,
        escape(&b.title),
        escape(&b.title),
        escape(&b.unit)
    );
    let _ = write!(
        out,
        r##"<path class="axis" d="M{L} {T}V{B}H{R}" fill="none" stroke="#888"/>"##
    );
    let top = nice_max(b.bars.iter().map(|x| x.1).fold(0.0, f64::max));
    let _ = write!(
        out,
        r#"<text class="tick" x="{}" y="{}" text-anchor="end">{}</text><text class="tick" x="{}" y="{}" text-anchor="end">0</text>"#,
        L - 4.0,
        T + 4.0,
        number(top),
        L - 4.0,
        B + 4.0
    );
    let n = b.bars.len().max(1) as f64;
    let slot = (R - L) / n;
    let last = b.bars.len().saturating_sub(1);
    for (i, (label, v)) in b.bars.iter().enumerate() {
        let h = (B - T) * v.max(0.0) / top;
        let x = L + slot * i as f64;
        let _ = write!(
            out,
            r##"<rect class="column" x="{:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="#2874a6"><title>{}: {}</title></rect>"##,
            x + slot * 0.1,
            B - h,
            slot * 0.8,
            escape(label),
            number(*v)
        );
        if i == 0 || i == last || i == last / 2 {
            let _ = write!(
                out,
                r#"<text class="tick" x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
                x + slot / 2.0,
                B + 16.0,
                escape(label)
            );
        }
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

/// Text safe in HTML and SVG content and attribute values. Names come
/// from other processes: a control character but a line break or a tab
/// is shown as `?`, as in the text report (`analysis::ps::printable`).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push('?'),
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
    fn markup_and_control_characters_are_escaped() {
        assert_eq!(
            escape("<b x='1'>&\x1b[2J\u{9b}\ttab\nline"),
            "&lt;b x=&#39;1&#39;&gt;&amp;?[2J?\ttab\nline"
        );
    }

    #[test]
    fn a_histogram_has_a_bar_per_bucket() {
        let b = Bars {
            id: "latency".into(),
            title: "Block I/O latency".into(),
            unit: "requests".into(),
            bars: vec![
                ("1 us".into(), 0.0),
                ("2 us".into(), 30.0),
                ("4 us".into(), 7.0),
            ],
        };
        let svg = bar_chart(&b);
        assert_eq!(svg.matches("<rect class=\"column\"").count(), 3, "{svg}");
        assert!(svg.contains("<title>2 us: 30</title>"), "{svg}");
        assert!(svg.contains(">50</text>"), "the axis tops at 50: {svg}");
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
