//! Exec tracing sources for exec-trace and execsnoop: the BPF tier
//! (`sys::bpf::exec`, user strings read at syscall entry) and the perf tier
//! (`sys::exec_perf`, tracepoints through perf_event_open), behind one
//! interface that yields `model::exec::TraceEvent`s.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::model::exec::{Frame, TraceEvent};

/// Which processes to watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Filter {
    /// Only this process (None: every process).
    pub pid: Option<u32>,
    /// Also the processes it forks, and theirs.
    pub follow_children: bool,
    /// Record signals generated for the watched processes (and their ends).
    pub signals: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TierChoice {
    Auto,
    Bpf,
    Perf,
}

/// The command kdiag started: the perf tier cannot read user strings, but
/// knows what it passed to execve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spawned {
    pub pid: u32,
    pub path: String,
    pub argv: Vec<String>,
}

/// A running exec trace. Dropping it detaches everything.
pub trait Source {
    /// "bpf" or "perf".
    fn tier(&self) -> &'static str;
    /// Wait up to `timeout` for events and append them, in time order.
    fn poll(&mut self, timeout: Duration, out: &mut Vec<TraceEvent>) -> anyhow::Result<()>;
    /// Events the kernel dropped (ring full).
    fn lost(&self) -> u64;
    /// What this tier cannot see, for the user.
    fn notes(&self) -> Vec<String>;
}

/// Open the requested tier. `auto` tries BPF, then perf, and says why in
/// the returned notes.
pub fn open(
    tier: TierChoice,
    filter: Filter,
    spawned: Option<Spawned>,
) -> anyhow::Result<(Box<dyn Source>, Vec<String>)> {
    match tier {
        TierChoice::Bpf => Ok((
            Box::new(crate::sys::bpf::exec::ExecBpf::open(filter)?),
            vec![],
        )),
        TierChoice::Perf => Ok((
            Box::new(crate::sys::exec_perf::ExecPerf::open(filter, spawned)?),
            vec![],
        )),
        TierChoice::Auto => match crate::sys::bpf::exec::ExecBpf::open(filter) {
            Ok(s) => Ok((Box::new(s), vec![])),
            Err(e) => {
                let s = crate::sys::exec_perf::ExecPerf::open(filter, spawned)?;
                Ok((
                    Box::new(s),
                    vec![format!("BPF tier unavailable ({e:#}); using the perf tier")],
                ))
            }
        },
    }
}

/// Kernel symbols from /proc/kallsyms, for the signal stacks.
pub struct KernelSymbols(BTreeMap<u64, String>);

impl KernelSymbols {
    /// Read /proc/kallsyms. With kptr_restrict hiding addresses every
    /// address is 0 and frames stay unnamed.
    pub fn load() -> KernelSymbols {
        let map = aya::util::kernel_symbols().unwrap_or_default();
        KernelSymbols(map.into_iter().filter(|(a, _)| *a != 0).collect())
    }

    pub fn frame(&self, addr: u64) -> Frame {
        Frame {
            addr,
            // kallsyms appends "\t[module]" to module symbols.
            symbol: self
                .0
                .range(..=addr)
                .next_back()
                .and_then(|(_, s)| s.split_whitespace().next())
                .map(str::to_string),
        }
    }

    /// Symbolize a kernel stack (innermost first), dropping the frames of
    /// the tracing machinery itself (BPF program, tracepoint iterator), so
    /// the stack starts where the traced event happened.
    pub fn stack(&self, ips: impl IntoIterator<Item = u64>) -> Vec<Frame> {
        let frames: Vec<Frame> = ips.into_iter().map(|ip| self.frame(ip)).collect();
        let tracing = |f: &Frame| {
            f.symbol.as_deref().is_some_and(|s| {
                [
                    "bpf_",
                    "__bpf_trace_",
                    "__traceiter_",
                    "perf_trace_",
                    "perf_tp_",
                    "trace_event_",
                ]
                .iter()
                .any(|p| s.starts_with(p))
            })
        };
        match frames.iter().rposition(tracing) {
            Some(last) if last + 1 < frames.len() => frames[last + 1..].to_vec(),
            _ => frames,
        }
    }
}
