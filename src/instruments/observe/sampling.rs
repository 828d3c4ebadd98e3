//! Where threads are, sampled: every tick up to `per_tick` threads, in
//! rotation, so the cost is bounded whatever the thread count: 8 threads a
//! tick for up to 64 threads (whose files stay open, cheap to read again),
//! 4 beyond (their files are opened for each read, which costs three times
//! as much): a 1,000-thread process gets 200 samples a second, each thread
//! every 5 s, 1,000 samples in 5 s. For each sampled thread: its state, and when it
//! sleeps, its wait channel, its system call and what that call waits on
//! (the kind of file behind a descriptor, or for a futex whether it is a
//! contended mutex).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::analysis::waits;
use crate::model::diagnosis::{LockWaits, Observation, ThreadState};
use crate::sys::procfs::parse::Syscall;
use crate::sys::procfs::syscalls;
use crate::sys::procfs::task::TaskReader;

/// futex(2) operations, as the syscall's second argument carries them.
const FUTEX_CMD_MASK: u64 = !(128 | 256); // PRIVATE_FLAG, CLOCK_REALTIME
const FUTEX_WAIT: u64 = 0;
const FUTEX_LOCK_PI: u64 = 6;
const FUTEX_WAIT_BITSET: u64 = 9;
const FUTEX_LOCK_PI2: u64 = 13;
/// The value a contended mutex's futex word holds while threads wait for
/// it, in glibc's and Rust std's mutexes ("locked, with waiters").
const MUTEX_CONTENDED: u64 = 2;

/// Beyond this many threads, half as many are sampled per tick.
const MANY_THREADS: usize = 64;

#[derive(Default)]
struct LockAcc {
    samples: u64,
    waiters: HashSet<i32>,
    most_at_once: usize,
    ticks: u64,
    ticks_running: u64,
}

/// (state, wait channel, system call, what it waits on).
type SampleKey = (char, String, String, &'static str);

pub struct ThreadSampler {
    per_tick: usize,
    cursor: usize,
    /// What each (pid, fd) refers to, looked up once.
    fds: HashMap<(i32, u64), &'static str>,
    counts: HashMap<SampleKey, u64>,
    /// The samples since the last `take_interval` (not yet in `counts`).
    interval: HashMap<SampleKey, u64>,
    locks: HashMap<(i32, u64), LockAcc>,
    /// Per bucket: (sum over ticks of the working threads estimate, ticks).
    buckets: Vec<(f64, u32)>,
    pub ticks: u64,
    pub samples: u64,
    most_per_tick: usize,
    /// Syscall files read / refused.
    syscall_reads: (u64, u64),
    /// Each process's samples by state.
    by_member: HashMap<i32, BTreeMap<ThreadState, u64>>,
}

impl ThreadSampler {
    pub fn new(per_tick: usize) -> ThreadSampler {
        ThreadSampler {
            per_tick,
            cursor: 0,
            fds: HashMap::new(),
            counts: HashMap::new(),
            interval: HashMap::new(),
            locks: HashMap::new(),
            buckets: Vec::new(),
            ticks: 0,
            samples: 0,
            most_per_tick: 0,
            syscall_reads: (0, 0),
            by_member: HashMap::new(),
        }
    }

    /// Sample the next threads of `threads` (every live thread of the
    /// tree, `live` of them by the kernel's count) into bucket `bucket`.
    pub fn tick(&mut self, r: &mut TaskReader, threads: &[(i32, i32)], live: usize, bucket: usize) {
        self.ticks += 1;
        if threads.is_empty() {
            return;
        }
        let per_tick = if threads.len() > MANY_THREADS {
            self.per_tick / 2
        } else {
            self.per_tick
        };
        let n = per_tick.min(threads.len());
        self.most_per_tick = self.most_per_tick.max(n);
        let (mut seen, mut working) = (0usize, 0usize);
        let mut mutex_waits: HashMap<(i32, u64), Vec<i32>> = HashMap::new();
        // Processes with a thread seen running in this tick.
        let mut running: HashSet<i32> = HashSet::new();
        for i in 0..n {
            let (pid, tid) = threads[(self.cursor + i) % threads.len()];
            let Some(st) = r.stat(pid, Some(tid)) else {
                continue; // the thread ended
            };
            let (mut wchan, mut call, mut on) = (String::new(), String::new(), "");
            if matches!(st.state, 'S' | 'D') {
                match r.syscall(pid, tid) {
                    None => self.syscall_reads.1 += 1,
                    Some(s) => {
                        self.syscall_reads.0 += 1;
                        let (c, o, lock) = self.describe(r, pid, s);
                        call = c;
                        on = o;
                        if let Some(addr) = lock {
                            mutex_waits.entry((pid, addr)).or_default().push(tid);
                        }
                    }
                }
                if waits::needs_wchan(st.state, &call, on) {
                    wchan = r.wchan(pid, tid);
                }
            } else if st.state == 'R' {
                running.insert(pid);
            }
            let state = waits::classify(st.state, &wchan, &call, on).state;
            *self
                .by_member
                .entry(pid)
                .or_default()
                .entry(state)
                .or_default() += 1;
            seen += 1;
            working += usize::from(state != ThreadState::Sleeping);
            *self
                .interval
                .entry((st.state, wchan, call, on))
                .or_default() += 1;
        }
        self.cursor = (self.cursor + n) % threads.len();
        self.samples += seen as u64;
        for ((pid, addr), tids) in mutex_waits {
            let acc = self.locks.entry((pid, addr)).or_default();
            acc.samples += tids.len() as u64;
            acc.most_at_once = acc.most_at_once.max(tids.len());
            acc.waiters.extend(tids);
            acc.ticks += 1;
            acc.ticks_running += u64::from(running.contains(&pid));
        }
        if seen > 0 {
            if self.buckets.len() <= bucket {
                self.buckets.resize(bucket + 1, (0.0, 0));
            }
            let b = &mut self.buckets[bucket];
            b.0 += working as f64 / seen as f64 * live.max(seen) as f64;
            b.1 += 1;
        }
    }

    /// A blocked thread's system call by name, what it waits on, and for a
    /// contended mutex its address.
    fn describe(
        &mut self,
        r: &TaskReader,
        pid: i32,
        s: Syscall,
    ) -> (String, &'static str, Option<u64>) {
        let Syscall::In { nr, args } = s else {
            return match s {
                Syscall::NotInSyscall => ("fault".into(), "", None),
                _ => (String::new(), "", None), // woke up meanwhile
            };
        };
        let Some(name) = syscalls::name(nr) else {
            return (format!("#{nr}"), "", None);
        };
        let on = match name {
            "futex" => {
                let cmd = args[1] & FUTEX_CMD_MASK;
                let mutex = matches!(cmd, FUTEX_LOCK_PI | FUTEX_LOCK_PI2)
                    || (matches!(cmd, FUTEX_WAIT | FUTEX_WAIT_BITSET)
                        && args[2] == MUTEX_CONTENDED);
                if mutex {
                    return (name.into(), "mutex", Some(args[0]));
                }
                "futex"
            }
            "read" | "readv" | "pread64" | "preadv" | "preadv2" | "recvfrom" | "recvmsg"
            | "recvmmsg" | "write" | "writev" | "pwrite64" | "pwritev" | "pwritev2" | "sendto"
            | "sendmsg" | "sendmmsg" => {
                let fd = args[0];
                *self
                    .fds
                    .entry((pid, fd))
                    .or_insert_with(|| r.fd_kind(pid, fd).name())
            }
            _ => "",
        };
        (name.into(), on, None)
    }

    /// The samples since the last call, added to `o` (an interval's own
    /// observation, for the series); they count for the window too.
    pub fn take_interval(&mut self, o: &mut Observation) {
        for (key, n) in self.interval.drain() {
            o.sample(key.0, &key.1, &key.2, key.3, n);
            *self.counts.entry(key).or_default() += n;
        }
    }

    /// Put what was sampled into the observation (its members first).
    pub fn into_observation(mut self, o: &mut Observation, bucket_s: f64) {
        for m in &mut o.members {
            m.states = self.by_member.remove(&m.pid).unwrap_or_default();
        }
        self.take_interval(&mut Observation::default());
        for ((state, wchan, call, on), n) in self.counts {
            o.sample(state, &wchan, &call, on, n);
        }
        o.samples
            .sort_by(|a, b| b.count.cmp(&a.count).then(a.cmp(b)));
        let mut locks: Vec<LockWaits> = self
            .locks
            .into_iter()
            .map(|((pid, addr), a)| LockWaits {
                pid,
                address: format!("{addr:#x}"),
                samples: a.samples,
                waiters: a.waiters.len(),
                most_at_once: a.most_at_once,
                running_share: a.ticks_running as f64 / a.ticks.max(1) as f64,
            })
            .collect();
        locks.sort_by_key(|l| std::cmp::Reverse(l.samples));
        o.locks = locks;
        o.busy = self
            .buckets
            .iter()
            .map(|&(sum, n)| if n == 0 { 0.0 } else { sum / n as f64 })
            .collect();
        o.bucket_s = bucket_s;
        o.sampling.ticks = self.ticks;
        o.sampling.samples = self.samples;
        o.sampling.threads_per_tick = self.most_per_tick;
        o.syscalls_readable = self.syscall_reads.0 > 0 || self.syscall_reads.1 == 0;
    }
}
