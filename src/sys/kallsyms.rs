//! Kernel symbols from /proc/kallsyms, to name the kernel frames of
//! recorded stacks (profiles, off-CPU profiles, signal stacks).
//!
//! A known set of addresses is named by the kernel's own lookup where BPF
//! allows (`sys::bpf::ksyms`, [`name_each`]): the file only where not.
//!
//! The kernel formats 100,000+ lines at each read, the larger part of the
//! cost; the read is done in large chunks and parsed in place, keeping
//! each symbol's address and where its name starts in the text, not one
//! string per symbol.

use crate::model::exec::Frame;

/// Kernel symbols from /proc/kallsyms: the text as read, and every named
/// address with where its name starts, sorted by address.
pub struct KernelSymbols {
    text: Vec<u8>,
    index: Vec<(u64, u32)>,
    /// kptr_restrict shows every address as 0 (not root): nothing is named.
    hidden: bool,
}

/// Why an address has no name, when kallsyms was read.
const NOT_IN_KALLSYMS: &str = "kernel address not in kallsyms (a module or BPF code?)";

/// The name of each of `addrs`, or why it has none: from the kernel's own
/// lookup of just these addresses where BPF is available (a thousandth of
/// the work of reading the whole file), else from /proc/kallsyms.
pub fn name_each(addrs: &[u64]) -> Vec<Result<String, String>> {
    if let Ok(names) = crate::sys::bpf::ksyms::names(addrs) {
        return names
            .into_iter()
            .map(|n| n.ok_or_else(|| NOT_IN_KALLSYMS.to_string()))
            .collect();
    }
    from_kallsyms(&KernelSymbols::read(), addrs)
}

/// Each of `addrs` named from kallsyms as read, or why not.
fn from_kallsyms(
    syms: &std::io::Result<KernelSymbols>,
    addrs: &[u64],
) -> Vec<Result<String, String>> {
    addrs
        .iter()
        .map(|&addr| match syms {
            Ok(k) => match k.name(addr) {
                Some(name) => Ok(name.to_string()),
                None if k.hidden() => {
                    Err("kernel addresses hidden (kernel.kptr_restrict; run as root)".into())
                }
                None => Err(NOT_IN_KALLSYMS.into()),
            },
            Err(e) => Err(format!("kernel symbols unreadable: {e}")),
        })
        .collect()
}

impl KernelSymbols {
    /// Read /proc/kallsyms. With kptr_restrict hiding addresses every
    /// address is 0 and frames stay unnamed.
    pub fn load() -> KernelSymbols {
        Self::read().unwrap_or_else(|_| KernelSymbols::parse(Vec::new()))
    }

    /// Read /proc/kallsyms, or why it could not be read.
    pub fn read() -> std::io::Result<KernelSymbols> {
        use std::io::Read;
        let mut text = Vec::with_capacity(16 << 20);
        std::fs::File::open("/proc/kallsyms")?.read_to_end(&mut text)?;
        Ok(KernelSymbols::parse(text))
    }

    /// Index kallsyms text: `ADDR TYPE NAME[\t[MODULE]]` per line.
    fn parse(text: Vec<u8>) -> KernelSymbols {
        let mut index = Vec::with_capacity(text.len() / 40);
        let mut lines = 0usize;
        let mut start = 0usize;
        for line in text.split(|&b| b == b'\n') {
            let at = start;
            start += line.len() + 1;
            if line.is_empty() {
                continue;
            }
            lines += 1;
            // "ffffffff81000000 T _stext": the name starts after the type.
            let Some(space) = line.iter().position(|&b| b == b' ') else {
                continue;
            };
            let Some(addr) = std::str::from_utf8(&line[..space])
                .ok()
                .and_then(|h| u64::from_str_radix(h, 16).ok())
            else {
                continue;
            };
            let name = space + 3;
            if addr == 0 || name >= line.len() {
                continue;
            }
            index.push((addr, (at + name) as u32));
        }
        index.sort_unstable_by_key(|&(a, _)| a);
        KernelSymbols {
            hidden: lines > 0 && index.is_empty(),
            text,
            index,
        }
    }

    /// Every address hidden by kptr_restrict (not root).
    pub fn hidden(&self) -> bool {
        self.hidden
    }

    /// The symbol `addr` is in: the nearest at or below it.
    pub fn name(&self, addr: u64) -> Option<&str> {
        let i = self
            .index
            .partition_point(|&(a, _)| a <= addr)
            .checked_sub(1)?;
        let rest = &self.text[self.index[i].1 as usize..];
        // kallsyms appends "\t[module]" to module symbols.
        let end = rest
            .iter()
            .position(|&b| b == b'\n' || b == b'\t' || b == b' ')
            .unwrap_or(rest.len());
        std::str::from_utf8(&rest[..end]).ok()
    }

    pub fn frame(&self, addr: u64) -> Frame {
        Frame {
            addr,
            symbol: self.name(addr).map(str::to_string),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_by_nearest_symbol_below() {
        let text = b"0000000000000000 A fixed_percpu_data\nffffffff81000000 T _stext\nffffffff81001000 t do_one\nffffffffc0001000 t mod_fn\t[kvm]\n".to_vec();
        let k = KernelSymbols::parse(text);
        assert!(!k.hidden());
        assert_eq!(k.name(0xffffffff81000010), Some("_stext"));
        assert_eq!(k.name(0xffffffff81001000), Some("do_one"));
        assert_eq!(k.name(0xffffffffc0001234), Some("mod_fn"));
        assert_eq!(k.name(0xffffffff80000000), None);
    }

    #[test]
    fn without_the_iterator_names_come_from_kallsyms_or_say_why_not() {
        let text = b"ffffffff81000000 T _stext\nffffffff81001000 t do_one\n".to_vec();
        let named = from_kallsyms(&Ok(KernelSymbols::parse(text)), &[0xffffffff81001004, 1]);
        assert_eq!(named[0], Ok("do_one".into()));
        assert!(named[1].as_ref().unwrap_err().contains("not in kallsyms"));
        let hidden = KernelSymbols::parse(b"0000000000000000 T _stext\n".to_vec());
        let named = from_kallsyms(&Ok(hidden), &[0xffffffff81001004]);
        assert!(named[0].as_ref().unwrap_err().contains("kptr_restrict"));
        let unreadable = Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied));
        let named = from_kallsyms(&unreadable, &[0xffffffff81001004]);
        assert!(named[0].as_ref().unwrap_err().contains("unreadable"));
    }

    #[test]
    fn all_zero_addresses_are_hidden() {
        let k = KernelSymbols::parse(
            b"0000000000000000 T _stext\n0000000000000000 t do_one\n".to_vec(),
        );
        assert!(k.hidden());
        assert_eq!(k.name(0xffffffff81000010), None);
    }
}
