//! A lab's workload process: run as the invoking user under kdiag's
//! supervisor, like any command kdiag starts, so that it and everything it
//! forks die with kdiag (SIGKILL included; a workload removes its scratch
//! files on the SIGTERM that comes first).

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use crate::model::exec::Exit;
use crate::sys::process::spawn::{HeldChild, Options};
use crate::user_files;
use crate::workloads;

pub struct Workload {
    child: HeldChild,
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
        let output = match log {
            Some(log) => user_files::create_mode(log, 0o600)?,
            None => std::fs::OpenOptions::new().write(true).open("/dev/null")?,
        };
        let mut argv: Vec<OsString> = vec![path.clone().into()];
        argv.extend(args.iter().map(OsString::from));
        argv.extend(["--seed", token, "--duration", "0"].map(OsString::from));
        let options = Options {
            // Beside the lab's own screen: never handed the terminal.
            foreground: false,
            output: Some(output.as_raw_fd()),
            identity: None,
        };
        let mut child = HeldChild::spawn_with(&argv, options)
            .with_context(|| format!("cannot start {}", path.display()))?;
        drop(output);
        let throttle = match read_iops {
            Some(iops) => {
                let t = workloads::throttle(name, args, iops)
                    .map_err(|e| anyhow::anyhow!(workloads::throttle_advice(name, &e)))?;
                // As root, before it runs (and becomes the invoker).
                t.cgroup.add(child.pid)?;
                Some(t)
            }
            None => None,
        };
        child.release().context("starting the workload")?;
        if let Some(e) = child.exec_error()? {
            anyhow::bail!("cannot run {}: {e}", path.display());
        }
        Ok(Workload {
            child,
            _throttle: throttle,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.pid
    }

    /// How it ended, if it has ended.
    pub fn exited(&mut self) -> Option<String> {
        let status = self.child.try_wait()?;
        Some(crate::render::exec::exit_text(&Exit::from_status(status)))
    }

    /// SIGTERM, then SIGKILL after 5 s, to it and all it started; reaped.
    pub fn stop(&mut self) {
        self.child.stop(Duration::from_secs(5));
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop();
    }
}
