//! Probe effect of `kdiag offcpu` on the worst case for a sched_switch
//! tracer: a pipe ping-pong between two processes pinned to one CPU at
//! real-time priority (two
//! context switches per round trip, nothing else). Run as root:
//! `cargo bench --bench offcpu`.
//!
//! The measure is the pair's own CPU time per round trip (its rusage: the
//! scheduler charges the tracepoint's work to the tasks switching), which
//! other load on the machine does not inflate the way it does wall time;
//! the round-trip rate is shown too. Modes, in paired rounds (order rotated
//! each round, differences against the same round's bare run):
//! - bare;
//! - `kdiag offcpu -p A,B` (the pair: every switch walks two stacks);
//! - `kdiag offcpu -a` (every process, like the bpftrace script);
//! - `kdiag offcpu -p X` with X an unrelated sleeping process: the cost for
//!   processes outside the filter (goal: at most 1%);
//! - bpftrace running the off-CPU script of wave2-facts.md §1.
//!
//! Then one more run per kdiag mode with kernel.bpf_stats_enabled, for the
//! program's own time per switch as the kernel accounts it.
//!
//! Knobs: KDIAG_BENCH_ROUNDS (default 5), KDIAG_BENCH_TRIPS (default 200000).
//! The binary re-runs itself as the ping-pong pair (`pingpong TRIPS`).

#[path = "common.rs"]
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

const CPU: usize = 1;

const BPFTRACE_SCRIPT: &str = r#"
tracepoint:sched:sched_switch /args->prev_pid != 0/ { @start[args->prev_pid] = nsecs; @kst[args->prev_pid] = kstack; @ust[args->prev_pid] = ustack; @st[args->prev_pid] = args->prev_state; }
tracepoint:sched:sched_switch /@start[args->next_pid]/ { @off_us[args->next_comm, @st[args->next_pid] & 3, @kst[args->next_pid], @ust[args->next_pid]] = sum((nsecs - @start[args->next_pid]) / 1000); delete(@start[args->next_pid]); delete(@kst[args->next_pid]); delete(@ust[args->next_pid]); delete(@st[args->next_pid]); }
"#;

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Pin this process to `cpu` at real-time priority 1 (inherited by the
/// partner it forks): other load on the machine then neither delays the
/// pair nor evicts its caches between switches, so runs compare.
fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t with one bit set, and a plain
    // sched_param, for this process.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
        let param = libc::sched_param { sched_priority: 1 };
        libc::sched_setscheduler(0, libc::SCHED_FIFO, &param);
    }
}

fn pipe() -> (i32, i32) {
    let mut fds = [0; 2];
    // SAFETY: room for two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    (fds[0], fds[1])
}

fn byte(fd: i32, write: bool) {
    let mut b = [0u8; 1];
    // SAFETY: one byte to or from a local buffer.
    let n = unsafe {
        if write {
            libc::write(fd, b.as_ptr().cast(), 1)
        } else {
            libc::read(fd, b.as_mut_ptr().cast(), 1)
        }
    };
    assert_eq!(n, 1, "ping-pong pipe");
}

/// The pair itself (run as `pingpong TRIPS`): prints "pids A B", waits for a
/// line on stdin, runs TRIPS round trips, prints the rate and the pair's
/// CPU time per round trip (both processes).
fn pingpong(trips: u64) {
    let (a_r, a_w) = pipe();
    let (b_r, b_w) = pipe();
    pin(CPU);
    // SAFETY: single-threaded here; the child only does pipe I/O and exits.
    let child = unsafe { libc::fork() };
    if child == 0 {
        // SAFETY: closing the ends this side does not use, so that the
        // parent closing its write end reaches us as EOF.
        unsafe {
            libc::close(a_w);
            libc::close(b_r);
        }
        loop {
            let mut b = [0u8; 1];
            // SAFETY: one byte into a local buffer.
            if unsafe { libc::read(a_r, b.as_mut_ptr().cast(), 1) } != 1 {
                // SAFETY: leaving the forked child without running destructors.
                unsafe { libc::_exit(0) };
            }
            byte(b_w, true);
        }
    }
    // SAFETY: the child's ends, unused here.
    unsafe {
        libc::close(a_r);
        libc::close(b_w);
    }
    println!("pids {} {child}", std::process::id());
    std::io::stdout().flush().unwrap();
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    let cpu = |who| {
        // SAFETY: rusage is plain data getrusage fills.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(who, &mut ru) };
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(ru.ru_utime) + tv(ru.ru_stime)
    };
    let cpu0 = cpu(libc::RUSAGE_SELF);
    let t = Instant::now();
    for _ in 0..trips {
        byte(a_w, true);
        byte(b_r, false);
    }
    let rate = trips as f64 / t.elapsed().as_secs_f64();
    let mine = cpu(libc::RUSAGE_SELF) - cpu0;
    // SAFETY: closing our write end ends the child's loop.
    unsafe { libc::close(a_w) };
    let mut status = 0;
    // SAFETY: reaping our own child.
    unsafe { libc::waitpid(child, &mut status, 0) };
    // The child's CPU before "go" is a fork and a blocked read: nothing.
    let theirs = cpu(libc::RUSAGE_CHILDREN);
    println!(
        "rate {rate} cpu_ns {}",
        (mine + theirs) * 1e9 / trips as f64
    );
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    Bare,
    KdiagPair,
    KdiagAll,
    KdiagOther,
    Bpftrace,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::Bare => "no tracing",
            Mode::KdiagPair => "`kdiag offcpu -p A,B` (the pair)",
            Mode::KdiagAll => "`kdiag offcpu -a` (every process)",
            Mode::KdiagOther => "`kdiag offcpu -p X` (an unrelated sleeping process)",
            Mode::Bpftrace => "bpftrace off-CPU script (every process)",
        }
    }
}

/// The pair, started and waiting for "go".
struct Pair {
    child: Child,
    pids: (u32, u32),
    out: BufReader<std::process::ChildStdout>,
}

fn start_pair(trips: u64) -> Pair {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["pingpong", &trips.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let v: Vec<u32> = line
        .split_whitespace()
        .skip(1)
        .map(|p| p.parse().unwrap())
        .collect();
    Pair {
        child,
        pids: (v[0], v[1]),
        out,
    }
}

impl Pair {
    /// Run: (round trips per second, CPU ns per round trip).
    fn run(mut self) -> (f64, f64) {
        writeln!(self.child.stdin.as_mut().unwrap(), "go").unwrap();
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        self.child.wait().unwrap();
        let v: Vec<f64> = line
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        (v[0], v[1])
    }
}

/// A tracer running in the background; its output is read by a thread (so
/// it never blocks) and handed over at the end.
struct Tracer {
    child: Child,
    output: std::sync::mpsc::Receiver<String>,
}

/// Start `cmd` and wait until a line of its `ready_on` stream contains `ready`.
fn start_tracer(mut cmd: Command, ready: &str, on_stderr: bool) -> Tracer {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("tracer starts");
    let (waited, other): (Box<dyn Read + Send>, Box<dyn Read + Send>) = if on_stderr {
        (
            Box::new(child.stderr.take().unwrap()),
            Box::new(child.stdout.take().unwrap()),
        )
    } else {
        (
            Box::new(child.stdout.take().unwrap()),
            Box::new(child.stderr.take().unwrap()),
        )
    };
    let mut waited = BufReader::new(waited);
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if waited.read_line(&mut line).unwrap() == 0 {
            panic!("tracer ended before it was ready: {seen}");
        }
        seen += &line;
        if line.contains(ready) {
            break;
        }
    }
    let (tx, rx) = std::sync::mpsc::channel();
    for mut r in [Box::new(waited) as Box<dyn Read + Send>, other] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            let _ = tx.send(s);
        });
    }
    Tracer { child, output: rx }
}

impl Tracer {
    /// SIGINT, wait, and return everything it printed.
    fn stop(mut self) -> String {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let status = self.child.wait().unwrap();
        let text: String = self.output.iter().take(2).collect();
        assert!(status.success(), "tracer failed: {text}");
        text
    }
}

fn kdiag(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kdiag"));
    c.arg("offcpu").args(args);
    c
}

fn start(mode: Mode, pair: (u32, u32), other: u32) -> Option<Tracer> {
    let pids = format!("{},{}", pair.0, pair.1);
    let other = other.to_string();
    let ready = "Tracing off-CPU time";
    Some(match mode {
        Mode::Bare => return None,
        Mode::KdiagPair => start_tracer(kdiag(&["-p", &pids]), ready, true),
        Mode::KdiagAll => start_tracer(kdiag(&["-a"]), ready, true),
        Mode::KdiagOther => start_tracer(kdiag(&["-p", &other]), ready, true),
        Mode::Bpftrace => {
            let mut c = Command::new("bpftrace");
            // Line-buffered: its "Attaching" line must reach the pipe.
            c.args(["-B", "line", "-e", BPFTRACE_SCRIPT]);
            start_tracer(c, "Attaching", false)
        }
    })
}

/// The tracer's programs' own time per switch, from the kernel's accounting
/// (kernel.bpf_stats_enabled, which slows every program a little, so it is
/// on only for this extra run). None without bpftool.
fn program_ns(mode: Mode, trips: u64, other: u32) -> Option<f64> {
    const STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";
    let was = std::fs::read_to_string(STATS).ok()?;
    std::fs::write(STATS, "1").ok()?;
    let pair = start_pair(trips);
    let tracer = start(mode, pair.pids, other);
    let _ = pair.run();
    let shown = Command::new("bpftool")
        .args(["prog", "show", "-j"])
        .output();
    let _ = std::fs::write(STATS, was.trim());
    drop(tracer.map(Tracer::stop));
    let progs: serde_json::Value = serde_json::from_slice(&shown.ok()?.stdout).ok()?;
    // kdiag: its one switch program. bpftrace: both of its sched_switch
    // programs run at every switch, so their times add up.
    let prefix = if mode == Mode::Bpftrace {
        "sched_switch"
    } else {
        "offcpu_sw"
    };
    let (mut ns, mut runs) = (0.0, 0.0f64);
    for p in progs.as_array()? {
        let name = p["name"].as_str().unwrap_or("");
        if let (true, Some(t), Some(n)) = (
            name.starts_with(prefix),
            p["run_time_ns"].as_f64(),
            p["run_cnt"].as_f64(),
        ) {
            ns += t;
            runs = runs.max(n);
        }
    }
    (runs > 0.0).then(|| ns / runs)
}

/// The unrelated process, killed however the benchmark ends.
struct Sleeper(Child);

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("pingpong") {
        pingpong(args[2].parse().unwrap());
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED offcpu benchmark: needs root (run with sudo)");
        return;
    }
    let rounds = env_num("KDIAG_BENCH_ROUNDS", 5) as usize;
    let trips = env_num("KDIAG_BENCH_TRIPS", 200_000);
    let have_bpftrace = Command::new("bpftrace").arg("--version").output().is_ok();
    let mut modes = vec![
        Mode::Bare,
        Mode::KdiagPair,
        Mode::KdiagAll,
        Mode::KdiagOther,
    ];
    if have_bpftrace {
        modes.push(Mode::Bpftrace);
    }
    // The unrelated process the filter watches: asleep but for five short
    // wake-ups a second, so it has blocks to report.
    let sleeper = Sleeper(
        Command::new("sh")
            .args(["-c", "while :; do sleep 0.2; done"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let other = sleeper.0.id();

    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut cpus: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    // Per round: extra CPU ns per round trip against that round's bare run.
    let mut extra: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for round in 0..rounds {
        let mut this = vec![0.0; modes.len()];
        for k in 0..modes.len() {
            let i = (k + round) % modes.len();
            let pair = start_pair(trips);
            let tracer = start(modes[i], pair.pids, other);
            let (rate, cpu) = pair.run();
            if let Some(t) = tracer {
                t.stop();
            }
            eprintln!(
                "round {round}: {:?} {rate:.0} round trips/s, {cpu:.0} ns CPU per round trip",
                modes[i]
            );
            this[i] = cpu;
            rates[i].push(rate);
            cpus[i].push(cpu);
        }
        for i in 0..modes.len() {
            extra[i].push(this[i] - this[0]);
        }
    }
    let prog: Vec<Option<f64>> = modes
        .iter()
        .map(|&m| match m {
            Mode::Bare => None,
            _ => program_ns(m, trips, other),
        })
        .collect();
    drop(sleeper);

    let bare_cpu = median(cpus[0].clone());
    let mut body = format!(
        "## offcpu: probe effect on a context-switch-heavy workload\n\n\
         A pipe ping-pong between two processes pinned to CPU {CPU} at real-time priority 1 \
         ({trips} round trips per run, two context switches each), run bare and under each tracer; {rounds} rounds, every \
         round runs each mode in rotating order. The measure is the pair's own CPU time per \
         round trip (rusage; the tracepoint's work is charged to the switching tasks), compared \
         with the same round's bare run (median of the differences); other load on the machine \
         barely moves it, unlike the round-trip rate, shown for reference. {}.\n\n\
         | mode | round trips/s | CPU per round trip | extra CPU per switch | vs bare | program time per switch (bpf_stats) |\n\
         |---|---:|---:|---:|---:|---:|\n",
        common::machine()
    );
    let mut per_switch = vec![0.0; modes.len()];
    for (i, mode) in modes.iter().enumerate() {
        let rate = median(rates[i].clone());
        let cpu = median(cpus[i].clone());
        per_switch[i] = median(extra[i].clone()) / 2.0;
        let (extra, vs) = if *mode == Mode::Bare {
            ("-".to_string(), "-".to_string())
        } else {
            (
                format!("{:+.0} ns", per_switch[i]),
                format!("{:+.1}%", 200.0 * per_switch[i] / bare_cpu),
            )
        };
        let prog = prog[i].map_or("-".to_string(), |ns| format!("{ns:.0} ns"));
        body += &format!(
            "| {} | {rate:.0} | {:.2} us | {extra} | {vs} | {prog} |\n",
            mode.label(),
            cpu / 1e3
        );
    }
    let (lo, hi) = cpus[0]
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), &v| (l.min(v), h.max(v)));
    body += &format!(
        "\nBare runs ranged from {:.2} to {:.2} us of CPU per round trip ({:+.1}% around their \
         median): differences smaller than that are noise of this machine at the time.\n",
        lo / 1e3,
        hi / 1e3,
        50.0 * (hi - lo) / bare_cpu
    );
    body += "\nkdiag filters in the kernel before taking any stack: a process outside the filter \
             costs the program's entry and two bitmap tests per switch. `-p A,B` and `-a` walk \
             the kernel and user stacks of every switch-out of the pair, as bpftrace's script \
             does; bpftrace also keeps four map entries per blocked thread. The program time \
             column is the kernel's own accounting (kernel.bpf_stats_enabled, a separate run; it \
             includes a clock read per run). The machine is shared, so figures move by a few \
             percent between runs.\n";
    if let Some(b) = modes.iter().position(|m| *m == Mode::Bpftrace) {
        let k = modes.iter().position(|m| *m == Mode::KdiagPair).unwrap();
        let o = modes.iter().position(|m| *m == Mode::KdiagOther).unwrap();
        body += &format!(
            "\nExtra CPU per traced switch, kdiag (`-p` the pair) / bpftrace: **{:.2}x** (goal: at \
             most 1). Processes outside kdiag's filter: **{:+.2}%** CPU per switch (goal: at most 1%).\n",
            per_switch[k] / per_switch[b],
            200.0 * per_switch[o] / bare_cpu
        );
    }
    common::write_section("offcpu", &body);
}
