//! The why, after the verdict: which drill-downs a verdict calls for (a CPU
//! profile for a CPU-bound process, an off-CPU profile for one that waits,
//! the block I/O for one that waits for storage, the other processes for
//! one that waits for a CPU; exec tracing all along), and what each found,
//! summarised for diagnose's report.

use super::{fold, offcpu};
use crate::model::diagnosis::{Class, StateShare, ThreadState};
use crate::model::drill::{Drill, Why};
use crate::model::flame::Flame;
use crate::model::profile::Profile;

/// Top functions, stacks and paths kept.
const TOP: usize = 5;
/// Folded stacks kept for each flame graph: the record stays small, and the
/// stacks left out are the narrowest.
const FLAME_STACKS: usize = 300;

/// Storage waits of this share of the working time call for the storage
/// drill-down whatever the verdict: on a fast disk an O_SYNC writer's
/// copies into the page cache can outweigh its waits (verdict `cpu`, in
/// the kernel, storage the runner-up).
pub const STRONG_STORAGE: f64 = 0.25;

/// Seconds of a CPU profile run by hand, and of a trace (off-CPU, block
/// I/O): the suggested commands' lengths.
const PROFILE_S: u32 = 5;
const TRACE_S: u32 = 3;

// The commands are analysis's; the drill-downs themselves are model's data.
impl Drill {
    /// The command that runs it by hand on `pid`: what a skipped
    /// drill-down says to run, and what the verdict suggests next.
    pub fn command(self, pid: i32) -> String {
        self.command_for(&[pid])
    }

    /// The one place a drill-down's command is written: by hand on `pids`;
    /// offcpu takes them all, the others the first (the one with most of
    /// the verdict); none: the CPU profile of every process.
    pub fn command_for(self, pids: &[i32]) -> String {
        let list: Vec<String> = pids.iter().map(i32::to_string).collect();
        let first = list.first().map_or("0", String::as_str);
        match self {
            Drill::Cpu if pids.is_empty() => format!("sudo kdiag profile -a -d {PROFILE_S}"),
            Drill::Cpu => format!("sudo kdiag profile -p {first} -d {PROFILE_S}"),
            Drill::Offcpu => format!("sudo kdiag offcpu -p {} -d {TRACE_S}", list.join(",")),
            Drill::Storage => format!("sudo kdiag iosnoop -p {first} --summary {TRACE_S}"),
            Drill::Sched => "kdiag top".to_string(),
            Drill::Exec => format!("sudo kdiag exec-trace -p {first}"),
        }
    }
}

/// The drill-downs run after the verdict; `all`: every one, whatever it is.
/// `states` is the verdict's thread-state breakdown (a strong storage
/// runner-up adds the storage drill-down). Exec tracing is not planned
/// here: it runs during the watch (`Drill::Exec`).
pub fn plan(verdict: Class, states: &[StateShare], all: bool) -> Vec<Drill> {
    if all {
        return vec![Drill::Cpu, Drill::Offcpu, Drill::Storage, Drill::Sched];
    }
    let mut drills = verdict.spec().drills.to_vec();
    let storage = states
        .iter()
        .find(|s| s.state == ThreadState::Storage)
        .map_or(0.0, |s| s.working_share);
    if storage >= STRONG_STORAGE && !drills.contains(&Drill::Storage) {
        drills.push(Drill::Storage);
    }
    drills
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
}

/// A profile's heaviest folded stacks, to draw its flame graph later.
fn flame(p: &Profile) -> Flame {
    let (lines, left_out) = fold::heaviest(fold::fold(p), FLAME_STACKS);
    Flame::of(p, lines, left_out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn storage(share: f64) -> Vec<StateShare> {
        vec![StateShare {
            state: ThreadState::Storage,
            seconds: 1.0,
            share,
            working_share: share,
        }]
    }

    #[test]
    fn verdicts_call_for_their_drill_down() {
        assert_eq!(plan(Class::Cpu, &[], false), [Drill::Cpu]);
        assert_eq!(plan(Class::Lock, &[], false), [Drill::Offcpu]);
        assert_eq!(
            plan(Class::Io, &storage(0.7), false),
            [Drill::Offcpu, Drill::Storage]
        );
        assert_eq!(plan(Class::Sched, &[], false), [Drill::Sched]);
        assert!(plan(Class::Zombie, &[], false).is_empty());
        assert_eq!(
            plan(Class::Zombie, &[], true),
            [Drill::Cpu, Drill::Offcpu, Drill::Storage, Drill::Sched]
        );
    }

    #[test]
    fn a_strong_storage_runner_up_adds_the_storage_drill_down() {
        assert_eq!(
            plan(Class::Cpu, &storage(0.4), false),
            [Drill::Cpu, Drill::Storage]
        );
        assert_eq!(plan(Class::Cpu, &storage(0.1), false), [Drill::Cpu]);
    }
}
