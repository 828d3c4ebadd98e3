//! Self-contained submissions: `answers.toml`, every file its answers
//! point to (copied under `artifacts/`, the answers rewritten to name them
//! relative to the answers file) and `manifest.toml` (lab, kdiag version,
//! learner, seed). As a tar archive or a folder; `kdiag check` and `kdiag
//! grade` read either, so a submission scores the same on the learner's
//! laptop, in `kdiag grade` and in an autograder's container.
//!
//! The manifest is the one place a submission names its learner: `grade`
//! grades the learner it names (who must agree with the roster and with
//! the platform that collected it), with the seed derived from that
//! learner's id; a manifest seed that differs is reported.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::tar;
use crate::course::attest;
use crate::grade::answers::Answers;
use crate::grade::evidence::{Evidence, MAX_ARTIFACT_BYTES};
use crate::grade::{Check, CheckFile};
use crate::user_files::{self, Limits, UserFileError};

pub const ANSWERS: &str = "answers.toml";
pub const MANIFEST: &str = "manifest.toml";
/// The largest archive kdiag opens.
pub const MAX_ARCHIVE_BYTES: u64 = 64 << 20;
const TAR_LIMITS: tar::Limits = tar::Limits {
    max_files: 256,
    max_file_bytes: MAX_ARTIFACT_BYTES,
};

/// The manifest format `lab submit` writes (1 had no seed source or time,
/// 2 no attempts).
pub const MANIFEST_VERSION: u32 = 3;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format_version: u32,
    pub lab: String,
    pub kdiag_version: String,
    /// The learner id the submission is graded as.
    pub learner: String,
    /// The seed the learner's runs used, and where it came from.
    pub seed: String,
    #[serde(default)]
    pub seed_source: SeedSource,
    /// When `lab submit` made it (seconds since the epoch): the newest of
    /// two submissions of one learner is graded.
    #[serde(default)]
    pub created: u64,
    /// Every file of the submission but the manifest.
    pub files: Vec<String>,
    /// Checks per question before submitting, as kdiag counted them in
    /// the lab's folder (None: not recorded, as before format 3). Only a
    /// course server's signed journal makes them attested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<BTreeMap<String, u32>>,
    /// Who counted `attempts`: the course server (attested by the bundle's
    /// signature) or the learner's machine (not attested).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts_counted_by: Option<String>,
}

impl Manifest {
    /// The manifest of a submission made now by this kdiag.
    pub fn new(
        lab: &str,
        learner: &str,
        seed: &str,
        seed_source: SeedSource,
        files: Vec<String>,
    ) -> Manifest {
        Manifest {
            format_version: MANIFEST_VERSION,
            lab: lab.to_string(),
            kdiag_version: env!("CARGO_PKG_VERSION").to_string(),
            learner: learner.to_string(),
            seed: seed.to_string(),
            seed_source,
            created: now(),
            files,
            attempts: None,
            attempts_counted_by: None,
        }
    }
}

/// Where the seed of a learner's runs came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SeedSource {
    /// Given to the lab (--seed or $KDIAG_SEED): a course's token.
    Given,
    /// Derived from the user name: study without a course.
    SelfStudy,
    /// The account's course token, chosen by the course server.
    Course,
    /// A manifest older than the field.
    #[default]
    Unknown,
}

impl std::fmt::Display for SeedSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SeedSource::Given => "given to the lab",
            SeedSource::SelfStudy => "self-study, from the user name",
            SeedSource::Course => "the account's, on the course server",
            SeedSource::Unknown => "not recorded",
        })
    }
}

/// A submission ready to check: the answers, how to read the files they
/// name, and the manifest if there is one.
#[derive(Debug, Clone)]
pub struct Submission {
    pub answers: Answers,
    pub evidence: Evidence,
    pub manifest: Option<Manifest>,
    /// What a course server signed: the attestation's text, and every
    /// file of the bundle by name and sha256 (`course::attest::verify`).
    pub signed: Signed,
}

#[derive(Debug, Clone, Default)]
pub struct Signed {
    pub attestation: Option<Vec<u8>>,
    pub hashes: BTreeMap<String, String>,
}

impl Signed {
    fn of(files: &BTreeMap<String, Vec<u8>>) -> Signed {
        Signed {
            attestation: files.get(attest::FILE).cloned(),
            hashes: files
                .iter()
                .map(|(n, d)| (n.clone(), attest::sha256_hex(d)))
                .collect(),
        }
    }
}

/// Why a submission cannot be graded (missing, unreadable, oversized,
/// malformed): every output format reports it, with exit 2.
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid(pub String);

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Open a submission: a tar archive; a folder holding answers.toml; or a
/// folder holding exactly one `.tar` (what an autograder's upload folder
/// looks like).
pub fn open(path: &Path) -> Result<Submission, Invalid> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| Invalid(format!("{}: {}", path.display(), io_reason(&e))))?;
    if meta.is_dir() {
        // An answers.toml that is not a regular file (a FIFO, a link, a
        // device) is read to be refused by what it is, not missed.
        if std::fs::symlink_metadata(path.join(ANSWERS)).is_ok() {
            return open_folder(path);
        }
        let tars: Vec<PathBuf> = user_files::read_dir(path)
            .map_err(|e| Invalid(e.to_string()))?
            .into_iter()
            .filter(|p| is_archive_name(p))
            .collect();
        return match tars.as_slice() {
            [one] => open_archive(one),
            [] => Err(Invalid(format!(
                "{}: no {ANSWERS} and no archive: not a submission (kdiag lab submit makes one)",
                path.display()
            ))),
            _ => Err(Invalid(format!(
                "{}: holds {} archives; a submission is one",
                path.display(),
                tars.len()
            ))),
        };
    }
    open_archive(path)
}

fn is_file(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file())
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory: nothing was submitted".into(),
        _ => e.to_string(),
    }
}

/// A plain answers file and the folder it is in. `confined` when it is a
/// submission's (its files must be inside the folder); a learner's own
/// answers may name any file they can read.
pub fn open_answers(path: &Path, confined: bool) -> Result<Submission, Invalid> {
    let limits = if confined {
        Limits::submission()
    } else {
        Limits::input()
    };
    let text = user_files::read_to_string(path, &limits).map_err(|e| Invalid(reason(e)))?;
    let answers = Answers::parse(&path.display().to_string(), &text)
        .map_err(|e| Invalid(format!("{e:#}")))?;
    let base = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    Ok(Submission {
        answers,
        evidence: Evidence::Dir { base, confined },
        manifest: None,
        signed: Signed::default(),
    })
}

fn reason(e: UserFileError) -> String {
    match e {
        UserFileError::NotFound(p) => {
            format!("{}: no such file: nothing was submitted", p.display())
        }
        other => other.to_string(),
    }
}

fn open_folder(dir: &Path) -> Result<Submission, Invalid> {
    let mut sub = open_answers(&dir.join(ANSWERS), true)?;
    let manifest = dir.join(MANIFEST);
    if is_file(&manifest) {
        let text = user_files::read_to_string(&manifest, &Limits::submission())
            .map_err(|e| Invalid(reason(e)))?;
        let m = parse_manifest(&manifest.display().to_string(), &text)?;
        // The signed files, read back (an attested folder is a bundle too).
        let mut files = BTreeMap::new();
        for name in m.files.iter().map(String::as_str).chain([attest::FILE]) {
            if !name.split('/').any(|p| p == ".." || p.is_empty())
                && let Ok(d) = user_files::read(&dir.join(name), &Limits::submission())
            {
                files.insert(name.to_string(), d);
            }
        }
        files.insert(MANIFEST.to_string(), text.into_bytes());
        sub.signed = Signed::of(&files);
        sub.manifest = Some(m);
    }
    Ok(sub)
}

/// Whether `p` names an archive kdiag reads (or refuses by name): what a
/// class folder's entry may be besides a folder.
pub fn is_archive_name(p: &Path) -> bool {
    let name = p.file_name().map(|n| n.to_string_lossy().to_lowercase());
    name.is_some_and(|n| ARCHIVE_SUFFIXES.iter().any(|s| n.ends_with(s)))
}

const ARCHIVE_SUFFIXES: &[&str] = &[".tar", ".tar.gz", ".tgz", ".zip", ".tar.xz", ".tar.bz2"];

/// `name` without its archive suffix.
pub fn strip_archive_suffix(name: &str) -> &str {
    let lower = name.to_lowercase();
    ARCHIVE_SUFFIXES
        .iter()
        .find(|s| lower.ends_with(*s))
        .map_or(name, |s| &name[..name.len() - s.len()])
}

/// The tar data of archive `path`: as it is, or gunzipped (within the
/// archive limit); other compressions are refused by name.
fn tar_data(path: &Path, data: Vec<u8>) -> Result<Vec<u8>, Invalid> {
    let refuse = |what: &str| {
        Invalid(format!(
            "{}: a {what}; kdiag reads the .tar that kdiag lab submit writes (or it gzipped): \
             hand that in",
            path.display()
        ))
    };
    match data.as_slice() {
        [0x1f, 0x8b, ..] => {
            use std::io::Read;
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(data.as_slice())
                .take(MAX_ARCHIVE_BYTES + 1)
                .read_to_end(&mut out)
                .map_err(|e| Invalid(format!("{}: a damaged gzip file: {e}", path.display())))?;
            if out.len() as u64 > MAX_ARCHIVE_BYTES {
                return Err(Invalid(format!(
                    "{}: unpacks to over {MAX_ARCHIVE_BYTES} bytes, the limit of a submission",
                    path.display()
                )));
            }
            Ok(out)
        }
        [b'P', b'K', 3, 4, ..] | [b'P', b'K', 5, 6, ..] => Err(refuse("zip archive")),
        [0xfd, b'7', b'z', b'X', b'Z', 0, ..] => Err(refuse("xz-compressed file")),
        [b'B', b'Z', b'h', ..] => Err(refuse("bzip2-compressed file")),
        _ => Ok(data),
    }
}

fn open_archive(path: &Path) -> Result<Submission, Invalid> {
    let data = user_files::read(path, &Limits::submission().max(MAX_ARCHIVE_BYTES))
        .map_err(|e| Invalid(reason(e)))?;
    let data = tar_data(path, data)?;
    let mut files =
        tar::read(&data, &TAR_LIMITS).map_err(|e| Invalid(format!("{}: {e}", path.display())))?;
    // An archive of a folder (sub/answers.toml): its files are the submission.
    if !files.contains_key(ANSWERS) {
        let roots: Vec<String> = files
            .keys()
            .filter_map(|k| k.strip_suffix(&format!("/{ANSWERS}")))
            .filter(|r| !r.contains('/'))
            .map(str::to_string)
            .collect();
        if let [root] = roots.as_slice() {
            let prefix = format!("{root}/");
            files = files
                .into_iter()
                .filter_map(|(k, v)| Some((k.strip_prefix(&prefix)?.to_string(), v)))
                .collect();
        }
    }
    let name = |f: &str| format!("{}:{f}", path.display());
    let text = files
        .get(ANSWERS)
        .ok_or_else(|| Invalid(format!("{}: the archive has no {ANSWERS}", path.display())))?;
    let text = std::str::from_utf8(text)
        .map_err(|_| Invalid(format!("{} is not UTF-8 text", name(ANSWERS))))?;
    let answers = Answers::parse(&name(ANSWERS), text).map_err(|e| Invalid(format!("{e:#}")))?;
    let manifest = match files.get(MANIFEST) {
        Some(m) => Some(parse_manifest(
            &name(MANIFEST),
            &String::from_utf8_lossy(m),
        )?),
        None => None,
    };
    Ok(Submission {
        answers,
        signed: Signed::of(&files),
        evidence: Evidence::Files(files),
        manifest,
    })
}

fn parse_manifest(name: &str, text: &str) -> Result<Manifest, Invalid> {
    crate::error::parse_toml(name, text).map_err(|e| Invalid(format!("{e:#}")))
}

/// What `kdiag lab submit` packs: the answers (artifact answers rewritten
/// to `artifacts/NAME`), the artifacts and the manifest, in that order.
/// `base` is the answers file's folder (relative artifact paths are
/// against it).
pub fn pack(
    checks: &CheckFile,
    answers: &Answers,
    base: &Path,
    learner: &str,
    seed: &str,
    seed_source: SeedSource,
    attempts: (BTreeMap<String, u32>, &str),
) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut answers = answers.clone();
    let mut artifacts: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for c in checks.checks.iter().filter(|c| c.is_artifact()) {
        let Some(value) = answers.get(&c.id) else {
            continue;
        };
        let path = base.join(value.trim());
        let data = user_files::read(&path, &Limits::input().max(MAX_ARTIFACT_BYTES))
            .map_err(anyhow::Error::from)
            .with_context(|| format!("{} names a file kdiag cannot pack", c.id))?;
        let name = artifact_name(c, &path, &artifacts);
        answers.set_text(&c.id, &name)?;
        artifacts.insert(name, data);
    }
    let mut files = vec![(ANSWERS.to_string(), answers.to_toml().into_bytes())];
    files.extend(artifacts);
    let names = files.iter().map(|(n, _)| n.clone()).collect();
    let manifest = Manifest {
        attempts: Some(attempts.0),
        attempts_counted_by: Some(attempts.1.to_string()),
        ..Manifest::new(&checks.lab, learner, seed, seed_source, names)
    };
    files.push((
        MANIFEST.to_string(),
        toml::to_string(&manifest)?.into_bytes(),
    ));
    Ok(files)
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The file name `lab submit` gives learner `learner`'s submission of
/// `lab` (without `.tar`): what a class folder's entry may be called.
pub fn default_name(lab: &str, learner: &str) -> String {
    format!("kdiag-{lab}-{}", crate::grade::identity::safe_name(learner))
}

/// `artifacts/<file name>`, made unique and short enough for tar.
fn artifact_name(c: &Check, path: &Path, taken: &BTreeMap<String, Vec<u8>>) -> String {
    let file: String = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| c.id.clone())
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | '-') {
                ch
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    let mut name = format!("artifacts/{file}");
    let mut n = 2;
    while taken.contains_key(&name) {
        name = format!("artifacts/{n}-{file}");
        n += 1;
    }
    name
}

/// Refuse to pack a lab folder (or its answers) that is not the caller's
/// own: `sudo kdiag lab submit --dir` a classmate's folder makes no
/// bundle of their work, whatever its mode.
pub fn own_folder(dir: &super::state::LabDir) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let uid = match crate::sys::process::privilege::invoker() {
        Some(who) => who.uid,
        // SAFETY: getuid cannot fail.
        None => unsafe { libc::getuid() },
    };
    for path in [dir.path.clone(), dir.answers()] {
        let owner = std::fs::symlink_metadata(&path)
            .with_context(|| format!("cannot read {}", path.display()))?
            .uid();
        if owner != uid {
            return Err(crate::error::usage(format!(
                "{} is not yours (it belongs to {}): kdiag lab submit packs only your own lab \
                 folder",
                path.display(),
                crate::sys::process::privilege::user_name(owner)
                    .unwrap_or_else(|| format!("uid {owner}"))
            )));
        }
    }
    Ok(())
}

/// Write packed files as a tar archive at `path` (as the user, 0600: a
/// bundle holds the learner's answers).
pub fn write_archive(path: &Path, files: &[(String, Vec<u8>)]) -> anyhow::Result<()> {
    let data = tar::write(files, now()).map_err(|e| anyhow::anyhow!(e))?;
    user_files::write_private(path, data)?;
    Ok(())
}

/// Write packed files into folder `dir` (0700, files 0600), which must be
/// missing or empty.
pub fn write_folder(dir: &Path, files: &[(String, Vec<u8>)]) -> anyhow::Result<()> {
    ensure_empty_dir(dir)?;
    user_files::create_private_dir(dir)?;
    for (name, data) in files {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            user_files::create_private_dir(parent)?;
        }
        user_files::write_private(&path, data)?;
    }
    Ok(())
}

/// Create `dir` (as the user), refusing one that holds anything.
pub fn ensure_empty_dir(dir: &Path) -> anyhow::Result<()> {
    user_files::create_dir_all(dir)?;
    let entries = user_files::read_dir(dir)?;
    if !entries.is_empty() {
        return Err(crate::error::usage(format!(
            "{} is not empty; name a new folder (kdiag does not mix a submission with other files)",
            dir.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::LabSource;

    fn checks() -> CheckFile {
        crate::lab::load(&LabSource::default(), "0-demo").unwrap().1
    }

    #[test]
    fn packs_artifacts_and_reads_back_as_archive_or_folder() {
        let d = tempfile::tempdir().unwrap();
        let key = checks()
            .checks
            .iter()
            .find(|c| c.is_artifact())
            .unwrap()
            .id
            .clone();
        std::fs::write(d.path().join("my trace.folded"), "a;b 1\n").unwrap();
        let mut a = Answers::default();
        a.set("who.comm", "io-app").unwrap();
        a.set(&key, "my trace.folded").unwrap();
        let files = pack(
            &checks(),
            &a,
            d.path(),
            "ada",
            "abcd-efgh-jkmn",
            SeedSource::Given,
            ([("who.comm".to_string(), 3)].into(), "test"),
        )
        .unwrap();
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, [ANSWERS, "artifacts/my_trace.folded", MANIFEST]);

        let tar = d.path().join("s.tar");
        write_archive(&tar, &files).unwrap();
        let folder = d.path().join("s");
        write_folder(&folder, &files).unwrap();
        for sub in [open(&tar).unwrap(), open(&folder).unwrap()] {
            let path = sub.answers.get(&key).unwrap();
            assert_eq!(path, "artifacts/my_trace.folded");
            assert_eq!(sub.evidence.read(&path).unwrap(), b"a;b 1\n");
            let m = sub.manifest.unwrap();
            assert_eq!((m.learner.as_str(), m.lab.as_str()), ("ada", "0-demo"));
            assert_eq!(m.seed_source, SeedSource::Given);
            assert!(m.created > 1_700_000_000, "{}", m.created);
            assert_eq!(m.attempts.unwrap()["who.comm"], 3);
        }
        // A folder holding one archive is that submission.
        let upload = d.path().join("upload");
        std::fs::create_dir(&upload).unwrap();
        std::fs::copy(&tar, upload.join("kdiag-0-demo.tar")).unwrap();
        assert!(open(&upload).is_ok());
        assert!(
            write_folder(&folder, &files)
                .unwrap_err()
                .to_string()
                .contains("not empty")
        );
    }

    #[test]
    fn an_answers_file_that_is_not_a_regular_file_is_named_as_what_it_is() {
        let d = tempfile::tempdir().unwrap();
        let sub = |name: &str| {
            let dir = d.path().join(name);
            std::fs::create_dir(&dir).unwrap();
            dir
        };
        let fifo = sub("fifo");
        let c = std::ffi::CString::new(fifo.join(ANSWERS).to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let link = sub("link");
        std::fs::write(d.path().join("real.toml"), "[who]\ncomm = 'x'\n").unwrap();
        std::os::unix::fs::symlink(d.path().join("real.toml"), link.join(ANSWERS)).unwrap();
        let device = sub("device");
        std::os::unix::fs::symlink("/dev/zero", device.join(ANSWERS)).unwrap();
        let big = sub("big");
        let f = std::fs::File::create(big.join(ANSWERS)).unwrap();
        f.set_len(2 << 30).unwrap(); // sparse
        for (dir, want) in [
            (&fifo, "is a FIFO"),
            (&link, "is a symbolic link"),
            (&device, "is a symbolic link"),
            (&big, "over"),
        ] {
            let e = open(dir).unwrap_err();
            assert!(e.0.contains(want), "{}: {e}", dir.display());
        }
        let e = open_answers(Path::new("/dev/zero"), true).unwrap_err();
        assert!(e.0.contains("a character device"), "{e}");
    }

    #[test]
    fn gzipped_archives_are_read_and_zips_refused_by_name() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        let files = vec![(ANSWERS.to_string(), b"[who]\ncomm = 'io-app'\n".to_vec())];
        let tar = tar::write(&files, 0).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&tar).unwrap();
        let path = d.path().join("ada.tar.gz");
        std::fs::write(&path, gz.finish().unwrap()).unwrap();
        assert_eq!(
            open(&path).unwrap().answers.get("who.comm").unwrap(),
            "io-app"
        );
        let zip = d.path().join("ada.zip");
        std::fs::write(&zip, b"PK\x03\x04rest of a zip").unwrap();
        let e = open(&zip).unwrap_err();
        assert!(e.0.contains("a zip archive; kdiag reads the .tar"), "{e}");
        assert!(is_archive_name(&zip) && is_archive_name(&path));
        assert_eq!(
            strip_archive_suffix("kdiag-0-demo-ada.TAR.GZ"),
            "kdiag-0-demo-ada"
        );
    }

    #[test]
    fn missing_and_malformed_submissions_say_why() {
        let d = tempfile::tempdir().unwrap();
        let e = open(&d.path().join("nope")).unwrap_err();
        assert!(e.0.contains("nothing was submitted"), "{e}");
        let e = open(d.path()).unwrap_err();
        assert!(e.0.contains("not a submission"), "{e}");
        std::fs::write(d.path().join("x.tar"), vec![7u8; 1024]).unwrap();
        let e = open(d.path()).unwrap_err();
        assert!(e.0.contains("not a tar archive"), "{e}");
        std::fs::write(d.path().join(ANSWERS), "[who\n").unwrap();
        let e = open(d.path()).unwrap_err();
        assert!(e.0.contains("answers.toml:1:"), "{e}");
    }
}
