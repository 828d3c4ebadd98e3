//! Tier A, the perf engine: perf_event_open events, one per CPU, each CPU's
//! events writing into one mmap ring, drained into decoded records.
//!
//! A `Session` owns every fd and mapping: dropping it (on return, error,
//! panic unwind or after Ctrl-C) closes them, and closing is all it takes for
//! the kernel to forget the events. Nothing is left behind.
//!
//! ```no_run
//! # use kdiag::sys::perf::*;
//! let spec = EventSpec::cpu_clock(99).with_callchain();
//! let mut session = Session::open(&[spec], Target::AllCpus, 64)?;
//! session.enable()?;
//! session.poll(std::time::Duration::from_millis(100))?;
//! session.drain(|rec| { if let Record::Sample(s) = rec { println!("{:x}", s.ip) } });
//! # anyhow::Ok(())
//! ```

mod record;
mod ring;
mod spec;

pub use record::{Callchain, Record, Sample, Space, UserRegs, decode};
pub use spec::{EventKind, EventSpec, MAX_USER_STACK, max_stack};

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use anyhow::{Context, bail};
use perf_event_open_sys::{self as pe, bindings as sys};

use ring::Ring;

/// Whose activity to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Every task on every CPU.
    AllCpus,
    /// One process, its threads and the children it starts from now on.
    Process(i32),
}

/// Counters of records the kernel could not deliver as asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Losses {
    /// Records dropped because a ring was full.
    pub lost: u64,
    /// Times sampling was throttled (rate over perf_event_max_sample_rate).
    pub throttled: u64,
}

struct CpuRing {
    ring: Ring,
    /// The fd the ring is mapped on (the CPU's first event).
    fd: OwnedFd,
}

/// Open events, their rings, and the loss counters.
pub struct Session {
    rings: Vec<CpuRing>,
    /// Every event fd except each ring's owner, kept open for the session.
    others: Vec<OwnedFd>,
    sample_type: u64,
    losses: Losses,
}

impl Session {
    /// Open every spec on every online CPU for `target`, with rings of
    /// `pages` data pages (a power of two) per CPU. Events start disabled:
    /// call `enable`. All specs must agree on callchain (one ring holds
    /// records of one layout).
    pub fn open(specs: &[EventSpec], target: Target, pages: usize) -> anyhow::Result<Session> {
        let Some(first) = specs.first() else {
            bail!("no events to open")
        };
        let sample_type = first.sample_type();
        if specs.iter().any(|s| s.sample_type() != sample_type) {
            bail!("events sharing a ring must record the same sample fields");
        }
        let pages = pages.max(1).next_power_of_two();
        match target {
            Target::AllCpus => Self::open_tasks(specs, &[-1], false, pages, sample_type),
            Target::Process(pid) => Self::open_processes(specs, &[pid], pages),
        }
    }

    /// Open every spec for several processes (their threads and the
    /// children they start from now on), all writing into one ring per
    /// CPU. The first process's errors are the ones reported; the others
    /// may have ended meanwhile.
    pub fn open_processes(
        specs: &[EventSpec],
        pids: &[i32],
        pages: usize,
    ) -> anyhow::Result<Session> {
        let Some(first) = specs.first() else {
            bail!("no events to open")
        };
        let sample_type = first.sample_type();
        let pages = pages.max(1).next_power_of_two();
        // inherit follows threads and children created from now on; threads
        // that already exist need an event each, as `perf record -p` does. A
        // thread created while we attach may be followed on some CPUs only:
        // if the thread list changed meanwhile, attach again (nothing has
        // been enabled yet, so nothing is counted twice).
        let threads = || -> Vec<i32> { pids.iter().flat_map(|&p| threads_of(p)).collect() };
        let mut tries = 0;
        loop {
            let tasks = threads();
            let session = Self::open_tasks(specs, &tasks, true, pages, sample_type)?;
            tries += 1;
            if tries == 5 || threads().iter().all(|t| tasks.contains(t)) {
                return Ok(session);
            }
        }
    }

    fn open_tasks(
        specs: &[EventSpec],
        tasks: &[i32],
        inherit: bool,
        pages: usize,
        sample_type: u64,
    ) -> anyhow::Result<Session> {
        let mut rings = Vec::new();
        let mut others = Vec::new();
        for cpu in online_cpus()? {
            let mut fds = Vec::new();
            for (spec, &task) in specs.iter().flat_map(|s| tasks.iter().map(move |t| (s, t))) {
                let fd = match open_event(spec, task, cpu, inherit) {
                    Ok(fd) => fd,
                    // A thread that ended (or is ending: ESRCH) since we
                    // listed it: one of a user's processes may end at any
                    // time.
                    Err(e)
                        if task > 0 && (e.is::<crate::error::NoSuchProcess>() || !alive(task)) =>
                    {
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                fds.push(fd);
            }
            let mut fds = fds.into_iter();
            // Every task ended: the one named first is the one missed.
            let Some(fd) = fds.next() else {
                return Err(crate::error::NoSuchProcess::one(
                    tasks.first().copied().unwrap_or(0),
                ));
            };
            // The ring must exist before other events can be redirected into it.
            let ring = Ring::map(fd.as_fd(), pages).map_err(|e| map_error(e, pages))?;
            for other in fds {
                // SAFETY: both fds are live perf events on the same CPU.
                let rc = unsafe { pe::ioctls::SET_OUTPUT(other.as_raw_fd(), fd.as_raw_fd()) };
                if rc != 0 {
                    return Err(std::io::Error::last_os_error())
                        .context("redirecting an event into its CPU's ring");
                }
                others.push(other);
            }
            rings.push(CpuRing { ring, fd });
        }
        Ok(Session {
            rings,
            others,
            sample_type,
            losses: Losses::default(),
        })
    }

    fn fds(&self) -> impl Iterator<Item = &OwnedFd> {
        self.rings.iter().map(|r| &r.fd).chain(&self.others)
    }

    /// Start counting on every event.
    pub fn enable(&self) -> anyhow::Result<()> {
        for fd in self.fds() {
            // SAFETY: fd is a live perf event.
            if unsafe { pe::ioctls::ENABLE(fd.as_raw_fd(), 0) } != 0 {
                return Err(std::io::Error::last_os_error()).context("enabling a perf event");
            }
        }
        Ok(())
    }

    /// Stop counting (records already in the rings stay readable).
    pub fn disable(&self) -> anyhow::Result<()> {
        for fd in self.fds() {
            // SAFETY: fd is a live perf event.
            if unsafe { pe::ioctls::DISABLE(fd.as_raw_fd(), 0) } != 0 {
                return Err(std::io::Error::last_os_error()).context("disabling a perf event");
            }
        }
        Ok(())
    }

    /// Wait up to `timeout` for any ring to pass its watermark. Returns
    /// whether data is waiting. EINTR (Ctrl-C) returns early without error.
    pub fn poll(&self, timeout: Duration) -> anyhow::Result<bool> {
        let mut fds: Vec<libc::pollfd> = self
            .rings
            .iter()
            .map(|r| libc::pollfd {
                fd: r.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: fds is a valid array of pollfd of the given length.
        let rc = unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                timeout.as_millis() as i32,
            )
        };
        if rc < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(err).context("waiting for perf events");
            }
        }
        Ok(self.rings.iter().any(|r| r.ring.has_data()))
    }

    /// Hand every record waiting in every ring to `f`, CPU by CPU (records of
    /// one CPU are in time order; sort by `time` to merge CPUs). Lost and
    /// throttle records are counted here as well as passed on.
    pub fn drain(&mut self, mut f: impl FnMut(Record<'_>)) {
        let sample_type = self.sample_type;
        let losses = &mut self.losses;
        for r in &mut self.rings {
            r.ring.drain(|kind, misc, body| {
                let Some(rec) = decode(kind, misc, body, sample_type) else {
                    return;
                };
                match rec {
                    Record::Lost { count } => losses.lost += count,
                    Record::Throttle {
                        unthrottle: false, ..
                    } => losses.throttled += 1,
                    _ => {}
                }
                f(rec)
            });
        }
    }

    pub fn losses(&self) -> Losses {
        self.losses
    }
}

/// A counting (non-sampling) tracepoint event on every CPU: how many times
/// the kernel hit the tracepoint, whether or not samples were delivered.
/// Samplers compare it with what their rings received.
pub struct Counter {
    fds: Vec<OwnedFd>,
}

impl Counter {
    pub fn tracepoint(spec: &EventSpec) -> anyhow::Result<Counter> {
        let mut fds = Vec::new();
        for cpu in online_cpus()? {
            let mut attr = spec.attr(false);
            attr.sample_type = 0;
            attr.__bindgen_anon_1.sample_period = 0;
            attr.set_watermark(0);
            attr.set_disabled(0);
            let flags = sys::PERF_FLAG_FD_CLOEXEC as libc::c_ulong;
            // SAFETY: attr is fully initialised; the kernel validates the rest.
            let fd = unsafe { pe::perf_event_open(&mut attr, -1, cpu, -1, flags) };
            if fd < 0 {
                return Err(open_error(std::io::Error::last_os_error(), spec, -1));
            }
            // SAFETY: fd is a fresh descriptor we own.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            if let Some(filter) = &spec.filter {
                set_filter(&fd, filter)?;
            }
            fds.push(fd);
        }
        Ok(Counter { fds })
    }

    /// The hits counted so far, summed over CPUs.
    pub fn read(&self) -> anyhow::Result<u64> {
        let mut total = 0;
        for fd in &self.fds {
            let mut v = 0u64;
            // SAFETY: reading 8 bytes into a local u64 from a counting event.
            let n = unsafe { libc::read(fd.as_raw_fd(), (&raw mut v).cast(), 8) };
            if n != 8 {
                return Err(std::io::Error::last_os_error()).context("reading a perf counter");
            }
            total += v;
        }
        Ok(total)
    }
}

fn open_event(spec: &EventSpec, pid: i32, cpu: i32, inherit: bool) -> anyhow::Result<OwnedFd> {
    let mut attr = spec.attr(inherit);
    let flags = sys::PERF_FLAG_FD_CLOEXEC as libc::c_ulong;
    // SAFETY: attr is fully initialised; the kernel validates the rest.
    let fd = unsafe { pe::perf_event_open(&mut attr, pid, cpu, -1, flags) };
    if fd < 0 {
        return Err(open_error(std::io::Error::last_os_error(), spec, pid));
    }
    // SAFETY: fd is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    if let Some(filter) = &spec.filter {
        set_filter(&fd, filter)?;
    }
    Ok(fd)
}

/// Turn perf_event_open's errno into what the user should do.
fn open_error(err: std::io::Error, spec: &EventSpec, pid: i32) -> anyhow::Error {
    let what = match spec.kind {
        EventKind::CpuClock { .. } => "CPU-clock sampling",
        EventKind::Cycles { .. } => "hardware cycle sampling",
        EventKind::Tracepoint { .. } => "tracepoint recording",
        EventKind::Sideband => "recording process mappings",
    };
    match err.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            let paranoid =
                std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap_or_default();
            crate::error::Unavailable::Privilege(format!(
                "{what} was refused ({err}; kernel.perf_event_paranoid = {}): run with sudo, \
                 or grant CAP_PERFMON, or lower it with `sudo sysctl kernel.perf_event_paranoid=1`",
                paranoid.trim()
            ))
            .into()
        }
        Some(libc::ESRCH) => crate::error::NoSuchProcess::one(pid),
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP)
            if matches!(spec.kind, EventKind::Cycles { .. }) =>
        {
            NoHardwareCounter(err).into()
        }
        Some(libc::EMFILE) => {
            anyhow::anyhow!("{what}: too many open files ({err}); raise `ulimit -n`")
        }
        _ => anyhow::Error::new(err).context(format!("perf_event_open for {what}")),
    }
}

/// Opening a hardware event failed because the machine has no such counter
/// (a VM without a PMU): callers fall back to cpu-clock (`downcast_ref`).
#[derive(Debug, thiserror::Error)]
#[error("this machine has no hardware cycle counter ({0}); use the cpu-clock event")]
pub struct NoHardwareCounter(pub std::io::Error);

fn map_error(err: std::io::Error, pages: usize) -> anyhow::Error {
    if err.raw_os_error() == Some(libc::EPERM) {
        crate::error::Unavailable::Privilege(format!(
            "mapping a {pages}-page perf ring was refused ({err}): over kernel.perf_event_mlock_kb; \
             run with sudo or raise that sysctl"
        ))
        .into()
    } else {
        anyhow::Error::new(err).context("mapping a perf ring buffer")
    }
}

fn set_filter(fd: &OwnedFd, filter: &str) -> anyhow::Result<()> {
    let c = CString::new(filter)?;
    // SAFETY: fd is a live tracepoint event; c is NUL-terminated and outlives the call.
    if unsafe { pe::ioctls::SET_FILTER(fd.as_raw_fd(), c.as_ptr() as *mut _) } != 0 {
        let err = std::io::Error::last_os_error();
        bail!("the kernel rejected the tracepoint filter `{filter}`: {err}");
    }
    Ok(())
}

/// A process's threads, the process itself first (its errors are the ones
/// reported). Just the pid when /proc does not list them.
fn threads_of(pid: i32) -> Vec<i32> {
    let mut tids = vec![pid];
    if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        tids.extend(
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
                .filter(|&t| t != pid),
        );
    }
    tids
}

fn alive(tid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{tid}")).exists()
}

/// The online CPUs, from /sys/devices/system/cpu/online ("0-3,6").
pub fn online_cpus() -> anyhow::Result<Vec<i32>> {
    let text =
        std::fs::read_to_string("/sys/devices/system/cpu/online").context("reading online CPUs")?;
    parse_cpu_list(&text)
}

fn parse_cpu_list(text: &str) -> anyhow::Result<Vec<i32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<i32>()?..=b.parse::<i32>()?),
            None => cpus.push(part.parse()?),
        }
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::tracefs::Tracefs;
    use std::time::Instant;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,6\n").unwrap(), [0, 1, 2, 3, 6]);
        assert_eq!(parse_cpu_list("0").unwrap(), [0]);
        assert!(parse_cpu_list("x").is_err());
    }

    /// Drain until `done` says so or `limit` passes.
    fn collect(session: &mut Session, limit: Duration, mut f: impl FnMut(Record<'_>) -> bool) {
        let start = Instant::now();
        let mut done = false;
        while !done && start.elapsed() < limit {
            session.poll(Duration::from_millis(50)).unwrap();
            session.drain(|r| done |= f(r));
        }
    }

    #[test]
    fn samples_a_busy_child_with_callchains() {
        if !crate::testing::require_root("samples_a_busy_child_with_callchains") {
            return;
        }
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg("while :; do :; done")
            .spawn()
            .unwrap();
        let spec = EventSpec::cpu_clock(999)
            .with_callchain()
            .with_task_events();
        // A 2-page ring wraps many times: every record decoding to this
        // child's samples shows wrap-around is handled.
        let mut session = Session::open(&[spec], Target::Process(child.id() as i32), 2).unwrap();
        session.enable().unwrap();
        // Collect until 300 samples (several ring wraps) or 10 s: on a loaded
        // machine the child gets less CPU, so count samples, not seconds.
        let (mut samples, mut user_frames, mut weight) = (0u64, 0, 0);
        collect(&mut session, Duration::from_secs(10), |r| {
            if let Record::Sample(s) = r {
                assert_eq!(s.pid, child.id());
                samples += 1;
                weight += s.period;
                user_frames += s
                    .callchain
                    .frames()
                    .filter(|(sp, _)| *sp == Space::User)
                    .count();
            }
            samples >= 300
        });
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(samples >= 300, "only {samples} samples in 10 s");
        assert!(user_frames as u64 >= samples, "user callchains missing");
        // cpu-clock periods are nanoseconds of CPU time, ~1 ms each at 999 Hz:
        // the weights add up to the CPU time the samples stand for.
        let per_sample = weight / samples;
        assert!(
            (500_000..2_000_000).contains(&per_sample),
            "{per_sample} ns per sample"
        );
    }

    #[test]
    fn decodes_exec_tracepoint_strings() {
        if !crate::testing::require_root("decodes_exec_tracepoint_strings") {
            return;
        }
        let fs = Tracefs::open().unwrap();
        let format = fs.event("sched", "sched_process_exec").unwrap();
        let filename = format.field("filename").unwrap();
        let pid_field = format.field("pid").unwrap();
        let mut session =
            Session::open(&[EventSpec::tracepoint(format.id)], Target::AllCpus, 8).unwrap();
        session.enable().unwrap();
        let child = std::process::Command::new("/bin/true").spawn().unwrap();
        let pid = child.id() as u64;
        child.wait_with_output().unwrap();
        let mut seen = None;
        collect(&mut session, Duration::from_secs(2), |r| {
            if let Record::Sample(s) = r
                && pid_field.u64(s.raw) == Some(pid)
            {
                seen = filename.str(s.raw).map(|f| f.into_owned());
            }
            seen.is_some()
        });
        assert_eq!(seen.as_deref(), Some("/bin/true"));
        assert_eq!(session.losses(), Losses::default());
    }

    #[test]
    fn two_tracepoints_share_a_ring() {
        if !crate::testing::require_root("two_tracepoints_share_a_ring") {
            return;
        }
        let fs = Tracefs::open().unwrap();
        let exec = fs.event("sched", "sched_process_exec").unwrap();
        let exit = fs.event("sched", "sched_process_exit").unwrap();
        let specs = [
            EventSpec::tracepoint(exec.id),
            EventSpec::tracepoint(exit.id),
        ];
        let mut session = Session::open(&specs, Target::AllCpus, 8).unwrap();
        session.enable().unwrap();
        let child = std::process::Command::new("/bin/true").spawn().unwrap();
        let pid = child.id() as u64;
        child.wait_with_output().unwrap();
        let kind = exec.field("common_type").unwrap();
        let (exec_pid, exit_pid) = (exec.field("pid").unwrap(), exit.field("pid").unwrap());
        let (mut saw_exec, mut saw_exit) = (false, false);
        collect(&mut session, Duration::from_secs(2), |r| {
            if let Record::Sample(s) = r {
                // Both events write into one ring; common_type tells them apart.
                match kind.u64(s.raw) {
                    Some(id) if id == exec.id => saw_exec |= exec_pid.u64(s.raw) == Some(pid),
                    Some(id) if id == exit.id => saw_exit |= exit_pid.u64(s.raw) == Some(pid),
                    _ => {}
                }
            }
            saw_exec && saw_exit
        });
        assert!(
            saw_exec && saw_exit,
            "exec seen: {saw_exec}, exit seen: {saw_exit}"
        );
    }

    #[test]
    fn counter_counts_tracepoint_hits() {
        if !crate::testing::require_root("counter_counts_tracepoint_hits") {
            return;
        }
        let fs = Tracefs::open().unwrap();
        let exec = fs.event("sched", "sched_process_exec").unwrap();
        let counter = Counter::tracepoint(&EventSpec::tracepoint(exec.id)).unwrap();
        let before = counter.read().unwrap();
        for _ in 0..3 {
            std::process::Command::new("/bin/true").status().unwrap();
        }
        assert!(counter.read().unwrap() - before >= 3);
    }

    #[test]
    fn filters_apply_in_the_kernel() {
        if !crate::testing::require_root("filters_apply_in_the_kernel") {
            return;
        }
        let fs = Tracefs::open().unwrap();
        let format = fs.event("sched", "sched_process_exec").unwrap();
        let spec = EventSpec::tracepoint(format.id).with_filter("pid == 1");
        let mut session = Session::open(&[spec], Target::AllCpus, 8).unwrap();
        session.enable().unwrap();
        std::process::Command::new("/bin/true").status().unwrap();
        let mut any = false;
        collect(&mut session, Duration::from_millis(300), |r| {
            any |= matches!(r, Record::Sample(_));
            false
        });
        assert!(!any, "the filter let a non-matching exec through");
        let bad = EventSpec::tracepoint(format.id).with_filter("no_such_field == 1");
        let err = Session::open(&[bad], Target::AllCpus, 8)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("rejected the tracepoint filter"), "{err}");
    }

    #[test]
    fn attaches_existing_threads_and_shares_rings() {
        if !crate::testing::require_root("attaches_existing_threads_and_shares_rings") {
            return;
        }
        // A thread that exists before the session opens: inherit alone would
        // miss it. Two events per CPU exercise redirecting into one ring.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let busy = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() } as u32).unwrap();
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        let tid = rx.recv().unwrap();
        let spec = EventSpec::cpu_clock(999);
        let mut session = Session::open(
            &[spec.clone(), spec],
            Target::Process(std::process::id() as i32),
            8,
        )
        .unwrap();
        session.enable().unwrap();
        let mut hits = 0;
        collect(&mut session, Duration::from_millis(400), |r| {
            if let Record::Sample(s) = r {
                hits += (s.tid == tid) as u32;
            }
            false
        });
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        busy.join().unwrap();
        assert!(hits > 50, "only {hits} samples of the pre-existing thread");
    }

    #[test]
    fn missing_process_is_named() {
        if !crate::testing::require_root("missing_process_is_named") {
            return;
        }
        let err = Session::open(
            &[EventSpec::cpu_clock(99)],
            Target::Process(i32::MAX - 1),
            8,
        )
        .err()
        .unwrap();
        assert!(err.to_string().contains("no process with PID"), "{err}");
    }
}
