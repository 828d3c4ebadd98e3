//! Real probes of what this machine allows: load trivial BPF programs, open
//! perf events, read sysctls and /proc files. Nothing is guessed from kernel
//! versions. `probe_all` is the library entry other commands use to pick a
//! tier; every handle it opens is closed before it returns.

pub mod features;

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;

use anyhow::Context;
use aya::Btf;
use aya::programs::perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent};
use aya::programs::{BtfTracePoint, FEntry, PerfEvent, TracePoint};
use perf_event_open_sys as perf;

use crate::model::capability::{Check, Probes};

const SUDO: &str = "run kdiag with sudo";

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Run every probe.
pub fn probe_all() -> Probes {
    let caps = effective_caps();
    let root = crate::sys::process::privilege::is_root();
    let has = |bit: u32| caps.is_some_and(|c| c & (1 << bit) != 0);
    let cap = |bit: u32, name: &str, why: &str| {
        if has(bit) {
            Check::ok("in the effective set")
        } else {
            Check::denied(
                format!("not held: {why}"),
                format!("{SUDO}, or grant {name}"),
            )
        }
    };
    let perfmon = has(CAP_PERFMON) || has(CAP_SYS_ADMIN);
    let tracefs = crate::sys::tracefs::Tracefs::open();
    let btf = crate::sys::bpf::kernel_btf();

    Probes {
        user: user_check(root, caps),
        cap_perfmon: cap(
            CAP_PERFMON,
            "CAP_PERFMON",
            "needed for system-wide perf events",
        ),
        cap_bpf: cap(CAP_BPF, "CAP_BPF", "needed to load BPF programs"),
        cap_sys_admin: cap(
            CAP_SYS_ADMIN,
            "CAP_SYS_ADMIN",
            "needed for tracefs and some BPF",
        ),
        perf_event_paranoid: paranoid_check(perfmon),
        kptr_restrict: kptr_check(),
        perf_event_max_sample_rate: sysctl_info("kernel/perf_event_max_sample_rate"),
        perf_event_max_stack: sysctl_info("kernel/perf_event_max_stack"),
        unprivileged_bpf_disabled: sysctl_info("kernel/unprivileged_bpf_disabled"),
        tracefs: match &tracefs {
            Ok(fs) if fs.mounted_now() => {
                Check::ok(format!("mounted by kdiag at {}", fs.root().display()))
            }
            Ok(fs) => Check::ok(format!("found at {}", fs.root().display())),
            Err(e) if !root => Check::denied(format!("{e:#}"), SUDO),
            Err(e) => Check::missing(
                format!("{e:#}"),
                "use a kernel with CONFIG_TRACING (tracefs)",
            ),
        },
        btf: match &btf {
            Ok(_) => Check::ok("/sys/kernel/btf/vmlinux"),
            Err(e) => Check::missing(
                format!("/sys/kernel/btf/vmlinux: {e}"),
                "use a kernel built with CONFIG_DEBUG_INFO_BTF=y (tp_btf needs it)",
            ),
        },
        perf_tracepoint: match &tracefs {
            Ok(fs) => perf_tracepoint_check(fs.root()),
            Err(_) => Check::denied("tracefs unavailable", SUDO),
        },
        bpf_tracepoint: bpf_check(|| {
            let mut ebpf = load_probe_object()?;
            let prog: &mut TracePoint = program(&mut ebpf, "probe_tracepoint")?;
            prog.load().context("BPF_PROG_LOAD")?;
            prog.attach("sched", "sched_process_exec")
                .context("attach")?;
            Ok("loaded and attached to sched:sched_process_exec".into())
        }),
        bpf_tp_btf: match &btf {
            Ok(btf) => bpf_check(|| {
                let mut ebpf = load_probe_object()?;
                let prog: &mut BtfTracePoint = program(&mut ebpf, "probe_tp_btf")?;
                prog.load("sched_process_exec", btf)
                    .context("BPF_PROG_LOAD")?;
                prog.attach().context("attach")?;
                Ok("loaded and attached to sched_process_exec".into())
            }),
            Err(_) => Check::missing("no kernel BTF", "needs CONFIG_DEBUG_INFO_BTF=y"),
        },
        bpf_fentry: match &btf {
            Ok(btf) => fentry_check(root, btf),
            Err(_) => Check::missing("no kernel BTF", "needs CONFIG_DEBUG_INFO_BTF=y"),
        },
        sched_prepare_exec: match &tracefs {
            Ok(fs) if fs.has_event("sched", "sched_prepare_exec") => {
                Check::ok("sched:sched_prepare_exec (Linux 6.10+)")
            }
            Ok(_) => Check::missing(
                "no sched:sched_prepare_exec tracepoint (added in Linux 6.10)",
                "none needed: exec-trace infers the point of no return from the SIGSEGV that \
                 follows; a 6.10+ kernel reports it",
            ),
            Err(_) => Check::denied("tracefs unavailable", SUDO),
        },
        bpf_perf_event: bpf_check(|| {
            let mut ebpf = load_probe_object()?;
            let prog: &mut PerfEvent = program(&mut ebpf, "probe_perf_event")?;
            prog.load().context("BPF_PROG_LOAD")?;
            prog.attach(
                PerfEventConfig::Software(SoftwareEvent::CpuClock),
                PerfEventScope::AllProcessesOneCpu { cpu: 0 },
                SamplePolicy::Frequency(99),
                false,
            )
            .context("attach")?;
            Ok("loaded and attached to cpu-clock on CPU 0".into())
        }),
        bpf_iter_ksyms: bpf_check(|| {
            // Any address will do: a line back means the iterator loaded,
            // ran and formatted it.
            crate::sys::bpf::ksyms::names(&[1])?;
            Ok("loaded and read: kernel frames named for the addresses asked".into())
        }),
        bpf_iter_task: bpf_check(|| {
            let mut tasks = crate::sys::bpf::tasks::Tasks::open()?;
            let mut all = Vec::new();
            tasks.read(&mut all)?;
            Ok(format!("loaded and read: {} tasks' counters", all.len()))
        }),
        kprobe_pmu: kprobe_check(),
        uprobe_pmu: uprobe_check(),
        hardware_pmu: hardware_check(),
        cpu_clock: cpu_clock_check(),
        task_delayacct: delayacct_check(),
        psi: psi_check(),
        schedstat: proc_file_check(
            "/proc/self/schedstat",
            "kernel without CONFIG_SCHED_INFO",
            "on-CPU and run-queue wait per task",
        ),
        proc_pid_io: proc_file_check(
            "/proc/self/io",
            "kernel without CONFIG_TASK_IO_ACCOUNTING",
            "storage bytes per process",
        ),
    }
}

/// CapEff from /proc/self/status.
fn effective_caps() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

fn user_check(root: bool, caps: Option<u64>) -> Check {
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let name = crate::sys::process::privilege::user_name(uid).unwrap_or_else(|| uid.to_string());
    let caps = caps.map(|c| format!("CapEff {c:016x}")).unwrap_or_default();
    if root {
        Check::ok(format!("{name} (uid {uid}), {caps}"))
    } else {
        Check::denied(
            format!("{name} (uid {uid}), {caps}"),
            format!("tracing needs root: {SUDO}"),
        )
    }
}

fn read_sysctl(name: &str) -> io::Result<String> {
    Ok(std::fs::read_to_string(Path::new("/proc/sys").join(name))?
        .trim()
        .to_string())
}

/// A sysctl shown for information: ok when readable.
fn sysctl_info(name: &str) -> Check {
    match read_sysctl(name) {
        Ok(v) => Check::ok(v),
        Err(e) => Check::missing(
            format!("/proc/sys/{name}: {e}"),
            "kernel lacks this setting",
        ),
    }
}

fn paranoid_check(perfmon: bool) -> Check {
    let value = match read_sysctl("kernel/perf_event_paranoid") {
        Ok(v) => v,
        Err(e) => return Check::missing(e.to_string(), "kernel without perf events"),
    };
    let level: i32 = value.parse().unwrap_or(4);
    if perfmon || level <= -1 {
        Check::ok(if perfmon {
            format!("{value} (bypassed: CAP_PERFMON)")
        } else {
            value
        })
    } else {
        Check::denied(
            format!("{value}: system-wide and kernel events need CAP_PERFMON"),
            format!("{SUDO}, or: sudo sysctl kernel.perf_event_paranoid=-1"),
        )
    }
}

fn kptr_check() -> Check {
    match read_sysctl("kernel/kptr_restrict") {
        Ok(v) if v == "0" => Check::ok(v),
        Ok(v) if v == "1" && crate::sys::process::privilege::is_root() => {
            Check::ok(format!("{v} (root sees addresses)"))
        }
        Ok(v) => Check::denied(
            format!("{v}: kernel addresses hidden, kernel frames cannot be named"),
            "sudo sysctl kernel.kptr_restrict=0 (1 is enough for root)",
        ),
        Err(e) => Check::missing(e.to_string(), "kernel lacks kptr_restrict"),
    }
}

fn load_probe_object() -> anyhow::Result<crate::sys::bpf::Loaded> {
    crate::sys::bpf::load(crate::sys::bpf::objects::PROBE, "the BPF probe")
}

fn program<'a, T>(ebpf: &'a mut aya::Ebpf, name: &str) -> anyhow::Result<&'a mut T>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = aya::programs::ProgramError>,
{
    let prog = ebpf
        .program_mut(name)
        .ok_or_else(|| anyhow::anyhow!("program {name} missing from probe.bpf.o"))?;
    Ok(prog.try_into()?)
}

/// Run a BPF probe; the Ebpf (programs, links) is dropped inside `f`, so
/// nothing stays attached.
fn bpf_check(f: impl FnOnce() -> anyhow::Result<String>) -> Check {
    let root = crate::sys::process::privilege::is_root();
    let err = match f() {
        Ok(detail) => return Check::ok(detail),
        Err(e) => e,
    };
    // "BPF_PROG_LOAD: Operation not permitted (EPERM)", or the whole chain
    // when no errno explains it (the verifier log, a missing program).
    let detail = match errno(&err) {
        Some(n) => format!("{err}: {} ({})", describe_errno(n), errno_name(n)),
        None => format!("{err:#}"),
    };
    match errno(&err) {
        Some(libc::EPERM | libc::EACCES) if root => Check::denied(
            format!("{detail}, even as root"),
            "a kernel policy (lockdown, LSM, hardening) forbids it",
        ),
        Some(libc::EPERM | libc::EACCES) => Check::denied(detail, SUDO),
        // sys::bpf::load refused before any syscall: we lack the capabilities.
        None if !root => Check::denied("not tried: needs CAP_BPF and CAP_PERFMON", SUDO),
        _ => Check::missing(detail, "this kernel does not support it"),
    }
}

/// strerror text without Rust's "(os error N)".
fn describe_errno(n: i32) -> String {
    let text = io::Error::from_raw_os_error(n).to_string();
    text.split(" (os error").next().unwrap_or(&text).to_string()
}

fn errno_name(n: i32) -> String {
    crate::model::errno::errno_name(n).map_or_else(|| format!("errno {n}"), str::to_string)
}

fn fentry_check(root: bool, btf: &Btf) -> Check {
    let check = bpf_check(|| {
        let mut ebpf = load_probe_object()?;
        let prog: &mut FEntry = program(&mut ebpf, "probe_fentry")?;
        prog.load("vfs_read", btf).context("BPF_PROG_LOAD")?;
        prog.attach().context("attach")?;
        Ok("loaded and attached to vfs_read".into())
    });
    match check.status {
        crate::model::capability::Status::Ok => check,
        _ if !root => check,
        // kdiag never needs fentry; say so instead of asking for a fix.
        status => Check {
            status,
            detail: check.detail,
            fix: Some(
                "a kernel policy forbids it; kdiag does not need it (tracepoints and tp_btf \
                 instead), but bcc/bpftrace tools built \
                 on fentry/kfunc will not run here"
                    .into(),
            ),
        },
    }
}

/// The errno behind an error, searching its whole chain.
fn errno(err: &anyhow::Error) -> Option<i32> {
    err.chain().find_map(|e| {
        e.downcast_ref::<io::Error>()
            .and_then(io::Error::raw_os_error)
    })
}

/// perf_event_open with `attr`, closed at once. Err carries the errno.
fn open_perf(attr: &mut perf::bindings::perf_event_attr, pid: i32, cpu: i32) -> io::Result<()> {
    attr.size = std::mem::size_of::<perf::bindings::perf_event_attr>() as u32;
    attr.set_disabled(1);
    // SAFETY: attr is a fully initialised perf_event_attr.
    let fd = unsafe {
        perf::perf_event_open(
            attr,
            pid,
            cpu,
            -1,
            perf::bindings::PERF_FLAG_FD_CLOEXEC as _,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a new descriptor we own; dropping closes it.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
    Ok(())
}

/// A failed perf_event_open as a Check: EACCES/EPERM is denied, the rest
/// (ENOENT, EOPNOTSUPP, ENODEV, EINVAL) means the kernel or CPU lacks it.
fn perf_failure(err: io::Error, missing_fix: &str) -> Check {
    let n = err.raw_os_error().unwrap_or(0);
    let detail = format!("perf_event_open: {} ({})", describe_errno(n), errno_name(n));
    match n {
        libc::EACCES | libc::EPERM => Check::denied(
            detail,
            format!("{SUDO}, or: sudo sysctl kernel.perf_event_paranoid=-1"),
        ),
        _ => Check::missing(detail, missing_fix),
    }
}

fn perf_tracepoint_check(tracefs: &Path) -> Check {
    let id_file = tracefs.join("events/sched/sched_process_exec/id");
    let id: u64 = match std::fs::read_to_string(&id_file).map(|s| s.trim().parse()) {
        Ok(Ok(id)) => id,
        _ => return Check::denied(format!("cannot read {}", id_file.display()), SUDO),
    };
    let mut attr = perf::bindings::perf_event_attr {
        type_: perf::bindings::PERF_TYPE_TRACEPOINT,
        config: id,
        sample_type: perf::bindings::PERF_SAMPLE_RAW as u64,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = 1;
    match open_perf(&mut attr, -1, 0) {
        Ok(()) => Check::ok("opened sched:sched_process_exec system-wide with raw records"),
        Err(e) => perf_failure(e, "kernel without tracepoint perf events"),
    }
}

/// The PMU type number of a dynamic PMU (kprobe, uprobe), if the kernel has it.
fn pmu_type(name: &str) -> Option<u32> {
    let path = format!("/sys/bus/event_source/devices/{name}/type");
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn kprobe_check() -> Check {
    let Some(ty) = pmu_type("kprobe") else {
        return Check::missing(
            "no kprobe PMU in /sys/bus/event_source/devices (CONFIG_KPROBES unset)",
            "not needed by kdiag (tracepoints instead); bcc tools built on kprobes will not run here",
        );
    };
    let func = c"vfs_read";
    let mut attr = perf::bindings::perf_event_attr {
        type_: ty,
        ..Default::default()
    };
    attr.__bindgen_anon_3.kprobe_func = func.as_ptr() as u64;
    match open_perf(&mut attr, -1, 0) {
        Ok(()) => Check::ok("opened a kprobe on vfs_read"),
        Err(e) => perf_failure(e, "kprobes unusable here; kdiag uses tracepoints instead"),
    }
}

fn uprobe_check() -> Check {
    let Some(ty) = pmu_type("uprobe") else {
        return Check::missing(
            "no uprobe PMU in /sys/bus/event_source/devices",
            "use a kernel with CONFIG_UPROBE_EVENTS=y",
        );
    };
    // Probe our own executable at the start of .text; the event is opened
    // disabled, for this process only, and closed at once.
    let Ok(exe) = std::env::current_exe() else {
        return Check::missing("cannot find our own executable", "check /proc/self/exe");
    };
    let Some(offset) = text_offset(&exe) else {
        return Check::missing("no .text section in our executable", "none");
    };
    let Ok(path) = std::ffi::CString::new(exe.as_os_str().as_encoded_bytes()) else {
        return Check::missing("executable path has a NUL byte", "none");
    };
    let mut attr = perf::bindings::perf_event_attr {
        type_: ty,
        ..Default::default()
    };
    attr.__bindgen_anon_3.uprobe_path = path.as_ptr() as u64;
    attr.__bindgen_anon_4.probe_offset = offset;
    match open_perf(&mut attr, 0, -1) {
        Ok(()) => Check::ok("opened a uprobe on our own executable"),
        Err(e) => perf_failure(e, "uprobes unusable here"),
    }
}

/// File offset of the .text section of an ELF file.
fn text_offset(path: &Path) -> Option<u64> {
    use object::{Object, ObjectSection};
    // Read only the headers, not the whole (possibly 40 MB) executable.
    let cache = object::ReadCache::new(std::fs::File::open(path).ok()?);
    let file = object::File::parse(&cache).ok()?;
    file.section_by_name(".text")?
        .file_range()
        .map(|(off, _)| off)
}

fn hardware_check() -> Check {
    let mut attr = perf::bindings::perf_event_attr {
        type_: perf::bindings::PERF_TYPE_HARDWARE,
        config: perf::bindings::PERF_COUNT_HW_CPU_CYCLES as u64,
        ..Default::default()
    };
    attr.set_exclude_kernel(1);
    match open_perf(&mut attr, 0, -1) {
        Ok(()) => Check::ok("cycles counter opened"),
        Err(e) => perf_failure(
            e,
            "none needed: no hardware PMU (usual in VMs), kdiag samples on the cpu-clock software event",
        ),
    }
}

fn cpu_clock_check() -> Check {
    let mut attr = perf::bindings::perf_event_attr {
        type_: perf::bindings::PERF_TYPE_SOFTWARE,
        config: perf::bindings::PERF_COUNT_SW_CPU_CLOCK as u64,
        sample_type: (perf::bindings::PERF_SAMPLE_IP | perf::bindings::PERF_SAMPLE_CALLCHAIN)
            as u64,
        ..Default::default()
    };
    attr.set_freq(1);
    attr.__bindgen_anon_1.sample_freq = 99;
    match open_perf(&mut attr, -1, 0) {
        Ok(()) => Check::ok("sampling at 99 Hz with callchains, system-wide"),
        Err(e) => perf_failure(e, "kernel without software perf events"),
    }
}

fn delayacct_check() -> Check {
    match read_sysctl("kernel/task_delayacct") {
        Ok(v) if v == "1" => Check::ok("1"),
        Ok(v) => Check::missing(
            format!("{v}: I/O and run-queue delays per task read 0"),
            "sudo sysctl kernel.task_delayacct=1",
        ),
        Err(_) => Check::missing(
            "no kernel.task_delayacct",
            "use a kernel with CONFIG_TASK_DELAY_ACCT=y",
        ),
    }
}

fn psi_check() -> Check {
    match std::fs::read_to_string("/proc/pressure/io") {
        Ok(_) => Check::ok("/proc/pressure/{cpu,io,memory}"),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Check::missing(
            "PSI disabled at boot",
            "boot with psi=1 on the kernel command line",
        ),
        Err(e) => Check::missing(
            format!("/proc/pressure/io: {e}"),
            "use a kernel with CONFIG_PSI=y",
        ),
    }
}

fn proc_file_check(path: &str, missing: &str, what: &str) -> Check {
    match std::fs::read_to_string(path) {
        Ok(_) => Check::ok(what),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Check::denied(
            format!("{path}: {e}"),
            "other users' files need root: run kdiag with sudo",
        ),
        Err(e) => Check::missing(format!("{path}: {e}"), missing),
    }
}
