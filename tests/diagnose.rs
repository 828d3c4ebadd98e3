//! `kdiag diagnose` on real processes: the bundled workloads (each verdict
//! must be the class the workload says it exhibits, `--describe`), and
//! programs written for the purpose (tests/programs/*.c, built
//! here with cc), each asserting the verdict and its key evidence from real
//! /proc numbers. The tests that load the CPUs run one at a time.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::own_cpu::OwnCpu;
use common::{Kids, command, free_pid, kdiag, run_kdiag, stderr, workload};
use serde_json::Value;

/// Held by every test that runs something busy, so their CPU use does not
/// disturb each other's verdicts.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// tests/programs/NAME.c built with cc (once per test run).
fn fixture(name: &str) -> PathBuf {
    common::c_fixture(name)
}

/// The JSON report of `kdiag diagnose --json ARGS`, which must succeed.
fn diagnose(args: &[&str]) -> Value {
    common::diagnose_json(args)
}

/// Diagnose a command (started by kdiag) for `secs`.
fn diagnose_cmd(secs: &str, argv: &[&str]) -> Value {
    let mut args = vec!["-d", secs, "--"];
    args.extend_from_slice(argv);
    diagnose(&args)
}

fn verdict(v: &Value) -> &str {
    v["diagnosis"]["verdict"].as_str().unwrap()
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(&v["diagnosis"]).unwrap()
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// Share of the runnable time spent in the run queue.
fn queue_share(v: &Value) -> f64 {
    let t = &v["observation"]["totals"];
    let cpu = num(&t["user_s"]) + num(&t["system_s"]) + num(&t["unseen_children_cpu_s"]);
    let rq = num(&t["run_delay_s"]);
    rq / (cpu + rq).max(1e-9)
}

/// Working share (of the time not sleeping by design) of a thread state.
fn working_share(v: &Value, state: &str) -> f64 {
    v["diagnosis"]["states"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["state"] == state)
        .map(|s| num(&s["working_share"]))
        .sum()
}

/// `state` is named among the runner-ups of a verdict's summary ("...,
/// also on CPU 29%, waiting for storage 17%").
fn runner_up(summary: &str, state: &str) -> bool {
    summary
        .split_once(" also ")
        .is_some_and(|(_, rest)| rest.contains(state))
}

/// The verdict `expected`; or, on a machine so busy that the target waited
/// for a CPU at least 40% of its runnable time (the `sched` threshold),
/// `sched`, which is then the right answer, with the expected state still
/// in the evidence: for `cpu`, runnable time (on CPU or queued) is at
/// least 80% of the working time; otherwise the expected state is named
/// as a runner-up in the summary.
fn assert_class(v: &Value, expected: &str, what: &str) {
    let got = verdict(v);
    if got == expected {
        return;
    }
    // On a fast device an O_SYNC writer's copies into the page cache can
    // outweigh its waits for the device (this VM's disk some days: 1 GB/s,
    // io-app 55% on CPU in the kernel, 40% waiting for storage): then cpu,
    // in the kernel, with storage the runner-up, is what happened.
    let summary = &common::verdict_text(&v["diagnosis"]);
    if expected == "io"
        && got == "cpu"
        && summary.contains("mostly in the kernel")
        && runner_up(summary, "waiting for storage")
    {
        eprintln!("{what}: {summary}");
        return;
    }
    assert_eq!(got, "sched", "{what}: expected {expected}: {}", pretty(v));
    assert!(
        queue_share(v) >= 0.4,
        "{what}: sched with a run-queue share of {:.2}: {}",
        queue_share(v),
        pretty(v)
    );
    match expected {
        "cpu" => assert!(
            working_share(v, "on-cpu") + working_share(v, "run-queue") >= 0.8,
            "{what}: {}",
            pretty(v)
        ),
        "io" => assert!(
            runner_up(summary, "waiting for storage"),
            "{what}: {summary}"
        ),
        "lock" => assert!(
            summary.contains("also waiting for a lock"),
            "{what}: {summary}"
        ),
        other => panic!("{what}: expected {other}, got sched: {}", pretty(v)),
    }
}

fn assert_cpu_bound(v: &Value, what: &str) {
    assert_class(v, "cpu", what);
}

/// Every member PID is gone (or a zombie about to be reaped by init).
fn all_gone(v: &Value) -> Result<(), String> {
    let t = Instant::now();
    loop {
        let alive: Vec<i64> = v["observation"]["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["pid"].as_i64().unwrap())
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| !s.contains(") Z "))
            })
            .collect();
        if alive.is_empty() {
            return Ok(());
        }
        if t.elapsed() > Duration::from_secs(2) {
            return Err(format!("left running: {alive:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn expected_class(name: &str) -> String {
    let out = command(workload(name)).arg("--describe").output().unwrap();
    let truth: Value = serde_json::from_slice(&out.stdout).unwrap();
    truth["expect"]["class"].as_str().unwrap().to_string()
}

#[test]
fn verdicts_match_what_the_workloads_do() {
    let _g = one_at_a_time();
    let own = OwnCpu::new("verdicts");
    for name in ["cpu-burn", "io-app", "lock-contend", "mem-leak"] {
        let argv = OwnCpu::argv(own.as_ref(), workload(name).to_str().unwrap());
        let report = diagnose_cmd("2.5", &OwnCpu::refs(&argv));
        assert_class(&report, &expected_class(name), name);
        all_gone(&report).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let idle = diagnose_cmd("1", &["sleep", "30"]);
    assert_eq!(verdict(&idle), "idle", "{}", pretty(&idle));

    // The text report leads with the verdict, names the next tool and
    // says what watching cost.
    let out = kdiag()
        .args(["diagnose", "-d", "1.5", "--"])
        .arg(workload("cpu-burn"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("Verdict: cpu: CPU-bound") || text.starts_with("Verdict: sched:"),
        "{text}"
    );
    assert!(
        text.contains("kdiag profile") || text.contains("kdiag top"),
        "{text}"
    );
    assert!(text.contains("kdiag's own cost: "), "{text}");
}

#[test]
fn starved_for_cpu_is_waiting_for_a_cpu() {
    let _g = one_at_a_time();
    // Twice as many busy processes as CPUs, plus the target: it gets well
    // under half a CPU, runnable all the time.
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let spin = "while :; do :; done";
    let _rivals = Kids(
        (0..2 * cpus)
            .map(|_| command("sh").args(["-c", spin]).spawn().unwrap())
            .collect(),
    );
    let v = diagnose_cmd("2", &["sh", "-c", spin]);
    assert_eq!(verdict(&v), "sched", "{}", pretty(&v));
    let t = &v["observation"]["totals"];
    let cpus_used = (num(&t["user_s"]) + num(&t["system_s"])) / num(&v["observation"]["window_s"]);
    assert!(cpus_used < 0.5, "it got {cpus_used:.2} CPUs");
    assert!(queue_share(&v) >= 0.4, "{}", pretty(&v));
    assert!(
        common::verdict_text(&v["diagnosis"]).contains("of its runnable time in the run queue"),
        "{}",
        pretty(&v)
    );
    // The machine's CPU pressure over the window: every CPU has a busy
    // loop waiting behind another nearly all the time. It is in the JSON,
    // in the evidence as the JSON has it, and it is why the run-queue time
    // reads as competition (low pressure would have read not-competition).
    if std::path::Path::new("/proc/pressure/cpu").exists() {
        let some = num(&v["observation"]["limits"]["pressure"]["cpu"]["some"]);
        assert!(
            (0.5..=1.05).contains(&some),
            "CPU some {some}: {}",
            pretty(&v)
        );
        let evidence = common::evidence_text(&v["diagnosis"]).join("\n");
        assert!(
            evidence.contains(&format!(
                "Pressure (machine, PSI): CPU some {:.0}%",
                some * 100.0
            )),
            "{evidence}"
        );
    }
}

#[test]
fn a_pipeline_is_watched_as_a_tree_and_stopped_whole() {
    let _g = one_at_a_time();
    let v = diagnose_cmd("2", &["sh", "-c", "yes | gzip -1 > /dev/null"]);
    assert_cpu_bound(&v, "yes | gzip");
    let members: Vec<&str> = v["observation"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["comm"].as_str().unwrap())
        .collect();
    assert!(
        members.contains(&"yes") && members.contains(&"gzip"),
        "{members:?}"
    );
    // The busiest member is named, with its share of the tree's CPU.
    let top = &v["diagnosis"]["busiest"][0];
    let comm = top["comm"].as_str().unwrap();
    assert!(comm == "gzip" || comm == "yes", "{}", pretty(&v));
    let line = format!("{comm} (PID {}) ", top["pid"]);
    assert!(
        common::evidence_text(&v["diagnosis"])
            .iter()
            .any(|e| e.contains(&line)),
        "{}",
        pretty(&v)
    );
    // Nothing the command started is left running.
    all_gone(&v).unwrap();
}

#[test]
fn bursts_are_reported_as_bursts() {
    let _g = one_at_a_time();
    // Busy for 1 s, asleep for 1 s, over and over: whichever phase the
    // window starts in, the verdict is the bursts' (CPU), not idle.
    let v = diagnose_cmd("5", &[fixture("bursts").to_str().unwrap(), "1", "1"]);
    assert_cpu_bound(&v, "1 s bursts");
    let p = &v["diagnosis"]["periodic"];
    assert!((0.7..1.4).contains(&num(&p["burst_s"])), "{}", pretty(&v));
    assert!((1.6..2.5).contains(&num(&p["period_s"])), "{}", pretty(&v));
    assert!(
        common::verdict_text(&v["diagnosis"]).contains("of the time in bursts of about"),
        "{}",
        pretty(&v)
    );
}

#[test]
fn a_tree_given_by_pid_is_followed_and_never_signalled() {
    let _g = one_at_a_time();
    let mut sh = command("sh")
        .args(["-c", "sleep 30 & sleep 30 & wait"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let pid = sh.id().to_string();
    let v = diagnose(&["-d", "0.5", "-p", &pid, "--tree"]);
    let members = v["observation"]["members"].as_array().unwrap().clone();
    assert_eq!(members.len(), 3, "{members:?}");
    assert_eq!(verdict(&v), "idle");
    for m in &members {
        let pid = m["pid"].as_i64().unwrap();
        assert!(
            Path::new(&format!("/proc/{pid}")).exists(),
            "{pid} was stopped"
        );
    }
    // SAFETY: ending the test's own process group members by PID.
    for m in &members {
        unsafe { libc::kill(m["pid"].as_i64().unwrap() as i32, libc::SIGKILL) };
    }
    let _ = sh.wait();
}

#[test]
fn allocating_once_is_not_a_leak() {
    let _g = one_at_a_time();
    // 32 MiB at the start, 32 MiB more after 1 s, then asleep. (Small
    // steps: faulting in more on a busy machine can wait on page locks long
    // enough to look like storage time.)
    let v = diagnose_cmd("3", &[fixture("alloc_once").to_str().unwrap()]);
    assert_eq!(verdict(&v), "idle", "{}", pretty(&v));
    let series = v["observation"]["memory"]["series"].as_array().unwrap();
    let anon = series.last().unwrap()["anon_kib"].as_u64().unwrap();
    assert!(anon >= 60 << 10, "it did allocate: {anon} KiB");
}

#[test]
fn reading_a_file_through_mmap_after_dropping_its_cache_is_storage() {
    let _g = one_at_a_time();
    // A 128 MiB file on real storage (/var/tmp, not tmpfs), synced so that
    // dropping its pages from the cache really drops them.
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let file = dir.path().join("data");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&file).unwrap();
        let mut block = vec![0u8; 1 << 20];
        for (i, b) in block.iter_mut().enumerate() {
            *b = (i * 7 + i / 4096) as u8;
        }
        for _ in 0..128 {
            f.write_all(&block).unwrap();
        }
        f.sync_all().unwrap();
    }
    // In a cgroup of its own: beside other load its CPU wait outgrew the
    // storage wait (`sched`, 50% against 39%).
    let own = OwnCpu::new("mmap");
    let script = format!(
        "{}exec {} {}",
        OwnCpu::enter(own.as_ref()),
        fixture("mmap_read").display(),
        file.display()
    );
    let v = diagnose_cmd("2.5", &["sh", "-c", &script]);
    assert_eq!(verdict(&v), "io", "{}", pretty(&v));
    let o = &v["observation"];
    assert!(
        o["totals"]["read_bytes"].as_u64().unwrap() >= 16 << 20,
        "storage reads: {}",
        o["totals"]
    );
    assert!(
        common::verdict_text(&v["diagnosis"]).contains("page fault"),
        "{}",
        pretty(&v)
    );
    // The kernel time handling the faults counts as storage, not CPU:
    // the storage state holds it and more.
    // A finding of its own, worded beside the others.
    let f = &v["diagnosis"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "fault-reads")
        .unwrap_or_else(|| panic!("no fault-reads finding: {}", pretty(&v)))["reads"];
    let kernel_s = num(&f["kernel_s"]);
    assert!(
        common::evidence_text(&v["diagnosis"])
            .iter()
            .any(|e| e.starts_with("Reads through page faults")),
        "{}",
        pretty(&v)
    );
    assert!(kernel_s > 0.0, "{}", pretty(&v));
    let storage = v["diagnosis"]["states"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["state"] == "storage")
        .map_or(0.0, |s| num(&s["seconds"]));
    assert!(storage > kernel_s, "{}", pretty(&v));
    // File pages grew, and that is not a leak.
    let series = o["memory"]["series"].as_array().unwrap();
    let file_kib = |p: &Value| p["file_kib"].as_u64().unwrap();
    assert!(series.iter().map(file_kib).max().unwrap() > file_kib(&series[0]) + 8192);
}

/// The drill-down its verdict calls for runs in the same diagnose: a CPU
/// profile naming cpu-burn's hottest function; an off-CPU profile with
/// lock-contend's locking function over futex; none with --why none.
#[test]
fn the_why_is_run_for_the_verdict() {
    let _g = one_at_a_time();
    let truth = |name: &str| -> Value {
        let out = command(workload(name)).arg("--describe").output().unwrap();
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["expect"].clone()
    };
    // In a cgroup of its own with the largest weight: beside other load
    // cpu-burn got 0.16 of a CPU and read `sched`.
    let own = OwnCpu::new("why");
    let argv = |name: &str| OwnCpu::argv(own.as_ref(), workload(name).to_str().unwrap());
    let cpu = diagnose_cmd("2", &OwnCpu::refs(&argv("cpu-burn")));
    assert_eq!(verdict(&cpu), "cpu", "{}", pretty(&cpu));
    let why = &cpu["why"];
    assert!(why["offcpu"].is_null(), "{why}");
    let top = why["cpu"]["top_self"].as_array().unwrap();
    let hottest = truth("cpu-burn")["hottest"].as_str().unwrap().to_string();
    let first = top.iter().find(|f| f["kernel"] == false).unwrap();
    assert!(first["name"].as_str().unwrap().ends_with(&hottest), "{why}");

    let lock = diagnose_cmd("2", &OwnCpu::refs(&argv("lock-contend")));
    assert_eq!(verdict(&lock), "lock", "{}", pretty(&lock));
    let why = &lock["why"];
    assert!(why["cpu"].is_null(), "{why}");
    let function = truth("lock-contend")["lock_function"]
        .as_str()
        .unwrap()
        .to_string();
    let paths = why["offcpu"]["paths"].as_array().unwrap();
    let top = paths[0]["frames"].as_array().unwrap();
    let frames: Vec<&str> = top.iter().map(|f| f.as_str().unwrap()).collect();
    assert!(
        frames.iter().any(|f| f.ends_with(&function)) && frames.iter().any(|f| f.contains("futex")),
        "{frames:?}"
    );

    let none = diagnose(&[
        "--why",
        "none",
        "-d",
        "1",
        "--",
        workload("cpu-burn").to_str().unwrap(),
    ]);
    assert!(none["why"].is_null(), "{}", pretty(&none));

    // The text report shows it, and still says what to run to look further.
    let out = kdiag()
        .args(["diagnose", "-d", "1.5", "--"])
        .arg(workload("lock-contend"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // Taken after the window, and it says when (seconds from the window's
    // start): from no sooner than the window ended, for its 1.5 s.
    let heading = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("Why (drill-down, 1.5 s each, taken after the watch window: from ")
        })
        .unwrap_or_else(|| panic!("{text}"));
    let figures: Vec<f64> = heading
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|w| w.trim_end_matches('.').parse().ok())
        .collect();
    let [from, to, ended] = figures[..] else {
        panic!("{heading}")
    };
    assert!(
        from >= ended && (to - from - 1.5).abs() < 0.11 && (ended - 1.5).abs() < 0.3,
        "{heading}"
    );
    assert!(
        text.contains(&function) && text.contains("To look further:"),
        "{text}"
    );
    // Its cost counts the off-CPU drill-down's BPF programs and their maps.
    assert!(
        text.contains(" BPF programs loaded with ") && text.contains(" MiB of maps ("),
        "{text}"
    );
}

/// The cost covers everything diagnose did: with every drill-down, the
/// BPF programs of the exec trace, the off-CPU profile and the block
/// trace are counted with their run time, measured by the kernel's
/// run-time statistics turned on for the run only (BPF_ENABLE_STATS: the
/// sysctl is never written), and the memory of their maps.
#[test]
fn the_cost_counts_the_bpf_programs_of_every_drill_down() {
    if !common::require_root("the_cost_counts_the_bpf_programs_of_every_drill_down") {
        return;
    }
    let _g = one_at_a_time();
    let sysctl = "/proc/sys/kernel/bpf_stats_enabled";
    let before = std::fs::read_to_string(sysctl).unwrap();
    let v = diagnose(&[
        "--why",
        "all",
        "-d",
        "1",
        "--",
        workload("lock-contend").to_str().unwrap(),
    ]);
    let why = &v["why"];
    assert!(
        why["offcpu"].is_object() && why["storage"].is_object(),
        "{why}"
    );
    let bpf = &v["observation"]["cost"]["bpf"];
    // exec (3 programs at least), off-CPU (1 attached of its 2 forms
    // loaded), block (3 at least).
    assert!(bpf["programs"].as_u64().unwrap() >= 5, "{bpf}");
    assert!(
        bpf["stats"] == "turned-on" || bpf["stats"] == "already-on",
        "{bpf}"
    );
    // The kernel ran them and kdiag counted it (how often depends on how
    // busy the machine is: 25 runs in a quiet CI second, thousands loaded).
    assert!(bpf["runs"].as_u64().unwrap() > 0, "{bpf}");
    assert!(bpf["run_time_ns"].as_u64().unwrap() > 0, "{bpf}");
    // Their maps' memory, as the kernel charged it (memlock in each map's
    // fdinfo): the off-CPU profile's stack map alone holds more than 1 MiB.
    assert!(bpf["map_bytes"].as_u64().unwrap() > 1 << 20, "{bpf}");
    assert_eq!(std::fs::read_to_string(sysctl).unwrap(), before);
}

#[test]
fn a_lock_held_while_computing_is_a_lock() {
    let _g = one_at_a_time();
    let v = diagnose_cmd("2", &[fixture("lock_compute").to_str().unwrap(), "4"]);
    // On an oversubscribed machine every woken waiter and the preempted
    // holder queue for a CPU, and that wait can outweigh the lock.
    assert_class(&v, "lock", "lock_compute");
    if verdict(&v) == "lock" {
        let summary = &common::verdict_text(&v["diagnosis"]);
        assert!(
            summary.contains("the holder works while holding it"),
            "{summary}"
        );
    }
    let lock = &v["observation"]["locks"][0];
    assert!(lock["waiters"].as_u64().unwrap() >= 3, "{lock}");
    assert!(
        num(&lock["running_share"]) >= 0.5,
        "the holder computes: {lock}"
    );
}

/// A `sleep 30` of the test's own, killed at the end.
fn sleeper() -> Child {
    command("sleep")
        .arg("30")
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn a_stopped_process_is_stopped() {
    let kid = sleeper();
    let pid = kid.id() as i32;
    let _kids = Kids(vec![kid]);
    // SAFETY: stopping our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let v = diagnose(&["-d", "0.6", "-p", &pid.to_string()]);
    assert_eq!(verdict(&v), "stopped", "{}", pretty(&v));
    assert!(v["observation"]["stopped"]["tracer_pid"].is_null());
    let next = v["diagnosis"]["next"][0].as_str().unwrap();
    assert_eq!(next, format!("kill -CONT {pid}"));

    // Stopped by a tracer: this test attaches to a second sleeper.
    let kid = sleeper();
    let pid = kid.id() as i32;
    let _kids = Kids(vec![kid]);
    // SAFETY: tracing our own child from this thread, then waiting for the
    // stop that PTRACE_ATTACH causes.
    unsafe {
        assert_eq!(libc::ptrace(libc::PTRACE_ATTACH, pid, 0, 0), 0);
        let mut status = 0;
        assert_eq!(libc::waitpid(pid, &mut status, libc::__WALL), pid);
    }
    let v = diagnose(&["-d", "0.6", "-p", &pid.to_string()]);
    // SAFETY: detaching from the child this thread traces.
    unsafe { libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0) };
    assert_eq!(verdict(&v), "stopped", "{}", pretty(&v));
    assert_eq!(
        v["observation"]["stopped"]["tracer_pid"],
        std::process::id()
    );
    let summary = &common::verdict_text(&v["diagnosis"]);
    assert!(summary.contains("by its tracer"), "{summary}");
}

#[test]
fn a_zombie_names_the_parent_that_does_not_reap_it() {
    // The shell forks a child that exits at once, then becomes `sleep`,
    // which never waits for it.
    let parent = command("sh")
        .args(["-c", "(exit 0) & exec sleep 30"])
        .spawn()
        .unwrap();
    let ppid = parent.id();
    let _kids = Kids(vec![parent]);
    let t = Instant::now();
    let zombie = loop {
        let children = std::fs::read_to_string(format!("/proc/{ppid}/task/{ppid}/children"))
            .unwrap_or_default();
        let z = children.split_whitespace().find(|c| {
            std::fs::read_to_string(format!("/proc/{c}/stat")).is_ok_and(|s| s.contains(") Z "))
        });
        if let Some(z) = z {
            break z.to_string();
        }
        assert!(t.elapsed() < Duration::from_secs(5), "no zombie appeared");
        std::thread::sleep(Duration::from_millis(20));
    };
    let v = diagnose(&["-d", "1", "-p", &zombie]);
    assert_eq!(verdict(&v), "zombie", "{}", pretty(&v));
    assert_eq!(v["observation"]["zombie"]["parent_pid"], ppid);
    assert_eq!(v["observation"]["zombie"]["parent_comm"], "sleep");
    let summary = &common::verdict_text(&v["diagnosis"]);
    assert!(
        summary.contains(&format!("parent PID {ppid} (sleep)")),
        "{summary}"
    );
}

#[test]
fn a_command_that_ends_in_the_window_is_reported_until_then() {
    let v = diagnose_cmd("3", &["sh", "-c", "sleep 0.6"]);
    let ended = &v["observation"]["ended"];
    let after = num(&ended["after_s"]);
    assert!((0.5..2.0).contains(&after), "{ended}");
    assert_eq!(ended["how"], "exited with code 0");
    assert_eq!(verdict(&v), "idle", "{}", pretty(&v));
}

#[test]
fn a_kernel_thread_says_what_it_is() {
    // kthreadd, PID 2, creates the kernel's threads.
    let v = diagnose(&["-d", "0.3", "-p", "2"]);
    let k = &v["observation"]["kernel_thread"];
    assert_eq!(k["kind"], "kthreadd", "{k}");
    assert!(
        common::evidence_text(&v["diagnosis"])[0]
            .starts_with("Kernel thread (kthreadd): creates every other kernel thread"),
        "{}",
        pretty(&v)
    );
    assert_eq!(v["observation"]["comm"], "kthreadd");
}

#[test]
fn a_thousand_threads_cost_little() {
    let _g = one_at_a_time();
    let kid = command(fixture("many_threads"))
        .arg("1000")
        .spawn()
        .unwrap();
    let pid = kid.id();
    let _kids = Kids(vec![kid]);
    let t = Instant::now();
    while std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count()) < 1001 {
        assert!(t.elapsed() < Duration::from_secs(10), "threads not started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let v = diagnose(&["-d", "3", "-p", &pid.to_string()]);
    let o = &v["observation"];
    assert_eq!(o["totals"]["threads"], 1001);
    // Loosely (the goal, under 5% of one CPU, is measured in the
    // benchmark): a regression to reading every thread every tick costs
    // a whole CPU.
    let share = num(&o["cost"]["cpu_s"]) / num(&o["window_s"]);
    assert!(share < 0.15, "kdiag used {:.1}% of a CPU", share * 100.0);
    assert!(o["sampling"]["threads_per_tick"].as_u64().unwrap() <= 8);
}

#[test]
fn diagnoses_a_running_pid() {
    let mut child = sleeper();
    let out = run_kdiag(&[
        "diagnose",
        "--json",
        "-d",
        "0.5",
        "-p",
        &child.id().to_string(),
    ]);
    let _ = child.kill();
    let _ = child.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["observation"]["comm"], "sleep");
    assert_eq!(v["diagnosis"]["verdict"], "idle");
}

#[test]
fn bad_targets_are_clear_errors() {
    let gone = free_pid();
    let out = run_kdiag(&["diagnose", "-p", &gone]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains(&format!("no process with PID {gone}")));
    let out = run_kdiag(&["diagnose"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("-p PID, --cgroup PATH, --unit NAME, or -- CMD"));
    let out = run_kdiag(&["diagnose", "-d", "0", "-p", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run_kdiag(&["diagnose", "--tree", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "--tree needs -p");
    let out = run_kdiag(&["diagnose", "--", "sh", "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("(exited with code 3): nothing to diagnose"),
        "{}",
        stderr(&out)
    );
    let out = run_kdiag(&["diagnose", "--", "/nonexistent/prog"]);
    assert_eq!(out.status.code(), Some(127));
    assert!(stderr(&out).contains("cannot run"), "{}", stderr(&out));
}
