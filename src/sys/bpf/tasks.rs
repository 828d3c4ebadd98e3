//! Every task's counters read in the kernel (`tasks.bpf.c`, a task
//! iterator, Linux 5.8+): one binary record per thread per read, where
//! /proc formats three text files per process.

use std::io::Read;

use anyhow::Context;
use aya::programs::Iter;

use super::objects::TASKS;

/// One thread, as `struct task_rec` of tasks.bpf.c lays it out. The
/// leader's (`tid == tgid`) CPU time, faults and storage bytes include
/// what the process's ended threads left; `rss_pages` is the leader's only.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Task {
    pub tid: u32,
    pub tgid: u32,
    /// Real uid.
    pub uid: u32,
    /// The kernel's task state bits (`__state | exit_state`): 0 running,
    /// 1 interruptible sleep, 2 uninterruptible, ...
    pub state: u32,
    /// ns on a CPU (`se.sum_exec_runtime`).
    pub sum_exec_runtime: u64,
    /// ns waited on a run queue (`sched_info.run_delay`).
    pub run_delay: u64,
    /// Times it ran on a CPU (`sched_info.pcount`).
    pub pcount: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub maj_flt: u64,
    /// ns since boot (/proc/PID/stat's start time, in ns).
    pub start_boottime: u64,
    /// Its cgroup v2 id.
    pub cgroup_id: u64,
    pub rss_pages: u64,
    /// `HAS_*`: the fields this kernel has.
    pub has: u32,
    pub comm: [u8; 16],
    _pad: u32,
}

/// Storage bytes read (CONFIG_TASK_IO_ACCOUNTING).
pub const HAS_IO: u32 = 1;
/// Run-queue wait read (CONFIG_SCHED_INFO).
pub const HAS_SCHED_INFO: u32 = 2;
/// The leader of a process with memory: `rss_pages` read.
pub const HAS_RSS: u32 = 4;

const _: () = assert!(std::mem::size_of::<Task>() == 112);

impl Task {
    pub fn comm(&self) -> &[u8] {
        let n = self.comm.iter().position(|&b| b == 0).unwrap_or(16);
        &self.comm[..n]
    }
}

/// The loaded iterator, read again at each `read`.
pub struct Tasks {
    loaded: super::Loaded,
    bytes: Vec<u8>,
}

impl Tasks {
    /// Load the iterator and read it once; or why the kernel refuses (no
    /// BPF rights, no BTF, no task iterators before 5.8).
    pub fn open() -> anyhow::Result<Tasks> {
        let mut loaded = super::load(TASKS, "reading every task's counters")?;
        let btf = super::btf_for_core()?;
        let program: &mut Iter = loaded
            .program_mut("each_task")
            .context("the tasks object has no each_task program")?
            .try_into()?;
        program.load("task", btf).context("loading iter/task")?;
        let mut tasks = Tasks {
            loaded,
            bytes: Vec::new(),
        };
        let mut probe = Vec::new();
        tasks.read(&mut probe)?;
        anyhow::ensure!(!probe.is_empty(), "the task iterator returned no task");
        Ok(tasks)
    }

    /// Every task on the machine now (in kdiag's PID namespace), into `out`
    /// (cleared first).
    pub fn read(&mut self, out: &mut Vec<Task>) -> anyhow::Result<()> {
        let program: &mut Iter = self
            .loaded
            .program_mut("each_task")
            .context("vanished")?
            .try_into()?;
        // A link per read: each iterator file walks the tasks once.
        let link = program.attach().context("attaching iter/task")?;
        self.bytes.clear();
        program
            .take_link(link)?
            .into_file()
            .context("creating the task iterator")?
            .read_to_end(&mut self.bytes)
            .context("reading the task iterator")?;
        let size = std::mem::size_of::<Task>();
        anyhow::ensure!(
            self.bytes.len().is_multiple_of(size),
            "the task iterator returned {} bytes, not whole records of {size}",
            self.bytes.len()
        );
        out.clear();
        out.extend(self.bytes.chunks_exact(size).map(|b| {
            // SAFETY: `b` holds size_of::<Task>() bytes and Task is plain
            // integers, valid for any bits.
            unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<Task>()) }
        }));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::procfs::parse;

    /// A busy single-threaded Python that first wrote 1 MiB to disk and
    /// synced it; killed and its file removed on drop.
    struct Busy(std::process::Child, std::path::PathBuf);

    impl Drop for Busy {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
            let _ = std::fs::remove_file(&self.1);
        }
    }

    fn read_proc(pid: u32, file: &str) -> Vec<u8> {
        std::fs::read(format!("/proc/{pid}/{file}")).unwrap()
    }

    #[test]
    fn the_iterator_counts_what_proc_shows() {
        if !crate::testing::require_root("the_iterator_counts_what_proc_shows") {
            return;
        }
        // Beside the test binary: on disk, where writes count as storage
        // bytes (a tmpfs /tmp would count none).
        let exe = std::env::current_exe().unwrap();
        let file = exe.with_file_name(format!("tasks-test-{}", std::process::id()));
        let script = "import os, sys\n\
                      f = open(sys.argv[1], 'wb'); f.write(b'x' * 2**20); f.flush()\n\
                      os.fsync(f.fileno()); print('written', flush=True)\n\
                      while True: pass\n";
        let mut child = std::process::Command::new("python3")
            .args(["-c", script])
            .arg(&file)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = child.stdout.take().unwrap();
        let busy = Busy(child, file);
        let pid = busy.0.id();
        let mut line = [0u8; 8];
        out.read_exact(&mut line).unwrap();
        // Until it has run 100 ms, however loaded the machine is.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while parse::schedstat(&read_proc(pid, "schedstat")).unwrap().0 < 100_000_000 {
            assert!(
                std::time::Instant::now() < deadline,
                "python3 never ran 100 ms"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }

        let mut tasks = Tasks::open().unwrap();
        let mut all = Vec::new();
        let before = parse::schedstat(&read_proc(pid, "schedstat")).unwrap();
        tasks.read(&mut all).unwrap();
        let after = parse::schedstat(&read_proc(pid, "schedstat")).unwrap();
        let stat = parse::stat(&read_proc(pid, "stat")).unwrap();
        let io = parse::io(&read_proc(pid, "io")).unwrap();
        let statm = String::from_utf8(read_proc(pid, "statm")).unwrap();

        let mine: Vec<&Task> = all.iter().filter(|t| t.tgid == pid).collect();
        assert_eq!(mine.len(), 1, "one thread: {mine:?}");
        let t = mine[0];
        assert_eq!(t.tid, pid);
        assert_eq!(t.comm(), b"python3");
        assert_eq!(t.uid, 0);
        // Busy: running or runnable (0), never asleep.
        assert_eq!(t.state, 0, "state {:#x}", t.state);
        // The iterator ran between the two reads of the same counters.
        assert!(before.0 <= t.sum_exec_runtime && t.sum_exec_runtime <= after.0);
        assert!(before.1 <= t.run_delay && t.run_delay <= after.1);
        assert!(before.2 <= t.pcount && t.pcount <= after.2);
        // /proc/PID/stat's CPU time is the same time in clock ticks
        // (utime + stime scaled to sum_exec_runtime), each of the two cut
        // to whole ticks: two ticks apart at most, and the few ticks the
        // process ran between the reads.
        let tick = 1_000_000_000 / crate::sys::procfs::hz();
        let stat_ns = (stat.utime + stat.stime) * tick;
        let ran = after.0 - before.0;
        assert!(
            stat_ns + 2 * tick >= t.sum_exec_runtime && stat_ns <= after.0 + ran + tick,
            "stat {stat_ns} ns, iterator {} ns",
            t.sum_exec_runtime
        );
        assert_eq!(t.start_boottime / tick, stat.start_ticks);
        assert_eq!(
            t.has & (HAS_IO | HAS_SCHED_INFO | HAS_RSS),
            HAS_IO | HAS_SCHED_INFO | HAS_RSS
        );
        assert!(io.write_bytes >= 1 << 20, "{io:?}");
        assert_eq!(
            (t.read_bytes, t.write_bytes),
            (io.read_bytes, io.write_bytes)
        );
        assert_eq!(t.maj_flt, stat.majflt);
        // statm's resident pages, which the kernel sums over the CPUs'
        // batches where the iterator reads the total they left (at most
        // 32 pages a CPU each of 3 counters apart).
        let resident: u64 = statm.split(' ').nth(1).unwrap().parse().unwrap();
        let slack = 3 * 32 * std::thread::available_parallelism().map_or(64, |n| n.get()) as u64;
        assert!(
            t.rss_pages.abs_diff(resident) <= slack,
            "iterator {} pages, statm {resident}",
            t.rss_pages
        );
        assert!(resident > 1000, "{resident} pages");
        // Every other process of the machine is there too.
        let procs = crate::sys::procfs::pids().unwrap().len();
        let leaders = all.iter().filter(|t| t.tid == t.tgid).count();
        assert!(
            leaders.abs_diff(procs) < 50,
            "{leaders} leaders, {procs} in /proc"
        );
    }
}
