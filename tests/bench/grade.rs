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
use kdiag::lab::{self, Source, solution};

const LEARNERS: usize = 1000;
/// Every 20th learner hands in the previous learner's answers.
const COPY_EVERY: usize = 20;
const RUNS: usize = 7;

/// A folded profile as `kdiag profile --folded` writes it (about 20 KB),
/// with the learner's own hot function on its stacks.
fn profile(function: &str) -> String {
    let mut out = String::new();
    let kernel = [
        "ksys_write_[k];vfs_write_[k];ext4_buffered_write_iter_[k];copy_folio_from_iter_atomic_[k]",
        "ksys_write_[k];vfs_write_[k];ext4_sync_file_[k];file_write_and_wait_range_[k];folio_wait_writeback_[k]",
        "ksys_write_[k];vfs_write_[k];ext4_sync_file_[k];blkdev_issue_flush_[k];submit_bio_wait_[k]",
    ];
    for i in 0..80 {
        out.push_str(&format!(
            "io-app;__libc_start_call_main;main;io_app::main;kdiag_workloads::main;\
             kdiag_workloads::io_app::pass::{function};__write;entry_SYSCALL_64_after_hwframe_[k];\
             do_syscall_64_[k];{} {}\n",
            kernel[i % kernel.len()],
            1 + i % 7
        ));
    }
    out
}

fn write_class(dir: &Path) -> std::path::PathBuf {
    let course = Course::generate(vec!["0-demo".into()]).unwrap();
    let course_file = dir.join("course.toml");
    course.create(&course_file).unwrap();
    let source = Source::default();
    let lab = source.lab("0-demo").unwrap();
    let sol = solution::load(&source, "0-demo").unwrap();
    let subs = dir.join("subs");
    let mut previous: Option<(String, String)> = None;
    for n in 0..LEARNERS {
        let id = format!("s{n:04}");
        let facts = lab::facts(&lab, &course.token(&id)).unwrap();
        let (answers, _) = solution::answers(&sol, &facts).unwrap();
        let mut text = answers.to_toml();
        let mut folded = profile(&facts.get("expect.write_function").unwrap_or_default());
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

fn run(cmd: &mut Command) -> (Duration, Vec<u8>) {
    let (out, d) = time(|| cmd.stderr(Stdio::null()).output().expect("command runs"));
    assert!(out.status.success(), "{cmd:?} failed");
    (d, out.stdout)
}

fn main() {
    let kdiag = env!("CARGO_BIN_EXE_kdiag");
    let dir = tempfile::tempdir().unwrap();
    let course = write_class(dir.path());
    let subs = dir.path().join("subs");
    let files: Vec<String> = walk(&subs);

    let mut grade_times = Vec::new();
    let mut cat_times = Vec::new();
    let mut rows = 0;
    for _ in 0..RUNS {
        let (d, out) = run(Command::new(kdiag)
            .args(["grade", "0-demo"])
            .arg(&subs)
            .arg("--course")
            .arg(&course));
        rows = out.iter().filter(|&&b| b == b'\n').count() - 1;
        grade_times.push(d);
        let (d, _) = run(Command::new("cat").args(&files));
        cat_times.push(d);
    }
    assert_eq!(rows, LEARNERS);
    let (_, json) = run(Command::new(kdiag)
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
    let suspicious = v["suspicious"].as_array().unwrap().len();

    let (g, c) = (median(grade_times), median(cat_times));
    let body = format!(
        "## kdiag grade: 1,000 learners, each with their own variant\n\n\
         {} (`cargo bench --bench grade`, median of {RUNS} runs). A course of {LEARNERS} \
         learners of lab 0-demo, each submission an answers.toml and a ~20 KB folded \
         profile as evidence; every {COPY_EVERY}th learner hands in the previous one's. \
         `kdiag grade` derives each learner's seed from the course secret, recomputes \
         the truth, grades every check and compares the class for copies.\n\n\
         | command | wall time | per submission |\n|---|---|---|\n\
         | `kdiag grade 0-demo subs --course course.toml` | {:.0} ms | {:.2} ms |\n\
         | `cat` of every submitted file (the reading floor) | {:.0} ms | {:.2} ms |\n\n\
         Result: {full} of {LEARNERS} submissions earn full marks, {suspicious} suspicious \
         findings listed (the copies). Goal: under 1 s for 1,000 submissions.",
        machine(),
        g.as_secs_f64() * 1e3,
        g.as_secs_f64() * 1e3 / LEARNERS as f64,
        c.as_secs_f64() * 1e3,
        c.as_secs_f64() * 1e3 / LEARNERS as f64,
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
