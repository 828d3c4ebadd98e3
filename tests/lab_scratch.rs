//! A lab's scratch directory is one no other user can take: a second user
//! (kdiag-other, who .ci/run creates beside kdiag-learner) runs labs after
//! the learner has made the default names of their scratch directories
//! (`/tmp/kdiag-UID`, `/var/tmp/kdiag-UID`) first. The labs still start,
//! write only into directories of the second user's, and leave none behind.
//!
//! The second user runs kdiag as root "through sudo" (SUDO_UID and friends
//! set, as sudo sets them; no sudoers rule for them is needed): their
//! memory workload's scratch goes to /run/kdiag/UID, a directory kdiag makes
//! for them with their own identity.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const OTHER: &str = "kdiag-other";

/// The second user's (uid, gid), which CI must have.
fn other(test: &str) -> Option<(u32, u32)> {
    learner(test)?;
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").args([flag, OTHER]).output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    let ids = id("-u").zip(id("-g"));
    if ids.is_none() {
        let why = format!("{test}: needs the user {OTHER} (.ci/run creates it)");
        assert!(!in_ci(), "{why}, and CI=true forbids skipping");
        eprintln!("SKIPPED {why}");
    }
    ids
}

/// Directories named `kdiag-UID` or `kdiag-UID-*` under `parent`.
fn named_for(parent: &str, uid: u32) -> Vec<PathBuf> {
    let exact = format!("kdiag-{uid}");
    let prefix = format!("kdiag-{uid}-");
    std::fs::read_dir(parent)
        .unwrap()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n == exact || n.starts_with(&prefix)
        })
        .map(|e| e.path())
        .collect()
}

/// The regular files `pid` holds open, waiting until it holds one under
/// one of `under`.
fn open_files(pid: u32, under: &[&Path]) -> Vec<PathBuf> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let files: Vec<PathBuf> = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|d| {
                d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                    .filter(|f| f.is_file())
                    .collect()
            })
            .unwrap_or_default();
        if files.iter().any(|f| under.iter().any(|u| f.starts_with(u))) {
            return files;
        }
        assert!(
            Instant::now() < deadline,
            "workload {pid} opened no file under {under:?}: {files:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Run `lab` as the second user through "sudo" until its workload has its
/// scratch file open; check the file is theirs, in a directory of theirs
/// that is not the one the learner took; quit; nothing left.
fn run_lab(lab: &str, uid: u32, gid: u32, root: &Path, expect_under: &[&Path]) {
    let _one = lab_run::one_workload();
    let mut child = kdiag()
        .args(["lab", lab, "--plain", "--seed", "7", "--dir"])
        .arg(root)
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .env("SUDO_USER", OTHER)
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("XDG_STATE_HOME")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !seen.contains("Step 1/") && Instant::now() < deadline {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        seen.push_str(&line);
    }
    let mut stderr = child.stderr.take().unwrap();
    let mut err = || {
        let mut e = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut e);
        e
    };
    if !seen.contains("Step 1/") {
        let _ = child.kill();
        panic!("lab {lab} did not start for {OTHER}:\n{seen}\n{}", err());
    }
    let progress = std::fs::read_to_string(root.join(lab).join("progress.toml")).unwrap();
    let pid: u32 = progress
        .lines()
        .find_map(|l| l.strip_prefix("pid = "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let files = open_files(pid, expect_under);
    let file = files
        .iter()
        .find(|f| expect_under.iter().any(|u| f.starts_with(u)))
        .unwrap();
    let scratch = file.parent().unwrap().to_path_buf();
    let base = scratch.parent().unwrap().to_path_buf();
    for p in [file, &scratch, &base] {
        let m = std::fs::symlink_metadata(p).unwrap();
        assert_eq!(m.uid(), uid, "{} is not {OTHER}'s", p.display());
    }
    assert_eq!(
        std::fs::symlink_metadata(&base).unwrap().mode() & 0o077,
        0,
        "{} is open to others",
        base.display()
    );
    drop(child.stdin.take());
    // 1: the lab quit with steps not done.
    let status = child.wait().unwrap();
    let stderr = err();
    assert!(
        status.code() == Some(1) && !stderr.contains("error"),
        "lab {lab}: {status:?}\n{stderr}"
    );
    assert!(!scratch.exists(), "{} left behind", scratch.display());
}

#[test]
fn a_scratch_name_taken_by_another_user_does_not_block_a_lab() {
    let Some((uid, gid)) = other("a_scratch_name_taken_by_another_user_does_not_block_a_lab")
    else {
        return;
    };
    // Leftovers of an earlier run of this test (only the two test users'
    // directories, named for the second user).
    for parent in ["/tmp", "/var/tmp"] {
        for d in named_for(parent, uid) {
            let _ = std::fs::remove_dir_all(d);
        }
    }
    // The learner takes the second user's default names first.
    as_learner(&format!(
        "mkdir -m 0755 /tmp/kdiag-{uid} /var/tmp/kdiag-{uid} && touch /var/tmp/kdiag-{uid}/planted"
    ));
    let home = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(home.path(), Some(uid), Some(gid)).unwrap();
    let runtime = PathBuf::from(format!("/run/kdiag/{uid}"));

    // io-app writes on a disk: under /var/tmp, in a fallback name of theirs.
    run_lab("0-demo", uid, gid, home.path(), &[Path::new("/var/tmp")]);
    // memory may write anywhere: in the runtime directory kdiag made for them.
    run_lab("3-memory", uid, gid, home.path(), &[&runtime]);
    let m = std::fs::symlink_metadata(&runtime).unwrap();
    assert!(m.is_dir() && m.uid() == uid && m.mode() & 0o777 == 0o700);
    let parent = std::fs::symlink_metadata("/run/kdiag").unwrap();
    assert!(parent.uid() == 0 && parent.mode() & 0o022 == 0);

    // The learner's directories are as they were; the fallbacks are gone.
    assert!(Path::new(&format!("/var/tmp/kdiag-{uid}/planted")).exists());
    let left: Vec<_> = ["/tmp", "/var/tmp"]
        .iter()
        .flat_map(|p| named_for(p, uid))
        .filter(|d| !d.ends_with(format!("kdiag-{uid}")))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    for parent in ["/tmp", "/var/tmp"] {
        std::fs::remove_dir_all(format!("{parent}/kdiag-{uid}")).unwrap();
    }
}
