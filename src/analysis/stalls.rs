//! A stall over a quiet verdict: a thread that stayed in one call for the
//! whole window while work waited for its process (`model::stalls`) is
//! not idle, and not merely blocked. Pure.

use crate::analysis::limits::Finding as Override;
use crate::model::diagnosis::{Class, Confidence, Observation};
use crate::model::drill::Drill;
use crate::model::stalls::Stall;
use crate::model::verdict::{Cause, Finding};

/// The stall that replaces the thread states' verdict `class`: only a
/// quiet one (idle, blocked), or a lock when work waits on the process's
/// sockets too: threads waiting on a mutex are the lock verdict's own
/// story (Python's GIL waiters beside a main thread asleep in join read
/// `stall` before).
pub fn judge(o: &Observation, class: Class) -> Option<Override> {
    if !matches!(class, Class::Idle | Class::Blocked | Class::Lock) {
        return None;
    }
    let s = stalled(o).next()?;
    let sockets = !s.waiting.listeners.is_empty() || s.waiting.unread_bytes > 0;
    if class == Class::Lock && !sockets {
        return None;
    }
    Some(Override {
        verdict: Class::Stall,
        confidence: if s.so_far_s.is_some_and(|t| t >= o.window_s) {
            Confidence::High
        } else {
            Confidence::Medium
        },
        cause: Cause::Stall {
            stall: s.clone(),
            window_s: o.window_s,
        },
        next: vec![
            format!("sudo cat /proc/{}/task/{}/stack", s.pid, s.tid),
            Drill::Offcpu.command(s.pid),
        ],
    })
}

/// The stalled threads, less those idle behind one: a thread asleep in a
/// futex (a condition, an idle pool's queue) beside a thread of its
/// process stalled elsewhere waits for work that one would hand it
/// (Redis's background threads beside a main thread in DEBUG SLEEP).
/// Threads that all wait in futexes are each other's story: kept. A
/// thread whose only waiting work is its process's lock waiters, while
/// another thread of it ran at nearly every such moment (the holder works
/// under the lock), holds nothing they wait for: not stalled (a main
/// thread in pause() beside threads taking turns at a lock).
fn stalled(o: &Observation) -> impl Iterator<Item = &Stall> {
    let idle = |s: &Stall| {
        s.call == "futex" && o.stalls.iter().any(|t| t.pid == s.pid && t.call != "futex")
    };
    let holder_works = |s: &Stall| {
        let w = &s.waiting;
        w.queued() == 0
            && w.unread_bytes == 0
            && (o.locks.iter().filter(|l| l.pid == s.pid))
                .map(|l| l.running_share)
                .reduce(f64::min)
                .is_some_and(|least| least >= HOLDER_WORKS)
    };
    o.stalls
        .iter()
        .filter(move |s| !idle(s) && !holder_works(s))
}

/// The share of a lock's waits with another thread running that says its
/// holder works (is not the stalled thread).
const HOLDER_WORKS: f64 = 0.9;

/// One finding per stalled thread.
pub fn evidence(o: &Observation) -> Vec<Finding> {
    stalled(o)
        .map(|s| Finding::Stalled {
            stall: s.clone(),
            window_s: o.window_s,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::stalls::{Listener, Stall, Waiting};

    fn stalled(waiting: Waiting) -> Observation {
        Observation {
            window_s: 2.0,
            stalls: vec![Stall {
                pid: 10,
                tid: 11,
                comm: "server".into(),
                state: 'S',
                call: "clock_nanosleep".into(),
                wchan: "hrtimer_nanosleep".into(),
                so_far_s: Some(7.5),
                stack: vec!["main".into(), "sleep".into(), "do_nanosleep [k]".into()],
                waiting,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn a_thread_in_pause_beside_a_working_lock_holder_is_not_stalled() {
        let mut o = stalled(Waiting {
            lock_waiters: 3,
            ..Default::default()
        });
        o.locks = vec![crate::model::diagnosis::LockWaits {
            pid: 10,
            running_share: 1.0,
            ..Default::default()
        }];
        assert!(evidence(&o).is_empty());
        assert!(judge(&o, Class::Lock).is_none());
        // The holder not seen working: the thread that never ran may hold it.
        o.locks[0].running_share = 0.2;
        assert_eq!(evidence(&o).len(), 1);
    }

    #[test]
    fn a_sleeping_server_with_a_queue_is_stalled_not_idle() {
        let o = stalled(Waiting {
            listeners: vec![Listener {
                port: 8080,
                path: None,
                queued_start: 20,
                queued_end: 20,
            }],
            ..Default::default()
        });
        let f = judge(&o, Class::Idle).expect("a stall");
        assert_eq!((f.verdict, f.confidence), (Class::Stall, Confidence::High));
        assert_eq!(
            f.cause,
            Cause::Stall {
                stall: o.stalls[0].clone(),
                window_s: 2.0
            }
        );
        assert_eq!(
            evidence(&o),
            vec![Finding::Stalled {
                stall: o.stalls[0].clone(),
                window_s: 2.0
            }]
        );
    }

    #[test]
    fn idle_threads_behind_a_stalled_one_are_not_stalled() {
        // Redis in DEBUG SLEEP: its main thread sleeps, its background
        // threads wait in futexes for jobs it would hand them.
        let mut o = stalled(Waiting {
            unread_bytes: 5,
            unread_sockets: 1,
            ..Default::default()
        });
        let sleeper = o.stalls[0].clone();
        let idle = Stall {
            tid: 12,
            comm: "bio_close_file".into(),
            call: "futex".into(),
            wchan: "futex_do_wait".into(),
            ..sleeper.clone()
        };
        o.stalls.insert(0, idle.clone());
        let found = |o: &Observation| -> Vec<i32> {
            evidence(o)
                .iter()
                .map(|f| match f {
                    Finding::Stalled { stall, .. } => stall.tid,
                    _ => 0,
                })
                .collect()
        };
        assert_eq!(found(&o), [11]);
        let f = judge(&o, Class::Idle).expect("a stall");
        assert!(matches!(f.cause, Cause::Stall { stall, .. } if stall.tid == 11));
        // Threads that all wait in futexes (a deadlock) are each stalled.
        o.stalls = vec![idle.clone(), Stall { tid: 13, ..idle }];
        assert_eq!(found(&o), [12, 13]);
    }

    #[test]
    fn a_busy_verdict_stands() {
        let o = stalled(Waiting {
            unread_bytes: 5,
            unread_sockets: 1,
            ..Default::default()
        });
        assert_eq!(judge(&o, Class::Cpu), None);
        assert_eq!(judge(&Observation::default(), Class::Idle), None);
    }

    #[test]
    fn mutex_waiters_alone_leave_a_lock_verdict_standing() {
        let o = stalled(Waiting {
            lock_waiters: 3,
            ..Default::default()
        });
        assert_eq!(judge(&o, Class::Lock), None);
        assert!(judge(&o, Class::Idle).is_some());
    }
}
