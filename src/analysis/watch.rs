//! One watch interval of one group, judged with diagnose's own model: the
//! group's counters and thread samples become an `Observation` (a tree of
//! processes over the interval) and `classify` gives its thread-state split
//! and verdict, so watch and diagnose never disagree on what a state is.

use crate::analysis::classify;
use crate::model::diagnosis::{Class, Observation, Scope, ThreadSamples, Totals};
use crate::model::watch::{STATES, state_index};

/// A group's counter deltas over one interval.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Interval {
    pub window_s: f64,
    pub cpu_s: f64,
    pub run_delay_s: f64,
    /// Thread lifetime in the interval, summed over threads.
    pub thread_s: f64,
    pub threads: usize,
    pub processes: usize,
}

/// The interval's thread seconds per state (indexed as `STATES`), its
/// working thread-seconds and its verdict.
pub fn judge(i: &Interval, samples: &[ThreadSamples]) -> ([f64; STATES.len()], f64, Class) {
    let o = Observation {
        scope: Scope::Tree,
        window_s: i.window_s,
        totals: Totals {
            user_s: i.cpu_s,
            run_delay_s: Some(i.run_delay_s),
            thread_s: i.thread_s,
            threads: i.threads,
            processes: i.processes,
            ..Totals::default()
        },
        samples: samples.to_vec(),
        syscalls_readable: true,
        ..Observation::default()
    };
    let d = classify::classify(&o);
    let mut secs = [0.0; STATES.len()];
    let mut working = 0.0;
    for s in &d.states {
        secs[state_index(s.state)] += s.seconds;
        if s.state != crate::model::diagnosis::ThreadState::Sleeping {
            working += s.seconds;
        }
    }
    (secs, working, d.verdict)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(state: char, syscall: &str, on: &str, count: u64) -> ThreadSamples {
        ThreadSamples {
            state,
            wchan: String::new(),
            syscall: syscall.into(),
            on: on.into(),
            count,
        }
    }

    #[test]
    fn a_busy_group_is_cpu_and_its_seconds_add_up() {
        let i = Interval {
            window_s: 5.0,
            cpu_s: 9.0,
            run_delay_s: 0.5,
            thread_s: 10.0,
            threads: 2,
            processes: 1,
        };
        let (secs, working, verdict) = judge(&i, &[sample('S', "nanosleep", "", 3)]);
        assert_eq!(verdict, Class::Cpu);
        assert_eq!(secs[0], 9.0);
        assert_eq!(secs[1], 0.5);
        assert!((secs.iter().sum::<f64>() - 10.0).abs() < 1e-9);
        assert!((working - 9.5).abs() < 1e-9, "{working}");
    }

    #[test]
    fn sleeping_processes_are_idle_and_off_cpu_time_follows_the_samples() {
        let i = Interval {
            window_s: 5.0,
            cpu_s: 0.0,
            thread_s: 100.0,
            threads: 20,
            processes: 20,
            ..Interval::default()
        };
        let (secs, _, verdict) = judge(&i, &[sample('S', "nanosleep", "", 4)]);
        assert_eq!(verdict, Class::Idle);
        assert_eq!(
            secs[state_index(crate::model::diagnosis::ThreadState::Sleeping)],
            100.0
        );
    }

    #[test]
    fn storage_waits_make_io() {
        let i = Interval {
            window_s: 5.0,
            cpu_s: 0.5,
            thread_s: 5.0,
            threads: 1,
            processes: 1,
            ..Interval::default()
        };
        let (secs, _, verdict) = judge(&i, &[sample('D', "read", "file", 9)]);
        assert_eq!(verdict, Class::Io);
        assert!((secs[2] - 4.5).abs() < 1e-9);
    }
}
