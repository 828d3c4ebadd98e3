//! `kdiag diagnose -p PID -d 5` against `pidstat -t -p PID 1 5` (sysstat)
//! watching the same target for the same 5 s: each tool's own CPU time
//! (the whole process, from wait4's rusage) and peak memory, on a
//! single-threaded target (asleep, and busy) and on one with 1,000
//! threads. pidstat reads every thread's files once a second; diagnose
//! samples a bounded number of threads 50 times a second and reads every
//! thread's counters at both ends.
//!
//! Run as root or as the targets' owner: `cargo bench --bench diagnose`.
//! Knob: KDIAG_BENCH_ROUNDS (default 5).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{machine, write_section};

const WINDOW_S: u32 = 5;

/// (CPU seconds, peak RSS in KiB) of one run of `cmd`, output discarded.
#[allow(clippy::zombie_processes)] // reaped with wait4 for its rusage
fn measured(cmd: &mut Command) -> (f64, u64, String) {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let pid = child.id() as i32;
    let mut out = String::new();
    {
        use std::io::Read;
        child.stdout.unwrap().read_to_string(&mut out).unwrap();
    }
    let mut status = 0;
    // SAFETY: rusage is plain data; pid is our child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{cmd:?} failed"
    );
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime) + tv(ru.ru_stime), ru.ru_maxrss as u64, out)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn many_threads(dir: &Path) -> PathBuf {
    let out = dir.join("many_threads");
    let src = common::root().join("tests/programs/many_threads.c");
    let ok = Command::new("cc")
        .args(["-O1", "-pthread", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("cc");
    assert!(ok.success());
    out
}

struct Target(Child);

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Row {
    target: &'static str,
    threads: usize,
    kdiag_cpu: f64,
    kdiag_window_cpu: f64,
    kdiag_rss: f64,
    pidstat_cpu: f64,
    pidstat_rss: f64,
}

fn bench(target: &'static str, mut cmd: Command, rounds: usize) -> Row {
    let t = Target(cmd.stdout(Stdio::null()).spawn().expect("target"));
    let pid = t.0.id().to_string();
    std::thread::sleep(Duration::from_millis(500));
    let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .count();
    let (mut kc, mut kw, mut kr, mut pc, mut pr) = (vec![], vec![], vec![], vec![], vec![]);
    for round in 0..rounds {
        for which in [round % 2, 1 - round % 2] {
            if which == 0 {
                let (cpu, rss, out) = measured(Command::new(env!("CARGO_BIN_EXE_kdiag")).args([
                    "diagnose",
                    "--json",
                    "-d",
                    &WINDOW_S.to_string(),
                    "-p",
                    &pid,
                ]));
                let v: serde_json::Value = serde_json::from_str(&out).unwrap();
                kc.push(cpu);
                kw.push(v["observation"]["cost"]["cpu_s"].as_f64().unwrap());
                kr.push(rss as f64);
            } else {
                let (cpu, rss, _) = measured(Command::new("pidstat").args([
                    "-t",
                    "-p",
                    &pid,
                    "1",
                    &WINDOW_S.to_string(),
                ]));
                pc.push(cpu);
                pr.push(rss as f64);
            }
        }
    }
    Row {
        target,
        threads,
        kdiag_cpu: median(kc),
        kdiag_window_cpu: median(kw),
        kdiag_rss: median(kr),
        pidstat_cpu: median(pc),
        pidstat_rss: median(pr),
    }
}

fn main() {
    let rounds: usize = std::env::var("KDIAG_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let dir = tempfile::tempdir().unwrap();
    let many = many_threads(dir.path());
    let mut sleep = Command::new("sleep");
    sleep.arg("600");
    let mut busy = Command::new("sh");
    busy.args(["-c", "while :; do :; done"]);
    let mut thousand = Command::new(&many);
    thousand.arg("1000");
    let rows = [
        bench("one thread, asleep (`sleep`)", sleep, rounds),
        bench("one thread, busy (a shell loop)", busy, rounds),
        bench("1,000 threads waking once a second", thousand, rounds),
    ];
    let version = Command::new("pidstat")
        .arg("-V")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_owned()
        })
        .unwrap_or_default();
    let pct = |cpu: f64| cpu * 100.0 / WINDOW_S as f64;
    let mut body = format!(
        "## kdiag diagnose vs pidstat -t 1: the watcher's own cost\n\n\
         {machine}; {version}. Each tool watches the same target for {WINDOW_S} s \
         (`kdiag diagnose --json -d {WINDOW_S} -p PID`, `pidstat -t -p PID 1 {WINDOW_S}`), \
         in alternating order, {rounds} rounds, medians (`cargo bench --bench diagnose`). \
         CPU is each tool's whole process (start-up and output included, from wait4), as a \
         share of one CPU over the window.\n\n\
         | target | threads | kdiag CPU | kdiag CPU in its window (its own report) | pidstat -t CPU | kdiag / pidstat | kdiag peak RSS | pidstat peak RSS |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
        machine = machine(),
    );
    for r in &rows {
        body.push_str(&format!(
            "| {} | {} | {:.2}% ({:.0} ms) | {:.2}% | {:.2}% ({:.0} ms) | {:.2}x | {:.1} MiB | {:.1} MiB |\n",
            r.target,
            r.threads,
            pct(r.kdiag_cpu),
            r.kdiag_cpu * 1e3,
            pct(r.kdiag_window_cpu),
            pct(r.pidstat_cpu),
            r.pidstat_cpu * 1e3,
            r.kdiag_cpu / r.pidstat_cpu.max(1e-6),
            r.kdiag_rss / 1024.0,
            r.pidstat_rss / 1024.0,
        ));
    }
    body.push_str(
        "\nGoals: under 1% of one CPU for a single-threaded target, under 5% for 1,000 threads. \
         diagnose samples 50 times a second (8 threads a tick, 4 beyond 64 threads, in \
         rotation) where pidstat reads once a second, so on one thread it reads more often; \
         on 1,000 threads it reads less, since pidstat reads every thread every second. \
         The machine is shared, so single figures move between runs.\n",
    );
    write_section("diagnose", &body);
}
