//! A lab's workload process: run as the invoking user, and sent SIGTERM if
//! kdiag dies, so it never outlives the lab (it removes its scratch files
//! itself on SIGTERM).

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;

use crate::sys::process::spawn::terminate;
use crate::sys::process::{privilege, user_files};
use crate::workloads;

pub struct Workload {
    child: Child,
    /// The cgroup slowing its disk, for workloads whose truth asks for one
    /// (bio); removed after the child is stopped.
    _throttle: Option<workloads::Throttle>,
}

impl Workload {
    /// Start workload `name` with `args` for seed `token`, forever
    /// (`--duration 0`), its output going to `log` (None: discarded), in a
    /// cgroup limiting its disk's reads to `read_iops` when its truth asks
    /// for one.
    pub fn start(
        name: &str,
        args: &[String],
        token: &str,
        log: Option<&Path>,
        read_iops: Option<u64>,
    ) -> anyhow::Result<Workload> {
        let path = workloads::binary(name)?;
        let (stdout, stderr) = match log {
            Some(log) => {
                let out = user_files::create(log)?;
                (Stdio::from(out.try_clone()?), Stdio::from(out))
            }
            None => (Stdio::null(), Stdio::null()),
        };
        let mut cmd = Command::new(&path);
        cmd.args(args)
            .args(["--seed", token, "--duration", "0"])
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr);
        let throttle = match read_iops {
            Some(iops) => {
                let t = workloads::throttle(name, args, iops)
                    .map_err(|e| anyhow::anyhow!(workloads::throttle_advice(name, &e)))?;
                // As root, before becoming the invoker.
                t.cgroup.join_on_exec(&mut cmd)?;
                Some(t)
            }
            None => None,
        };
        privilege::run_as_invoker(&mut cmd);
        // After the switch to the invoker: changing credentials clears the
        // parent-death signal.
        // SAFETY: prctl is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", path.display()))?;
        Ok(Workload {
            child,
            _throttle: throttle,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Exit status, if the workload has ended.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM, then SIGKILL after 5 s; reaped either way.
    pub fn stop(&mut self) {
        let child = &mut self.child;
        terminate(child.id(), Duration::from_secs(5), || {
            child.try_wait().ok().flatten().is_some()
        });
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop();
    }
}
