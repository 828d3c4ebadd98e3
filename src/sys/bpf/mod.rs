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
pub fn load(object: &[u8], what: &str) -> anyhow::Result<Loaded> {
    load_with(object, what, |_| {})
}

/// Like `load`, letting `configure` set `const volatile` globals first.
pub fn load_with<'a>(
    object: &[u8],
    what: &str,
    configure: impl FnOnce(&mut aya::EbpfLoader<'a>),
) -> anyhow::Result<Loaded> {
    if !crate::sys::process::privilege::is_root() && !has_bpf_caps() {
        return Err(crate::error::needs_privilege(what));
    }
    let mut loader = aya::EbpfLoader::new();
    configure(&mut loader);
    let ebpf = loader
        .load(object)
        .with_context(|| format!("loading the BPF programs for {what}"))?;
    // Its maps' memory, counted once while they all exist (an instrument
    // may take a map out of the object later).
    let bytes: u64 = ebpf.maps().filter_map(|(_, m)| map_memlock(m)).sum();
    TALLY.lock().unwrap_or_else(|e| e.into_inner()).map_bytes += bytes;
    Ok(Loaded(ebpf))
}

/// The memory the kernel charged for a map (`memlock:` in its fdinfo).
fn map_memlock(map: &aya::maps::Map) -> Option<u64> {
    use aya::maps::Map;
    use std::os::fd::{AsFd, AsRawFd};
    macro_rules! data {
        ($($v:ident),*) => { match map { $(Map::$v(d))|* => d } };
    }
    let d = data!(
        Array,
        ArrayOfMaps,
        BloomFilter,
        CgroupArray,
        CgroupStorage,
        CgrpStorage,
        CpuMap,
        DevMap,
        DevMapHash,
        HashMap,
        HashOfMaps,
        InodeStorage,
        LpmTrie,
        LruHashMap,
        PerCpuArray,
        PerCpuCgroupStorage,
        PerCpuHashMap,
        PerCpuLruHashMap,
        PerfEventArray,
        ProgramArray,
        Queue,
        ReusePortSockArray,
        RingBuf,
        SockHash,
        SockMap,
        SkStorage,
        Stack,
        StackTraceMap,
        Unsupported,
        XskMap
    );
    let fd = d.fd().as_fd().as_raw_fd();
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
    field(&info, "memlock:")
}

/// A loaded object (aya's handle, which owns its programs and maps). When
/// it is dropped, what its programs did is added to this process's
/// `tally`: how many were loaded and, while the kernel keeps run-time
/// statistics, the time they ran.
pub struct Loaded(aya::Ebpf);

impl std::ops::Deref for Loaded {
    type Target = aya::Ebpf;
    fn deref(&self) -> &aya::Ebpf {
        &self.0
    }
}

impl std::ops::DerefMut for Loaded {
    fn deref_mut(&mut self) -> &mut aya::Ebpf {
        &mut self.0
    }
}

impl Drop for Loaded {
    fn drop(&mut self) {
        // Read before aya closes the programs' descriptors.
        for (_, program) in self.0.programs() {
            count(program);
        }
    }
}

/// Add what `program` did to the tally, if it is still loaded: a loader
/// that unloads a program before dropping its object calls this first
/// (an unloaded program is not counted again on drop).
pub fn count(program: &aya::programs::Program) {
    let Some(info) = fdinfo(program) else {
        return;
    };
    let mut t = TALLY.lock().unwrap_or_else(|e| e.into_inner());
    t.programs += 1;
    t.run_time_ns += field(&info, "run_time_ns:").unwrap_or(0);
    t.runs += field(&info, "run_cnt:").unwrap_or(0);
}

/// What the BPF programs kdiag loaded and unloaded so far did, and the
/// memory of the maps of every object it loaded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub programs: u64,
    /// Time in the programs and their runs, counted only while run-time
    /// statistics are on (`RunTimeStats`).
    pub run_time_ns: u64,
    pub runs: u64,
    /// Bytes the kernel charged for the maps of every object loaded
    /// (`memlock:` of each map's fdinfo, read when the object was loaded).
    pub map_bytes: u64,
}

static TALLY: std::sync::Mutex<Tally> = std::sync::Mutex::new(Tally {
    programs: 0,
    run_time_ns: 0,
    runs: 0,
    map_bytes: 0,
});

/// The programs unloaded so far (a program still loaded is not counted).
pub fn tally() -> Tally {
    *TALLY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the kernel measures BPF programs' run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunTimeStats {
    /// `kernel.bpf_stats_enabled` was already 1.
    AlreadyOn,
    /// Turned on by kdiag (BPF_ENABLE_STATS) while it holds the returned
    /// descriptor: the kernel turns it off again when that is closed, at
    /// kdiag's exit whatever ends it, and the sysctl is never written.
    TurnedOn,
    /// Could not be turned on (no privilege, or a kernel before 5.8).
    Unavailable,
}

/// Turn run-time statistics on for as long as the descriptor is held.
pub fn measure_run_time() -> (RunTimeStats, Option<std::os::fd::OwnedFd>) {
    let on = std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled")
        .is_ok_and(|s| s.trim() == "1");
    if on {
        return (RunTimeStats::AlreadyOn, None);
    }
    match aya::sys::enable_stats(aya::sys::Stats::RunTime) {
        Ok(fd) => (RunTimeStats::TurnedOn, Some(fd)),
        Err(_) => (RunTimeStats::Unavailable, None),
    }
}

/// A loaded program's /proc/self/fdinfo text; None when it is not loaded.
fn fdinfo(program: &aya::programs::Program) -> Option<String> {
    use std::os::fd::{AsFd, AsRawFd};
    let fd = program.fd().ok()?;
    std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_fd().as_raw_fd())).ok()
}

fn field(info: &str, name: &str) -> Option<u64> {
    info.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().parse().ok())
}

/// Whether the effective capability set holds CAP_BPF and CAP_PERFMON.
pub fn has_bpf_caps() -> bool {
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
    let mut total = None;
    for (_, program) in ebpf.programs() {
        let Some(info) = fdinfo(program) else {
            continue;
        };
        if let Some(m) = field(&info, "recursion_misses:") {
            total = Some(total.unwrap_or(0) + m);
        }
    }
    total
}
