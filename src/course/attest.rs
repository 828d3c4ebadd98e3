//! Attestation on a course server: learners without root run kdiag through
//! a sudoers rule, and a course installed by root (`kdiag course install`)
//! lets kdiag vouch for what it saw. Running as root for the learner, kdiag
//! takes their identity from the account that invoked sudo (SUDO_UID: sudo
//! sets it, the learner cannot), journals every `check` and `answer` in a
//! root-owned journal per learner and lab, and signs the bundle `lab
//! submit` writes with a key derived from the course secret, which only
//! root can read. `grade --course` verifies the signature: a bundle edited
//! after signing, or signed for another learner, is not attested.
//!
//! On a learner's own machine, where they are root, none of this holds:
//! root reads the key and writes the journal (docs/SECURITY.md).

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::Context;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::roster::Roster;
use super::{Course, hex, unhex};
use crate::sys::process::privilege;

/// Root's directory of kdiag state on a course server.
pub const STATE_DIR: &str = "/var/lib/kdiag";
/// The attestation a signed bundle carries.
pub const FILE: &str = "attestation.toml";
const FORMAT_VERSION: u32 = 1;

/// The installed course (root's, 0600).
pub fn installed_path() -> PathBuf {
    Path::new(STATE_DIR).join("course.toml")
}

/// Which login is which learner (root's, 0600), when the course was
/// installed with a roster.
fn learners_path() -> PathBuf {
    Path::new(STATE_DIR).join("learners.toml")
}

/// `kdiag course install`: copy the course file (read as the user running
/// kdiag) to root's state directory, 0600 in a 0711 directory (anyone may
/// see that a course is installed, no one but root what it holds), and
/// record which login is which learner of `roster`. For the server's
/// administrator only: `policy::require_admin` first.
pub fn install(course: &Course, roster: Option<&Roster>) -> anyhow::Result<PathBuf> {
    if !privilege::is_root() {
        return Err(crate::error::missing(
            "kdiag course install writes root's state: run it as root or through sudo",
        ));
    }
    let logins = roster.map(|r| r.logins("the roster")).transpose()?;
    let dir = Path::new(STATE_DIR);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o711)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    root_only(dir)?;
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o711))?;
    write_root_file(&installed_path(), course.text.as_bytes())?;
    match logins {
        Some(map) => write_root_file(&learners_path(), toml::to_string(&map)?.as_bytes())?,
        None => match std::fs::remove_file(learners_path()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        },
    }
    Ok(installed_path())
}

/// Replace `to` (in root's state directory) with `data`, root's, 0600.
fn write_root_file(to: &Path, data: &[u8]) -> anyhow::Result<()> {
    let tmp = to.with_extension("new");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    f.write_all(data)?;
    f.sync_all()?;
    std::fs::rename(&tmp, to).with_context(|| format!("cannot write {}", to.display()))
}

/// Whether a course is installed on this machine. Anyone can tell (the
/// state directory is 0711); an error reading it counts as installed.
pub fn is_installed() -> bool {
    match std::fs::symlink_metadata(installed_path()) {
        Ok(_) => true,
        Err(e) => {
            e.kind() != std::io::ErrorKind::NotFound
            // A 0700 directory from an older kdiag hides it from learners.
            && e.kind() != std::io::ErrorKind::PermissionDenied
        }
    }
}

/// A root-only file of the state directory, read (as root).
fn read_root_file(path: &Path) -> anyhow::Result<String> {
    root_only(Path::new(STATE_DIR))?;
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.is_file() || meta.uid() != 0 || meta.mode() & 0o077 != 0 {
        anyhow::bail!(
            "{} is not root's own 0600 file: the administrator runs kdiag course install again",
            path.display()
        );
    }
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// The installed course, when there is one and kdiag runs as root.
pub fn installed() -> anyhow::Result<Option<Course>> {
    let path = installed_path();
    if !privilege::is_root() || std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    Ok(Some(Course::parse(&path, &read_root_file(&path)?)?))
}

/// A directory of root's that no one else can write (or a symlink planted).
fn root_only(dir: &Path) -> anyhow::Result<()> {
    let m = std::fs::symlink_metadata(dir)?;
    if !m.is_dir() || m.uid() != 0 || m.mode() & 0o022 != 0 {
        anyhow::bail!(
            "{} is not a directory of root's that only root can write: remove it",
            dir.display()
        );
    }
    Ok(())
}

/// kdiag running as root for a sudo learner, with a course installed.
pub struct Server {
    course: Course,
    uid: u32,
    /// The learner's id in the course: their login, or the roster's id
    /// for it when the course was installed with a roster.
    pub learner: String,
}

impl Server {
    /// The course server for learner account `uid` (`policy::caller`
    /// decides who is a learner): the installed course, and the learner
    /// id of the account's login.
    pub fn open(course: Course, uid: u32) -> anyhow::Result<Server> {
        let login =
            privilege::user_name(uid).with_context(|| format!("uid {uid} has no user name"))?;
        let learner = match std::fs::symlink_metadata(learners_path()) {
            Err(_) => login,
            Ok(_) => {
                let map: BTreeMap<String, String> = crate::error::parse_toml(
                    &learners_path().display().to_string(),
                    &read_root_file(&learners_path())?,
                )?;
                map.get(&login).cloned().ok_or_else(|| {
                    crate::error::usage(format!(
                        "your account {login} is not in this course's roster: ask your \
                         instructor to add it (kdiag course install --roster)"
                    ))
                })?
            }
        };
        Ok(Server {
            course,
            uid,
            learner,
        })
    }

    /// The learner's seed: their login name's course token.
    pub fn token(&self) -> super::Token {
        self.course.token(&self.learner)
    }

    /// The most checks of one question the course allows (None: no limit).
    pub fn max_attempts(&self) -> Option<u32> {
        self.course.max_attempts
    }

    fn journal_path(&self, lab: &str) -> PathBuf {
        Path::new(STATE_DIR)
            .join("journal")
            .join(self.uid.to_string())
            .join(format!("{lab}.journal"))
    }

    /// Append one entry to the learner's journal of `lab`.
    pub fn record(&self, lab: &str, entry: &Entry) -> anyhow::Result<()> {
        let path = self.journal_path(lab);
        let dir = path.parent().expect("a journal has a folder");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .with_context(|| format!("cannot write the journal {}", path.display()))?;
        f.write_all(entry.line().as_bytes())
            .with_context(|| format!("cannot write the journal {}", path.display()))
    }

    /// The journal of `lab` as written ("" before anything was journaled).
    pub fn journal(&self, lab: &str) -> anyhow::Result<String> {
        match std::fs::read_to_string(self.journal_path(lab)) {
            Ok(t) => Ok(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(e).context("cannot read the journal"),
        }
    }

    /// How often each question of `lab` was checked.
    pub fn attempts(&self, lab: &str) -> anyhow::Result<BTreeMap<String, u32>> {
        Ok(attempts(&self.journal(lab)?))
    }

    /// The attestation of a bundle of `files` (name, bytes) for `lab`.
    pub fn sign(&self, lab: &str, files: &[(String, Vec<u8>)]) -> anyhow::Result<Vec<u8>> {
        let mut a = Attestation {
            format_version: FORMAT_VERSION,
            learner: self.learner.clone(),
            lab: lab.to_string(),
            journal: self.journal(lab)?,
            signature: String::new(),
        };
        let hashes = files
            .iter()
            .map(|(n, d)| (n.clone(), sha256_hex(d)))
            .collect();
        a.signature = hex(&a.mac(&self.course, &hashes).finalize().into_bytes());
        Ok(toml::to_string(&a)?.into_bytes())
    }
}

/// One journal line: when, what, which question, the outcome, and for a
/// check the fingerprint of the answer checked (`lab::attempts`).
pub struct Entry {
    pub kind: &'static str,
    pub key: String,
    pub result: String,
    pub answer: Option<String>,
}

impl Entry {
    fn line(&self) -> String {
        let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
        let answer = self
            .answer
            .as_deref()
            .map(|a| format!("\t{}", clean(a)))
            .unwrap_or_default();
        format!(
            "{}\t{}\t{}\t{}{answer}\n",
            super::now_secs(),
            self.kind,
            clean(&self.key),
            clean(&self.result)
        )
    }
}

/// Attempts per question in a journal's text: its check lines.
pub fn attempts(journal: &str) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    for line in journal.lines() {
        if let ["check", key, ..] = line.split('\t').skip(1).collect::<Vec<_>>().as_slice() {
            *out.entry(key.to_string()).or_default() += 1;
        }
    }
    out
}

/// The fingerprint of the last answer counted for each question.
pub fn last_answers(journal: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in journal.lines() {
        if let [_, "check", key, _, fp] = line.split('\t').collect::<Vec<_>>().as_slice() {
            out.insert(key.to_string(), fp.to_string());
        }
    }
    out
}

/// The content hashes of the evidence files kdiag recorded itself.
pub fn recorded_evidence(journal: &str) -> Vec<String> {
    journal
        .lines()
        .filter_map(|l| match l.split('\t').collect::<Vec<_>>().as_slice() {
            [_, "evidence", _, hash] => Some(hash.to_string()),
            _ => None,
        })
        .collect()
}

/// What a signed bundle carries beside its files.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attestation {
    pub format_version: u32,
    pub learner: String,
    pub lab: String,
    pub journal: String,
    pub signature: String,
}

impl Attestation {
    /// HMAC over the learner, the lab, every other file of the bundle by
    /// name and content hash (manifest, answers, evidence) and the journal.
    fn mac(&self, course: &Course, hashes: &BTreeMap<String, String>) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&course.attestation_key())
            .expect("HMAC takes any key length");
        mac.update(b"kdiag attestation v1\n");
        mac.update(format!("{}\n{}\n", self.learner, self.lab).as_bytes());
        for (name, hash) in hashes.iter().filter(|(n, _)| n.as_str() != FILE) {
            mac.update(format!("{name}\t{hash}\n").as_bytes());
        }
        mac.update(b"journal\n");
        mac.update(self.journal.as_bytes());
        mac
    }
}

/// What the grader learns from a bundle's attestation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub attested: bool,
    /// Why not, or who and what was attested.
    pub detail: String,
    /// Checks per question, from the journal (attested only).
    pub attempts: BTreeMap<String, u32>,
    /// Content hashes of evidence kdiag recorded itself (attested only).
    pub recorded: Vec<String>,
}

/// Verify the attestation among a bundle's files (`hashes`: name →
/// sha256 hex, the attestation's own text under `FILE`), for `learner`.
pub fn verify(
    course: &Course,
    attestation: Option<&[u8]>,
    hashes: &BTreeMap<String, String>,
    learner: &str,
    lab: &str,
) -> Verdict {
    let not = |why: String| Verdict {
        attested: false,
        detail: why,
        attempts: BTreeMap::new(),
        recorded: Vec::new(),
    };
    let Some(text) = attestation else {
        return not("not attested: no attestation (made outside a course server)".into());
    };
    let a: Attestation = match std::str::from_utf8(text)
        .map_err(|e| e.to_string())
        .and_then(|t| toml::from_str(t).map_err(|e| e.to_string()))
    {
        Ok(a) => a,
        Err(e) => return not(format!("not attested: {FILE} is damaged: {e}")),
    };
    let Some(sig) = unhex(&a.signature) else {
        return not(format!("not attested: {FILE} has no signature"));
    };
    if a.mac(course, hashes).verify_slice(&sig).is_err() {
        return not(
            "not attested: the signature does not match: the bundle was changed after kdiag \
             signed it, or signed with another course's key"
                .into(),
        );
    }
    if a.learner != learner || a.lab != lab {
        return not(format!(
            "not attested: signed for learner {} in lab {}, not {learner} in {lab}",
            a.learner, a.lab
        ));
    }
    Verdict {
        attested: true,
        detail: format!(
            "attested: signed by kdiag on the course server for {}",
            a.learner
        ),
        attempts: attempts(&a.journal),
        recorded: recorded_evidence(&a.journal),
    }
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_covers_every_file_and_the_journal() {
        let course = Course::generate(vec!["0-demo".into()]).unwrap();
        let files: BTreeMap<String, String> = [("answers.toml", "a"), ("manifest.toml", "m")]
            .map(|(n, d)| (n.to_string(), sha256_hex(d.as_bytes())))
            .into();
        let mut a = Attestation {
            format_version: 1,
            learner: "ada".into(),
            lab: "0-demo".into(),
            journal: "1\tcheck\twho.pid\tpassed\n1\tcheck\twho.pid\tfailed\n".into(),
            signature: String::new(),
        };
        a.signature = hex(&a.mac(&course, &files).finalize().into_bytes());
        let text = toml::to_string(&a).unwrap();
        let v = verify(&course, Some(text.as_bytes()), &files, "ada", "0-demo");
        assert!(v.attested, "{}", v.detail);
        assert_eq!(v.attempts["who.pid"], 2);
        // Another learner, an edited answer, an edited journal, another course.
        assert!(!verify(&course, Some(text.as_bytes()), &files, "bob", "0-demo").attested);
        let mut edited = files.clone();
        edited.insert("answers.toml".into(), sha256_hex(b"b"));
        assert!(!verify(&course, Some(text.as_bytes()), &edited, "ada", "0-demo").attested);
        let shorter = text.replace("1\\tcheck\\twho.pid\\tfailed\n", "");
        assert_ne!(shorter, text);
        assert!(!verify(&course, Some(shorter.as_bytes()), &files, "ada", "0-demo").attested);
        let other = Course::generate(vec!["0-demo".into()]).unwrap();
        assert!(!verify(&other, Some(text.as_bytes()), &files, "ada", "0-demo").attested);
        assert!(!verify(&course, None, &files, "ada", "0-demo").attested);
    }
}
