//! A stall over a quiet verdict: a thread that stayed in one call for the
//! whole window while work waited for its process (`model::stalls`) is
//! not idle, and not merely blocked. Pure.

use crate::analysis::limits::Finding as Override;
use crate::analysis::why::Drill;
use crate::model::diagnosis::{Class, Confidence, Observation};
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
    let s = o.stalls.first()?;
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

/// One finding per stalled thread.
pub fn evidence(o: &Observation) -> Vec<Finding> {
    o.stalls
        .iter()
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
