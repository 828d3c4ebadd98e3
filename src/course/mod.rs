//! Courses: the instructor's secret that gives every learner their own
//! variant of each lab (the model of CS:APP's per-student bomb lab). The
//! course file (`course.toml`, mode 0600) holds a random secret and the
//! course's labs; `token.rs` turns (secret, learner id) into the learner's
//! seed token; `roster.rs` reads the class list. The grader derives each
//! learner's token from their id again, so nothing a learner hands in
//! decides which truth their answers are compared with.

pub mod attest;
pub mod policy;
pub mod roster;
pub mod token;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::user_files::{self, Limits};
pub use token::Token;

/// The course file format this binary reads.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes of secret: 256 bits, as many as HMAC-SHA256 uses.
const SECRET_BYTES: usize = 32;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CourseFile {
    format_version: u32,
    /// Hex; never printed by any command.
    secret: String,
    labs: Vec<String>,
    /// The most times `check` may judge one question on a course server
    /// (attested runs; none: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_attempts: Option<u32>,
    /// Accounts that administer the course server (beside the sudo,
    /// admin and wheel groups): kdiag's learner policy does not apply to
    /// them (`course::policy`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    admins: Vec<String>,
}

/// A loaded course.
#[derive(Clone)]
pub struct Course {
    /// Where it was read from, for messages.
    pub path: PathBuf,
    secret: Vec<u8>,
    pub labs: Vec<String>,
    pub max_attempts: Option<u32>,
    pub admins: Vec<String>,
    /// The file as read (what `course install` copies).
    text: String,
}

impl std::fmt::Debug for Course {
    // The secret stays out of logs and panics.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Course")
            .field("path", &self.path)
            .field("labs", &self.labs)
            .finish_non_exhaustive()
    }
}

impl Course {
    /// A new course with a fresh random secret (not written anywhere).
    pub fn generate(labs: Vec<String>) -> anyhow::Result<Course> {
        Ok(Course {
            path: PathBuf::new(),
            secret: random_bytes(SECRET_BYTES)?,
            labs,
            max_attempts: None,
            admins: Vec::new(),
            text: String::new(),
        })
    }

    /// Write the course to `path`, which must not exist, readable by its
    /// owner only: anyone with the secret can derive every learner's truth.
    pub fn create(&self, path: &Path) -> anyhow::Result<()> {
        match std::fs::symlink_metadata(path) {
            // A usage error (exit 2): the command asked for something kdiag
            // will not do.
            Ok(_) => {
                return Err(crate::error::usage(format!(
                    "{} already exists; kdiag will not replace a course's secret \
                     (every seed handed out depends on it): choose another --out",
                    path.display()
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot use {}", path.display())),
        }
        let text = format!(
            "# kdiag course file: keep it secret (mode 0600) and keep it safe.\n\
             # Its secret derives every learner's seed (kdiag course seeds) and the\n\
             # truth their answers are graded against; losing it loses the variants.\n{}",
            toml::to_string(&CourseFile {
                format_version: FORMAT_VERSION,
                secret: hex(&self.secret),
                labs: self.labs.clone(),
                max_attempts: self.max_attempts,
                admins: self.admins.clone(),
            })?
        );
        let mut file = user_files::create_mode(path, 0o600)?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.flush())
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(())
    }

    /// Read a course file (as the user who runs kdiag).
    pub fn load(path: &Path) -> anyhow::Result<Course> {
        let text = user_files::read_to_string(path, &Limits::input())
            .map_err(anyhow::Error::from)
            .context("cannot read the course file (kdiag course init makes one)")?;
        Course::parse(path, &text)
    }

    /// A course file's text, read from `path`.
    pub fn parse(path: &Path, text: &str) -> anyhow::Result<Course> {
        let name = path.display().to_string();
        let file: CourseFile = crate::error::parse_toml(&name, text)?;
        if file.format_version > FORMAT_VERSION {
            anyhow::bail!(
                "{name} has format_version {}; this kdiag reads up to {FORMAT_VERSION}: update kdiag",
                file.format_version
            );
        }
        let secret = unhex(&file.secret)
            .filter(|s| s.len() >= 16)
            .with_context(|| {
                format!("{name}: the secret is not the hex kdiag course init writes")
            })?;
        Ok(Course {
            path: path.to_path_buf(),
            secret,
            labs: file.labs,
            max_attempts: file.max_attempts,
            admins: file.admins,
            text: text.to_string(),
        })
    }

    /// The key that signs attested bundles: derived from the secret, for
    /// that use only.
    fn attestation_key(&self) -> Vec<u8> {
        use hmac::{Hmac, Mac};
        let mut mac =
            Hmac::<sha2::Sha256>::new_from_slice(&self.secret).expect("HMAC takes any key length");
        mac.update(b"kdiag attestation key v1\0");
        mac.finalize().into_bytes().to_vec()
    }

    /// The seed token of learner `id`.
    pub fn token(&self, id: &str) -> Token {
        token::learner_token(&self.secret, id)
    }

    /// Whether `token` is learner `id`'s.
    pub fn verify(&self, id: &str, token: &Token) -> bool {
        &self.token(id) == token
    }
}

/// `n` bytes from the kernel's random generator (getrandom(2), which
/// blocks only until the pool is first initialised).
fn random_bytes(n: usize) -> anyhow::Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    let mut filled = 0;
    while filled < n {
        // SAFETY: the pointer and length describe the unfilled tail of buf.
        let got = unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), n - filled, 0) };
        if got < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e).context("cannot get random bytes from the kernel (getrandom)");
        }
        filled += got as usize;
    }
    Ok(buf)
}

/// Seconds since the epoch.
fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    let s = s.trim();
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_course_file_round_trips_private_and_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("course.toml");
        let course = Course::generate(vec!["0-demo".into()]).unwrap();
        course.create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        let back = Course::load(&path).unwrap();
        assert_eq!(back.labs, ["0-demo"]);
        assert_eq!(back.token("ada"), course.token("ada"));
        assert!(back.verify("ada", &course.token("ada")));
        assert!(!back.verify("bob", &course.token("ada")));
        let e = course.create(&path).unwrap_err();
        assert!(e.to_string().contains("already exists"), "{e}");
        assert!(!format!("{course:?}").contains(&hex(&course.secret)));
        // Two courses never share a secret.
        let other = Course::generate(vec![]).unwrap();
        assert_ne!(other.token("ada"), course.token("ada"));
    }

    #[test]
    fn a_damaged_secret_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("course.toml");
        std::fs::write(&path, "format_version = 1\nsecret = \"zz\"\nlabs = []\n").unwrap();
        let e = Course::load(&path).unwrap_err();
        assert!(format!("{e:#}").contains("secret"), "{e:#}");
    }
}
