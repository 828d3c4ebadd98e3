//! Where a learner's lab files live: per user, not per directory, so
//! `kdiag answer` works from anywhere. `$XDG_STATE_HOME/kdiag/labs/LAB`
//! (default `~/.local/state/kdiag/labs/LAB`); under sudo the invoking
//! user's home, never root's; `--dir DIR` puts the labs in DIR instead.
//!
//! The folder holds `answers.toml` (the learner's), `progress.toml` (the
//! lab's own notes: seed, the last run's PID, steps done) and
//! `workload.log`. None of it is truth: the grader reads the answers and
//! the files they point to, and recomputes everything else from the seed.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::sys::process::privilege;
use crate::user_files::{self, Limits, UserFileError};

/// The folder holding every lab's folder: `dir` when given, else the
/// user's state directory.
pub fn root(dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(d) = dir {
        return Ok(std::path::absolute(d)?);
    }
    let xdg = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    let base = match privilege::invoker() {
        // sudo resets the environment unless told to keep it: an
        // XDG_STATE_HOME that survived is the user's; HOME may be root's.
        Some(who) => match xdg {
            Some(x) => x,
            None => home_of(who.uid)
                .context("cannot find your home directory (as the sudo invoker): give --dir DIR")?
                .join(".local/state"),
        },
        None => match xdg {
            Some(x) => x,
            None => std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                // SAFETY: getuid cannot fail.
                .or_else(|| home_of(unsafe { libc::getuid() }))
                .context("cannot find your home directory ($HOME): give --dir DIR")?
                .join(".local/state"),
        },
    };
    Ok(base.join("kdiag/labs"))
}

/// The home directory of `uid` from the password database.
fn home_of(uid: libc::uid_t) -> Option<PathBuf> {
    let mut buf = vec![0 as libc::c_char; 4096];
    // SAFETY: zeroed passwd is a valid out-parameter.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: valid pointers, buf's length passed along.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 || result.is_null() || pwd.pw_dir.is_null() {
        return None;
    }
    // SAFETY: on success pw_dir points to a NUL-terminated string in buf.
    let dir = unsafe { std::ffi::CStr::from_ptr(pwd.pw_dir) };
    Some(PathBuf::from(dir.to_string_lossy().into_owned())).filter(|p| p.is_absolute())
}

/// One lab's folder.
#[derive(Debug, Clone)]
pub struct LabDir {
    pub path: PathBuf,
}

impl LabDir {
    pub fn new(root: &Path, lab: &str) -> LabDir {
        LabDir {
            path: root.join(lab),
        }
    }

    pub fn answers(&self) -> PathBuf {
        self.path.join("answers.toml")
    }

    pub fn progress(&self) -> PathBuf {
        self.path.join("progress.toml")
    }

    pub fn log(&self) -> PathBuf {
        self.path.join("workload.log")
    }

    pub fn attempts(&self) -> PathBuf {
        self.path.join("attempts.toml")
    }

    /// Create the folder (as the user, 0700: classmates on a shared
    /// machine cannot read a learner's answers, seed or evidence).
    pub fn create(&self) -> anyhow::Result<()> {
        user_files::create_private_dir(&self.path)?;
        Ok(())
    }

    /// The files here a reset clears that exist: the learner's answers, the
    /// lab's notes, the workload's log and the evidence the app saved.
    /// Anything else the learner put there stays.
    pub fn resettable(&self) -> Vec<PathBuf> {
        const RESET_FILES: &[&str] = &[
            "answers.toml",
            "progress.toml",
            "workload.log",
            "profile.folded",
            "iosnoop.json",
        ];
        RESET_FILES
            .iter()
            .map(|f| self.path.join(f))
            .filter(|p| p.symlink_metadata().is_ok())
            .collect()
    }
}

/// Record `value` for `key` in the lab's answers file, as the user (what
/// `kdiag answer` and the lab app both do): a file named as evidence
/// (`artifact`) by its absolute path, so it is found from any directory.
/// The value as recorded.
pub fn record(dir: &LabDir, key: &str, value: &str, artifact: bool) -> anyhow::Result<String> {
    let file = dir.answers();
    let mut answers = crate::grade::answers::Answers::load(&file)?;
    if artifact {
        let path = std::path::absolute(value)?;
        answers.set_text(key, &path.display().to_string())?;
    } else {
        answers.set(key, value)?;
    }
    dir.create()?;
    user_files::write_private(&file, answers.to_toml())?;
    Ok(answers.get(key).unwrap_or_default())
}

/// The lab's notes on where the learner is. Only the lab reads them, to
/// resume and to say what changed; no score depends on them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// The seed token of the learner's runs.
    #[serde(default)]
    pub seed: String,
    /// The workload's PID in the last run.
    #[serde(default)]
    pub pid: Option<u32>,
    /// Steps whose checks all passed, in order.
    #[serde(default)]
    pub done: Vec<String>,
}

impl Progress {
    /// Read the notes; missing or damaged ones are a fresh start.
    pub fn load(path: &Path) -> Progress {
        match user_files::read_to_string(path, &Limits::input()) {
            Ok(text) => toml::from_str(&text).unwrap_or_default(),
            Err(UserFileError::NotFound(_)) => Progress::default(),
            Err(_) => Progress::default(),
        }
    }

    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        let text = format!(
            "# kdiag lab progress: the lab's own notes (your answers are in answers.toml).\n{}",
            toml::to_string(self)?
        );
        user_files::write_private(path, text)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_dir_wins_and_is_absolute() {
        let r = root(Some(Path::new("rel"))).unwrap();
        assert!(r.is_absolute() && r.ends_with("rel"), "{}", r.display());
        assert_eq!(
            LabDir::new(&r, "0-demo").answers(),
            r.join("0-demo/answers.toml")
        );
    }

    #[test]
    fn the_default_is_under_the_state_directory() {
        // Without sudo (the tests do not run through it) it comes from
        // XDG_STATE_HOME or HOME, and is the same from any directory.
        let r = root(None).unwrap();
        assert!(r.ends_with("kdiag/labs"), "{}", r.display());
        assert!(r.is_absolute());
        assert!(home_of(0).is_some());
    }

    #[test]
    fn progress_round_trips_and_tolerates_damage() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("progress.toml");
        assert_eq!(Progress::load(&p), Progress::default());
        let prog = Progress {
            seed: "abcd-efgh-jkmn".into(),
            pid: Some(42),
            done: vec!["who".into()],
        };
        prog.save(&p).unwrap();
        assert_eq!(Progress::load(&p), prog);
        std::fs::write(&p, "pid = = 3").unwrap();
        assert_eq!(Progress::load(&p), Progress::default());
    }
}
