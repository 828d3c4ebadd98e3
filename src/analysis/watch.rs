//! One watch interval of one group, judged with diagnose's own model: the
//! group's counters and thread samples become an `Observation` (a tree of
//! processes over the interval) and `classify` gives its thread-state split
//! and verdict, so watch and diagnose never disagree on what a state is.

use crate::analysis::classify;
use crate::model::diagnosis::{Class, Observation, Scope, ThreadSamples, Totals};
use crate::model::limits::Limits;
use crate::model::watch::{Event, STATES, state_index};

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
/// working thread-seconds and its verdict, with the group's cgroup
/// `limits` over the interval judged by diagnose's rules (a throttled
/// quota is `cpu-quota` in both).
pub fn judge(
    i: &Interval,
    samples: &[ThreadSamples],
    limits: Limits,
) -> ([f64; STATES.len()], f64, Class) {
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
        limits,
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

/// A group's spell of one verdict worth a record: since when (seconds on
/// watch's clock) and whether it was recorded already (one record a spell).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spell {
    pub verdict: Class,
    pub since: f64,
    pub recorded: bool,
}

/// Follow every group's verdict at time `now`: a spell starts when a group
/// turns to a verdict worth a record and ends when it turns to another
/// verdict (or the group goes); the groups whose spell has lasted `after`
/// seconds unrecorded are due, marked recorded here.
pub fn due_records(
    spells: &mut std::collections::HashMap<String, Spell>,
    verdicts: &[(&str, Class)],
    now: f64,
    after: f64,
) -> Vec<(String, Class)> {
    spells.retain(|name, s| verdicts.iter().any(|(n, v)| n == name && *v == s.verdict));
    let mut due = Vec::new();
    for &(name, verdict) in verdicts {
        if !verdict.spec().record {
            continue;
        }
        let s = spells.entry(name.to_string()).or_insert(Spell {
            verdict,
            since: now,
            recorded: false,
        });
        if !s.recorded && now - s.since >= after {
            s.recorded = true;
            due.push((name.to_string(), verdict));
        }
    }
    due
}

/// The groups whose verdict changed since the last scan, as events; `last`
/// holds each group's verdict of the last scan and is brought up to date.
/// A group not in the last scan (new, or back in the top) is news only
/// when its verdict is worth a record: a new idle group is not.
pub fn verdict_changes(
    last: &mut std::collections::HashMap<String, Class>,
    verdicts: &[(&str, Class)],
) -> Vec<Event> {
    let mut events = Vec::new();
    let mut now = std::collections::HashMap::with_capacity(verdicts.len());
    for &(group, to) in verdicts {
        let from = last.get(group).copied();
        if from.is_some_and(|f| f != to) || (from.is_none() && to.spec().record) {
            events.push(Event::Verdict {
                group: group.to_string(),
                from,
                to,
            });
        }
        now.insert(group.to_string(), to);
    }
    *last = now;
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_of_verdict_is_an_event_and_a_new_group_only_when_bad() {
        let mut last = std::collections::HashMap::new();
        assert!(verdict_changes(&mut last, &[("a", Class::Idle)]).is_empty());
        assert_eq!(
            verdict_changes(&mut last, &[("a", Class::Io), ("b", Class::Lock)]),
            [
                Event::Verdict {
                    group: "a".into(),
                    from: Some(Class::Idle),
                    to: Class::Io
                },
                Event::Verdict {
                    group: "b".into(),
                    from: None,
                    to: Class::Lock
                }
            ]
        );
        assert!(verdict_changes(&mut last, &[("a", Class::Io), ("b", Class::Lock)]).is_empty());
        // Gone, and back idle: no news.
        assert!(verdict_changes(&mut last, &[]).is_empty());
        assert!(verdict_changes(&mut last, &[("a", Class::Idle)]).is_empty());
        assert_eq!(verdict_changes(&mut last, &[("a", Class::Cpu)]).len(), 1);
    }

    #[test]
    fn a_record_is_due_once_a_bad_verdict_has_lasted() {
        let mut spells = std::collections::HashMap::new();
        let due = |spells: &mut _, v: &[(&str, Class)], t| due_records(spells, v, t, 10.0);
        assert!(due(&mut spells, &[("db", Class::Idle)], 0.0).is_empty());
        assert!(due(&mut spells, &[("db", Class::Io)], 5.0).is_empty());
        assert!(due(&mut spells, &[("db", Class::Io)], 14.0).is_empty());
        assert_eq!(
            due(&mut spells, &[("db", Class::Io)], 15.0),
            [("db".to_string(), Class::Io)]
        );
        // Once a spell.
        assert!(due(&mut spells, &[("db", Class::Io)], 30.0).is_empty());
        // Another verdict is another spell, timed from its start.
        assert!(due(&mut spells, &[("db", Class::Lock)], 31.0).is_empty());
        assert_eq!(due(&mut spells, &[("db", Class::Lock)], 41.0).len(), 1);
        // A group that goes (or turns good) ends its spell.
        assert!(due(&mut spells, &[], 42.0).is_empty());
        assert!(spells.is_empty());
        assert!(due(&mut spells, &[("db", Class::Cpu)], 60.0).is_empty());
        assert!(spells.is_empty());
    }

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
        let (secs, working, verdict) =
            judge(&i, &[sample('S', "nanosleep", "", 3)], Limits::default());
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
        let (secs, _, verdict) = judge(&i, &[sample('S', "nanosleep", "", 4)], Limits::default());
        assert_eq!(verdict, Class::Idle);
        assert_eq!(
            secs[state_index(crate::model::diagnosis::ThreadState::Sleeping)],
            100.0
        );
    }

    #[test]
    fn a_group_throttled_by_its_quota_is_cpu_quota_as_in_diagnose() {
        use crate::model::limits::{CgroupLimits, CpuQuota};
        // A busy loop under a 0.1-CPU quota: a tenth of the time on CPU,
        // the rest runnable, throttled in every period.
        let i = Interval {
            window_s: 5.0,
            cpu_s: 0.5,
            run_delay_s: 4.5,
            thread_s: 5.0,
            threads: 1,
            processes: 1,
        };
        let samples = [sample('R', "", "", 20)];
        assert_eq!(judge(&i, &samples, Limits::default()).2, Class::Sched);
        let limits = Limits {
            cgroups: vec![CgroupLimits {
                version: 1,
                controllers: "cpu,cpuacct".into(),
                path: "/kdiag-busy".into(),
                dir: "/sys/fs/cgroup/cpu,cpuacct/kdiag-busy".into(),
                cpu: Some(CpuQuota {
                    quota_us: Some(10_000),
                    period_us: 100_000,
                    periods: 50,
                    throttled: 50,
                    throttled_s: 4.5,
                }),
                ..CgroupLimits::default()
            }],
            ..Limits::default()
        };
        assert_eq!(judge(&i, &samples, limits).2, Class::CpuQuota);
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
        let (secs, _, verdict) = judge(&i, &[sample('D', "read", "file", 9)], Limits::default());
        assert_eq!(verdict, Class::Io);
        assert!((secs[2] - 4.5).abs() < 1e-9);
    }
}
