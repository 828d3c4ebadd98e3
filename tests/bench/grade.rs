//! `kdiag grade` on a course of 1,000 learners, each with their own variant
//! of lab 0-demo: every submission (answers plus a profile as evidence) is
//! graded against the truth recomputed from the course secret and the
//! learner's id, then the class is compared for copied answers. The peer is
//! the floor of any grader: `cat` reading every submitted file once.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{machine, median, time, write_section};
use kdiag::course::Course;
use kdiag::lab::{self, LabSource, solution};

const LEARNERS: usize = 1000;
/// Every 20th learner hands in the previous learner's answers.
const COPY_EVERY: usize = 20;
const RUNS: usize = 7;

/// A folded profile as `kdiag profile --folded` writes it (about 20 KB),
/// with the learner's own hot function on its stacks.
fn profile(function: &str, seed: usize) -> String {
    let mut out = String::new();
    let kernel = [
        "ksys_write_[k];vfs_write_[k];ext4_buffered_write_iter_[k];copy_folio_from_iter_atomic_[k]",
        "ksys_write_[k];vfs_write_[k];ext4_sync_file_[k];file_write_and_wait_range_[k];folio_wait_writeback_[k]",
        "ksys_write_[k];vfs_write_[k];ext4_sync_file_[k];blkdev_issue_flush_[k];submit_bio_wait_[k]",
    ];
    for i in 0..80 {
        // Counts differ per learner: two real profiles are never identical.
        let count = if i == 0 { 1000 + seed } else { 1 + i % 7 };
        out.push_str(&format!(
            "io-app;__libc_start_call_main;main;io_app::main;kdiag_workloads::main;\
             kdiag_workloads::io_app::pass::{function};__write;entry_SYSCALL_64_after_hwframe_[k];\
             do_syscall_64_[k];{} {}\n",
            kernel[i % kernel.len()],
            count
        ));
    }
    out
}

fn write_class(dir: &Path) -> std::path::PathBuf {
    let course = Course::generate(vec!["0-demo".into()]).unwrap();
    let course_file = dir.join("course.toml");
    course.create(&course_file).unwrap();
    let source = LabSource::default();
    let lab = source.lab("0-demo").unwrap();
    let sol = solution::load(&source, "0-demo").unwrap();
    let subs = dir.join("subs");
    let mut previous: Option<(String, String)> = None;
    for n in 0..LEARNERS {
        let id = format!("s{n:04}");
        let facts = lab::facts(&lab, &course.token(&id)).unwrap();
        let (answers, _) = solution::answers(&sol, &facts).unwrap();
        let mut text = answers.to_toml();
        let mut folded = profile(&facts.get("expect.write_function").unwrap_or_default(), n);
        if n % COPY_EVERY == COPY_EVERY - 1
            && let Some((t, f)) = &previous
        {
            (text, folded) = (t.clone(), f.clone());
        }
        let sub = subs.join(&id);
        std::fs::create_dir_all(sub.join("artifacts")).unwrap();
        std::fs::write(sub.join("answers.toml"), &text).unwrap();
        std::fs::write(sub.join("artifacts/profile.folded"), &folded).unwrap();
        previous = Some((text, folded));
    }
    course_file
}

/// CPU time (user + system) of the children reaped so far.
fn children_cpu() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Wall time, CPU time and output of one run.
fn run(cmd: &mut Command) -> (Duration, Duration, Vec<u8>) {
    let cpu = children_cpu();
    let (out, d) = time(|| cmd.stderr(Stdio::null()).output().expect("command runs"));
    assert!(out.status.success(), "{cmd:?} failed");
    (d, children_cpu() - cpu, out.stdout)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or("?")
        .to_string()
}

fn main() {
    let kdiag = env!("CARGO_BIN_EXE_kdiag");
    let dir = tempfile::tempdir().unwrap();
    // KDIAG_BENCH_DIR keeps the class for a closer look (profiling).
    let keep = std::env::var_os("KDIAG_BENCH_DIR").map(std::path::PathBuf::from);
    let root = keep.as_deref().unwrap_or(dir.path());
    let course = write_class(root);
    let subs = root.join("subs");
    let files: Vec<String> = walk(&subs);

    let (mut grade_times, mut grade_cpu) = (Vec::new(), Vec::new());
    let (mut cat_times, mut cat_cpu) = (Vec::new(), Vec::new());
    let mut rows = 0;
    for _ in 0..RUNS {
        let (d, cpu, out) = run(Command::new(kdiag)
            .args(["grade", "0-demo"])
            .arg(&subs)
            .arg("--course")
            .arg(&course));
        rows = out.iter().filter(|&&b| b == b'\n').count() - 1;
        grade_times.push(d);
        grade_cpu.push(cpu);
        let (d, cpu, _) = run(Command::new("cat").args(&files));
        cat_times.push(d);
        cat_cpu.push(cpu);
    }
    assert_eq!(rows, LEARNERS);
    let (_, _, json) = run(Command::new(kdiag)
        .args(["grade", "0-demo"])
        .arg(&subs)
        .arg("--course")
        .arg(&course)
        .args(["--format", "json"]));
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let full = v["submissions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["score"] == v["max_score"])
        .count();
    let found = v["suspicious"].as_array().unwrap();
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for f in found {
        *kinds
            .entry(f["kind"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    let copiers: std::collections::BTreeSet<&str> = found
        .iter()
        .filter(|f| f["kind"] == "copy")
        .map(|f| f["submissions"][0].as_str().unwrap())
        .collect();
    let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
    let copies = LEARNERS / COPY_EVERY;

    let (g, c) = (median(grade_times), median(cat_times));
    let (gc, cc) = (median(grade_cpu), median(cat_cpu));
    let body = format!(
        "## kdiag grade: 1,000 learners, each with their own variant\n\n\
         {} (`cargo bench --bench grade`, median of {RUNS} runs). A course of {LEARNERS} \
         learners of lab 0-demo, each submission an answers.toml and a ~20 KB folded \
         profile as evidence; every {COPY_EVERY}th learner hands in the previous one's. \
         `kdiag grade` derives each learner's seed from the course secret, recomputes \
         the truth, grades every check and compares the class for copies.\n\n\
         | command | wall time | CPU time | wall per submission |\n|---|---|---|---|\n\
         | `kdiag grade 0-demo subs --course course.toml` | {:.0} ms | {:.0} ms | {:.2} ms |\n\
         | `cat` of every submitted file (the reading floor) | {:.0} ms | {:.0} ms | {:.2} ms |\n\n\
         Load average at the end: {} (the machine is shared; CPU time is the cost \
         without the wait for a core).\n\n\
         Result: {full} of {LEARNERS} submissions earn full marks; {} of the {copies} copies \
         are named as fitting another learner's variant; findings: {}. \
         Goal: under 1 s for 1,000 submissions.",
        machine(),
        g.as_secs_f64() * 1e3,
        gc.as_secs_f64() * 1e3,
        g.as_secs_f64() * 1e3 / LEARNERS as f64,
        c.as_secs_f64() * 1e3,
        cc.as_secs_f64() * 1e3,
        c.as_secs_f64() * 1e3 / LEARNERS as f64,
        load(),
        copiers.len(),
        kinds.join(", "),
    );
    write_section("grade", &body);
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p.display().to_string());
        }
    }
    out.sort();
    out
}
