//! Tracing overhead of `kdiag iosnoop` on 4 KiB O_DIRECT random reads (fio,
//! 2 jobs): IOPS without tracing, under kdiag (BPF and perf tiers) and under
//! `perf record` of the same two tracepoints. Runs are paired: each round
//! measures every mode, in rotating order, and ratios are taken against the
//! same round's untraced run. Needs root; writes its section of
//! docs/PERFORMANCE.md.

#[path = "common.rs"]
mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const FILE: &str = "/var/tmp/kdiag-bench-iosnoop.fio";
const PERF_DATA: &str = "/var/tmp/kdiag-bench-iosnoop.perf.data";
const RUNTIME_S: u32 = 3;
const ROUNDS: usize = 15;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    Untraced,
    KdiagBpf,
    KdiagPerf,
    PerfRecord,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::Untraced => "no tracing",
            Mode::KdiagBpf => "`kdiag iosnoop` (BPF tier)",
            Mode::KdiagPerf => "`kdiag iosnoop --tier perf`",
            Mode::PerfRecord => {
                "`perf record -e block:block_rq_issue -e block:block_rq_complete -a`"
            }
        }
    }
}

/// One fio run's IOPS. `engine` is psync (one I/O at a time per job) or
/// libaio at queue depth `depth`.
fn fio(engine: &str, depth: u32) -> f64 {
    let mut cmd = Command::new("fio");
    cmd.args([
        "--name=randread",
        &format!("--filename={FILE}"),
        "--size=256M",
        "--rw=randread",
        "--bs=4k",
        "--direct=1",
        &format!("--ioengine={engine}"),
        "--numjobs=2",
        "--time_based",
        &format!("--runtime={RUNTIME_S}"),
        "--group_reporting",
        "--output-format=json",
    ]);
    if engine == "libaio" {
        cmd.arg(format!("--iodepth={depth}"));
    }
    let out = cmd.output().expect("fio is installed");
    assert!(
        out.status.success(),
        "fio failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("fio JSON");
    v["jobs"][0]["read"]["iops"].as_f64().expect("read iops")
}

/// A tracer running in the background; kdiag's stderr is read by a thread
/// (so it never blocks) and handed over at the end.
struct Tracer {
    child: Child,
    mode: Mode,
    started: std::time::Instant,
    stderr: Option<std::sync::mpsc::Receiver<String>>,
}

fn start(mode: Mode) -> Option<Tracer> {
    let child = match mode {
        Mode::Untraced => return None,
        Mode::KdiagBpf | Mode::KdiagPerf => {
            let tier = if mode == Mode::KdiagBpf {
                "bpf"
            } else {
                "perf"
            };
            let mut child = Command::new(env!("CARGO_BIN_EXE_kdiag"))
                .args(["iosnoop", "--tier", tier, "--device", "vda"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            // Wait for "Tracing block I/O ...": the programs are attached.
            let mut err = BufReader::new(child.stderr.take().unwrap());
            let mut line = String::new();
            while err.read_line(&mut line).unwrap() > 0 && !line.contains("Tracing block I/O") {
                line.clear();
            }
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let mut rest = String::new();
                let _ = err.read_to_string(&mut rest);
                let _ = tx.send(rest);
            });
            return Some(Tracer {
                child,
                mode,
                started: std::time::Instant::now(),
                stderr: Some(rx),
            });
        }
        Mode::PerfRecord => {
            let child = Command::new("perf")
                .args([
                    "record",
                    "-e",
                    "block:block_rq_issue",
                    "-e",
                    "block:block_rq_complete",
                    "-a",
                    "-o",
                    PERF_DATA,
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("perf is installed");
            // perf record gives no ready signal: let it open its events.
            std::thread::sleep(Duration::from_millis(1500));
            child
        }
    };
    Some(Tracer {
        child,
        mode,
        started: std::time::Instant::now(),
        stderr: None,
    })
}

/// CPU time (user + system) a process has used so far, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised comm: utime and stime are the 12th and 13th.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<u64> = rest
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    f.get(10)
        .zip(f.get(11))
        .map_or(0.0, |(u, s)| (u + s) as f64 / hz)
}

/// What a tracer cost and caught.
struct Outcome {
    lost: u64,
    recorded: Option<u64>,
    /// Share of one CPU the tracer used while tracing.
    cpu: f64,
}

/// Stop a tracer and report on it.
fn stop(t: Tracer) -> Outcome {
    let cpu = cpu_seconds(t.child.id()) / t.started.elapsed().as_secs_f64();
    let mut child = t.child;
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let text = match t.stderr {
        Some(rx) => rx.recv().unwrap_or_default(),
        None => {
            let mut s = String::new();
            child.stderr.take().unwrap().read_to_string(&mut s).unwrap();
            // The loss count is in the data file: `perf report --stats`
            // prints "LOST events: N" when there were any.
            let stats = Command::new("perf")
                .args(["report", "-i", PERF_DATA, "--stats"])
                .output()
                .unwrap();
            s + &String::from_utf8_lossy(&stats.stdout)
        }
    };
    let status = child.wait().unwrap();
    let _ = std::fs::remove_file(PERF_DATA);
    let number_before = |word: &str| {
        let at = text.find(word)?;
        text[..at].split_whitespace().last()?.parse::<u64>().ok()
    };
    let number_after = |word: &str| {
        let at = text.find(word)? + word.len();
        text[at..].split_whitespace().next()?.parse::<u64>().ok()
    };
    match t.mode {
        Mode::PerfRecord => {
            let lost = number_after("LOST events:").unwrap_or(0);
            let samples = text
                .find(" samples)")
                .and_then(|at| text[..at].rsplit('(').next()?.parse().ok());
            Outcome {
                lost,
                recorded: samples,
                cpu,
            }
        }
        _ => {
            assert!(status.success(), "kdiag failed: {text}");
            Outcome {
                lost: number_before("events lost").unwrap_or(0),
                recorded: number_after("Traced "),
                cpu,
            }
        }
    }
}

/// The BPF tier's in-kernel cost per request, from the kernel's own
/// accounting (`kernel.bpf_stats_enabled`, read with bpftool) over one extra
/// libaio run at depth 64: that accounting slows every program, so it stays out of the
/// runs above. None without bpftool.
fn bpf_program_costs() -> Option<String> {
    const STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";
    let was = std::fs::read_to_string(STATS).ok()?;
    std::fs::write(STATS, "1").ok()?;
    let tracer = start(Mode::KdiagBpf);
    fio("libaio", 64);
    let shown = Command::new("bpftool")
        .args(["prog", "show", "-j"])
        .output();
    let _ = std::fs::write(STATS, was.trim());
    if let Some(t) = tracer {
        stop(t);
    }
    let progs: serde_json::Value = serde_json::from_slice(&shown.ok()?.stdout).ok()?;
    let mut total = 0.0;
    let mut parts = Vec::new();
    for p in progs.as_array()? {
        let name = p["name"].as_str().unwrap_or("");
        let (Some(ns), Some(runs)) = (p["run_time_ns"].as_f64(), p["run_cnt"].as_f64()) else {
            continue;
        };
        if name.starts_with("block_") && runs > 0.0 {
            total += ns / runs;
            parts.push(format!("{name} {:.0} ns", ns / runs));
        }
    }
    (!parts.is_empty()).then(|| {
        format!(
            "\nThe BPF tier's programs cost {total:.0} ns per request in the kernel at libaio depth 64 \
             ({}; kernel.bpf_stats_enabled, separate run).\n",
            parts.join(", ")
        )
    })
}

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED iosnoop benchmark: needs root (run with sudo)");
        return;
    }
    // Lay out the file once.
    fio("psync", 1);
    let modes = [
        Mode::Untraced,
        Mode::KdiagBpf,
        Mode::KdiagPerf,
        Mode::PerfRecord,
    ];
    let mut body = format!(
        "## iosnoop: tracing overhead on 4 KiB O_DIRECT random reads\n\n\
         fio, 2 jobs, {RUNTIME_S} s per run, {ROUNDS} rounds; every round runs each mode in rotating \
         order and each ratio is against the same round's untraced run (median shown). \
         {}.\n",
        common::machine()
    );
    // Issue 17: the BPF tier once cost 11% of the IOPS at depth 64.
    for (engine, depth) in [("psync", 1), ("libaio", 16), ("libaio", 64)] {
        let mut iops: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
        let mut lost = vec![0u64; modes.len()];
        let mut traced = vec![0u64; modes.len()];
        let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
        for round in 0..ROUNDS {
            for k in 0..modes.len() {
                let i = (k + round) % modes.len();
                let tracer = start(modes[i]);
                let v = fio(engine, depth);
                if let Some(t) = tracer {
                    let o = stop(t);
                    lost[i] += o.lost;
                    traced[i] += o.recorded.unwrap_or(0);
                    cpu[i].push(o.cpu);
                }
                eprintln!("{engine} {depth} round {round}: {:?} {v:.0} IOPS", modes[i]);
                iops[i].push(v);
            }
        }
        let depth = if engine == "libaio" {
            format!("libaio, queue depth {depth}")
        } else {
            "psync, one I/O at a time per job".to_string()
        };
        body.push_str(&format!(
            "\n### {depth}\n\n| mode | median IOPS | IOPS vs untraced (median of pairs) | tracer CPU (median, % of one CPU) | events lost | requests/samples recorded |\n|---|---:|---:|---:|---:|---:|\n"
        ));
        for (i, mode) in modes.iter().enumerate() {
            let mut ratios: Vec<f64> = iops[i].iter().zip(&iops[0]).map(|(a, b)| a / b).collect();
            ratios.sort_by(f64::total_cmp);
            let mut sorted = iops[i].clone();
            sorted.sort_by(f64::total_cmp);
            let median = sorted[sorted.len() / 2];
            let ratio = ratios[ratios.len() / 2];
            let (lost, rec, load) = if *mode == Mode::Untraced {
                ("-".to_string(), "-".to_string(), "-".to_string())
            } else {
                let mut c = cpu[i].clone();
                c.sort_by(f64::total_cmp);
                (
                    lost[i].to_string(),
                    traced[i].to_string(),
                    format!("{:.1}%", c[c.len() / 2] * 100.0),
                )
            };
            body.push_str(&format!(
                "| {} | {median:.0} | {:.3} ({:+.1}%) | {load} | {lost} | {rec} |\n",
                mode.label(),
                ratio,
                (ratio - 1.0) * 100.0
            ));
        }
    }
    if let Some(line) = bpf_program_costs() {
        body.push_str(&line);
    }
    body.push_str(
        "\nkdiag prints every row (to /dev/null here) and keeps requests for its end-of-trace summary; \
         perf record writes raw records to a file. The machine is shared, so single ratios move by a few percent \
         between runs.\n",
    );
    let _ = std::fs::remove_file(FILE);
    common::write_section("iosnoop", &body);
}
