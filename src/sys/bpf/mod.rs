//! Loading kdiag's compiled BPF objects (tier B) with aya, with errors a user
//! can act on. The C sources and their compiled objects live here (built by
//! `build.sh`); each instrument's loader lives with the instrument
//! (`instruments/<name>/bpf.rs`) and loads its object from `objects` below.

use std::sync::{Mutex, OnceLock};

use anyhow::Context;

pub mod ksyms;
pub mod tasks;

/// The compiled objects, embedded so that a build needs no clang: one
/// static per committed `*.bpf.o` of this folder (`offcpu.bpf.o` is
/// `OFFCPU`), documented by its source's leading comment; build.rs writes
/// the list, so no object is left out and none is kept by hand.
pub mod objects {
    include!(concat!(env!("OUT_DIR"), "/bpf_objects.rs"));
}

/// Load a compiled BPF object; `what` names the feature for error messages.
/// Permission errors become "run with sudo"; verifier failures keep the log.
pub fn load(object: &'static [u8], what: &str) -> anyhow::Result<Loaded> {
    load_with(object, what, &[], &[])
}

/// Like `load`, with `const volatile` globals set first (`globals`: name,
/// value's bytes in native order, as big as the global) and maps sized
/// (`sizes`: name, max_entries; the others keep the object's own size).
pub fn load_with(
    object: &'static [u8],
    what: &str,
    globals: &[(&str, &[u8])],
    sizes: &[(&str, u32)],
) -> anyhow::Result<Loaded> {
    if !crate::sys::process::privilege::is_root() && !has_bpf_caps() {
        return Err(crate::error::needs_privilege(what));
    }
    let data = with_globals(object, globals)
        .with_context(|| format!("setting the globals of the BPF programs for {what}"))?;
    let sizes =
        map_sizes(object, sizes).with_context(|| format!("sizing the BPF maps for {what}"))?;
    let ebpf = {
        let mut loader = loader().lock().unwrap_or_else(|e| e.into_inner());
        for (name, size) in sizes {
            loader.map_max_entries(name, size);
        }
        loader.load(&data)
    }
    .with_context(|| format!("loading the BPF programs for {what}"))?;
    // Its maps' memory, counted once while they all exist (an instrument
    // may take a map out of the object later).
    let bytes: u64 = ebpf.maps().filter_map(|(_, m)| map_memlock(m)).sum();
    TALLY.lock().unwrap_or_else(|e| e.into_inner()).map_bytes += bytes;
    Ok(Loaded(ebpf))
}

/// The kernel's BTF (/sys/kernel/btf/vmlinux), parsed once per process:
/// a parse reads 5 MiB and takes tens of ms, and the loader, every tp_btf
/// attach and doctor need it. The error is the parse's, for the caller to
/// word.
pub fn kernel_btf() -> anyhow::Result<&'static aya::Btf> {
    static BTF: OnceLock<Result<aya::Btf, String>> = OnceLock::new();
    BTF.get_or_init(|| aya::Btf::from_sys_fs().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// The kernel's BTF for a tier whose programs read task_struct with CO-RE,
/// which only that BTF can relocate; the error says what the kernel lacks.
pub fn btf_for_core() -> anyhow::Result<&'static aya::Btf> {
    kernel_btf().map_err(|e| {
        anyhow::anyhow!(
            "this kernel has no BTF (/sys/kernel/btf/vmlinux: {e}), which the BPF tier \
             needs (CONFIG_DEBUG_INFO_BTF=y)"
        )
    })
}

/// Load program `prog` of `object` (its file name, for the error) as
/// `tp_btf/tp` and attach it.
pub fn attach_tp_btf(
    ebpf: &mut Loaded,
    object: &str,
    prog: &str,
    tp: &str,
    btf: &aya::Btf,
) -> anyhow::Result<()> {
    let p: &mut aya::programs::BtfTracePoint = ebpf
        .program_mut(prog)
        .with_context(|| format!("no program {prog} in {object}"))?
        .try_into()?;
    p.load(tp, btf)
        .with_context(|| format!("loading tp_btf/{tp}"))?;
    p.attach()
        .with_context(|| format!("attaching tp_btf/{tp}"))?;
    Ok(())
}

/// One half of a stack a program recorded with `bpf_get_stackid`, as read
/// back from its stack map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Captured {
    /// Addresses, innermost first.
    Ips(Vec<u64>),
    /// A kernel thread's user half: there is none.
    Absent,
    /// Not stored: the stack map was full, or its bucket taken (hash collision).
    Lost,
    /// The user stack could not be read.
    Unreadable,
}

/// The user stack id a program records for a kernel thread, which has no
/// user stack (not an errno): `NO_USER_STACK` of the C sources.
pub const NO_USER_STACK: i32 = -1;
const EFAULT: i32 = 14;

/// The half a program recorded as `id` (a stack id, `NO_USER_STACK`, or
/// `bpf_get_stackid`'s negative errno), read from its stack map.
pub fn read_stack(
    map: &aya::maps::StackTraceMap<&aya::maps::MapData>,
    id: i32,
    user: bool,
) -> Captured {
    match id {
        NO_USER_STACK if user => Captured::Absent,
        id if id == -EFAULT && user => Captured::Unreadable,
        id if id < 0 => Captured::Lost,
        id => match map.get(&(id as u32), 0) {
            Ok(trace) => Captured::Ips(trace.frames().iter().map(|f| f.ip).collect()),
            Err(_) => Captured::Lost,
        },
    }
}

/// Words of a watch bitmap (an array map of u64s, one bit per tgid, named
/// `watched` in the C sources): one bit per possible PID, for `sizes`.
pub fn watch_words() -> anyhow::Result<u32> {
    let text = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .context("reading /proc/sys/kernel/pid_max")?;
    let pid_max: u32 = text
        .trim()
        .parse()
        .context("parsing /proc/sys/kernel/pid_max")?;
    Ok(pid_max.div_ceil(64).max(1))
}

/// Set the bits of `tgids` in the loaded object's `watched` bitmap.
pub fn watch_all(ebpf: &mut Loaded, tgids: &[u32]) -> anyhow::Result<()> {
    tgids.iter().try_for_each(|&tgid| watch(ebpf, tgid))
}

/// Counter `i` of the loaded object's per-CPU `counters` map (declared by
/// watch.bpf.h, indexed by the program's `enum counter`), summed over CPUs.
pub fn counter(ebpf: &Loaded, i: u32) -> anyhow::Result<u64> {
    let arr: aya::maps::PerCpuArray<_, u64> =
        aya::maps::PerCpuArray::try_from(ebpf.map("counters").context("no counters map")?)?;
    Ok(arr.get(&i, 0).context("reading the counters")?.iter().sum())
}

/// Set `tgid`'s bit in the loaded object's `watched` bitmap (also a
/// `-- CMD` child before it is released).
pub fn watch(ebpf: &mut Loaded, tgid: u32) -> anyhow::Result<()> {
    let mut watched: aya::maps::Array<_, u64> =
        aya::maps::Array::try_from(ebpf.map_mut("watched").context("no watched map")?)?;
    let word = tgid / 64;
    let old = watched
        .get(&word, 0)
        .with_context(|| format!("PID {tgid} is above kernel.pid_max: cannot watch it"))?;
    watched
        .set(word, old | 1 << (tgid % 64), 0)
        .context("updating the watch bitmap")?;
    Ok(())
}

/// The one loader of this process. aya 0.14's `EbpfLoader::new()` parses
/// the kernel's BTF itself, whatever `btf()` is given afterwards
/// (aya-rs/aya#1172), so a loader per load cost a parse per load. A loader
/// cannot forget what it was told, so it is told nothing that belongs to
/// one object: globals go into the object's bytes (`with_globals`), and
/// every load sizes each of its object's maps (`map_sizes`), so a size
/// left by another object's map of the same name never applies.
fn loader() -> &'static Mutex<aya::EbpfLoader<'static>> {
    static LOADER: OnceLock<Mutex<aya::EbpfLoader<'static>>> = OnceLock::new();
    LOADER.get_or_init(|| {
        let mut loader = aya::EbpfLoader::new();
        loader.btf(kernel_btf().ok());
        Mutex::new(loader)
    })
}

/// `object` with the `const volatile` globals `globals` written into its
/// initial data (what aya's `override_global` does to the parsed object).
fn with_globals(object: &[u8], globals: &[(&str, &[u8])]) -> anyhow::Result<Vec<u8>> {
    use object::{Object, ObjectSection, ObjectSymbol};
    let elf = object::File::parse(object)?;
    let mut data = object.to_vec();
    for &(name, value) in globals {
        let sym = elf
            .symbols()
            .find(|s| s.name() == Ok(name))
            .with_context(|| format!("the object has no global {name}"))?;
        anyhow::ensure!(
            sym.size() == value.len() as u64,
            "global {name} is {} bytes, not {}",
            sym.size(),
            value.len()
        );
        let section = elf.section_by_index(
            sym.section_index()
                .with_context(|| format!("global {name} is in no section"))?,
        )?;
        let (start, len) = section
            .file_range()
            .with_context(|| format!("global {name} has no initial data (in .bss?)"))?;
        let at = sym.address() - section.address();
        anyhow::ensure!(
            at + sym.size() <= len,
            "global {name} lies outside its section"
        );
        let at = (start + at) as usize;
        data[at..at + value.len()].copy_from_slice(value);
    }
    Ok(data)
}

/// Every map of `object` (its BTF-defined `.maps`) with the size it is to
/// have: `sizes`' where named there, else its own.
fn map_sizes(
    object: &'static [u8],
    sizes: &[(&str, u32)],
) -> anyhow::Result<Vec<(&'static str, u32)>> {
    use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};
    let parsed = aya_obj::Object::parse(object)?;
    let elf = object::File::parse(object)?;
    let mut out = Vec::new();
    if let Some(maps) = elf.section_by_name(".maps") {
        for sym in elf
            .symbols()
            .filter(|s| s.section_index() == Some(maps.index()) && s.kind() == SymbolKind::Data)
        {
            let name = sym.name()?;
            let own = parsed
                .maps
                .get(name)
                .with_context(|| format!("aya does not see map {name}"))?
                .max_entries();
            let size = sizes.iter().find(|(n, _)| *n == name).map_or(own, |s| s.1);
            out.push((name, size));
        }
    }
    for (name, _) in sizes {
        anyhow::ensure!(
            out.iter().any(|(m, _)| m == name),
            "the object has no map {name}"
        );
    }
    Ok(out)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A global's bytes as aya will see them: in its parsed `.rodata` map.
    fn rodata_global(data: &[u8], name: &str) -> Vec<u8> {
        use object::{Object, ObjectSymbol};
        let elf = object::File::parse(data).unwrap();
        let sym = elf.symbols().find(|s| s.name() == Ok(name)).unwrap();
        let obj = aya_obj::Object::parse(data).unwrap();
        let (_, map) = obj
            .maps
            .iter()
            .find(|(n, _)| n.starts_with(".rodata"))
            .unwrap();
        let at = sym.address() as usize;
        map.data()[at..at + sym.size() as usize].to_vec()
    }

    #[test]
    fn globals_are_written_into_the_object() {
        let dev = 0x1234_5678u32.to_ne_bytes();
        let data = with_globals(
            objects::BIOSNOOP,
            &[("filter_dev", &dev), ("hist_only", &[1])],
        )
        .unwrap();
        assert_eq!(rodata_global(&data, "filter_dev"), dev);
        assert_eq!(rodata_global(&data, "hist_only"), [1]);
        assert_eq!(rodata_global(&data, "queued"), [0], "left as compiled");
        assert_eq!(rodata_global(objects::BIOSNOOP, "filter_dev"), [0; 4]);
    }

    #[test]
    fn a_wrong_global_is_refused() {
        let e = with_globals(objects::BIOSNOOP, &[("nope", &[1])]).unwrap_err();
        assert_eq!(e.to_string(), "the object has no global nope");
        let e = with_globals(objects::BIOSNOOP, &[("filter_dev", &[1])]).unwrap_err();
        assert_eq!(e.to_string(), "global filter_dev is 4 bytes, not 1");
    }

    /// Every map is sized at every load: `watched` is in two objects, and
    /// the size offcpu gives its own must not reach exec's.
    #[test]
    fn every_map_is_sized_each_load() {
        let exec = map_sizes(objects::EXEC, &[]).unwrap();
        let off = map_sizes(objects::OFFCPU, &[("watched", 7)]).unwrap();
        let size =
            |maps: &[(&str, u32)], name: &str| maps.iter().find(|(n, _)| *n == name).map(|m| m.1);
        assert_eq!(size(&off, "watched"), Some(7));
        let own = aya_obj::Object::parse(objects::EXEC).unwrap().maps["watched"].max_entries();
        assert_eq!(size(&exec, "watched"), Some(own));
        let mut names: Vec<_> = exec.iter().map(|m| m.0).collect();
        names.sort();
        assert_eq!(
            names,
            ["drops", "events", "pending", "scratch", "stacks", "watched"]
        );
        let e = map_sizes(objects::EXEC, &[("nope", 1)]).unwrap_err();
        assert_eq!(e.to_string(), "the object has no map nope");
    }
}
