//! What each of diagnose's time series does over the window, in this
//! order: **growing** (a sustained least-squares slope, not one step), then
//! **periodic** (a peak of the autocorrelation after it first falls below
//! zero, at most half the window: two cycles seen), then a **one-off
//! change** (two levels fit far better than one), else **steady**. A
//! series whose whole range stays within its unit's noise floor is steady
//! at once. The one place for slopes (`fit`): memory_trend uses it too.

use crate::analysis::io_pattern::human_bytes;
use crate::model::trend::{Limit, Series, SeriesShape, Shape, Shapes, Trend};

/// Fewer points than this are too few to say anything.
pub const MIN_POINTS: usize = 5;
/// Growing: a line fits this well (r²), ...
const GROWING_FIT: f64 = 0.8;
/// ... each third's mean moves on by this share of the growth, ...
const THIRD_MIN: f64 = 0.15;
/// ... and no one step between points is more than this share of it.
const STEP_MAX: f64 = 0.5;
/// Periodic: the autocorrelation at the period is at least this.
const PERIODIC_MIN: f64 = 0.4;
/// The fundamental is the first peak at least this share of the highest
/// (bursts that vary, or fall across two points, can make a multiple of
/// the period repeat better than the period itself).
const FUNDAMENTAL: f64 = 0.5;
/// A change: two levels explain this share of the variance, ...
const CHANGE_FIT: f64 = 0.7;
/// ... and they are this many within-level deviations apart.
const CHANGE_SIGMAS: f64 = 4.0;

/// A least-squares line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Line {
    pub slope: f64,
    pub intercept: f64,
    /// r²: 1 is a perfect line, 0 no line at all (or a flat series).
    pub fit: f64,
}

/// The least-squares line through `points` (t, value); None with fewer
/// than two points or all at one time.
pub fn fit(points: &[(f64, f64)]) -> Option<Line> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mt = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mv = points.iter().map(|p| p.1).sum::<f64>() / n;
    let cov: f64 = points.iter().map(|p| (p.0 - mt) * (p.1 - mv)).sum();
    let var_t: f64 = points.iter().map(|p| (p.0 - mt).powi(2)).sum();
    let var_v: f64 = points.iter().map(|p| (p.1 - mv).powi(2)).sum();
    if var_t <= 0.0 {
        return None;
    }
    let slope = cov / var_t;
    Some(Line {
        slope,
        intercept: mv - slope * mt,
        fit: if var_v > 0.0 {
            cov * cov / (var_t * var_v)
        } else {
            0.0
        },
    })
}

/// The smallest change worth a word in `unit`: below it a series is steady.
pub fn noise_floor(unit: &str) -> f64 {
    match unit {
        "%" => 5.0,
        "CPUs" => 0.05,
        "B/s" => 64.0 * 1024.0,
        "B" => 1024.0 * 1024.0,
        "/s" => 50.0,
        "s/s" => 0.05,
        _ => 0.0,
    }
}

/// A value in its unit, for people: "42.1 MiB", "3.0 MiB/s", "98%",
/// "0.97 CPUs", "1200/s", "0.25 s/s".
pub fn value_text(v: f64, unit: &str) -> String {
    let bytes = |v: f64| {
        let s = human_bytes(v.abs().round() as u64);
        if v < 0.0 { format!("-{s}") } else { s }
    };
    match unit {
        "B" => bytes(v),
        "B/s" => format!("{}/s", bytes(v)),
        "%" => format!("{v:.0}%"),
        "CPUs" => format!("{v:.2} CPUs"),
        "/s" => format!("{v:.0}/s"),
        "s/s" => format!("{v:.2} s/s"),
        u => format!("{v:.2} {u}"),
    }
}

/// A slope, signed, per second: "+2.1 MiB/s", "-0.05 CPUs per second".
pub fn slope_text(slope: f64, unit: &str) -> String {
    let sign = if slope < 0.0 { "-" } else { "+" };
    let v = value_text(slope.abs(), unit);
    match unit {
        "B" => format!("{sign}{v}/s"),
        _ => format!("{sign}{v} per second"),
    }
}

/// A time ahead, roughly: "about 40 s", "about 4 min", "about 3 h",
/// "about 2 days".
pub fn about(secs: f64) -> String {
    match secs {
        s if s < 90.0 => format!("about {s:.0} s"),
        s if s < 90.0 * 60.0 => format!("about {:.0} min", s / 60.0),
        s if s < 48.0 * 3600.0 => format!("about {:.0} h", s / 3600.0),
        s => format!("about {:.0} days", s / 86400.0),
    }
}

/// Every series' shape; none when the window held fewer than MIN_POINTS.
pub fn shapes(t: &Trend) -> Shapes {
    let most = t.series.iter().map(|s| s.points.len()).max().unwrap_or(0);
    let mut out = Shapes {
        memory_limit: t.memory_limit.clone(),
        ..Default::default()
    };
    if most < MIN_POINTS {
        out.too_few_points = Some(most);
        return out;
    }
    out.series = t
        .series
        .iter()
        .filter_map(|s| {
            Some(SeriesShape {
                name: s.name.clone(),
                unit: s.unit.clone(),
                shape: shape(s, t.memory_limit.as_ref())?,
            })
        })
        .collect();
    out
}

/// The trend's thread-state series (percent of the thread time, named
/// by `ThreadState::describe`) made to agree with the window's `states`:
/// they were split live, before the waiters' stacks moved waits between
/// states (a runtime's lock, an event no thread held, throttled time).
/// Each point keeps its total; a state that lost time gives it, in
/// proportion, to those that gained it, so each series' mean is the
/// window's share and the trend is read on the verdict's classes.
pub fn on_window_states(t: &Trend, states: &[crate::model::diagnosis::StateShare]) -> Trend {
    use crate::model::diagnosis::ThreadState::*;
    let all = [
        OnCpu, RunQueue, Storage, Lock, Paging, Stopped, Sleeping, Other,
    ];
    let mut out = t.clone();
    // A class the live split never saw (a lock found only in the waiters'
    // stacks) gets a series to gain its time in, after the other states.
    let share = |st| {
        states
            .iter()
            .find(|x| x.state == st)
            .map_or(0.0, |x| x.share)
    };
    let last_state = out
        .series
        .iter()
        .rposition(|s| all.iter().any(|st| s.name == st.describe()));
    if let Some(at) = last_state {
        let (unit, times) = (
            out.series[at].unit.clone(),
            out.series[at]
                .points
                .iter()
                .map(|p| (p.0, 0.0))
                .collect::<Vec<_>>(),
        );
        let missing = all
            .iter()
            .filter(|st| share(**st) > 0.0 && !out.series.iter().any(|s| s.name == st.describe()));
        let new: Vec<Series> = missing
            .map(|st| Series {
                name: st.describe().to_string(),
                unit: unit.clone(),
                points: times.clone(),
            })
            .collect();
        out.series.splice(at + 1..at + 1, new);
    }
    let idx: Vec<(usize, f64)> = all
        .iter()
        .filter_map(|st| {
            let i = out.series.iter().position(|s| s.name == st.describe())?;
            let want = share(*st) * 100.0;
            Some((i, want))
        })
        .collect();
    let mean = |s: &Series| s.values().sum::<f64>() / s.points.len().max(1) as f64;
    // Per state: the share of its points it keeps, and what it must gain.
    let plan: Vec<(usize, f64, f64)> = idx
        .iter()
        .map(|&(i, want)| {
            let m = mean(&out.series[i]);
            let keep = if m > 0.0 { (want / m).min(1.0) } else { 1.0 };
            (i, keep, (want - m.min(want)).max(0.0))
        })
        .collect();
    let need: f64 = plan.iter().map(|p| p.2).sum();
    if need <= 1e-9 {
        return out;
    }
    let n = plan
        .iter()
        .map(|p| out.series[p.0].points.len())
        .min()
        .unwrap_or(0);
    for k in 0..n {
        let mut given = 0.0;
        for &(i, keep, _) in &plan {
            let v = &mut out.series[i].points[k].1;
            given += *v * (1.0 - keep);
            *v *= keep;
        }
        for &(i, _, gain) in &plan {
            out.series[i].points[k].1 += given * gain / need;
        }
    }
    out
}

/// What one series does; None with fewer than MIN_POINTS points.
pub fn shape(s: &Series, limit: Option<&Limit>) -> Option<Shape> {
    let p = &s.points;
    if p.len() < MIN_POINTS {
        return None;
    }
    let v: Vec<f64> = s.values().collect();
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let (lo, hi) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    let floor = noise_floor(&s.unit);
    if hi - lo <= floor {
        return Some(Shape::Steady { mean });
    }
    if let Some(line) = growing(p, floor) {
        let reaches_limit_s = limit
            .filter(|_| s.unit == "B" && line.slope > 0.0)
            .map(|l| l.headroom_bytes as f64 / line.slope);
        return Some(Shape::Growing {
            slope: line.slope,
            fit: line.fit,
            reaches_limit_s,
        });
    }
    let dt = (p[p.len() - 1].0 - p[0].0) / (p.len() - 1) as f64;
    if let Some(periodic) = periodic(&v, dt) {
        return Some(periodic);
    }
    if let Some(change) = change(p, floor) {
        return Some(change);
    }
    Some(Shape::Steady { mean })
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// A sustained slope: a line fits, it moves the series by more than the
/// noise floor twice over, every third moves on, and no single step makes
/// the growth (that would be a change).
fn growing(p: &[(f64, f64)], floor: f64) -> Option<Line> {
    let line = fit(p)?;
    let growth = line.slope * (p[p.len() - 1].0 - p[0].0);
    if line.fit < GROWING_FIT || growth.abs() < 2.0 * floor || growth == 0.0 {
        return None;
    }
    let v: Vec<f64> = p.iter().map(|x| x.1).collect();
    let n = v.len();
    let thirds: Vec<f64> = (0..3)
        .map(|i| mean(&v[n * i / 3..n * (i + 1) / 3]))
        .collect();
    let sustained = thirds
        .windows(2)
        .all(|w| (w[1] - w[0]) / growth >= THIRD_MIN);
    let biggest_step = v
        .windows(2)
        .map(|w| (w[1] - w[0]) / growth)
        .fold(0.0, f64::max);
    (sustained && biggest_step <= STEP_MAX).then_some(line)
}

/// The autocorrelation of `v` (unbiased: each lag's sum over its own
/// number of pairs), lags 0..=max_lag.
fn autocorrelation(v: &[f64], max_lag: usize) -> Vec<f64> {
    let n = v.len();
    let m = mean(v);
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n as f64;
    (0..=max_lag.min(n - 1))
        .map(|k| {
            let s: f64 = (0..n - k).map(|i| (v[i] - m) * (v[i + k] - m)).sum();
            if var > 0.0 {
                s / (n - k) as f64 / var
            } else {
                0.0
            }
        })
        .collect()
}

/// The peak of `r` at `k` refined between its neighbours (a parabola).
fn refine(r: &[f64], k: usize) -> f64 {
    if k == 0 || k + 1 >= r.len() {
        return k as f64;
    }
    let (a, b, c) = (r[k - 1], r[k], r[k + 1]);
    let d = a - 2.0 * b + c;
    if d >= 0.0 {
        return k as f64;
    }
    k as f64 + (0.5 * (a - c) / d).clamp(-0.5, 0.5)
}

/// The highest local peak of `r` within one lag of `lag`.
fn peak_near(r: &[f64], lag: f64) -> Option<usize> {
    let k = lag.round() as usize;
    (k.saturating_sub(1)..=k + 1)
        .filter(|&i| i > 0 && i + 1 < r.len())
        .max_by(|&a, &b| r[a].total_cmp(&r[b]))
}

/// Periodic, from the autocorrelation (`dt` seconds between values, summed
/// in pairs): its
/// first strong peak after it first falls below zero, among lags up to half the
/// series; the period refined by the peaks at its multiples (further lags
/// measure it more finely); the duty the share of values above the middle
/// of the low and high levels, which stand twice the noise floor apart.
fn periodic(v: &[f64], dt: f64) -> Option<Shape> {
    let n = v.len();
    // Summed in pairs: a burst that falls across two points counts whole,
    // so bursts that drift by part of an interval still line up.
    let pairs: Vec<f64> = v.windows(2).map(|w| w[0] + w[1]).collect();
    let r = autocorrelation(&pairs, n * 3 / 4);
    let half = n / 2;
    let zero = (1..=half.min(r.len() - 1)).find(|&k| r[k] < 0.0)?;
    let peaks: Vec<usize> = (zero..half.min(r.len() - 1))
        .filter(|&k| r[k] >= r[k - 1] && r[k] >= r[k + 1])
        .collect();
    let best = peaks
        .iter()
        .map(|&k| r[k])
        .fold(f64::NEG_INFINITY, f64::max);
    if best < PERIODIC_MIN {
        return None;
    }
    let k = *peaks
        .iter()
        .find(|&&k| r[k] >= (FUNDAMENTAL * best).max(PERIODIC_MIN))?;
    let mut period = refine(&r, k);
    for m in 2.. {
        let Some(km) = peak_near(&r, period * m as f64) else {
            break;
        };
        if km + 1 >= r.len() || r[km] < FUNDAMENTAL * r[k] {
            break;
        }
        period = refine(&r, km) / m as f64;
    }
    let mid = (v.iter().copied().fold(f64::INFINITY, f64::min)
        + v.iter().copied().fold(f64::NEG_INFINITY, f64::max))
        / 2.0;
    let high_v: Vec<f64> = v.iter().copied().filter(|&x| x >= mid).collect();
    let low_v: Vec<f64> = v.iter().copied().filter(|&x| x < mid).collect();
    let (low, high) = (mean(&low_v), mean(&high_v));
    let threshold = (low + high) / 2.0;
    let duty = v.iter().filter(|&&x| x >= threshold).count() as f64 / n as f64;
    Some(Shape::Periodic {
        period_s: period * dt,
        duty,
        strength: r[k],
        low,
        high,
    })
}

/// One step: the split into two levels (at least two points each) that
/// leaves the least variance, when the levels explain most of it and stand
/// well apart.
fn change(p: &[(f64, f64)], floor: f64) -> Option<Shape> {
    let v: Vec<f64> = p.iter().map(|x| x.1).collect();
    let n = v.len();
    let m = mean(&v);
    let total: f64 = v.iter().map(|x| (x - m).powi(2)).sum();
    let sse = |s: &[f64]| {
        let m = mean(s);
        s.iter().map(|x| (x - m).powi(2)).sum::<f64>()
    };
    let (k, left) = (2..=n - 2)
        .map(|k| (k, sse(&v[..k]) + sse(&v[k..])))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    let (before, after) = (mean(&v[..k]), mean(&v[k..]));
    let sigma = (left / (n - 2) as f64).sqrt();
    let apart = (after - before).abs();
    let explained = total > 0.0 && 1.0 - left / total >= CHANGE_FIT;
    (explained && apart >= 2.0 * floor && apart >= CHANGE_SIGMAS * sigma).then(|| Shape::Change {
        at_s: p[k - 1].0,
        before,
        after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` points every `dt` seconds of `f(t)`.
    fn series(unit: &str, n: usize, dt: f64, f: impl Fn(f64) -> f64) -> Series {
        Series {
            name: "x".into(),
            unit: unit.into(),
            points: (1..=n)
                .map(|i| {
                    let t = i as f64 * dt;
                    (t, f(t))
                })
                .collect(),
        }
    }

    /// A deterministic noise in [-1, 1].
    fn noise(t: f64) -> f64 {
        ((t * 12.9898).sin() * 43758.5453).fract()
    }

    #[test]
    fn a_line_is_fitted_exactly() {
        let l = fit(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]).unwrap();
        assert!((l.slope - 2.0).abs() < 1e-12 && (l.intercept - 1.0).abs() < 1e-12);
        assert!((l.fit - 1.0).abs() < 1e-12);
        assert_eq!(fit(&[(1.0, 1.0)]), None);
        assert_eq!(fit(&[(1.0, 1.0), (1.0, 2.0)]), None);
    }

    #[test]
    fn a_flat_or_noisy_series_is_steady() {
        let s = series("CPUs", 30, 1.0, |t| 1.0 + 0.02 * noise(t));
        assert!(
            matches!(shape(&s, None), Some(Shape::Steady { mean }) if (mean - 1.0).abs() < 0.01)
        );
        // Noise well above the floor, but no structure.
        let s = series("%", 60, 0.5, |t| 50.0 + 20.0 * noise(t));
        assert_eq!(
            shape(&s, None).unwrap().name(),
            "steady",
            "{:?}",
            shape(&s, None)
        );
    }

    #[test]
    fn a_leak_grows_with_its_slope_and_the_time_to_the_limit() {
        // 2 MiB/s from 100 MiB, with page-sized noise.
        let mib = 1024.0 * 1024.0;
        let s = series("B", 20, 1.0, |t| {
            100.0 * mib + 2.0 * mib * t + 4096.0 * noise(t)
        });
        let limit = Limit {
            what: "memory.max".into(),
            limit_bytes: (1024.0 * mib) as u64,
            headroom_bytes: (480.0 * mib) as u64,
        };
        let Some(Shape::Growing {
            slope,
            reaches_limit_s,
            fit,
        }) = shape(&s, Some(&limit))
        else {
            panic!("{:?}", shape(&s, Some(&limit)))
        };
        assert!((slope / mib - 2.0).abs() < 0.01 && fit > 0.99);
        assert!((reaches_limit_s.unwrap() - 240.0).abs() < 1.0);
        // Shrinking is a negative slope, with no limit to reach.
        let s = series("B", 20, 1.0, |t| 100.0 * mib - 2.0 * mib * t);
        assert!(matches!(
            shape(&s, Some(&limit)),
            Some(Shape::Growing { slope, reaches_limit_s: None, .. }) if slope < 0.0
        ));
    }

    #[test]
    fn one_step_is_a_change_not_growth() {
        // 0.05 CPUs for 6 s, then 1 CPU.
        let s = series("CPUs", 20, 0.5, |t| {
            (if t <= 6.0 { 0.05 } else { 1.0 }) + 0.01 * noise(t)
        });
        let Some(Shape::Change {
            at_s,
            before,
            after,
        }) = shape(&s, None)
        else {
            panic!("{:?}", shape(&s, None))
        };
        assert_eq!(at_s, 6.0);
        assert!((before - 0.05).abs() < 0.02 && (after - 1.0).abs() < 0.02);
    }

    #[test]
    fn bursts_are_periodic_with_their_period_and_duty() {
        // A 2.5 s period sampled every 0.25 s: one burst point in ten.
        let s = series("B/s", 80, 0.25, |t| {
            if ((t / 0.25).round() as i64) % 10 == 3 {
                3e8 * (1.0 + 0.05 * noise(t))
            } else {
                1e4
            }
        });
        let Some(Shape::Periodic { period_s, duty, .. }) = shape(&s, None) else {
            panic!("{:?}", shape(&s, None))
        };
        assert!((period_s - 2.5).abs() < 0.05, "{period_s}");
        assert!((duty - 0.1).abs() < 0.02, "{duty}");
        // A square wave, period 4 s, half the time high, sampled every
        // 0.3 s: its period is not a whole number of points.
        let s = series("%", 100, 0.3, |t| if (t % 4.0) < 2.0 { 90.0 } else { 10.0 });
        let Some(Shape::Periodic { period_s, duty, .. }) = shape(&s, None) else {
            panic!("{:?}", shape(&s, None))
        };
        assert!((period_s - 4.0).abs() < 0.2, "{period_s}");
        assert!((duty - 0.5).abs() < 0.05, "{duty}");
    }

    #[test]
    fn one_cycle_is_not_periodic() {
        // Up for the first half, down for the second: a change at most.
        let s = series("%", 20, 1.0, |t| if t <= 10.0 { 80.0 } else { 5.0 });
        assert_eq!(shape(&s, None).unwrap().name(), "change");
    }

    #[test]
    fn too_few_points_say_so() {
        let t = Trend {
            interval_s: 1.0,
            series: vec![series("CPUs", 3, 1.0, |t| t)],
            ..Default::default()
        };
        let s = shapes(&t);
        assert_eq!(s.too_few_points, Some(3));
        assert!(s.series.is_empty());
    }

    #[test]
    fn shapes_survive_a_round_trip_through_json() {
        let t = Trend {
            interval_s: 0.5,
            series: vec![series("CPUs", 12, 0.5, |t| if t < 3.0 { 0.0 } else { 1.0 })],
            ..Default::default()
        };
        let s = shapes(&t);
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"class\":\"change\""), "{json}");
        assert_eq!(serde_json::from_str::<Shapes>(&json).unwrap(), s);
        let back: Trend = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
    }
}
