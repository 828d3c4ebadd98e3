//! `kdiag diagnose`'s time series (one point per interval of each thread
//! state's share, CPU, storage bytes and delay, RSS, faults and context
//! switches) and what each one does over the window (steady, growing,
//! periodic, a one-off change). Plain data: saved and loaded as it is.

use serde::{Deserialize, Serialize};

/// One named series: (seconds since the start of the window, value) at the
/// end of each interval, in `unit` ("CPUs", "B/s", "B", "%", "/s", "s/s").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Series {
    pub name: String,
    pub unit: String,
    pub points: Vec<(f64, f64)>,
}

impl Series {
    pub fn values(&self) -> impl Iterator<Item = f64> + '_ {
        self.points.iter().map(|p| p.1)
    }

    pub fn last(&self) -> Option<f64> {
        self.points.last().map(|p| p.1)
    }
}

/// The series of one window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Trend {
    /// Seconds between points.
    pub interval_s: f64,
    pub series: Vec<Series>,
    /// What the memory series grow towards, when it could be read.
    pub memory_limit: Option<Limit>,
    /// Series that could not be kept, and why.
    pub notes: Vec<String>,
}

impl Trend {
    pub fn get(&self, name: &str) -> Option<&Series> {
        self.series.iter().find(|s| s.name == name)
    }

    /// Add one interval's readings, creating series as they first appear.
    pub fn add(&mut self, r: &Reading) {
        for &(name, unit, v) in &r.values {
            let i = match self.series.iter().position(|s| s.name == name) {
                Some(i) => i,
                None => {
                    self.series.push(Series {
                        name: name.into(),
                        unit: unit.into(),
                        points: Vec::new(),
                    });
                    self.series.len() - 1
                }
            };
            self.series[i].points.push((r.t, v));
        }
    }
}

/// One interval's values, as the observer sends them to a live view:
/// (series name, unit, value) at `t`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    pub t: f64,
    pub values: Vec<(&'static str, &'static str, f64)>,
}

/// The memory limit a growing RSS meets first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limit {
    /// "the cgroup limit (memory.max of /user.slice)", "RLIMIT_AS", "the
    /// machine's available memory (MemAvailable of 7.8 GiB MemTotal)".
    pub what: String,
    pub limit_bytes: u64,
    /// What is left below it at the end of the window.
    pub headroom_bytes: u64,
}

/// What a series does over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "class", rename_all = "kebab-case")]
pub enum Shape {
    /// No change beyond its noise: its mean.
    Steady { mean: f64 },
    /// A sustained slope (unit per second; negative when it shrinks), and
    /// for memory the seconds until it reaches the limit.
    Growing {
        slope: f64,
        /// How well a line fits (r²).
        fit: f64,
        reaches_limit_s: Option<f64>,
    },
    /// Repeats every `period_s`, high `duty` of the time (0 to 1), from the
    /// autocorrelation of the series.
    Periodic {
        period_s: f64,
        duty: f64,
        /// The autocorrelation at the period (1 is a perfect repeat).
        strength: f64,
        low: f64,
        high: f64,
    },
    /// One step from `before` to `after`, between `at_s` and the next point.
    Change { at_s: f64, before: f64, after: f64 },
}

impl Shape {
    pub fn name(&self) -> &'static str {
        match self {
            Shape::Steady { .. } => "steady",
            Shape::Growing { .. } => "growing",
            Shape::Periodic { .. } => "periodic",
            Shape::Change { .. } => "change",
        }
    }
}

/// One series' classification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesShape {
    pub name: String,
    pub unit: String,
    #[serde(flatten)]
    pub shape: Shape,
}

/// The series' classifications, or why there are none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Shapes {
    pub series: Vec<SeriesShape>,
    /// Set when the window held too few points to classify.
    pub too_few_points: Option<usize>,
    /// The memory limit growth is measured against.
    pub memory_limit: Option<Limit>,
}
