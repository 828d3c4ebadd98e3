//! `kdiag profile` against `perf record` (run as root: `sudo cargo bench --bench profile`).
//!
//! Each in two modes: frame pointers (`kdiag profile` vs `perf record -g`)
//! and DWARF unwinding (`kdiag profile --call-graph dwarf` vs
//! `perf record --call-graph dwarf,16384`, the same 16 KiB stack copies).
//!
//! 1. Probe effect: a fixed CPU-bound job (gzip over a generated file; Debian
//!    builds gzip without frame pointers), run bare, under kdiag and under
//!    perf at 99 Hz, in paired rounds (order rotated each round). The job's
//!    own wall and CPU time come from GNU time around it, the same for all
//!    three; each round's slowdown is against that round's bare run.
//! 2. End of recording to finished SVG, system-wide at 999 Hz for 50 s with
//!    both CPUs busy (~100k samples): kdiag's own measure (`cost.post_secs`,
//!    plus the time it spent unwinding while recording in DWARF mode)
//!    against perf's finalization (its run time past the recording) plus
//!    `perf script | inferno-collapse-perf | inferno-flamegraph`.
//! 3. When Go is installed, `go tool pprof -top` reads kdiag's `--pprof`.
//!
//! Knobs: KDIAG_BENCH_ROUNDS (default 5), KDIAG_BENCH_SECS (default 50).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{machine, write_section};

fn env_num(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn kdiag() -> &'static str {
    env!("CARGO_BIN_EXE_kdiag")
}

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd} >/dev/null")])
        .status()
        .is_ok_and(|s| s.success())
}

/// Run `cmd`, returning (its own + its descendants' CPU seconds, wall, stdout).
/// Reaped with wait4 (not `Child::wait`) to get its rusage.
#[allow(clippy::zombie_processes)]
fn run_measured(cmd: &mut Command) -> (f64, Duration, String) {
    let start = Instant::now();
    let child = cmd.stdout(Stdio::piped()).spawn().expect("spawn");
    let pid = child.id() as i32;
    let out = {
        use std::io::Read;
        let mut s = String::new();
        child.stdout.unwrap().read_to_string(&mut s).unwrap();
        s
    };
    let mut status = 0;
    // SAFETY: rusage is plain data; pid is our child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let wall = start.elapsed();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{cmd:?} failed"
    );
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime) + tv(ru.ru_stime), wall, out)
}

/// GNU time's "%e %U %S" output: (wall, cpu).
fn read_time(path: &Path) -> (f64, f64) {
    let text = std::fs::read_to_string(path).unwrap();
    let v: Vec<f64> = text
        .lines()
        .last()
        .unwrap()
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    (v[0], v[1] + v[2])
}

struct Round {
    base: (f64, f64),
    kdiag: (f64, f64),
    perf: (f64, f64),
    /// Tool's own CPU seconds, total (everything it and its job used minus the job).
    kdiag_self: f64,
    perf_self: f64,
    /// kdiag's own CPU while recording (its footer figure).
    kdiag_recording: f64,
}

/// How stacks are walked: kdiag's arguments, perf's, and a title.
#[derive(Clone, Copy)]
struct Mode {
    kdiag: &'static [&'static str],
    perf: &'static [&'static str],
    kdiag_name: &'static str,
    perf_name: &'static str,
}

const FP: Mode = Mode {
    kdiag: &[],
    perf: &["-g"],
    kdiag_name: "kdiag profile",
    perf_name: "perf record -g",
};

const DWARF: Mode = Mode {
    kdiag: &["--call-graph", "dwarf"],
    perf: &["--call-graph", "dwarf,16384"],
    kdiag_name: "kdiag profile --call-graph dwarf",
    perf_name: "perf record --call-graph dwarf,16384",
};

fn probe_effect(dir: &Path, rounds: usize, mode: Mode) -> String {
    // A fixed job: gzip a 6M-line file (~111 MB), a few seconds of CPU.
    let data = dir.join("data.txt");
    let text: String = (1..=6_000_000u32)
        .map(|i| format!("{i} {}\n", i.wrapping_mul(2654435761)))
        .collect();
    let data_mb = text.len() as f64 / 1e6;
    std::fs::write(&data, text).unwrap();
    let timing = dir.join("time.txt");
    let job = |cmd: &mut Command| {
        cmd.args(["/usr/bin/time", "-f", "%e %U %S", "-o"])
            .arg(&timing)
            .args([
                "sh",
                "-c",
                &format!("gzip -6 -c {} > /dev/null", data.display()),
            ]);
    };
    let perf_data = dir.join("probe.perf.data");
    let mut results = Vec::new();
    for r in 0..rounds {
        let mut round = Round {
            base: (0.0, 0.0),
            kdiag: (0.0, 0.0),
            perf: (0.0, 0.0),
            kdiag_self: 0.0,
            perf_self: 0.0,
            kdiag_recording: 0.0,
        };
        for which in (0..3).map(|i| (i + r) % 3) {
            match which {
                0 => {
                    let mut c = Command::new("env");
                    job(&mut c);
                    run_measured(&mut c);
                    round.base = read_time(&timing);
                }
                1 => {
                    let mut c = Command::new(kdiag());
                    c.args(["profile", "-F", "99", "--json"])
                        .args(mode.kdiag)
                        .arg("--");
                    job(&mut c);
                    let (cpu, _, out) = run_measured(&mut c);
                    round.kdiag = read_time(&timing);
                    round.kdiag_self = cpu - round.kdiag.1;
                    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
                    round.kdiag_recording =
                        v["profile"]["cost"]["kdiag_cpu_secs"].as_f64().unwrap();
                }
                _ => {
                    let mut c = Command::new("perf");
                    c.args(["record", "-q", "-F", "99"])
                        .args(mode.perf)
                        .arg("-o")
                        .arg(&perf_data)
                        .arg("--")
                        .stderr(Stdio::null());
                    job(&mut c);
                    let (cpu, _, _) = run_measured(&mut c);
                    round.perf = read_time(&timing);
                    round.perf_self = cpu - round.perf.1;
                }
            }
        }
        eprintln!(
            "round {r}: bare {:.2}s, kdiag {:.2}s, perf {:.2}s (wall)",
            round.base.0, round.kdiag.0, round.perf.0
        );
        results.push(round);
    }
    let _ = std::fs::remove_file(&perf_data);
    let med = |f: &dyn Fn(&Round) -> f64| {
        let mut v: Vec<f64> = results.iter().map(f).collect();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let slow_k = med(&|r| 100.0 * (r.kdiag.0 / r.base.0 - 1.0));
    let slow_p = med(&|r| 100.0 * (r.perf.0 / r.base.0 - 1.0));
    let cpu_k = med(&|r| 100.0 * (r.kdiag.1 / r.base.1 - 1.0));
    let cpu_p = med(&|r| 100.0 * (r.perf.1 / r.base.1 - 1.0));
    let self_k = med(&|r| 100.0 * r.kdiag_self / r.kdiag.1);
    let self_p = med(&|r| 100.0 * r.perf_self / r.perf.1);
    let rec_k = med(&|r| 100.0 * r.kdiag_recording / r.kdiag.1);
    let job_cpu = med(&|r| r.base.1);
    let ratio = if self_p > 0.0 {
        self_k / self_p
    } else {
        f64::NAN
    };
    let (kn, pn) = (mode.kdiag_name, mode.perf_name);
    format!(
        "### Probe effect: `{kn} -F 99` vs `{pn} -F 99`\n\n\
         Job: `gzip -6` of a {data_mb:.0} MB generated file ({job_cpu:.2} s of CPU bare), {rounds} paired \
         rounds, order rotated, medians of per-round figures.\n\n\
         | | {kn} | {pn} |\n|---|---|---|\n\
         | job wall-time slowdown vs bare run | {slow_k:+.2}% | {slow_p:+.2}% |\n\
         | job CPU-time change vs bare run | {cpu_k:+.2}% | {cpu_p:+.2}% |\n\
         | profiler's own CPU, % of the job's CPU (whole run incl. writing results) | {self_k:.2}% | {self_p:.2}% |\n\
         | kdiag's own CPU while recording (its footer), % of the job's CPU | {rec_k:.2}% | – |\n\n\
         kdiag's own CPU / perf's own CPU: **{ratio:.2}x** (goal: below 1, and kdiag under 2% of \
         the job's CPU). The slowdowns are within run-to-run noise on a shared 2-CPU machine; \
         the profilers' own CPU is the steadier measure.\n"
    )
}

/// cpu-burn next to kdiag (built by `cargo bench --workspace`), else build it.
fn cpu_burn() -> PathBuf {
    let path = Path::new(kdiag()).with_file_name("cpu-burn");
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let st = Command::new(cargo)
            .args([
                "build",
                "--release",
                "-p",
                "kdiag-workloads",
                "--bin",
                "cpu-burn",
            ])
            .status()
            .unwrap();
        assert!(st.success(), "building cpu-burn failed");
    }
    path
}

fn svg_time(dir: &Path, secs: u64, mode: Mode) -> String {
    let busy = Command::new(cpu_burn())
        .args([
            "--threads",
            "2",
            "--duration",
            &format!("{}", 3 * secs + 120),
            "--scratch",
        ])
        .arg(dir.join("burn-scratch"))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));

    let svg = dir.join("kdiag.svg");
    let (_, kwall, out) = run_measured(
        Command::new(kdiag())
            .args(["profile", "-a", "-F", "999", "-d", &secs.to_string()])
            .args(mode.kdiag)
            .args(["--json", "--svg"])
            .arg(&svg),
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    // Unwinding happens while recording, as samples are drained: count it.
    let k_unwind = v["profile"]["unwind"]["secs"].as_f64().unwrap_or(0.0);
    let k_post = v["profile"]["cost"]["post_secs"].as_f64().unwrap() + k_unwind;
    let k_samples =
        v["profile"]["samples"].as_u64().unwrap() + v["profile"]["idle_samples"].as_u64().unwrap();
    let k_lost = v["profile"]["lost"].as_u64().unwrap();

    let data = dir.join("sys.perf.data");
    let (_, pwall, _) = run_measured(
        Command::new("perf")
            .args(["record", "-q", "-a", "-F", "999"])
            .args(mode.perf)
            .arg("-o")
            .arg(&data)
            .args(["--", "sleep", &secs.to_string()])
            .stderr(Stdio::null()),
    );
    // perf's own work after the recording: its run time past the sleep.
    let p_final = pwall.as_secs_f64() - secs as f64;
    let inferno = have("inferno-collapse-perf") && have("inferno-flamegraph");
    let pipeline = if inferno {
        format!(
            "set -o pipefail 2>/dev/null; perf script --no-inline -i {} 2>/dev/null | inferno-collapse-perf | inferno-flamegraph > {}/perf.svg",
            data.display(),
            dir.display()
        )
    } else {
        format!(
            "perf script --no-inline -i {} > /dev/null 2>&1",
            data.display()
        )
    };
    let (_, p_script, _) = run_measured(Command::new("bash").args(["-c", &pipeline]));
    let stats = Command::new("perf")
        .args(["report", "--stats", "-i"])
        .arg(&data)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let p_samples: u64 = String::from_utf8_lossy(&stats.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("SAMPLE events:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let mut busy = busy;
    busy.kill().ok();
    busy.wait().ok();
    let data_mb = std::fs::metadata(&data).map(|m| m.len()).unwrap_or(0) as f64 / 1e6;
    let _ = std::fs::remove_file(&data);

    let peer = p_final + p_script.as_secs_f64();
    let what = if inferno {
        "`perf script --no-inline \\| inferno-collapse-perf \\| inferno-flamegraph`"
    } else {
        "`perf script` alone (inferno's CLI is not installed: `cargo install inferno`; \
         the full peer pipeline would be slower still)"
    };
    let unwound = if k_unwind > 0.0 {
        format!(" + unwinding while recording ({:.2} s)", k_unwind)
    } else {
        String::new()
    };
    let (kn, pn) = (mode.kdiag_name, mode.perf_name);
    format!(
        "### End of recording to finished SVG: `{kn}` vs `{pn}`, system-wide (`-a -F 999 -d {secs}`, both CPUs busy with cpu-burn)\n\n\
         | | samples | end of recording → SVG |\n|---|---|---|\n\
         | {kn} (in-process fold + blazesym + inferno{unwound}) | {k_samples} ({k_lost} lost) | {k_post:.2} s |\n\
         | {pn} finalization ({data_mb:.0} MB perf.data) + {what} | {p_samples} | {peer:.2} s ({p_final:.2} s + {:.2} s) |\n\n\
         kdiag is **{:.1}x** faster (goal: at least 3x). kdiag's whole run took {:.1} s. \
         perf script runs with `--no-inline`: kdiag names no inlined frames either, and \
         perf's inline lookups (addr2line) on the large binaries of other work sampled \
         system-wide took many minutes.\n",
        p_script.as_secs_f64(),
        peer / k_post,
        kwall.as_secs_f64()
    )
}

/// `go tool pprof -top` on kdiag's pprof of cpu-burn, when Go is installed.
fn go_pprof(dir: &Path) -> String {
    if !have("go") {
        return "### pprof\n\nNot checked: Go is not installed (`apt-get install golang-go`).\n"
            .into();
    }
    let file = dir.join("burn.pb.gz");
    let scratch = dir.join("pprof-scratch");
    run_measured(
        Command::new(kdiag())
            .args(["profile", "-F", "499", "--call-graph", "dwarf", "--pprof"])
            .arg(&file)
            .arg("--")
            .arg(cpu_burn())
            .args(["--duration", "2", "--scratch"])
            .arg(&scratch),
    );
    let out = Command::new("go")
        .args(["tool", "pprof", "-top", "-nodecount=4"])
        .arg(&file)
        .env("HOME", dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("burn_hot_alpha"),
        "go tool pprof could not read kdiag's profile: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let version = Command::new("go").arg("version").output().unwrap();
    format!(
        "### pprof\n\n`{}` reads `kdiag profile --pprof` (`go tool pprof -top -nodecount=4`, cpu-burn for 2 s):\n\n```\n{}```\n",
        String::from_utf8_lossy(&version.stdout).trim(),
        text
    )
}

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED profile bench: needs root (sudo cargo bench --bench profile)");
        return;
    }
    if !have("perf") {
        eprintln!("SKIPPED profile bench: perf is not installed (the peer)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rounds = env_num("KDIAG_BENCH_ROUNDS", 5.0) as usize;
    let secs = env_num("KDIAG_BENCH_SECS", 50.0) as u64;
    let probe = probe_effect(dir.path(), rounds.max(1), FP);
    let svg = svg_time(dir.path(), secs.max(1), FP);
    let dwarf_probe = probe_effect(dir.path(), rounds.max(1), DWARF);
    let dwarf_svg = svg_time(dir.path(), secs.max(1), DWARF);
    let pprof = go_pprof(dir.path());
    write_section(
        "profile",
        &format!(
            "## kdiag profile\n\nMeasured on {} (load from other work present), release build.\n\n\
             {probe}\n{svg}\n{dwarf_probe}\n{dwarf_svg}\n{pprof}",
            machine()
        ),
    );
}
