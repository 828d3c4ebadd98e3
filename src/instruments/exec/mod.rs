//! Exec tracing for exec-trace and execsnoop: the BPF tier (`bpf.rs`, user
//! strings read at syscall entry) and the perf tier (`perf.rs`, tracepoints
//! through perf_event_open), both yielding `model::exec::TraceEvent`s.

pub mod bpf;
pub mod perf;
pub mod source;
pub mod watch;

pub use source::{ExecSource, Filter, Spawned};

use std::path::Path;

use crate::analysis::exec_failure::FileFacts;
use crate::instruments::{self, Ask, Fallback, Tier};
use crate::model::exec::TraceEvent;
use crate::user_files::Peek;

/// exec-trace's tiers.
pub const TRACE_TIERS: instruments::Tiers = instruments::Tiers {
    name: "exec-trace",
    auto: "BPF where the kernel allows it, else perf",
    rows: &[
        instruments::TierRow {
            tier: Tier::Bpf,
            sees: "BPF programs: failed execs with their file names and arguments",
            // It also attaches tp_btf (signal_generate, fork).
            works: |p| p.bpf_tracepoint.is_ok() && p.bpf_tp_btf.is_ok(),
        },
        instruments::TierRow {
            tier: Tier::Perf,
            sees: "perf_event_open tracepoints: failed execs with error codes, file names \
                   only for successful execs",
            works: |p| p.perf_tracepoint.is_ok(),
        },
    ],
};

/// execsnoop's tiers.
pub const SNOOP_TIERS: instruments::Tiers = instruments::Tiers {
    name: "execsnoop",
    auto: "BPF where the kernel allows it, else perf",
    rows: &[
        instruments::TierRow {
            tier: Tier::Bpf,
            sees: "BPF programs: argv read in the kernel at exec",
            works: |p| p.bpf_tracepoint.is_ok(),
        },
        instruments::TierRow {
            tier: Tier::Perf,
            sees: "perf_event_open tracepoints: file names from sched_process_exec, argv \
                   from /proc (racy for short processes)",
            works: |p| p.perf_tracepoint.is_ok(),
        },
    ],
};

/// Open the requested tier, and why `auto` fell back, if it did.
pub fn open(
    ask: Ask,
    filter: Filter,
    spawned: Option<Spawned>,
) -> anyhow::Result<(Box<ExecSource>, Option<Fallback>)> {
    instruments::open(
        ask,
        vec![
            (
                Tier::Bpf,
                Box::new(|| Ok(Box::new(bpf::ExecBpf::open(filter)?) as Box<ExecSource>)),
            ),
            (
                Tier::Perf,
                Box::new(
                    || Ok(Box::new(perf::ExecPerf::open(filter, spawned)?) as Box<ExecSource>),
                ),
            ),
        ],
    )
}

/// What the file system says about each file an exec named: does it exist,
/// and what elf-check finds in it. Relative paths are taken from our working
/// directory, which a spawned command shares (best effort for -p).
pub fn file_facts(events: &[TraceEvent]) -> Vec<FileFacts> {
    let mut facts: Vec<FileFacts> = Vec::new();
    for e in events {
        let TraceEvent::Exec(x) = e else { continue };
        let Some(path) = &x.filename else { continue };
        if facts.iter().any(|f| &f.path == path) {
            continue;
        }
        // Looked at as the user, as everything a user names.
        let p = Path::new(path);
        let peek = crate::user_files::peek(p, 0);
        let elf = matches!(peek, Peek::File { .. })
            .then(|| crate::instruments::elf::read_target(p).ok())
            .flatten()
            .map(|(image, env)| crate::analysis::elf_rules::check(&image, &env));
        facts.push(FileFacts {
            path: path.clone(),
            exists: !matches!(peek, Peek::Missing),
            elf,
        });
    }
    facts
}
