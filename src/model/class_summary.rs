//! A graded class at a glance (plain data): `grade::summary` computes it,
//! its text and `render::grade_summary` its HTML page draw it.

use serde::Serialize;

/// Score bins: tenths of the maximum, the last one closed (it holds full
/// marks).
pub const BINS: usize = 10;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub lab: String,
    pub checks_version: String,
    pub max_score: f64,
    /// Submissions graded (neither missing nor ungradable).
    pub graded: usize,
    /// How many graded scores fall in each tenth of `max_score`.
    pub distribution: [usize; BINS],
    pub mean: Option<f64>,
    pub median: Option<f64>,
    /// Per graded check, the most missed first.
    pub checks: Vec<CheckRate>,
    /// Every copy flag, complete.
    pub flags: Vec<String>,
    /// (submission, why) for each submission that could not be graded.
    pub not_gradable: Vec<(String, String)>,
    /// Roster learners who handed nothing in.
    pub missing: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckRate {
    pub id: String,
    pub name: String,
    pub passed: usize,
    pub missed: usize,
    /// Checks of this question before submitting, summed over the
    /// submissions that record them (`counted`), and the most by one.
    pub attempts: u32,
    pub counted: usize,
    pub most_attempts: u32,
}

impl CheckRate {
    /// Attempts per submission that records them (None: none does).
    pub fn mean_attempts(&self) -> Option<f64> {
        (self.counted > 0).then(|| self.attempts as f64 / self.counted as f64)
    }

    /// The share of graded submissions that passed (0 when none).
    pub fn rate(&self) -> f64 {
        match self.passed + self.missed {
            0 => 0.0,
            n => self.passed as f64 / n as f64,
        }
    }
}

impl Summary {
    /// The score range of bin `i`, in points: "12-13.5".
    pub fn bin_label(&self, i: usize) -> String {
        let at = |k: usize| self.max_score * k as f64 / BINS as f64;
        format!("{}-{}", round(at(i)), round(at(i + 1)))
    }
}

/// A number as people write it: at most two decimals, none when whole.
pub fn round(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}
