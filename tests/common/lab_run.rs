//! `kdiag lab LAB --plain` driven through its stdin and stdout, as a
//! script or a screen reader would: one command a line, one reply a line.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use super::{LEARNER, kdiag, kdiag_as_learner};

/// `kdiag lab LAB --plain` running with piped input; its output lines
/// arrive on a channel. Dropping it closes stdin (the lab quits) and reaps
/// kdiag.
pub struct LabRun {
    _one: std::sync::MutexGuard<'static, ()>,
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// The lab's folder (answers, progress) under the test's root.
    pub dir: PathBuf,
    pub lab: String,
    /// Played by the learner through sudo.
    pub learner: bool,
    /// Started from a script with no terminal, its output through `| tee`.
    pub tee: bool,
    /// kdiag's standard error, whole once it has ended.
    stderr: Option<std::thread::JoinHandle<String>>,
    /// Every line kdiag printed that `expect` has read.
    pub transcript: std::cell::RefCell<String>,
}

/// One lab at a time: a workload's scratch directory is per workload, and
/// a second one refuses to start while the first runs.
static ONE_WORKLOAD: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Hold while anything else starts a workload (a self-test's artifacts).
pub fn one_workload() -> std::sync::MutexGuard<'static, ()> {
    ONE_WORKLOAD.lock().unwrap_or_else(|e| e.into_inner())
}

impl LabRun {
    pub fn start(lab: &str, root: &Path, seed: &str) -> LabRun {
        LabRun::start_with(lab, root, seed, None)
    }

    /// The same played by the unprivileged learner through sudo, as on a
    /// course server: `root` becomes theirs, and `kdiag()` runs their
    /// commands as `sudo kdiag`. As root (said loudly) where the learner
    /// and their sudoers rule are missing, outside CI.
    pub fn start_as_learner(lab: &str, root: &Path, seed: &str) -> LabRun {
        let Some((uid, gid)) = super::learner(&format!("{lab} as the learner")) else {
            return LabRun::start(lab, root, seed);
        };
        std::os::unix::fs::chown(root, Some(uid), Some(gid)).unwrap();
        LabRun::start_with(lab, root, seed, Some(None))
    }

    /// The learner's `sudo kdiag lab LAB --plain | tee LOG` run by a
    /// script (`bash -c`) in a session with no terminal at all, as cron or
    /// a CI job would: the commands come on the script's stdin, the
    /// replies through tee. Its exit code is kdiag's. As root, without
    /// tee, where the learner is missing (outside CI).
    pub fn start_as_learner_through_tee(lab: &str, root: &Path, seed: &str, log: &Path) -> LabRun {
        let Some((uid, gid)) = super::learner(&format!("{lab} through tee")) else {
            return LabRun::start(lab, root, seed);
        };
        std::os::unix::fs::chown(root, Some(uid), Some(gid)).unwrap();
        LabRun::start_with(lab, root, seed, Some(Some(log)))
    }

    /// `learner`: None as root, Some(log) as the learner, through tee to
    /// `log` when there is one.
    fn start_with(lab: &str, root: &Path, seed: &str, learner: Option<Option<&Path>>) -> LabRun {
        let guard = one_workload();
        let mut kdiag = match learner {
            None => kdiag(),
            Some(None) => kdiag_as_learner(),
            Some(Some(log)) => {
                let script = format!(
                    "sudo -n {} \"$@\" | tee {}; exit ${{PIPESTATUS[0]}}",
                    env!("CARGO_BIN_EXE_kdiag"),
                    log.display()
                );
                let mut c = super::command("sudo");
                c.args(["-n", "-u", LEARNER, "bash", "-c", &script, "bash"]);
                // SAFETY: setsid(2) is async-signal-safe; a session of its
                // own has no controlling terminal.
                unsafe {
                    c.pre_exec(|| {
                        libc::setsid();
                        Ok(())
                    })
                };
                c
            }
        };
        let mut child = kdiag
            .args(["lab", lab, "--plain", "--seed", seed, "--dir"])
            .arg(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Kept whole for the test, and shown as it comes (with the test's
        // output when it fails).
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let stderr = std::thread::spawn(move || {
            let (mut all, mut line) = (String::new(), String::new());
            while err.read_line(&mut line).is_ok_and(|n| n > 0) {
                eprint!("{line}");
                all.push_str(&line);
                line.clear();
            }
            all
        });
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let run = LabRun {
            _one: guard,
            stdin: child.stdin.take(),
            child,
            lines,
            dir: root.join(lab),
            lab: lab.to_string(),
            learner: learner.is_some(),
            tee: matches!(learner, Some(Some(_))),
            stderr: Some(stderr),
            transcript: Default::default(),
        };
        run.expect("Step 1/");
        run
    }

    pub fn send(&mut self, line: &str) {
        writeln!(self.stdin.as_mut().unwrap(), "{line}").unwrap();
    }

    /// Wait for a line containing `what`; the lines seen on the way.
    pub fn expect(&self, what: &str) -> String {
        let mut seen = String::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            match self.lines.recv_timeout(Duration::from_millis(200)) {
                Ok(l) => {
                    seen.push_str(&l);
                    seen.push('\n');
                    let mut all = self.transcript.borrow_mut();
                    all.push_str(&l);
                    all.push('\n');
                    if l.contains(what) {
                        return seen;
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(_) => break,
            }
        }
        panic!("no {what:?} from kdiag lab; it printed:\n{seen}");
    }

    /// Send `answer KEY VALUE` and return kdiag's reply to it.
    pub fn reply(&mut self, key: &str, value: &str) -> String {
        self.send(&format!("answer {key} {value}"));
        let seen = self.expect(&format!(": {key}"));
        seen.lines()
            .find(|l| l.starts_with("right: ") || l.starts_with("not yet: "))
            .unwrap_or_else(|| panic!("no verdict for {key}: {seen}"))
            .to_string()
    }

    /// The workload's PID, from the lab's progress file.
    pub fn pid(&self) -> u64 {
        let text = std::fs::read_to_string(self.dir.join("progress.toml")).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("pid = "))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// kdiag as the player runs it from their shell: `sudo kdiag` for the
    /// learner, kdiag as root otherwise.
    pub fn kdiag(&self) -> Command {
        if self.learner {
            kdiag_as_learner()
        } else {
            kdiag()
        }
    }

    /// `kdiag answer LAB KEY VALUE`, from outside the lab.
    pub fn answer(&self, key: &str, value: &str) {
        let out = kdiag()
            .args(["answer", &self.lab, key, value, "--dir"])
            .arg(self.dir.parent().unwrap())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }

    /// Close stdin (the lab quits) and return kdiag's exit code.
    pub fn finish(self) -> i32 {
        self.finish_with_stderr().0
    }

    /// The same, and what kdiag wrote on standard error.
    pub fn finish_with_stderr(mut self) -> (i32, String) {
        drop(self.stdin.take());
        let code = self.child.wait().unwrap().code().unwrap_or(-1);
        let err = self.stderr.take().unwrap().join().unwrap();
        (code, err)
    }
}

impl Drop for LabRun {
    /// A failed test still stops its lab before the next one starts: the
    /// next workload would find its scratch directory in use.
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(15);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `pid` runs (a zombie does not count).
pub fn pid_alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// The PID of `lab`'s workload under `root`, from the lab's progress file
/// once written.
pub fn workload_pid(root: &Path, lab: &str) -> u32 {
    let file = root.join(lab).join("progress.toml");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(pid) = std::fs::read_to_string(&file)
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("pid = ")?.trim().parse().ok())
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "no pid in {}", file.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}
