//! Kernel symbols from /proc/kallsyms, for the kernel stacks tracing
//! instruments record.

use std::collections::BTreeMap;

use crate::model::exec::Frame;

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
