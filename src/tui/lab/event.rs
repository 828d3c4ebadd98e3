//! What flows through the lab app: the one message enum every thread sends
//! to the loop (keys, terminal events, the collectors' batches), and the
//! effects `update` asks the loop to carry out (save and check answers,
//! save evidence). The state never does I/O itself, so tests drive it with
//! messages alone.

use crate::analysis::exec_failure::Finding;
use crate::model::block::BlockIo;
use crate::model::exec::TraceEvent;
use crate::model::lab::Panel;
use crate::model::profile::Profile;

use super::panels::process::FocusSample;
use super::panels::processes::ProcSample;
pub use crate::tui::keys::Key;

/// One message to the loop.
#[derive(Debug, Clone)]
pub enum Msg {
    Key(Key),
    /// The terminal changed size: redraw.
    Resize,
    /// Data from a collector.
    Data(Data),
    /// The outcome of an effect: the verdicts of a step's questions after
    /// saving answers, as (answer key, verdict).
    Checked {
        step: usize,
        verdicts: Vec<(String, Verdict)>,
    },
    /// Evidence saved: the answer key and the file's path (already checked
    /// through a following `Checked`).
    Saved {
        key: String,
        path: String,
    },
    /// The answers file as it is now (another program, such as
    /// `kdiag answer`, may have changed it), every answer checked.
    Reloaded(Vec<Given>),
    /// Something the learner should read (an answer that could not be
    /// saved, the workload stopping on its own).
    Problem(String),
    /// Leave: SIGTERM, SIGHUP, the terminal gone.
    Stop,
}

/// What collectors send.
#[derive(Debug, Clone)]
pub enum Data {
    /// Every process, once a second.
    Procs(Box<ProcSample>),
    /// The chosen process, once a second.
    Focus(FocusSample),
    /// Block requests completed since the last batch.
    Io(Vec<BlockIo>),
    /// One window of the chosen process's CPU profile.
    Profile(Box<Profile>),
    /// One window of the chosen process's off-CPU profile (weights in ns).
    Offcpu(Box<Profile>),
    /// Exec events of the chosen process's tree, with what they explain.
    Exec(Vec<TraceEvent>, Vec<Finding>),
    /// How a panel's instrument runs: its tier, events lost, notes.
    Status(Panel, String),
    /// A panel's instrument could not start or stopped with an error.
    Failed(Panel, String),
}

/// An answer found in the answers file: (key, value, verdict).
pub type Given = (String, String, Verdict);

/// A question's state after a check.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Unanswered,
    Right,
    /// The check's message: what is wrong, never the answer.
    NotYet(String),
}

/// What `update` asks the loop to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Save these answers (key, value) of step `step`, then check the step
    /// and send back `Msg::Checked`.
    Answer {
        step: usize,
        answers: Vec<(String, String)>,
    },
    /// Save `contents` as the lab folder's file `file`, answer `key` with
    /// its path, check, and send back `Msg::Saved` and `Msg::Checked`.
    Evidence {
        step: usize,
        key: String,
        file: String,
        contents: String,
    },
}
