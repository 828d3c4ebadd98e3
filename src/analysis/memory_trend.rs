//! Is anonymous memory growing? Judged on anonymous RSS plus swap (memory
//! the process holds, wherever it is), after a warm-up, as a sustained
//! least-squares slope (`trend::fit`): a one-off step (an interpreter
//! loading, a buffer allocated once) is not a trend, nor are file pages
//! read through mmap (those are the page cache, and storage waits).

use crate::model::diagnosis::MemoryPoint;

/// The first part of the window is left out: a command just started loads
/// and allocates once. At most 1 s, at most a quarter of the window.
const WARM_UP_S: f64 = 1.0;
const WARM_UP_SHARE: f64 = 0.25;
/// A trend grows at least this much after the warm-up, this fast.
pub const GROWTH_MIN_KIB: f64 = 2048.0;
pub const RATE_MIN_KIB_S: f64 = 256.0;
/// Sustained: every third of the rest grows by at least this share of the
/// growth, and no single step between two reads is more than half of it.
const THIRD_MIN: f64 = 0.1;
const STEP_MAX: f64 = 0.5;

#[derive(Debug, Clone, PartialEq)]
pub struct Trend {
    pub warm_up_s: f64,
    /// Growth from the end of the warm-up to the end (KiB).
    pub growth_kib: f64,
    /// Least-squares slope after the warm-up (KiB/s).
    pub slope_kib_s: f64,
    /// How well a line fits (r²).
    pub fit: f64,
    /// Growth spread over the window, not one step.
    pub sustained: bool,
}

impl Trend {
    /// Growing enough, fast enough, steadily enough to call it a leak.
    pub fn is_leak(&self) -> bool {
        self.sustained && self.growth_kib >= GROWTH_MIN_KIB && self.slope_kib_s >= RATE_MIN_KIB_S
    }
}

fn held(p: &MemoryPoint) -> f64 {
    (p.anon_kib + p.swap_kib) as f64
}

/// The trend of the series after its warm-up; None with fewer than four
/// points left.
pub fn trend(series: &[MemoryPoint], window_s: f64) -> Option<Trend> {
    let warm_up_s = WARM_UP_S.min(window_s * WARM_UP_SHARE);
    let v: Vec<&MemoryPoint> = series.iter().filter(|p| p.t >= warm_up_s).collect();
    if v.len() < 4 {
        return None;
    }
    let points: Vec<(f64, f64)> = v.iter().map(|p| (p.t, held(p))).collect();
    let line = crate::analysis::trend::fit(&points)?;
    let growth = held(v[v.len() - 1]) - held(v[0]);
    let third = |i: usize| {
        let a = v[(v.len() - 1) * i / 3];
        let b = v[(v.len() - 1) * (i + 1) / 3];
        held(b) - held(a)
    };
    let biggest_step = v
        .windows(2)
        .map(|w| held(w[1]) - held(w[0]))
        .fold(0.0, f64::max);
    let sustained = growth > 0.0
        && (0..3).all(|i| third(i) >= THIRD_MIN * growth)
        && biggest_step <= STEP_MAX * growth;
    Some(Trend {
        warm_up_s,
        growth_kib: growth,
        slope_kib_s: line.slope,
        fit: line.fit,
        sustained,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(f: impl Fn(f64) -> u64) -> Vec<MemoryPoint> {
        (0..21)
            .map(|i| {
                let t = i as f64 * 0.25;
                MemoryPoint {
                    t,
                    anon_kib: f(t),
                    file_kib: 1000,
                    ..Default::default()
                }
            })
            .collect()
    }

    #[test]
    fn a_steady_leak_is_a_trend() {
        let s = series(|t| 10_000 + (t * 4096.0) as u64);
        let tr = trend(&s, 5.0).unwrap();
        assert!(tr.is_leak(), "{tr:?}");
        assert!((tr.slope_kib_s - 4096.0).abs() < 50.0);
        assert!(tr.fit > 0.99);
    }

    #[test]
    fn one_allocation_at_the_start_is_not() {
        // 100 MiB in the first 0.5 s, then flat.
        let s = series(|t| if t < 0.5 { 2_000 } else { 102_400 });
        assert!(!trend(&s, 5.0).unwrap().is_leak());
    }

    #[test]
    fn one_step_later_is_not_either() {
        // Flat, one 50 MiB allocation at 3 s, flat again.
        let s = series(|t| if t < 3.0 { 10_000 } else { 61_200 });
        let tr = trend(&s, 5.0).unwrap();
        assert!(!tr.sustained && !tr.is_leak(), "{tr:?}");
    }

    #[test]
    fn file_pages_do_not_count() {
        let s: Vec<MemoryPoint> = series(|_| 5_000)
            .into_iter()
            .map(|mut p| {
                p.file_kib = 1000 + (p.t * 40_000.0) as u64;
                p
            })
            .collect();
        assert!(!trend(&s, 5.0).unwrap().is_leak());
    }

    #[test]
    fn swapped_out_memory_still_counts() {
        let s: Vec<MemoryPoint> = series(|_| 5_000)
            .into_iter()
            .map(|mut p| {
                p.swap_kib = (p.t * 2048.0) as u64;
                p
            })
            .collect();
        assert!(trend(&s, 5.0).unwrap().is_leak());
    }
}
