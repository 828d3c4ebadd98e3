//! Continuous profiles of what `kdiag watch` watches (its `--pyroscope`
//! and `--otlp-profiles`): profile's sampler (cpu-clock at a low rate, 19
//! Hz by default as the OpenTelemetry eBPF profiler) and offcpu's BPF
//! tables, opened once and cut into one window each period, every stack
//! kept with its thread so that the exporter can say whose it is
//! (`process`: a process's name, cgroup and who runs in it).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::instruments::offcpu::{self, OffcpuBpf};
use crate::instruments::profile::{self, CpuSampler, Request};
use crate::instruments::watch::Scope;
use crate::model::offcpu::StateFilter;
use crate::model::profile::Profile;

/// What to profile.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// CPU samples per second per CPU.
    pub hz: u64,
    /// One process (and the children it starts); None: every process.
    pub pid: Option<i32>,
}

/// The open sampler and tracer.
pub struct Profiler {
    cpu: CpuSampler,
    /// None where BPF cannot trace the scheduler (the note says why).
    offcpu: Option<OffcpuBpf>,
    hz: u64,
    window_start: (Instant, u64),
}

/// One period's profiles: CPU samples, and blocked time by stack.
pub struct Window {
    pub cpu: Profile,
    pub offcpu: Option<Profile>,
}

/// Open both; the off-CPU half only where BPF can trace the scheduler, else
/// a note saying why.
pub fn open(o: Options) -> anyhow::Result<(Profiler, Option<String>)> {
    let cpu = profile::open(
        Request {
            per_thread: true,
            ..Request::clock(o.hz)
        },
        o.pid,
    )?;
    let options = offcpu::Options {
        tgids: o.pid.map(|p| p as u32).into_iter().collect(),
        follow: true,
        min_block_ns: 1_000,
        states: StateFilter::All,
        per_thread: false,
        wakers: false,
    };
    let (offcpu, note) = match OffcpuBpf::start(&options) {
        Ok(t) => (Some(t), None),
        Err(e) => (None, Some(format!("no off-CPU profiles: {e:#}"))),
    };
    keep_memory_flat();
    let profiler = Profiler {
        cpu,
        offcpu,
        hz: o.hz,
        window_start: now(),
    };
    Ok((profiler, note))
}

/// Each window names its frames by parsing whole binaries' symbol tables
/// (tens of MB for a compiler's library), then frees them. glibc raises
/// its mmap threshold after such a free, so the next large tables come
/// from the heap and stay resident after they are freed: on a busy build
/// machine watch's RSS floor rose 6 MB in 45 s. A fixed threshold (its
/// initial 128 KiB) maps each large table and returns it when freed.
fn keep_memory_flat() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets an allocator parameter.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
    }
}

fn now() -> (Instant, u64) {
    (Instant::now(), crate::instruments::target::utc_now().1)
}

impl Profiler {
    /// Wait up to `timeout` for samples, and take them.
    pub fn poll(&mut self, timeout: Duration) -> anyhow::Result<()> {
        self.cpu.poll(timeout)
    }

    /// The profiles since the last window; profiling goes on.
    pub fn window(&mut self) -> anyhow::Result<Window> {
        let (start, start_unix_ns) = std::mem::replace(&mut self.window_start, now());
        let blank = || Profile {
            started_unix_ns: start_unix_ns,
            freq_hz: self.hz,
            cost: crate::model::profile::ProbeCost {
                wall_secs: start.elapsed().as_secs_f64(),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut cpu = blank();
        self.cpu.poll(Duration::ZERO)?;
        self.cpu.window(&mut cpu);
        let offcpu = match &mut self.offcpu {
            Some(t) => {
                let mut p = blank();
                t.window(&mut p)?;
                Some(p)
            }
            None => None,
        };
        Ok(Window { cpu, offcpu })
    }
}

/// Whose a process is, for a profile's labels.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Process {
    /// Its name (comm); None once it has gone.
    pub comm: Option<String>,
    /// Its cgroup's path ("/" for the root), as `kdiag watch --group-by
    /// cgroup` names groups.
    pub cgroup: Option<String>,
    /// A kernel thread (no command line).
    pub kernel: bool,
}

/// Read `pid`'s name and cgroup now.
pub fn process(pid: u32) -> Process {
    let read = |f: &str| std::fs::read_to_string(format!("/proc/{pid}/{f}")).ok();
    Process {
        comm: read("comm").map(|c| c.trim_end().to_string()),
        cgroup: read("cgroup").map(|t| crate::sys::procfs::pressure::cgroup_of(&t)),
        kernel: pid != 0 && read("cmdline").is_some_and(|c| c.is_empty()),
    }
}

/// The processes of a watch scope of cgroups (`--cgroup`, `--unit`,
/// `--container`) now, whose stacks are kept; None for every process
/// (the whole machine, or `--pid`, whose sampler sees only its process).
pub fn scope_pids(scope: &Scope) -> Option<HashSet<u32>> {
    let dirs = match scope {
        Scope::All | Scope::Pid(_) => return None,
        Scope::Cgroup(dir) => vec![dir.clone()],
        Scope::Container(name) => crate::instruments::watch::container::dirs(name),
    };
    Some(
        dirs.iter()
            .flat_map(|d| crate::sys::procfs::pressure::cgroup_pids(d).unwrap_or_default())
            .map(|p| p as u32)
            .collect(),
    )
}
