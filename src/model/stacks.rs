//! Weighted call stacks as the profile file writers take them (pprof,
//! speedscope): any instrument that produces `Stack`s (CPU samples with
//! nanosecond weights, off-CPU time in microseconds, ...) describes what its
//! numbers mean here and gets every format.

use crate::model::profile::{Module, Profile, Stack, WeightUnit};

/// What a number measures, in pprof's terms: `samples`/`count`,
/// `cpu`/`nanoseconds`, `off-cpu`/`microseconds`, `page-faults`/`count`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueType {
    pub kind: String,
    pub unit: String,
}

impl ValueType {
    pub fn new(kind: &str, unit: &str) -> Self {
        ValueType {
            kind: kind.into(),
            unit: unit.into(),
        }
    }
}

/// Stacks and what their numbers mean.
#[derive(Debug, Clone)]
pub struct StackSet<'a> {
    /// What was profiled, for titles: `CPU profile of cpu-burn`.
    pub title: String,
    /// What `Stack::samples` counts.
    pub count: ValueType,
    /// What `Stack::weight` measures (the main value of the profile).
    pub weight: ValueType,
    /// The weight one sample nominally stands for (pprof's period; 0: none).
    pub period: u64,
    /// When recording started, ns since the Unix epoch (0: unknown).
    pub start_unix_ns: u64,
    /// How long recording lasted, ns.
    pub duration_ns: u64,
    /// Outermost frame first; `comm` is the root (thread or command).
    pub stacks: &'a [Stack],
    /// The binaries `Frame::module` refers to.
    pub modules: &'a [Module],
}

impl<'a> StackSet<'a> {
    /// A CPU profile: samples, weighted by the event's period (CPU ns for
    /// cpu-clock, cycles for the cycles event).
    fn cpu(p: &'a Profile) -> Self {
        let weight = if p.event == "cycles" {
            ValueType::new("cycles", "count")
        } else {
            ValueType::new("cpu", "nanoseconds")
        };
        StackSet {
            title: format!("CPU profile of {}", p.target),
            count: ValueType::new("samples", "count"),
            weight,
            period: if p.event == "cycles" || p.freq_hz == 0 {
                0
            } else {
                1_000_000_000 / p.freq_hz
            },
            start_unix_ns: p.started_unix_ns,
            duration_ns: (p.cost.wall_secs * 1e9) as u64,
            stacks: &p.stacks,
            modules: &p.modules,
        }
    }

    /// A profile of counted events (`WeightUnit::Events`): each stack's
    /// count of `Profile::event` (`page-faults/count`), which is also its
    /// weight; no period (events are counted, not sampled).
    fn events(p: &'a Profile) -> Self {
        let counted = ValueType::new(&p.event, "count");
        StackSet {
            title: format!("{} profile of {}", p.event, p.target),
            count: counted.clone(),
            weight: counted,
            period: 0,
            start_unix_ns: p.started_unix_ns,
            duration_ns: (p.cost.wall_secs * 1e9) as u64,
            stacks: &p.stacks,
            modules: &p.modules,
        }
    }

    /// The reading of `p` its unit calls for: `cpu`, `offcpu` or `events`.
    pub fn of(p: &'a Profile) -> Self {
        match p.unit {
            WeightUnit::Samples => Self::cpu(p),
            WeightUnit::Nanoseconds => Self::offcpu(p),
            WeightUnit::Events => Self::events(p),
        }
    }

    /// An off-CPU profile: times a thread blocked on each stack, weighted
    /// by the nanoseconds it stayed blocked (no period: blocks are events,
    /// not samples).
    fn offcpu(p: &'a Profile) -> Self {
        StackSet {
            title: format!("Off-CPU profile of {}", p.target),
            count: ValueType::new("blocks", "count"),
            weight: ValueType::new("off-cpu", "nanoseconds"),
            period: 0,
            start_unix_ns: p.started_unix_ns,
            duration_ns: (p.cost.wall_secs * 1e9) as u64,
            stacks: &p.stacks,
            modules: &p.modules,
        }
    }
}
