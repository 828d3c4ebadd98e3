//! The files an answer points to (artifacts: a saved trace, a profile),
//! read the way the answers came: from the learner's disk, or from inside
//! a submission, where a path is relative to the answers file and may not
//! leave the submission (no absolute path, no `..`, no symlink), so a
//! submission can only be graded on the evidence it carries.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use crate::user_files::{self, Limits};

/// The largest artifact kdiag reads: a few seconds of a trace is far less.
pub const MAX_ARTIFACT_BYTES: u64 = 8 << 20;

#[derive(Debug, Clone)]
pub enum Evidence {
    /// Files on disk; relative paths are against `base` (the answers
    /// file's folder). `confined`: a submission's folder, whose answers may
    /// only name files inside it.
    Dir { base: PathBuf, confined: bool },
    /// A submission archive's files, by their relative path.
    Files(BTreeMap<String, Vec<u8>>),
}

impl Evidence {
    /// The file an answer names, or why it cannot be used.
    pub fn read(&self, answer: &str) -> Result<Vec<u8>, String> {
        let answer = answer.trim();
        match self {
            Evidence::Dir {
                base,
                confined: false,
            } => {
                let path = base.join(answer);
                user_files::read(&path, &Limits::input().max(MAX_ARTIFACT_BYTES))
                    .map_err(|e| e.to_string())
            }
            Evidence::Dir {
                base,
                confined: true,
            } => {
                let rel = relative(answer)?;
                let path = base.join(rel);
                user_files::read(&path, &Limits::submission().max(MAX_ARTIFACT_BYTES))
                    .map_err(|e| e.to_string())
            }
            Evidence::Files(files) => {
                let rel = relative(answer)?;
                files
                    .get(rel.to_str().unwrap_or_default())
                    .cloned()
                    .ok_or_else(|| format!("{answer}: not in the submission"))
            }
        }
    }
}

/// `answer` as a path inside a submission: relative, without `..`.
pub fn relative(answer: &str) -> Result<PathBuf, String> {
    let path = Path::new(answer);
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!(
                    "{answer}: a submission names its files relative to its answers.toml \
                     (kdiag lab submit copies them in)"
                ));
            }
            Component::ParentDir => {
                return Err(format!("{answer}: a submission's files must be inside it"));
            }
        }
    }
    if out.as_os_str().is_empty() {
        return Err(format!("{answer:?} is not a file name"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn submissions_read_only_what_they_carry() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("artifacts")).unwrap();
        std::fs::write(d.path().join("artifacts/p.folded"), "a;b 1\n").unwrap();
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(outside.path(), "secret").unwrap();
        std::os::unix::fs::symlink(outside.path(), d.path().join("link")).unwrap();

        let sub = Evidence::Dir {
            base: d.path().into(),
            confined: true,
        };
        assert_eq!(sub.read("artifacts/p.folded").unwrap(), b"a;b 1\n");
        assert_eq!(sub.read("./artifacts/p.folded").unwrap(), b"a;b 1\n");
        assert!(sub.read(&outside.path().display().to_string()).is_err());
        assert!(sub.read("../x").unwrap_err().contains("inside it"));
        assert!(sub.read("link").unwrap_err().contains("symbolic link"));

        // The learner's own answers may name any file they can read.
        let own = Evidence::Dir {
            base: d.path().into(),
            confined: false,
        };
        assert_eq!(
            own.read(&outside.path().display().to_string()).unwrap(),
            b"secret"
        );
        assert_eq!(own.read("link").unwrap(), b"secret");

        let files = Evidence::Files(BTreeMap::from([("artifacts/p".to_string(), b"x".to_vec())]));
        assert_eq!(files.read("./artifacts/p").unwrap(), b"x");
        assert!(files.read("/artifacts/p").is_err());
        assert!(files.read("artifacts/q").is_err());
    }
}
