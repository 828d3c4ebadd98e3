//! A profile's folded stacks with the facts its flame graph's title shows:
//! enough to draw the flame graph again without the profile (diagnose's
//! record and its HTML report).

use serde::{Deserialize, Serialize};

use crate::model::profile::{Profile, WeightUnit};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Flame {
    /// What was profiled: `PID 42 (burn)`.
    pub target: String,
    /// When recording started (UTC, RFC 3339).
    pub started: String,
    /// Samples (a CPU profile) or nanoseconds blocked (off-CPU).
    pub unit: WeightUnit,
    pub wall_s: f64,
    /// The CPU profile's event and frequency.
    pub event: String,
    pub freq_hz: u64,
    /// Samples (CPU) or blocks (off-CPU) in the whole profile.
    pub samples: u64,
    /// Records (CPU) or stacks (off-CPU) the kernel dropped.
    pub lost: u64,
    /// The whole profile's weight (off-CPU: nanoseconds blocked).
    pub total_weight: u64,
    /// `comm;outer;...;inner count` lines (`analysis::fold::fold`): the
    /// heaviest stacks, sorted.
    pub lines: Vec<String>,
    /// Folded stacks left out of `lines`.
    pub left_out: usize,
}

impl Flame {
    /// `profile`'s facts with its folded `lines` (`left_out` more not kept).
    pub fn of(profile: &Profile, lines: Vec<String>, left_out: usize) -> Flame {
        Flame {
            target: profile.target.clone(),
            started: profile.started.clone(),
            unit: profile.unit,
            wall_s: profile.cost.wall_secs,
            event: profile.event.clone(),
            freq_hz: profile.freq_hz,
            samples: profile.samples,
            lost: profile.lost,
            total_weight: profile.total_weight(),
            lines,
            left_out,
        }
    }
}
