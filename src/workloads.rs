//! The bundled workloads as kdiag finds and runs them: separate binaries
//! (crate workloads/) installed next to kdiag's own executable. Their
//! ground truth comes from the same crate as a library, in-process.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::error;
use crate::model::block::DevId;
use crate::sys::cgroup::{self, Cgroup, CgroupError};
use crate::sys::process::privilege;
use crate::sys::process::spawn::{Forwarder, HeldChild};

/// The bundled workloads: name and what is wrong with it.
pub use kdiag_workloads::WORKLOADS;

/// Where the workloads live: next to kdiag's own executable (a build,
/// target/release), or, as the .deb installs them, in `lib/kdiag` beside
/// the executable's `bin` directory (/usr/bin/kdiag → /usr/lib/kdiag).
pub fn bin_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find kdiag's own executable")?;
    Ok(workloads_dir(exe.parent().unwrap_or(Path::new("/"))))
}

/// The installed layout's directory when the executable's own holds no
/// workload, else the executable's (whose errors then name it).
fn workloads_dir(exe_dir: &Path) -> PathBuf {
    let holds_one = |dir: &Path| kdiag_workloads::names().any(|n| dir.join(n).is_file());
    let installed = exe_dir
        .parent()
        .map(|prefix| prefix.join("lib/kdiag"))
        .filter(|dir| !holds_one(exe_dir) && holds_one(dir));
    installed.unwrap_or_else(|| exe_dir.to_path_buf())
}

fn check_name(name: &str) -> anyhow::Result<()> {
    if kdiag_workloads::names().any(|n| n == name) {
        return Ok(());
    }
    let names: Vec<&str> = kdiag_workloads::names().collect();
    Err(error::usage(format!(
        "no workload named {name:?}; the workloads are: {}",
        names.join(", ")
    )))
}

pub fn binary(name: &str) -> anyhow::Result<PathBuf> {
    check_name(name)?;
    let dir = bin_dir()?;
    let path = dir.join(name);
    if !path.is_file() {
        anyhow::bail!(
            "workload {name} is not built (looked for {}): {}",
            path.display(),
            build_hint(&dir)
        );
    }
    Ok(path)
}

pub fn build_hint(dir: &std::path::Path) -> String {
    format!(
        "build the workloads with `cargo build --release --workspace` \
         (they must sit next to kdiag, in {}; for a debug kdiag use `cargo build --workspace`), \
         or install the kdiag package (which puts them in /usr/lib/kdiag)",
        dir.display()
    )
}

/// A workload's ground truth (`--describe`, JSON text) for the seed token
/// `seed` (course tokens included: callers that show it to a learner must
/// refuse those); `args` are workload arguments that change it (e.g.
/// scheduling's MODE). Computed in-process; no binary is needed.
pub fn ground_truth(name: &str, seed: &str, args: &[String]) -> anyhow::Result<String> {
    check_name(name)?;
    kdiag_workloads::describe(name, seed, args).map_err(error::usage)
}

/// The ground truth of workload `name` for seed `token`, parsed: the one
/// place labs, checks and grading get a learner's truth.
pub fn truth(name: &str, token: &str, args: &[String]) -> anyhow::Result<serde_json::Value> {
    let text = ground_truth(name, token, args)?;
    serde_json::from_str(&text).with_context(|| format!("the ground truth of {name} is not JSON"))
}

/// The read-IOPS limit a workload's truth asks kdiag to apply to its disk
/// before it starts (`expect.throttle_read_iops`), if any.
pub fn read_iops_limit(truth: &serde_json::Value) -> Option<u64> {
    truth["expect"]["throttle_read_iops"].as_u64()
}

/// A cgroup limiting the disk a workload's files live on; the workload's
/// process joins it before it runs (`cgroup.join_on_exec`). Dropping it
/// kills whatever is left in it and removes it.
#[derive(Debug)]
pub struct Throttle {
    pub cgroup: Cgroup,
    pub disk: DevId,
    pub iops: u64,
}

/// Prepare the throttle `iops` for workload `name` started with `args`: a
/// fresh cgroup with that read-IOPS limit on the disk of its scratch
/// directory.
pub fn throttle(name: &str, args: &[String], iops: u64) -> Result<Throttle, CgroupError> {
    let dir = kdiag_workloads::scratch_dir(name, args).unwrap_or_else(|| PathBuf::from("/var/tmp"));
    // Before the cgroup exists, so a bad path leaves nothing to clean up.
    let disk = cgroup::disk_of(&dir)?;
    let cgroup = Cgroup::create()?;
    cgroup.limit_read_iops(disk, iops)?;
    Ok(Throttle { cgroup, disk, iops })
}

/// What to tell a user when a throttle cannot be set up: what is missing
/// and what to do.
pub fn throttle_advice(name: &str, err: &CgroupError) -> String {
    let unfaithful = format!(
        "`{name}` needs its disk slowed down for its process to show what it teaches \
         (threads waiting in D state, idle CPU); without it, pass --no-throttle \
         to run it anyway (its threads then mostly run instead of waiting)"
    );
    match err {
        CgroupError::NotRoot => format!("{err}\n{unfaithful}"),
        CgroupError::NoController(_) => format!(
            "{err}\n{unfaithful}. With cgroup v2 the io controller must be enabled \
             (on systemd it is; check /sys/fs/cgroup/cgroup.controllers lists io)"
        ),
        _ => format!("cannot throttle the disk: {err}\n{unfaithful}"),
    }
}

/// `throttle_advice` as the error `kdiag workload run` ends with: what the
/// machine lacks (not root, no controller) is a missing feature's exit code.
pub fn throttle_error(name: &str, err: CgroupError) -> anyhow::Error {
    let advice = throttle_advice(name, &err);
    match err {
        CgroupError::NotRoot | CgroupError::NoController(_) => error::missing(advice),
        _ => anyhow::anyhow!(advice),
    }
}

impl Throttle {
    /// The line announcing it: its cgroup, its version and the disk by name;
    /// the limit only when it is not a `secret` (a course seed's fact).
    pub fn announcement(&self, name: &str, secret: bool) -> String {
        let disk = crate::sys::disks::names()
            .remove(&self.disk)
            .unwrap_or_else(|| self.disk.to_string());
        let limit = match secret {
            true => String::new(),
            false => format!(" to {}/s", self.iops),
        };
        let version = match self.cgroup.version() {
            cgroup::Version::V2 => 2,
            _ => 1,
        };
        format!(
            "kdiag: {name} runs in cgroup {} (v{version}), its reads from {disk} limited{limit}",
            self.cgroup.path().display(),
        )
    }
}

/// Run the workload at `path` with `args` under kdiag's supervisor, like
/// any `-- CMD` (as the invoker under sudo; it and all it starts die with
/// kdiag, signals sent to kdiag reach it), inside `throttle` if given;
/// kdiag's exit code is its status (128+N if signal N ended it).
pub fn run(path: &Path, args: &[String], throttle: Option<Throttle>) -> anyhow::Result<u8> {
    let mut argv: Vec<std::ffi::OsString> = vec![path.into()];
    argv.extend(args.iter().map(Into::into));
    let forwarder = Forwarder::catch().context("cannot handle signals")?;
    let mut child =
        HeldChild::spawn(&argv).with_context(|| format!("cannot start {}", path.display()))?;
    // Into the throttle as root, before it runs (and becomes the invoker).
    if let Some(t) = &throttle {
        t.cgroup.add(child.pid)?;
    }
    child.release()?;
    if let Some(source) = child.exec_error()? {
        return Err(error::CannotRun {
            program: path.display().to_string(),
            error: source,
        }
        .into());
    }
    let ended = forwarder.wait(&mut child)?;
    drop(child); // kills and reaps whatever the workload left
    drop(throttle); // kills anything left in the cgroup and removes it
    Ok(error::status_exit(ended.status))
}

/// The running kernel's release, and the kernel tree a module is built
/// against: `given`, else that release's headers.
pub fn kernel_tree(given: Option<PathBuf>) -> anyhow::Result<(String, PathBuf)> {
    let release = crate::sys::procfs::kernel_release().context("cannot read the kernel release")?;
    let dir = given.unwrap_or_else(|| PathBuf::from(format!("/lib/modules/{release}/build")));
    Ok((release, dir))
}

/// Build a kernel module's sources in `out` against the kernel tree
/// `kdir` with make, run as the invoker: the folder is theirs.
pub fn make_module(kdir: &Path, out: &Path) -> anyhow::Result<()> {
    let mut make = std::process::Command::new("make");
    make.arg("-C")
        .arg(kdir)
        .arg(format!("M={}", out.display()))
        .arg("modules");
    privilege::run_as_invoker(&mut make);
    let status = make
        .status()
        .context("cannot run make: install make and gcc")?;
    if !status.success() {
        anyhow::bail!("building the module failed (make's output is above)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_are_found_next_to_kdiag_or_in_the_installed_layout() {
        let root = tempfile::tempdir().unwrap();
        let (bin, lib) = (
            root.path().join("usr/bin"),
            root.path().join("usr/lib/kdiag"),
        );
        std::fs::create_dir_all(&bin).unwrap();
        // Nothing anywhere: kdiag's own directory, which the errors name.
        assert_eq!(workloads_dir(&bin), bin);
        std::fs::create_dir_all(&lib).unwrap();
        assert_eq!(workloads_dir(&bin), bin, "an empty lib/kdiag is not chosen");
        std::fs::write(lib.join("io-app"), "").unwrap();
        assert_eq!(workloads_dir(&bin), lib, "the package's layout");
        std::fs::write(bin.join("io-app"), "").unwrap();
        assert_eq!(
            workloads_dir(&bin),
            bin,
            "a build's own workloads come first"
        );
    }

    #[test]
    fn truth_is_computed_in_process() {
        let truth: serde_json::Value =
            serde_json::from_str(&ground_truth("bio", "0", &[]).unwrap()).unwrap();
        assert_eq!(truth["workload"]["name"], "bio");
        assert_eq!(read_iops_limit(&truth), Some(200));
        let quiet: serde_json::Value = serde_json::from_str(
            &ground_truth("bio", "0", &["--no-throttle".to_string()]).unwrap(),
        )
        .unwrap();
        assert_eq!(read_iops_limit(&quiet), None);
        let err = ground_truth("nope", "0", &[]).unwrap_err();
        assert_eq!(error::exit_code(&err), error::USAGE);
        let err = ground_truth("memory", "0", &[]).unwrap_err();
        assert_eq!(error::exit_code(&err), error::USAGE, "{err}");
    }
}
