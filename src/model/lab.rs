//! What a lab step asks of the lab app, as lab.toml declares it: the live
//! instrument panels shown under the step's text, and how each answer is
//! entered. Plain data: `lab/` reads it, `tui::lab` draws it.

use serde::{Deserialize, Serialize};

/// A live instrument panel (lab.toml: `panels = ["processes"]`). Each names
/// what it shows, in the who → what → why → trend order of an
/// investigation. Only the panel on screen runs its instrument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Panel {
    /// who: every process, as `kdiag top`, sortable; the learner picks one.
    Processes,
    /// what: the chosen process's rates over the last seconds (CPU user and
    /// system, storage bytes, faults, context switches, thread states).
    Process,
    /// what: the chosen process's block requests as iosnoop prints them,
    /// with running totals.
    Iosnoop,
    /// why: the I/O pattern of the chosen process's requests (sequential or
    /// random, sizes, ranges rewritten).
    IoPattern,
    /// why: the chosen process's CPU profile: top functions and a text
    /// flame summary of the last seconds.
    Profile,
    /// why: failed execs of the chosen process and its children, explained.
    ExecTrace,
    /// why: where the chosen process waits off the CPU.
    Offcpu,
    /// trend: the chosen process's CPU, I/O, RSS and context switches
    /// since the lab started.
    Trend,
}

impl Panel {
    pub const ALL: [Panel; 8] = [
        Panel::Processes,
        Panel::Process,
        Panel::Iosnoop,
        Panel::IoPattern,
        Panel::Profile,
        Panel::ExecTrace,
        Panel::Offcpu,
        Panel::Trend,
    ];

    /// Its name in lab.toml.
    pub fn name(self) -> &'static str {
        match self {
            Panel::Processes => "processes",
            Panel::Process => "process",
            Panel::Iosnoop => "iosnoop",
            Panel::IoPattern => "io-pattern",
            Panel::Profile => "profile",
            Panel::ExecTrace => "exec-trace",
            Panel::Offcpu => "offcpu",
            Panel::Trend => "trend",
        }
    }

    /// Its title on screen.
    pub fn title(self) -> &'static str {
        match self {
            Panel::Processes => "processes",
            Panel::Process => "the process's rates",
            Panel::Iosnoop => "block requests (iosnoop)",
            Panel::IoPattern => "I/O pattern",
            Panel::Profile => "where the CPU goes (profile)",
            Panel::ExecTrace => "failed execs (exec-trace)",
            Panel::Offcpu => "where it waits (off-CPU)",
            Panel::Trend => "since the lab started (trend)",
        }
    }

    /// Whether it shows one process (the one picked in the process table).
    pub fn needs_process(self) -> bool {
        !matches!(self, Panel::Processes)
    }
}

/// How the app asks for one answer (lab.toml: `[steps.inputs]`, by answer
/// key). Keys not listed are text fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Input {
    /// Free text.
    Text,
    /// A number, with a unit the learner may add (`unit = "bytes"`: 10 MiB).
    Number {
        #[serde(default)]
        unit: Option<String>,
    },
    /// One of a list, chosen with ← →.
    Choice { choices: Vec<String> },
    /// The process picked in the process table: its PID or its name.
    Pick { column: PickColumn },
    /// A file the app saves from the panel on screen (the profile's folded
    /// stacks, the iosnoop trace) and whose path is the answer.
    Evidence,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PickColumn {
    Pid,
    Comm,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Step {
        panels: Vec<Panel>,
        inputs: std::collections::BTreeMap<String, Input>,
    }

    #[test]
    fn lab_toml_spelling() {
        let s: Step = toml::from_str(
            r#"
            panels = ["processes", "io-pattern", "exec-trace"]
            [inputs]
            "who.pid" = { type = "pick", column = "pid" }
            "trend.region_bytes" = { type = "number", unit = "bytes" }
            "trend.pattern" = { type = "choice", choices = ["a", "b"] }
            "why.profile" = { type = "evidence" }
            "#,
        )
        .unwrap();
        assert_eq!(
            s.panels,
            [Panel::Processes, Panel::IoPattern, Panel::ExecTrace]
        );
        assert_eq!(
            s.inputs["who.pid"],
            Input::Pick {
                column: PickColumn::Pid
            }
        );
        assert_eq!(
            s.inputs["trend.region_bytes"],
            Input::Number {
                unit: Some("bytes".into())
            }
        );
        assert_eq!(s.inputs["why.profile"], Input::Evidence);
        for p in Panel::ALL {
            let v: Panel = toml::Value::String(p.name().into()).try_into().unwrap();
            assert_eq!(v, p);
        }
        assert!(toml::from_str::<Step>("panels = [\"nope\"]\n[inputs]").is_err());
    }
}
