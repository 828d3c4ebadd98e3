//! Exec tracing for diagnose: started with the watch (an exec is over in a
//! millisecond, so it cannot wait for the verdict), finished after it and
//! explained as exec-trace explains; and what to say when the command
//! could not run at all.

use super::drill::by_hand;
use super::{Event, Request, WhyMode, words};
use crate::analysis::drill as summary;
use crate::analysis::exec_failure;
use crate::instruments::exec::watch::{ExecWatch, watch};
use crate::instruments::exec::{Filter, Spawned};
use crate::model::drill::{Drill, ExecDrill};

/// Start tracing the execs of `pid` and all it starts, for the whole
/// watch (`Drill::Exec`): None when not asked for (or, with auto, when
/// not root: a failure then still says what to run).
pub(super) fn watch_execs(
    mode: WhyMode,
    pid: u32,
    spawned: Option<Spawned>,
) -> Option<anyhow::Result<ExecWatch>> {
    let root = crate::sys::process::privilege::is_root();
    match mode {
        WhyMode::None => None,
        WhyMode::Auto if !root => None,
        WhyMode::All if !root => Some(Err(anyhow::anyhow!("needs root"))),
        _ => {
            let filter = Filter {
                pid: Some(pid),
                follow_children: true,
                signals: true,
                // The tree of a process the policy let the caller name.
                scope: crate::instruments::target::Scope::Everyone,
            };
            Some(watch(filter, spawned))
        }
    }
}

/// The exec trace's result: the execs explained as exec-trace explains
/// them (leaving out kdiag's own stopping of the command, by `stoppers`),
/// when one failed (or always with --why all); or why it could not run,
/// with the command that would.
pub(super) fn exec_drill(
    req: &Request,
    pid: i32,
    execs: Option<anyhow::Result<ExecWatch>>,
    stoppers: &[u32],
) -> Option<Result<ExecDrill, String>> {
    let trace = execs?.and_then(ExecWatch::finish);
    match trace {
        Ok(t) => {
            let findings = exec_failure::explain(&t.events, &t.files);
            let findings = exec_failure::not_stopped_by(findings, &t.events, stoppers);
            let e = summary::execs(&t.events, &findings, t.tier.name(), t.lost);
            (req.why == WhyMode::All || !e.failures.is_empty()).then_some(Ok(e))
        }
        Err(e) => Some(Err(format!(
            "{}: {e:#}; run: {}",
            Drill::Exec.what(),
            by_hand(req, Drill::Exec, &[pid])
        ))),
    }
}

/// The command could not run (its exec failed, or it died at once): say
/// why as exec-trace does, or without the trace what to run to see it
/// (as an event). Returns the end of the error message that follows.
pub(super) fn could_not_run(req: &Request, exec: Option<&ExecDrill>) -> &'static str {
    if req.why == WhyMode::None {
        return "nothing to diagnose";
    }
    match exec.filter(|e| !e.failures.is_empty()) {
        Some(e) => {
            (req.report)(Event::CouldNotRun(e));
            return "an exec failed, as explained above";
        }
        None if !req.command.is_empty() && !crate::sys::process::privilege::is_root() => {
            let command = format!("sudo kdiag exec-trace -- {}", words(req.command).join(" "));
            (req.report)(Event::SeeWhyWith(command));
        }
        None => {}
    }
    "nothing to diagnose"
}
