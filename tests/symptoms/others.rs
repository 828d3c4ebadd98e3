//! The other labs' workloads: io-stall, scheduling, memory, lock-contend,
//! mem-leak, and the seeded function names in profiles.

use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;
use crate::*;

// ---------------------------------------------------------------- io-stall

/// The io-stall lesson: the culprit only dirties page cache; the block
/// writes are issued by the kernel's writeback threads, so top blames no
/// one. perf (on-CPU task at issue) and kdiag iosnoop (submitter) both show
/// kworker/jbd2 writing what io-stall dirtied.
#[test]
fn io_stall_writes_are_done_by_kernel_threads() {
    let _one = serial();
    if !require_root("io_stall_writes_are_done_by_kernel_threads") {
        return;
    }
    let tmp = disk_tempdir();
    let dir = tmp.path().join("io-stall");
    let args = [
        "--seed",
        "symptom-stall",
        "--burst",
        "32M",
        "--period",
        "1s",
        "--duration",
        "10",
        "--scratch",
        dir.to_str().unwrap(),
    ];
    let expect = truth("io-stall", "symptom-stall", &["--burst", "32M"]);
    let mut kids = Kids(vec![spawn("io-stall", &args)]);
    let pid = kids.0[0].id();
    wait_for("a first burst", Duration::from_secs(10), || {
        proc_io(pid, "write_bytes") >= 32 << 20
    });
    let data = tmp.path().join("perf.data");
    let perf = Command::new("perf")
        .args(["record", "-q", "-e", "block:block_rq_issue", "-a", "-o"])
        .arg(&data)
        .args(["--", "sleep", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("perf is installed");
    kids.0.push(perf);
    let (w0, c0, t0) = (proc_io(pid, "write_bytes"), cpu_secs(pid), Instant::now());
    let out = run_kdiag(&["iosnoop", "--json", "3"]);
    let status = kids.0.pop().unwrap().wait().unwrap();
    assert!(status.success(), "perf record");
    let (w1, c1) = (proc_io(pid, "write_bytes"), cpu_secs(pid));
    let dirtied = (w1 - w0) as f64;
    let cpu = (c1 - c0) / t0.elapsed().as_secs_f64();

    // perf script: the task on the CPU when each write was issued.
    let script = Command::new("perf")
        .args(["script", "-F", "comm,trace", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    let (mut perf_kernel, mut perf_culprit) = (0.0, 0.0);
    for line in stdout(&script).lines() {
        // "kworker/u8:1   254,0 W 1048576 () ..." : comm, dev, rwbs, bytes
        let (comm, trace) = match line.trim_start().split_once(char::is_whitespace) {
            Some(x) => x,
            None => continue,
        };
        let f: Vec<&str> = trace.split_whitespace().collect();
        if f.len() < 3 || !f[1].contains('W') {
            continue;
        }
        let bytes: f64 = f[2].parse().unwrap_or(0.0);
        if comm.starts_with("kworker") || comm.starts_with("jbd2") {
            perf_kernel += bytes;
        } else if comm == "io-stall" {
            perf_culprit += bytes;
        }
    }
    // kdiag iosnoop: charged to the submitter, which for writeback is the
    // flusher kworker.
    let trace: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (mut kd_kernel, mut kd_culprit) = (0.0, 0.0);
    for r in trace["requests"].as_array().unwrap() {
        if !r["rwbs"].as_str().unwrap().contains('W') {
            continue;
        }
        let comm = r["comm"].as_str().unwrap();
        let bytes = r["bytes"].as_f64().unwrap();
        if comm.starts_with("kworker") || comm.starts_with("jbd2") {
            kd_kernel += bytes;
        } else if r["pid"].as_u64() == Some(pid as u64) {
            kd_culprit += bytes;
        }
    }
    let mib = |b: f64| b / (1 << 20) as f64;
    eprintln!(
        "io-stall: dirtied {:.0} MiB in 3 s for {:.1}% of a CPU; writes issued by kernel threads: \
         perf {:.0} MiB, kdiag iosnoop {:.0} MiB; by io-stall itself: perf {:.1} MiB, iosnoop {:.1} MiB",
        mib(dirtied),
        cpu * 100.0,
        mib(perf_kernel),
        mib(kd_kernel),
        mib(perf_culprit),
        mib(kd_culprit)
    );
    assert!(
        dirtied >= 2.0 * expect["burst_bytes"].as_f64().unwrap(),
        "bursts"
    );
    assert!(cpu < 0.25, "the culprit stays cheap: {cpu:.3} CPUs");
    for (tool, kernel, culprit) in [
        ("perf", perf_kernel, perf_culprit),
        ("kdiag iosnoop", kd_kernel, kd_culprit),
    ] {
        assert!(
            kernel >= 0.5 * dirtied,
            "{tool}: kernel threads wrote {} of {} MiB dirtied",
            mib(kernel),
            mib(dirtied)
        );
        assert!(
            culprit <= 0.25 * dirtied,
            "{tool}: io-stall issued {} MiB itself",
            mib(culprit)
        );
    }
}

// ---------------------------------------------------------------- scheduling

/// Lab 2-scheduling: fork mode takes many times the page faults of thread
/// mode, by perf stat and by kdiag time.
#[test]
fn scheduling_fork_takes_many_more_page_faults_than_threads() {
    let _one = serial();
    if !require_root("scheduling_fork_takes_many_more_page_faults_than_threads") {
        return;
    }
    let seed = "symptom-sched";
    let bin = workload("scheduling");
    let bin = bin.to_str().unwrap();
    let tasks = truth("scheduling", seed, &["1"])["tasks"].as_u64().unwrap();
    let perf = |mode: &str| perf_stat("page-faults", &[bin, mode, "--seed", seed]);
    let kd = |mode: &str| {
        kdiag_time(&[bin, mode, "--seed", seed])["minor_faults"]
            .as_f64()
            .unwrap()
    };
    let (pt, pf) = (perf("0"), perf("1"));
    let (kt, kf) = (kd("0"), kd("1"));
    eprintln!(
        "scheduling ({tasks} tasks): page faults threads/fork: perf {pt}/{pf} ({:.1}x), \
         kdiag time {kt}/{kf} ({:.1}x)",
        pf / pt,
        kf / kt
    );
    assert!(pf >= 4.0 * pt, "perf: fork {pf} vs threads {pt}");
    assert!(kf >= 4.0 * kt, "kdiag time: fork {kf} vs threads {kt}");
    // Both count the same faults (the children's included) to within a third.
    assert!((kf / pf - 1.0).abs() < 0.35, "perf {pf} vs kdiag {kf}");
}

// ---------------------------------------------------------------- memory

/// Lab 3-memory: at 1 KiB blocks mmap is cheaper than read/write (two
/// system calls per KiB); at 64 KiB read/write wins; mmap barely depends on
/// the block size. CPU time by perf stat and by kdiag time (medians of 3,
/// interleaved); the system calls counted by strace.
#[test]
fn memory_speed_order_at_1k_and_64k() {
    let _one = serial();
    if !require_root("memory_speed_order_at_1k_and_64k") {
        return;
    }
    let tmp = disk_tempdir();
    // One source for every run (its creation would dominate the CPU time).
    let src = tmp.path().join("src.bin");
    let mut rng = kdiag_workloads::Rng::new(1, "symptom-memory");
    let bytes: Vec<u8> = (0..(32 << 20) / 8)
        .flat_map(|_| rng.next_u64().to_le_bytes())
        .collect();
    std::fs::write(&src, &bytes).unwrap();
    let scratch = tmp.path().join("scratch");
    let bin = workload("memory");
    let cmd = |mode: &'static str, blk: &'static str| -> Vec<String> {
        vec![
            bin.to_str().unwrap().into(),
            mode.into(),
            blk.into(),
            src.to_str().unwrap().into(),
            "--scratch".into(),
            scratch.to_str().unwrap().into(),
        ]
    };
    let configs = [("0", "1K"), ("1", "1K"), ("0", "64K"), ("1", "64K")];
    let (mut perf, mut kd) = (vec![vec![]; 4], vec![vec![]; 4]);
    for _ in 0..3 {
        for (i, (mode, blk)) in configs.iter().enumerate() {
            let c = cmd(mode, blk);
            let c: Vec<&str> = c.iter().map(String::as_str).collect();
            perf[i].push(perf_stat("task-clock", &c) / 1000.0);
            let ru = kdiag_time(&c);
            kd[i].push(ru["user_secs"].as_f64().unwrap() + ru["sys_secs"].as_f64().unwrap());
        }
    }
    let perf: Vec<f64> = perf.into_iter().map(median).collect();
    let kd: Vec<f64> = kd.into_iter().map(median).collect();
    eprintln!(
        "memory 32 MiB, CPU s (mmap 1K, rw 1K, mmap 64K, rw 64K): perf {perf:.3?}, kdiag time {kd:.3?}"
    );
    for (tool, t) in [("perf", &perf), ("kdiag time", &kd)] {
        let (mmap1, rw1, mmap64, rw64) = (t[0], t[1], t[2], t[3]);
        assert!(rw1 > 1.2 * mmap1, "{tool}: at 1K mmap wins: {t:?}");
        assert!(mmap64 > 1.2 * rw64, "{tool}: at 64K read/write wins: {t:?}");
        assert!(
            rw1 > 2.0 * rw64,
            "{tool}: larger blocks help read/write: {t:?}"
        );
    }

    // The why: strace counts read/write calls as the truth predicts.
    let expect = truth("memory", "0", &["1", "1K", src.to_str().unwrap()]);
    let want = expect["syscalls"].as_f64().unwrap();
    let out = Command::new("strace")
        .args(["-f", "-c", "-e", "trace=read,write", "-o"])
        .arg(tmp.path().join("strace.txt"))
        .args(cmd("1", "1K"))
        .stdout(Stdio::null())
        .status()
        .expect("strace is installed");
    assert!(out.success());
    let summary = std::fs::read_to_string(tmp.path().join("strace.txt")).unwrap();
    let calls: f64 = summary
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            matches!(f.last(), Some(&"read") | Some(&"write")).then(|| f[3].parse::<f64>().ok())?
        })
        .sum();
    eprintln!("memory rw 1K: strace counted {calls} read+write calls, truth {want}");
    assert!((calls - want).abs() <= 20.0, "{summary}");
}

// ---------------------------------------------------------------- lock-contend

/// lock-contend: the workers spend most of their time waiting in futex,
/// by /proc/TID/syscall, by strace -w and by kdiag diagnose.
#[test]
fn lock_contend_threads_mostly_wait_in_futex() {
    let _one = serial();
    if !require_root("lock_contend_threads_mostly_wait_in_futex") {
        return;
    }
    let seed = "symptom-lock";
    let expect = truth("lock-contend", seed, &[]);
    let n = expect["threads"].as_u64().unwrap() as usize;
    let prefix = expect["thread_name_prefix"].as_str().unwrap().to_string();
    let kids = Kids(vec![spawn(
        "lock-contend",
        &["--seed", seed, "--duration", "8"],
    )]);
    let pid = kids.0[0].id();
    let workers = || {
        threads(pid)
            .into_iter()
            .filter(|t| t.1.starts_with(&prefix))
            .collect::<Vec<_>>()
    };
    wait_for("the workers", Duration::from_secs(5), || {
        workers().len() == n
    });

    let (mut futex, mut total) = (0, 0);
    for _ in 0..25 {
        for (tid, _, _) in workers() {
            let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall"))
            else {
                continue;
            };
            total += 1;
            if text.split_whitespace().next() == Some(&libc::SYS_futex.to_string()) {
                futex += 1;
            }
        }
        sleep(Duration::from_millis(40));
    }
    let proc_share = futex as f64 / total as f64;

    // strace -w -c: wall-clock time inside each system call.
    let out = Command::new("timeout")
        .args(["-s", "INT", "2", "strace", "-f", "-w", "-c", "-p"])
        .arg(pid.to_string())
        .output()
        .expect("strace is installed");
    let summary = stderr(&out);
    let share_of = |name: &str| -> f64 {
        summary
            .lines()
            .find(|l| l.split_whitespace().last() == Some(name))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .unwrap_or(0.0)
    };
    let strace_share = share_of("futex") / 100.0;

    let report = diagnose(pid, "2");
    let samples = report["observation"]["samples"].as_array().unwrap();
    let count = |pred: &dyn Fn(&Value) -> bool| -> f64 {
        samples
            .iter()
            .filter(|s| pred(s))
            .map(|s| s["count"].as_f64().unwrap())
            .sum()
    };
    let sleeping = count(&|s| s["state"] == "S");
    // Each sample names the system call it sleeps in (or, where
    // /proc/PID/syscall is unreadable, its wait channel).
    let in_futex = count(&|s| {
        s["state"] == "S"
            && (s["syscall"] == "futex" || s["wchan"].as_str().unwrap_or("").contains("futex"))
    });
    let kd_share = in_futex / sleeping;
    eprintln!(
        "lock-contend ({n} workers): futex share /proc {proc_share:.2}, strace -w {strace_share:.2}, \
         kdiag diagnose {kd_share:.2} ({})",
        crate::common::verdict_text(&report["diagnosis"])
    );
    assert!(proc_share >= 0.5, "/proc: futex {proc_share:.2}");
    assert!(
        strace_share >= 0.5,
        "strace: futex {strace_share:.2}\n{summary}"
    );
    assert!(kd_share >= 0.5, "kdiag diagnose: futex {kd_share:.2}");
    assert_eq!(report["diagnosis"]["verdict"], "lock", "{report:#}");
    assert!(cpu_secs(pid) < 1.0, "lock-bound, not CPU-bound");
}

// ---------------------------------------------------------------- mem-leak

/// mem-leak: RSS grows linearly at the truth's rate, by /proc and by kdiag
/// diagnose's RSS series.
#[test]
fn mem_leak_rss_grows_at_its_rate() {
    let _one = serial();
    if !require_root("mem_leak_rss_grows_at_its_rate") {
        return;
    }
    let seed = "symptom-leak";
    let rate = truth("mem-leak", seed, &[])["rate_bytes_per_s"]
        .as_f64()
        .unwrap();
    let mut kids = Kids(vec![spawn(
        "mem-leak",
        &["--seed", seed, "--duration", "8"],
    )]);
    let pid = kids.0[0].id();
    let rss = || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .unwrap();
        kb.trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<f64>()
            .unwrap()
            * 1024.0
    };
    sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    let mut points = vec![];
    while t0.elapsed() < Duration::from_secs(2) {
        points.push((t0.elapsed().as_secs_f64(), rss()));
        sleep(Duration::from_millis(100));
    }
    let proc_slope = slope(&points);
    let report = diagnose(pid, "2");
    // RSS is the anonymous, file-backed and shared parts together.
    let series: Vec<(f64, f64)> = report["observation"]["memory"]["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let kib = ["anon_kib", "file_kib", "shmem_kib"]
                .iter()
                .map(|k| p[*k].as_f64().unwrap())
                .sum::<f64>();
            (p["t"].as_f64().unwrap(), kib * 1024.0)
        })
        .collect();
    let kd_slope = slope(&series);
    let mib = |b: f64| b / (1 << 20) as f64;
    eprintln!(
        "mem-leak: truth {:.2} MiB/s; RSS slope /proc {:.2} MiB/s, kdiag diagnose {:.2} MiB/s ({})",
        mib(rate),
        mib(proc_slope),
        mib(kd_slope),
        crate::common::verdict_text(&report["diagnosis"])
    );
    for (tool, s) in [("/proc", proc_slope), ("kdiag diagnose", kd_slope)] {
        assert!(
            (s / rate - 1.0).abs() <= 0.3,
            "{tool}: slope {:.2} MiB/s vs {:.2}",
            mib(s),
            mib(rate)
        );
    }
    assert_eq!(report["diagnosis"]["verdict"], "memory-trend");
    kids.0[0].kill().unwrap();
}

// ---------------------------------------------------------------- names

/// The seed picks which of several compiled copies does the work, so a
/// profile names a seed-dependent function: frame pointers carry it into
/// kdiag profile's stacks.
#[test]
fn seeded_function_names_show_in_kdiag_profile() {
    let _one = serial();
    if !require_root("seeded_function_names_show_in_kdiag_profile") {
        return;
    }
    let tmp = disk_tempdir();
    let scratch = |n: &str| tmp.path().join(n).to_str().unwrap().to_string();
    let seed = "symptom-names";
    // (workload, arguments, fact, least share of stacks): a scheduling
    // task is short, most of fork mode's time is fork itself.
    let cases: [(&str, Vec<String>, &str, f64); 3] = [
        (
            "memory",
            vec!["1".into(), "1K".into(), "--size".into(), "64M".into()],
            "copy_function",
            20.0,
        ),
        ("scheduling", vec!["1".into()], "worker_function", 1.0),
        (
            "io-app",
            vec![
                "--size".into(),
                "1M".into(),
                "--duration".into(),
                "2".into(),
            ],
            "write_function",
            20.0,
        ),
    ];
    for (name, args, fact, least) in cases {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let function = truth(name, seed, &refs)[fact].as_str().unwrap().to_string();
        let bin = workload(name);
        let folded = tmp.path().join(format!("{name}.folded"));
        let mut cmd = vec!["profile", "-F", "999", "--folded", folded.to_str().unwrap()];
        cmd.extend(["--", bin.to_str().unwrap()]);
        cmd.extend(&refs);
        let dir = scratch(name);
        cmd.extend(["--seed", seed, "--scratch", &dir]);
        let out = run_kdiag(&cmd);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        // Share of the samples whose stack passes through the function.
        let (mut with, mut all) = (0u64, 0u64);
        let frame = format!("::{function}");
        for line in std::fs::read_to_string(&folded).unwrap().lines() {
            let (stack, count) = line.rsplit_once(' ').unwrap();
            let count: u64 = count.parse().unwrap();
            all += count;
            if stack.split(';').any(|f| f.ends_with(&frame)) {
                with += count;
            }
        }
        let percent = 100.0 * with as f64 / all.max(1) as f64;
        eprintln!("{name} seed {seed}: {fact} {function} on {percent:.1}% of {all} stacks");
        assert!(
            percent >= least,
            "{name}: {function} on {percent}% of stacks"
        );
    }
}
