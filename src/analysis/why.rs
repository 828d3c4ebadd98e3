//! The why, after the verdict: which drill-down a verdict calls for (a CPU
//! profile for a CPU-bound process, an off-CPU profile for one that waits),
//! and what each found, summarised for diagnose's report.

use serde::{Deserialize, Serialize};

use super::{fold, offcpu};
use crate::model::diagnosis::Class;
use crate::model::flame::Flame;
use crate::model::profile::Profile;

/// Top functions, stacks and paths kept.
const TOP: usize = 5;
/// Folded stacks kept for each flame graph: the record stays small, and the
/// stacks left out are the narrowest.
const FLAME_STACKS: usize = 300;

/// One drill-down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Drill {
    /// Where the CPU time goes: a CPU profile.
    Cpu,
    /// Where the threads wait: an off-CPU profile.
    Offcpu,
}

/// The drill-downs `verdict` calls for; `all`: both, whatever it is.
pub fn plan(verdict: Class, all: bool) -> Vec<Drill> {
    if all {
        return vec![Drill::Cpu, Drill::Offcpu];
    }
    match verdict {
        Class::Cpu => vec![Drill::Cpu],
        // Waiting: for storage, a lock, memory back from swap, anything
        // the kernel makes it wait for, or by design (where it sleeps).
        Class::Io | Class::Lock | Class::Paging | Class::Blocked | Class::Idle => {
            vec![Drill::Offcpu]
        }
        Class::Sched | Class::Stopped | Class::MemoryTrend | Class::Zombie => vec![],
    }
}

/// What the drill-downs found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Why {
    /// Seconds each drill-down ran.
    pub window_s: f64,
    /// The CPU profile's top functions and stacks.
    pub cpu: Option<fold::Summary>,
    /// The off-CPU profile's wait points and blocking paths.
    pub offcpu: Option<offcpu::Summary>,
    /// Drill-downs that could not run: why, and the command that would.
    pub skipped: Vec<String>,
    /// The CPU profile's folded stacks, for its flame graph.
    pub cpu_flame: Option<Flame>,
    /// The off-CPU profile's folded stacks, for its flame graph.
    pub offcpu_flame: Option<Flame>,
}

impl Why {
    pub fn add_cpu(&mut self, p: &Profile) {
        self.cpu = Some(fold::summarize(p, TOP));
        self.cpu_flame = Some(flame(p));
    }

    pub fn add_offcpu(&mut self, p: &Profile) {
        self.offcpu = Some(offcpu::summarize(p, TOP));
        self.offcpu_flame = Some(flame(p));
    }

    /// The hottest function on the CPU: the program's first in the
    /// self-time list, else the kernel's.
    pub fn hot_function(&self) -> Option<&str> {
        let cpu = self.cpu.as_ref()?;
        cpu.top_self
            .iter()
            .find(|f| !f.kernel)
            .or(cpu.top_self.first())
            .map(|f| f.name.as_str())
    }
}

/// A profile's heaviest folded stacks, to draw its flame graph later.
fn flame(p: &Profile) -> Flame {
    let (lines, left_out) = fold::heaviest(fold::fold(p), FLAME_STACKS);
    Flame::of(p, lines, left_out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_call_for_their_drill_down() {
        assert_eq!(plan(Class::Cpu, false), [Drill::Cpu]);
        assert_eq!(plan(Class::Lock, false), [Drill::Offcpu]);
        assert_eq!(plan(Class::Io, false), [Drill::Offcpu]);
        assert!(plan(Class::Zombie, false).is_empty());
        assert_eq!(plan(Class::Zombie, true), [Drill::Cpu, Drill::Offcpu]);
    }
}
