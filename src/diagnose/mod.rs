//! diagnose's engine, beside the lab's (`lab::engine`): from a target (a
//! PID, its tree, or a command kdiag starts) to one `DiagnoseRun`, without
//! any UI. engine.rs watches and classifies, drill.rs runs the drill-downs
//! the verdict calls for (at once, on threads), execs.rs traces execs for
//! the whole watch. It never prints: what it has to say while it runs goes
//! to the front end as an `Event`. `commands/diagnose.rs` parses the
//! arguments, opens the output files, words the events and hands the run
//! to render/.

mod drill;
mod engine;
mod execs;

use std::ffi::OsString;

pub use engine::{MAX_POINTS, interval, run};

use crate::instruments::observe::Options;
use crate::model::diagnosis::{Class, Observation};
use crate::model::drill::{Drill, ExecDrill};

/// The drill-down after the verdict (`--why`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WhyMode {
    None,
    Auto,
    All,
}

/// Watch the target while drawing its series as they come (the live view,
/// which the front end owns): `(pid, options, what is watched)` → what
/// `observe` returned, or why the view failed.
pub type Live<'a> =
    dyn Fn(i32, Options, String) -> anyhow::Result<anyhow::Result<Observation>> + 'a;

/// What to diagnose and how.
pub struct Request<'a> {
    /// `-p PID`; None: `command` is started.
    pub pid: Option<i32>,
    /// With `pid`: its descendants too.
    pub tree: bool,
    /// Every process of this cgroup directory (resolved on cgroupfs) and
    /// all they start, when no `pid`.
    pub cgroup: Option<std::path::PathBuf>,
    /// The command to start (and stop at the end), when no `pid`.
    pub command: &'a [OsString],
    /// Seconds to watch.
    pub duration: f64,
    /// Seconds between the points of the series.
    pub interval: f64,
    pub why: WhyMode,
    /// Where the events of the run go as they happen.
    pub report: &'a dyn Fn(Event),
    /// Watch through the live view instead of plainly.
    pub live: Option<&'a Live<'a>>,
    /// An HTML report is wanted: the drill-down also records the window
    /// per thread, for its heat map (a second CPU sampler and off-CPU
    /// trace beside the drill-downs' own).
    pub heat_map: bool,
    /// A JVM may be asked for its perf map (jcmd, which starts its attach
    /// listener): a person's diagnose does; watch's unattended flight
    /// records leave the JVMs they record alone.
    pub ask_jvms: bool,
    /// Whose processes the report may name beside the target's (a
    /// learner's own on a course server): the CPU competitors.
    pub scope: crate::instruments::target::Scope,
}

/// What the engine has to say while it runs, for the front end to word
/// (or not: a flight record says nothing).
pub enum Event<'a> {
    /// Watching starts: the PID, what besides it (" and its
    /// descendants"), for how long.
    Watching {
        pid: i32,
        what: &'a str,
        seconds: f64,
    },
    /// The verdict calls for these drill-downs, run at once for `seconds`.
    Drilling {
        verdict: Class,
        drills: &'a [Drill],
        seconds: f64,
    },
    /// The command could not run, and its exec trace says why.
    CouldNotRun(&'a ExecDrill),
    /// The command could not run, and no exec trace ran (not root): the
    /// command that would say why.
    SeeWhyWith(String),
}

/// A command's words as text.
fn words(argv: &[OsString]) -> Vec<String> {
    argv.iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}
