//! `kdiag time` against GNU `/usr/bin/time` on the same commands: the
//! counters must agree within tolerance (two runs never match exactly), and
//! kdiag must add what GNU time lacks: storage bytes and how the child ended.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The comparisons run one at a time so that one test's CPU load does not
/// skew another's timings.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// GNU time's counters for one run, from a machine-readable -f format.
#[derive(Debug)]
struct Gnu {
    real: f64,
    cpu: f64,
    max_rss_kb: f64,
    minor: f64,
    voluntary: f64,
    fs_in: f64,
    fs_out: f64,
    code: i32,
}

const GNU_FORMAT: &str = "KDIAG %e %U %S %M %R %w %I %O %x";

fn gnu_time(cmd: &[&str]) -> Gnu {
    let out = command("/usr/bin/time")
        .arg("-f")
        .arg(GNU_FORMAT)
        .args(cmd)
        .output()
        .expect("/usr/bin/time runs (apt-get install time)");
    let err = stderr(&out);
    let line = err
        .lines()
        .find(|l| l.starts_with("KDIAG "))
        .expect("GNU time line");
    let v: Vec<f64> = line[6..].split(' ').map(|x| x.parse().unwrap()).collect();
    Gnu {
        real: v[0],
        cpu: v[1] + v[2],
        max_rss_kb: v[3],
        minor: v[4],
        voluntary: v[5],
        fs_in: v[6],
        fs_out: v[7],
        code: out.status.code().unwrap(),
    }
}

/// kdiag's JSON report (written to a file so the command's output stays
/// apart) and its exit code.
fn kdiag_time(cmd: &[&str]) -> (serde_json::Value, i32) {
    let (report, code, _) = kdiag_time_output(cmd);
    (report, code)
}

/// `kdiag_time`, with what the command printed.
fn kdiag_time_output(cmd: &[&str]) -> (serde_json::Value, i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let out = kdiag()
        .args(["time", "--json", "-o"])
        .arg(&report)
        .arg("--")
        .args(cmd)
        .output()
        .expect("kdiag runs");
    let text = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("no report ({e}); stderr: {}", stderr(&out)));
    (
        serde_json::from_str(&text).unwrap(),
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The shell's own user+sys seconds from the first line of `times`
/// ("0m0.560000s 0m0.004000s").
fn shell_times(out: &str) -> f64 {
    let line = out
        .lines()
        .rev()
        .nth(1)
        .unwrap_or_else(|| panic!("no `times` output: {out:?}"));
    line.split_whitespace()
        .map(|t| {
            let (m, s) = t.trim_end_matches('s').split_once('m').expect("NmS.SSSs");
            m.parse::<f64>().unwrap() * 60.0 + s.parse::<f64>().unwrap()
        })
        .sum()
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// |a - b| within `rel` of b, or within `abs`.
fn close(what: &str, a: f64, b: f64, rel: f64, abs: f64) {
    assert!(
        (a - b).abs() <= abs.max(rel * b.abs()),
        "{what}: kdiag {a} vs GNU time {b} (tolerance {rel} relative / {abs} absolute)"
    );
}

/// A scratch directory on the project's disk (not tmpfs, where O_DIRECT
/// would fail and nothing reaches storage).
fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

#[test]
fn direct_write_and_read_reach_storage() {
    let _serial = serial();
    let dir = disk_dir();
    let file = dir.path().join("data");
    let of = format!("of={}", file.display());
    let write = [
        "dd",
        "if=/dev/zero",
        &of,
        "bs=1M",
        "count=16",
        "oflag=direct",
        "status=none",
    ];
    let gnu = gnu_time(&write);
    let (k, code) = kdiag_time(&write);
    assert_eq!((code, gnu.code), (0, 0));
    let mib16 = 16.0 * 1024.0 * 1024.0;
    // dd wrote 16 MiB with O_DIRECT: all of it went to storage.
    assert!(f(&k["io"]["write_bytes"]) >= mib16, "{k}");
    assert!(f(&k["io"]["wchar"]) >= mib16, "{k}");
    // ru_oublock counts the same 512-byte blocks in both tools.
    close(
        "fs outputs",
        f(&k["rusage"]["fs_outputs"]),
        gnu.fs_out,
        0.05,
        64.0,
    );
    assert!(gnu.fs_out >= mib16 / 512.0);

    let iff = format!("if={}", file.display());
    let read = [
        "dd",
        &iff,
        "of=/dev/null",
        "bs=1M",
        "iflag=direct",
        "status=none",
    ];
    let gnu = gnu_time(&read);
    let (k, _) = kdiag_time(&read);
    assert!(f(&k["io"]["read_bytes"]) >= mib16, "{k}");
    close(
        "fs inputs",
        f(&k["rusage"]["fs_inputs"]),
        gnu.fs_in,
        0.05,
        64.0,
    );
}

#[test]
fn cpu_loop_matches_gnu_time() {
    let _serial = serial();
    // The shell reports its own CPU time with `times` as its last act, so
    // kdiag's figure is checked against the same run: two runs of a CPU
    // loop differ by 30% or more on a shared machine.
    let cmd = [
        "sh",
        "-c",
        "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; times",
    ];
    let gnu = gnu_time(&cmd);
    let (k, code, out) = kdiag_time_output(&cmd);
    assert_eq!((code, gnu.code), (0, 0));
    assert!(gnu.cpu > 0.1, "the loop should burn CPU: {}", gnu.cpu);
    let own = shell_times(&out);
    let kdiag_cpu = f(&k["rusage"]["user_secs"]) + f(&k["rusage"]["sys_secs"]);
    assert!(
        kdiag_cpu >= own - 0.01,
        "kdiag {kdiag_cpu} < the shell's own {own}"
    );
    close(
        "user+sys against the shell's own account",
        kdiag_cpu,
        own,
        0.1,
        0.05,
    );
    // Wall-clock time is not compared here: on a shared machine it depends
    // on what else runs. The other counters are far steadier than CPU time.
    close(
        "max rss",
        f(&k["rusage"]["max_rss_kb"]),
        gnu.max_rss_kb,
        0.3,
        512.0,
    );
    close(
        "minor faults",
        f(&k["rusage"]["minor_faults"]),
        gnu.minor,
        0.3,
        50.0,
    );
}

#[test]
fn sleep_is_real_time_not_cpu() {
    let _serial = serial();
    let cmd = ["sleep", "0.3"];
    let gnu = gnu_time(&cmd);
    let (k, code) = kdiag_time(&cmd);
    assert_eq!(code, 0);
    close("real", f(&k["real_secs"]), gnu.real, 0.0, 0.1);
    assert!(f(&k["real_secs"]) >= 0.3);
    let cpu = f(&k["rusage"]["user_secs"]) + f(&k["rusage"]["sys_secs"]);
    assert!(cpu < 0.1, "{k}");
    // Sleeping is a voluntary switch in both tools.
    assert!(f(&k["rusage"]["voluntary_switches"]) >= 1.0 && gnu.voluntary >= 1.0);
}

#[test]
fn max_rss_of_a_big_allocation() {
    let _serial = serial();
    // The shell holds 32 MB in a variable.
    let cmd = [
        "sh",
        "-c",
        "x=$(head -c 32000000 /dev/zero | tr '\\0' a); echo ${#x} >/dev/null",
    ];
    let gnu = gnu_time(&cmd);
    let (k, _) = kdiag_time(&cmd);
    assert!(gnu.max_rss_kb > 30_000.0, "{gnu:?}");
    close(
        "max rss",
        f(&k["rusage"]["max_rss_kb"]),
        gnu.max_rss_kb,
        0.15,
        1024.0,
    );
}

#[test]
fn exit_codes_follow_the_child() {
    let _serial = serial();
    let cmd = ["sh", "-c", "exit 7"];
    let gnu = gnu_time(&cmd);
    let (k, code) = kdiag_time(&cmd);
    assert_eq!((code, gnu.code), (7, 7));
    assert_eq!(
        k["ending"],
        serde_json::json!({"kind": "exited", "code": 7})
    );

    // A signal: 128+N, like GNU time.
    let cmd = ["sh", "-c", "kill -TERM $$"];
    let gnu = gnu_time(&cmd);
    let (k, code) = kdiag_time(&cmd);
    assert_eq!((code, gnu.code), (143, 143));
    assert_eq!(k["ending"]["kind"], "signaled");
    assert_eq!(k["ending"]["name"], "SIGTERM");
}

#[test]
fn a_command_that_cannot_start() {
    let _serial = serial();
    let out = run_kdiag(&["time", "--", "kdiag-no-such-command"]);
    assert_eq!(out.status.code(), Some(127));
    assert_eq!(
        stderr(&out).trim(),
        "kdiag: cannot run 'kdiag-no-such-command': No such file or directory"
    );
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("not-executable");
    std::fs::write(&data, "data").unwrap();
    let out = run_kdiag(&["time", "--", data.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(126));
    assert!(
        stderr(&out).contains("Permission denied"),
        "{}",
        stderr(&out)
    );
    // A bare name is looked up in $PATH only, as the shell does: a program
    // of that name in the working directory does not run.
    let script = dir.path().join("kdiag-cwd-only");
    std::fs::write(&script, "#!/bin/sh\necho ran\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = kdiag()
        .current_dir(dir.path())
        .args(["time", "--", "kdiag-cwd-only"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");

    let out = run_kdiag(&["time"]);
    assert_eq!(out.status.code(), Some(2), "missing CMD is a usage error");
}

#[test]
fn verbose_report_has_gnu_labels_and_storage_bytes() {
    let _serial = serial();
    let out = run_kdiag(&["time", "-v", "--", "true"]);
    assert!(out.status.success());
    let text = stderr(&out);
    for label in [
        "Command being timed: \"true\"",
        "Maximum resident set size (kbytes):",
        "Voluntary context switches:",
        "File system outputs:",
        "Storage bytes written (write_bytes):",
        "Exit status: 0",
    ] {
        assert!(text.contains(label), "missing {label}:\n{text}");
    }
}

#[test]
fn kernel_sent_signal_is_recognised() {
    let _serial = serial();
    if !require_root("kernel_sent_signal_is_recognised") {
        return;
    }
    // Soft RLIMIT_CPU: the kernel sends SIGXCPU (SI_KERNEL) after 1 s of CPU.
    let (k, code) = kdiag_time(&["sh", "-c", "ulimit -S -t 1; while :; do :; done"]);
    assert_eq!(code, 128 + 24, "{k}");
    assert_eq!(k["ending"]["name"], "SIGXCPU");
    assert_eq!(k["ending"]["origin"]["code"], 128, "{k}");
    assert_eq!(k["ending"]["sent_by_kernel"], true, "{k}");
}

/// The children of `pid`, from /proc.
fn children(pid: u32) -> Vec<u32> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// The command kdiag `pid` runs (the child of its supervisor), once it has
/// exec'd.
fn wait_for_child(pid: u32) -> u32 {
    let kdiag = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    for _ in 0..100 {
        if let Some(&s) = children(pid).first()
            && let Some(&c) = children(s).first()
            && std::fs::read_link(format!("/proc/{c}/exe")).is_ok_and(|e| e != kdiag)
        {
            return c;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("kdiag {pid} never started its child");
}

fn spawn_timed_sleep(report: &Path) -> std::process::Child {
    kdiag()
        .args(["time", "--json", "-o"])
        .arg(report)
        .args(["--", "sleep", "30"])
        .spawn()
        .unwrap()
}

fn report(path: &PathBuf) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn user_sent_signal_names_the_sender() {
    let _serial = serial();
    if !require_root("user_sent_signal_names_the_sender") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let mut k = spawn_timed_sleep(&path);
    let sleep = wait_for_child(k.id());
    // SAFETY: plain kill(2) on the sleep we just found.
    assert_eq!(unsafe { libc::kill(sleep as i32, libc::SIGKILL) }, 0);
    assert_eq!(k.wait().unwrap().code(), Some(137));
    let r = report(&path);
    assert_eq!(r["ending"]["name"], "SIGKILL");
    assert_eq!(r["ending"]["sent_by_kernel"], false, "{r}");
    assert_eq!(
        r["ending"]["origin"]["sender_pid"],
        std::process::id(),
        "{r}"
    );
}

#[test]
fn sigterm_to_kdiag_reaches_the_command() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let mut k = spawn_timed_sleep(&path);
    wait_for_child(k.id());
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(k.id() as i32, libc::SIGTERM) };
    // kdiag survives, forwards the signal, reports and exits like the child.
    assert_eq!(k.wait().unwrap().code(), Some(143));
    assert_eq!(report(&path)["ending"]["name"], "SIGTERM");
    assert_eq!(instance_of(k.id()), None);
}

/// kdiag `pid`'s tracefs instance (`kdiag-time-PID-START`), if it exists.
fn instance_of(pid: u32) -> Option<PathBuf> {
    let prefix = format!("kdiag-time-{pid}-");
    std::fs::read_dir("/sys/kernel/tracing/instances")
        .ok()?
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
}

#[test]
fn ctrl_c_reaches_the_command_and_kdiag_reports() {
    let _serial = serial();
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    // Its own process group, as a shell job: Ctrl-C signals the whole group.
    let mut k = kdiag()
        .args(["time", "--json", "-o"])
        .arg(&path)
        .args(["--", "sleep", "30"])
        .process_group(0)
        .spawn()
        .unwrap();
    wait_for_child(k.id());
    // SAFETY: plain killpg(2) on the group we just created.
    unsafe { libc::killpg(k.id() as i32, libc::SIGINT) };
    assert_eq!(k.wait().unwrap().code(), Some(130));
    assert_eq!(report(&path)["ending"]["name"], "SIGINT");
    let left = instance_of(k.id());
    assert_eq!(left, None, "left behind");
}

#[test]
fn under_sudo_the_command_runs_as_the_invoker() {
    let _serial = serial();
    if !require_root("under_sudo_the_command_runs_as_the_invoker") {
        return;
    }
    let mut cmd = kdiag();
    cmd.env("SUDO_UID", "65534").env("SUDO_GID", "65534").args([
        "time",
        "--",
        "sh",
        "-c",
        "id -u; id -g; id -G",
    ]);
    with_root_groups(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    // The invoker's own supplementary groups, not root's.
    let groups = command("id").args(["-G", "65534"]).output().unwrap();
    let want = format!("65534\n65534\n{}", stdout(&groups));
    assert_eq!(stdout(&out), want);
}

#[test]
fn a_normal_user_gets_storage_bytes_too() {
    let _serial = serial();
    if !require_root("a_normal_user_gets_storage_bytes_too") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    // A zombie's /proc/PID/io belongs to root: kdiag must open it while the
    // child lives to read it afterwards as a normal user.
    let dir = disk_dir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let of = format!("of={}", dir.path().join("f").display());
    let out = kdiag()
        .uid(65534)
        .gid(65534)
        .args([
            "time",
            "--json",
            "--",
            "dd",
            "if=/dev/zero",
            &of,
            "bs=1M",
            "count=4",
        ])
        .args(["oflag=direct", "status=none"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let k: serde_json::Value = serde_json::from_str(&stderr(&out)).unwrap();
    assert!(f(&k["io"]["write_bytes"]) >= 4.0 * 1024.0 * 1024.0, "{k}");

    // A command that dies at once must not win the race against the open.
    for _ in 0..5 {
        let out = kdiag()
            .uid(65534)
            .gid(65534)
            .args(["time", "--json", "--", "sh", "-c", "kill -9 $$"])
            .output()
            .unwrap();
        let k: serde_json::Value = serde_json::from_str(&stderr(&out)).unwrap();
        assert!(k["io"].is_object(), "{k}");
    }
}

#[test]
fn the_command_inherits_no_extra_descriptors() {
    let _serial = serial();
    let list = ["sh", "-c", "ls /proc/$$/fd"];
    let direct = command(list[0]).args(&list[1..]).output().unwrap();
    let timed = kdiag().args(["time", "--"]).args(list).output().unwrap();
    assert_eq!(stdout(&timed), stdout(&direct));
}

#[test]
fn the_command_starts_with_default_signal_dispositions() {
    let _serial = serial();
    // kdiag ignores SIGPIPE (Rust does) and handles SIGINT/SIGTERM; the
    // command must start as it would from a shell, with none ignored or
    // blocked, or `yes | head` would see EPIPE instead of dying.
    let list = ["grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status"];
    let direct = command(list[0]).args(&list[1..]).output().unwrap();
    let timed = kdiag().args(["time", "--"]).args(list).output().unwrap();
    assert_eq!(stdout(&timed), stdout(&direct));

    // What kdiag was started with ignored stays ignored for the command,
    // as it would without kdiag in between: `nohup kdiag time -- CMD`
    // leaves CMD immune to SIGHUP; and kdiag started with the defaults
    // gives the defaults (SIGPIPE included), whatever it ignores itself.
    let ignored = |sh: &str| -> u64 {
        let out = command("sh")
            .args(["-c", sh, "sh", env!("CARGO_BIN_EXE_kdiag")])
            .output()
            .unwrap();
        let line = stdout(&out);
        let mask = line
            .lines()
            .find_map(|l| l.strip_prefix("SigIgn:"))
            .unwrap_or_else(|| panic!("no SigIgn: {line} {}", stderr(&out)));
        u64::from_str_radix(mask.trim(), 16).unwrap()
    };
    let grep = "exec \"$1\" time -- grep ^SigIgn /proc/self/status";
    let hup = 1 << (libc::SIGHUP - 1);
    let (int, pipe) = (1 << (libc::SIGINT - 1), 1 << (libc::SIGPIPE - 1));
    let nohup = ignored(&format!("trap '' HUP; {grep}"));
    assert_eq!(nohup & (hup | int | pipe), hup, "{nohup:x}");
    let plain = ignored(&format!("trap - HUP INT PIPE; {grep}"));
    assert_eq!(plain & (hup | int | pipe), 0, "{plain:x}");
}
