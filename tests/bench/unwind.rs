//! Whose stacks reach `main`: `kdiag profile` against `perf record` on the
//! same runs of programs built without frame pointers (run as root:
//! `sudo cargo bench --bench unwind`).
//!
//! Each program is started, and kdiag and perf attach to it together
//! (`-p PID`, 3 s at 499 Hz): kdiag `--call-graph fp` beside `perf record -g`,
//! then `dwarf` and `auto` each beside `perf record --call-graph dwarf,16384`.
//! A sample reaches the start when its stack holds `main` (C), `…::main`
//! (Rust) or `__libc_start_call_main` (a stripped binary, which has no
//! `main` symbol). perf's stacks come through `perf script --no-inline |
//! inferno-collapse-perf` (`cargo install inferno`), without the period
//! field so that each sample counts once, as in kdiag's folded file.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{machine, write_section};

const HZ: &str = "499";
const SECS: &str = "3";

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd} >/dev/null")])
        .status()
        .is_ok_and(|s| s.success())
}

fn programs() -> PathBuf {
    common::root().join("tests/programs")
}

/// A program to profile: how to start it, and its row's title.
struct Binary {
    title: &'static str,
    argv: Vec<String>,
}

fn build(dir: &Path) -> Vec<Binary> {
    let chain = dir.join("chain");
    let st = Command::new("gcc")
        .args(["-O2", "-fomit-frame-pointer", "-o"])
        .arg(&chain)
        .arg(programs().join("chain.c"))
        .status()
        .expect("gcc is installed");
    assert!(st.success(), "gcc failed");
    let rchain = dir.join("rchain");
    let st = Command::new("rustc")
        .args(["-C", "opt-level=2", "-C", "force-frame-pointers=no", "-o"])
        .arg(&rchain)
        .arg(programs().join("rchain.rs"))
        .status()
        .expect("rustc is installed");
    assert!(st.success(), "rustc failed");
    // gzip -6 of ~111 MB of text: about 9 s of CPU, longer than a profile.
    let data = dir.join("data.txt");
    let text: String = (1..=6_000_000u32)
        .map(|i| format!("{i} {}\n", i.wrapping_mul(2654435761)))
        .collect();
    std::fs::write(&data, text).unwrap();
    let path = |p: &Path| p.display().to_string();
    vec![
        Binary {
            title: "tests/programs/chain.c, `gcc -O2 -fomit-frame-pointer`",
            argv: vec![path(&chain), "5".into()],
        },
        Binary {
            title: "tests/programs/rchain.rs, `rustc -C opt-level=2 -C force-frame-pointers=no`",
            argv: vec![path(&rchain), "5".into()],
        },
        Binary {
            title: "the system's gzip (stripped, no frame pointers), `gzip -6` of 111 MB",
            argv: vec!["gzip".into(), "-6".into(), "-c".into(), path(&data)],
        },
    ]
}

/// Folded stacks: (frames, count).
type Folded = Vec<(Vec<String>, u64)>;

fn parse_folded(text: &str) -> Folded {
    text.lines()
        .filter_map(|l| {
            let (stack, n) = l.rsplit_once(' ')?;
            Some((
                stack.split(';').map(str::to_string).collect(),
                n.parse().ok()?,
            ))
        })
        .collect()
}

/// (samples whose stack reaches the program's start, all samples).
fn reaching_main(folded: &Folded) -> (u64, u64) {
    let reaches = |frames: &[String]| {
        frames
            .iter()
            .any(|f| f == "main" || f.ends_with("::main") || f == "__libc_start_call_main")
    };
    folded.iter().fold((0, 0), |(hit, all), (frames, n)| {
        (hit + if reaches(frames) { *n } else { 0 }, all + n)
    })
}

/// One run of `bin` with kdiag (`kdiag_mode`) and perf (`perf_args`)
/// attached together: their (reaching, all) sample counts.
fn same_run(dir: &Path, bin: &Binary, kdiag_mode: &str, perf_args: &[&str]) -> [(u64, u64); 2] {
    let mut prog: Child = Command::new(&bin.argv[0])
        .args(&bin.argv[1..])
        .stdout(Stdio::null())
        .spawn()
        .expect("the program starts");
    std::thread::sleep(Duration::from_millis(300));
    let pid = prog.id().to_string();
    let (kdiag_folded, perf_data) = (dir.join("k.folded"), dir.join("p.data"));
    let mut kdiag = Command::new(env!("CARGO_BIN_EXE_kdiag"))
        .args([
            "profile",
            "-p",
            &pid,
            "-d",
            SECS,
            "-F",
            HZ,
            "--call-graph",
            kdiag_mode,
        ])
        .arg("--folded")
        .arg(&kdiag_folded)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let perf = Command::new("perf")
        .args(["record", "-q", "-F", HZ])
        .args(perf_args)
        .args(["-p", &pid, "-o"])
        .arg(&perf_data)
        .args(["--", "sleep", SECS])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(perf.success(), "perf record failed");
    assert!(kdiag.wait().unwrap().success(), "kdiag profile failed");
    let _ = prog.kill();
    let _ = prog.wait();
    let script = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "perf script --no-inline -F comm,pid,tid,time,event,ip,sym,dso -i {} | inferno-collapse-perf",
            perf_data.display()
        ))
        .output()
        .unwrap();
    assert!(
        script.status.success(),
        "perf script | inferno-collapse-perf failed"
    );
    let ours = parse_folded(&std::fs::read_to_string(&kdiag_folded).unwrap());
    let theirs = parse_folded(&String::from_utf8_lossy(&script.stdout));
    [reaching_main(&ours), reaching_main(&theirs)]
}

fn share((hit, all): (u64, u64)) -> String {
    if all == 0 {
        return "no samples".into();
    }
    format!("{:.1}% of {all}", hit as f64 * 100.0 / all as f64)
}

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED unwind bench: needs root (sudo cargo bench --bench unwind)");
        return;
    }
    for tool in ["perf", "inferno-collapse-perf", "gcc", "rustc", "gzip"] {
        if !have(tool) {
            eprintln!("SKIPPED unwind bench: {tool} is not installed");
            return;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let dwarf = ["--call-graph", "dwarf,16384"];
    let mut rows = Vec::new();
    for bin in build(dir.path()) {
        let [k_fp, p_fp] = same_run(dir.path(), &bin, "fp", &["-g"]);
        let [k_dwarf, p_dwarf] = same_run(dir.path(), &bin, "dwarf", &dwarf);
        let [k_auto, p_auto] = same_run(dir.path(), &bin, "auto", &dwarf);
        rows.push(format!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            bin.title,
            share(k_fp),
            share(p_fp),
            share(k_dwarf),
            share(p_dwarf),
            share(k_auto),
            share(p_auto),
        ));
    }
    write_section(
        "unwind",
        &format!(
            "## kdiag profile: stacks that reach `main`, against perf on the same runs\n\n\
             Measured on {}, release build. Each cell: the share of the program's samples whose \
             stack reaches `main` (or `__libc_start_call_main` in a stripped binary), of that many \
             samples; kdiag and perf attached to the same run of the program (`-p PID`, {SECS} s \
             at {HZ} Hz), one run per column pair.\n\n\
             | binary | kdiag `fp` | perf `-g` (same run) | kdiag `dwarf` | perf `--call-graph dwarf,16384` (same run) | kdiag `auto` | perf `--call-graph dwarf,16384` (same run) |\n\
             |---|---:|---:|---:|---:|---:|---:|\n{}\n",
            machine(),
            rows.join("\n")
        ),
    );
}
