//! Loading kdiag's compiled BPF objects (tier B) with aya, with errors a user
//! can act on. The C sources and their compiled objects live here (built by
//! `build.sh`); each instrument's loader lives with the instrument
//! (`instruments/<name>/bpf.rs`) and loads its object from `objects` below.

use anyhow::Context;

/// The compiled objects, embedded so that a build needs no clang: one
/// static per committed `*.bpf.o` of this folder (`offcpu.bpf.o` is
/// `OFFCPU`), documented by its source's leading comment; build.rs writes
/// the list, so no object is left out and none is kept by hand.
pub mod objects {
    include!(concat!(env!("OUT_DIR"), "/bpf_objects.rs"));
}

/// Load a compiled BPF object; `what` names the feature for error messages.
/// Permission errors become "run with sudo"; verifier failures keep the log.
pub fn load(object: &[u8], what: &str) -> anyhow::Result<aya::Ebpf> {
    load_with(object, what, |_| {})
}

/// Like `load`, letting `configure` set `const volatile` globals first.
pub fn load_with<'a>(
    object: &[u8],
    what: &str,
    configure: impl FnOnce(&mut aya::EbpfLoader<'a>),
) -> anyhow::Result<aya::Ebpf> {
    if !crate::sys::process::privilege::is_root() && !has_bpf_caps() {
        return Err(crate::error::needs_privilege(what));
    }
    let mut loader = aya::EbpfLoader::new();
    configure(&mut loader);
    loader
        .load(object)
        .with_context(|| format!("loading the BPF programs for {what}"))
}

/// Whether the effective capability set holds CAP_BPF and CAP_PERFMON.
fn has_bpf_caps() -> bool {
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    eff & (1 << CAP_BPF) != 0 && eff & (1 << CAP_PERFMON) != 0
}

/// How many times the kernel skipped the loaded object's programs because
/// one was already running on that CPU (a completion interrupt landing on a
/// run of the same program): `recursion_misses` in each program's fdinfo,
/// summed. Those events never reach the program, so nothing else counts
/// them. None when the kernel does not report it (before 5.12).
pub fn recursion_misses(ebpf: &aya::Ebpf) -> Option<u64> {
    use std::os::fd::{AsFd, AsRawFd};
    let mut total = None;
    for (_, program) in ebpf.programs() {
        let Ok(fd) = program.fd() else { continue };
        let path = format!("/proc/self/fdinfo/{}", fd.as_fd().as_raw_fd());
        let Ok(info) = std::fs::read_to_string(path) else {
            continue;
        };
        let misses = info
            .lines()
            .find_map(|l| l.strip_prefix("recursion_misses:"))
            .and_then(|v| v.trim().parse::<u64>().ok());
        if let Some(m) = misses {
            total = Some(total.unwrap_or(0) + m);
        }
    }
    total
}
