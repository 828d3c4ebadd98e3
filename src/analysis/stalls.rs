//! A stall over a quiet verdict: a thread that stayed in one call for the
//! whole window while work waited for its process (`model::stalls`) is
//! not idle, and not merely blocked. Pure.

use crate::analysis::limits::Finding;
use crate::analysis::why::Drill;
use crate::model::diagnosis::{Class, Confidence, Observation};
use crate::model::stalls::{Stall, Waiting};

/// The stall that replaces the thread states' verdict `class`: only a
/// quiet one (idle, blocked), or a lock when work waits on the process's
/// sockets too: threads waiting on a mutex are the lock verdict's own
/// story (Python's GIL waiters beside a main thread asleep in join read
/// `stall` before).
pub fn judge(o: &Observation, class: Class) -> Option<Finding> {
    if !matches!(class, Class::Idle | Class::Blocked | Class::Lock) {
        return None;
    }
    let s = o.stalls.first()?;
    let sockets = !s.waiting.listeners.is_empty() || s.waiting.unread_bytes > 0;
    if class == Class::Lock && !sockets {
        return None;
    }
    Some(Finding {
        verdict: Class::Stall,
        confidence: if s.so_far_s.is_some_and(|t| t >= o.window_s) {
            Confidence::High
        } else {
            Confidence::Medium
        },
        summary: format!(
            "stalled: thread {} ({}) of PID {} stayed in {} the whole {:.1} s window{} while {}",
            s.tid,
            s.comm,
            s.pid,
            call_text(s),
            o.window_s,
            s.so_far_s
                .map_or(String::new(), |t| format!(" ({t:.1} s so far)")),
            waiting_text(&s.waiting)
        ),
        next: vec![
            format!("sudo cat /proc/{}/task/{}/stack", s.pid, s.tid),
            Drill::Offcpu.command(s.pid),
        ],
    })
}

/// One line of evidence per stalled thread.
pub fn evidence(o: &Observation) -> Vec<String> {
    o.stalls
        .iter()
        .map(|s| {
            format!(
                "Stalled thread {} ({}) of PID {}: in {}, state {}, {}; its stack: {}",
                s.tid,
                s.comm,
                s.pid,
                call_text(s),
                s.state,
                s.so_far_s.map_or_else(
                    || format!("has not run for {:.1} s at least", o.window_s),
                    |t| format!("last ran {t:.1} s ago")
                ),
                if s.stack.is_empty() {
                    "unreadable (needs root)".to_string()
                } else {
                    s.stack.join(" → ")
                }
            )
        })
        .collect()
}

/// "clock_nanosleep (hrtimer_nanosleep)".
fn call_text(s: &Stall) -> String {
    match (s.call.as_str(), s.wchan.as_str()) {
        ("", "") => format!("state {}", s.state),
        ("", w) => w.to_string(),
        (c, "") => c.to_string(),
        (c, w) => format!("{c} ({w})"),
    }
}

/// "20 connections wait in the accept queue of port 6379 (18 at the start,
/// limit 511)".
fn waiting_text(w: &Waiting) -> String {
    let mut parts: Vec<String> = w
        .listeners
        .iter()
        .map(|l| {
            format!(
                "{} connection{} wait{} in the accept queue of {} ({} at the start)",
                l.queued_end,
                plural(l.queued_end),
                if l.queued_end == 1 { "s" } else { "" },
                l.path
                    .as_ref()
                    .map_or(format!("port {}", l.port), |p| format!("unix socket {p}")),
                l.queued_start
            )
        })
        .collect();
    if w.unread_bytes > 0 {
        parts.push(format!(
            "{} bytes lie unread on {} connected socket{}",
            w.unread_bytes,
            w.unread_sockets,
            plural(w.unread_sockets as u64)
        ));
    }
    if w.lock_waiters > 0 {
        parts.push(format!(
            "{} other thread{} waited on its mutexes",
            w.lock_waiters,
            plural(w.lock_waiters as u64)
        ));
    }
    parts.join("; ")
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::stalls::Listener;

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
        assert!(
            f.summary.contains("clock_nanosleep (hrtimer_nanosleep)"),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("7.5 s so far"), "{}", f.summary);
        assert!(
            f.summary
                .contains("20 connections wait in the accept queue of port 8080")
        );
        assert!(evidence(&o)[0].contains("main → sleep → do_nanosleep [k]"));
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
