//! `kdiag ps` against procps's `ps aux` on a machine with 2,000+ processes
//! (started here, as paused children, and killed at the end).

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{machine, median, time, write_section};

const CHILDREN: usize = 2000;
const RUNS: usize = 15;

/// Paused children, killed and reaped on drop.
struct Children(Vec<libc::pid_t>);

impl Drop for Children {
    fn drop(&mut self) {
        for &pid in &self.0 {
            // SAFETY: signalling and reaping our own children.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
        }
    }
}

fn start_children(n: usize) -> Children {
    let mut kids = Children(Vec::with_capacity(n));
    for _ in 0..n {
        // SAFETY: the child only calls async-signal-safe pause and _exit.
        match unsafe { libc::fork() } {
            0 => unsafe {
                libc::pause();
                libc::_exit(0);
            },
            -1 => panic!("fork: {}", std::io::Error::last_os_error()),
            pid => kids.0.push(pid),
        }
    }
    kids
}

/// Wall time of one run of `cmd`, output discarded (as a pipe would).
fn run(cmd: &str, args: &[&str]) -> (Duration, usize) {
    let (out, d) = time(|| {
        Command::new(cmd)
            .args(args)
            .stderr(Stdio::inherit())
            .output()
            .expect("command runs")
    });
    assert!(out.status.success(), "{cmd} {args:?} failed");
    (d, out.stdout.iter().filter(|&&b| b == b'\n').count())
}

fn main() {
    let kdiag = env!("CARGO_BIN_EXE_kdiag");
    let _kids = start_children(CHILDREN);
    std::thread::sleep(Duration::from_millis(200));
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let (mut lines_ours, mut lines_theirs) = (0, 0);
    // Alternate so both see the same machine load.
    for _ in 0..RUNS {
        let (d, n) = run(kdiag, &["ps"]);
        ours.push(d);
        lines_ours = n;
        let (d, n) = run("ps", &["aux"]);
        theirs.push(d);
        lines_theirs = n;
    }
    let (k, p) = (median(ours), median(theirs));
    let ratio = p.as_secs_f64() / k.as_secs_f64();
    let version = Command::new("ps")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    write_section(
        "ps",
        &format!(
            "## kdiag ps vs ps aux\n\n\
             {machine}; {version}; {CHILDREN} extra paused processes started by the benchmark \
             (`cargo bench --bench ps`), median of {RUNS} alternating runs, output to a pipe.\n\n\
             | command | processes listed | median wall time |\n|---|---:|---:|\n\
             | `kdiag ps` | {ko} | {km:.1} ms |\n| `ps aux` | {po} | {pm:.1} ms |\n\n\
             kdiag ps is **{ratio:.2}x** the speed of `ps aux` (above 1 = faster).",
            machine = machine(),
            ko = lines_ours.saturating_sub(1),
            po = lines_theirs.saturating_sub(1),
            km = k.as_secs_f64() * 1e3,
            pm = p.as_secs_f64() * 1e3,
        ),
    );
}
