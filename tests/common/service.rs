//! A `kdiag serve` of the test's own: on a socket in a folder of its own
//! (never /run/kdiag, so that no other kdiag on the machine is served by
//! it), killed with the test, SIGKILL included.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::kdiag;

pub struct Service {
    child: Child,
    dir: tempfile::TempDir,
}

impl Service {
    /// `kdiag ARGS --socket SOCKET` (ARGS: `serve` and its options).
    pub fn start(args: &[String]) -> Service {
        let dir = tempfile::tempdir().unwrap();
        // The users reach the socket through it, as through /run/kdiag.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let socket = dir.path().join("kdiag.sock");
        let mut cmd = kdiag();
        cmd.args(args).arg("--socket").arg(&socket);
        // SAFETY: prctl is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                (libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0)
                    .then_some(())
                    .ok_or_else(std::io::Error::last_os_error)
            });
        }
        // Its log (a line per run) would only crowd the test's output.
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("kdiag serve starts");
        let t = Instant::now();
        while !socket.exists() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the service never made its socket"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Service { child, dir }
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("kdiag.sock")
    }

    /// kdiag run by (uid, gid), with no sudo and no capabilities, asking
    /// this service.
    pub fn kdiag_as(&self, uid: u32, gid: u32) -> Command {
        let mut cmd = kdiag();
        cmd.uid(uid).gid(gid).env("KDIAG_SOCKET", self.socket());
        cmd
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
