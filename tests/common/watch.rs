//! Helpers of the watch tests: a child killed at the end, a wait with a
//! deadline, a child's log read line by line (their cgroups: `OwnCg`).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child killed (and reaped) when the test ends, however it ends.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `kdiag watch --interval 1 --group-by cgroup --cgroup DIR`: a scan a
/// second of the cgroups below DIR, a group each; the caller adds the
/// exporters and the output's handling.
pub fn watch_cgroups(dir: &Path) -> Command {
    let mut c = super::kdiag();
    c.args([
        "watch",
        "--interval",
        "1",
        "--group-by",
        "cgroup",
        "--cgroup",
    ])
    .arg(dir);
    c
}

/// Poll `f` every 500 ms until it gives Some, for at most `limit`.
pub fn within<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "no {what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

pub use super::own_cgroup::OwnCg;

/// A child's log (stderr), line by line, read on a thread (a read blocks).
pub fn log_lines(child: &mut Guard) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.0.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// A shell in `cpu` (given the largest weight, so it never waits for a
/// CPU) and in a blkio cgroup of its own limiting reads to 100 IOPS on the
/// disk of a 16 MiB file (`common::direct_read_file(file)`), that sleeps
/// `idle_s` and then execs dd's 4 KiB O_DIRECT reads of the file: idle,
/// then storage-bound whatever else loads the machine. The shell (dd after
/// the exec, its pid the same) and the blkio cgroup, which must outlive it.
pub fn turns_storage_bound(cpu: &OwnCg, file: &str, idle_s: u32) -> (Guard, OwnCg) {
    let file = super::direct_read_file(file);
    let disk = kdiag::sys::cgroup::disk_of(&file).unwrap();
    cpu.set("cpu.shares", "262144");
    let blkio = OwnCg::new("blkio");
    blkio.set(
        "blkio.throttle.read_iops_device",
        &format!("{}:{} 100", disk.major, disk.minor),
    );
    let script = format!(
        "echo $$ > {} && echo $$ > {} && sleep {idle_s} && exec dd if={} of=/dev/null bs=4k iflag=direct",
        cpu.dir.join("cgroup.procs").display(),
        blkio.dir.join("cgroup.procs").display(),
        file.display()
    );
    let shell = quiet_shell(&script);
    let pid = shell.0.id() as i32;
    within(Duration::from_secs(5), "the shell in its cgroup", || {
        cpu.pids().contains(&pid).then_some(())
    });
    (shell, blkio)
}

/// `sh -c SCRIPT`, its output dropped, killed when the test ends.
pub fn quiet_shell(script: &str) -> Guard {
    Guard(
        super::command("sh")
            .args(["-c", script])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// tests/programs/SCRIPT (a Python receiver) on `port` (None: a free one),
/// its port, and its requests as they come (a JSON line each); None, the
/// test skipped, where python3's opentelemetry-proto is missing (the OTLP
/// receiver's types), which CI=true forbids.
pub fn receiver(
    test: &str,
    script: &str,
    port: Option<u16>,
) -> Option<(Guard, u16, std::sync::mpsc::Receiver<serde_json::Value>)> {
    let probe = super::command("python3")
        .args([
            "-c",
            "import opentelemetry.proto.collector.profiles.v1development, google.protobuf.unknown_fields",
        ])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        assert!(
            !super::in_ci(),
            "{test}: needs python3 -m pip install opentelemetry-proto, and CI=true forbids skipping"
        );
        eprintln!("SKIPPED {test}: python3's opentelemetry-proto is not installed");
        return None;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(script);
    let mut cmd = super::command("python3");
    cmd.arg(path).stdout(Stdio::piped());
    if let Some(p) = port {
        cmd.arg(p.to_string());
    }
    let mut child = Guard(cmd.spawn().unwrap());
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let port: u16 = lines.next().unwrap().unwrap().trim().parse().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let _ = tx.send(serde_json::from_str(&line).unwrap());
        }
    });
    Some((child, port, rx))
}
