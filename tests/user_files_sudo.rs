//! Files a user names, with kdiag run as root through sudo by an
//! unprivileged learner (`sudo -u kdiag-learner sudo kdiag ...`, the rule
//! .ci/run installs): every option or argument that takes a path, found by
//! walking the command line's definition, has a case here, and a new one
//! without a case fails `every_path_argument_has_a_case`.
//!
//! Writers: a symlink to a root-owned file, a symlink to a missing file in
//! /etc, a hard link to a root-owned file and a FIFO leave the target as it
//! was and give a clear error; an ordinary path gives a file of the
//! learner's. Readers: a FIFO returns within 2 s, /dev/zero is refused, an
//! oversized file is refused with the limit, and a root-only file is
//! refused without its content showing up anywhere.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use clap::CommandFactory;
use common::*;

/// What a path argument is, and the command line that exercises it
/// (`{P}` is the path under test; the other `{..}` are set up by `Env`).
#[derive(Debug, Clone, Copy)]
enum Case {
    /// Writes a file at the path.
    Writer(&'static str),
    /// Creates a directory at the path and writes in it.
    DirWriter(&'static str),
    /// Reads a file; `limit` is its size limit (None: it reads only
    /// parts of a file of any size).
    Reader(&'static str, Option<u64>),
    /// Lists or reads a directory.
    DirReader(&'static str),
    /// Writes a file at the path, from a command that exits 1 when it
    /// succeeds (a lab left unfinished: its transcript, `lab --log`).
    Transcript(&'static str),
    /// The same argument (a flattened option group) as the case named.
    Same(&'static str),
    /// The administrator's (`serve --socket`): a learner through sudo is
    /// refused before anything is made at the path.
    AdminOnly(&'static str),
}

const MIB: u64 = 1 << 20;

/// Every path argument, keyed "subcommand ... --long" or "subcommand <ID>".
fn cases() -> BTreeMap<&'static str, Case> {
    use Case::*;
    BTreeMap::from([
        ("time --output", Writer("time -o {P} -- true")),
        (
            "profile --folded",
            Writer("profile -F 999 --folded {P} -- {BUSY}"),
        ),
        (
            "profile --svg",
            Writer("profile -F 999 --svg {P} -- {BUSY}"),
        ),
        (
            "offcpu --folded",
            Writer("offcpu --folded {P} -- sleep 0.3"),
        ),
        ("offcpu --svg", Writer("offcpu --svg {P} -- sleep 0.3")),
        ("offcpu --pprof", Writer("offcpu --pprof {P} -- sleep 0.3")),
        (
            "offcpu --speedscope",
            Writer("offcpu --speedscope {P} -- sleep 0.3"),
        ),
        ("faults --folded", Writer("faults --folded {P} -- true")),
        ("faults --svg", Writer("faults --svg {P} -- true")),
        ("faults --pprof", Writer("faults --pprof {P} -- true")),
        (
            "faults --speedscope",
            Writer("faults --speedscope {P} -- true"),
        ),
        (
            "profile --pprof",
            Writer("profile -F 999 --pprof {P} -- {BUSY}"),
        ),
        (
            "profile --speedscope",
            Writer("profile -F 999 --speedscope {P} -- {BUSY}"),
        ),
        (
            "profile --html",
            Writer("profile --wall -F 999 --html {P} -- {BUSY}"),
        ),
        ("course init --out", Writer("course init --out {P}")),
        ("serve --socket", AdminOnly("serve --socket {P}")),
        (
            "diagnose --record",
            Writer("diagnose -d 0.3 --why none --record {P} -- sleep 2"),
        ),
        (
            "diagnose --report",
            Writer("diagnose -d 0.3 --why none --report html {P} -- sleep 2"),
        ),
        (
            "diagnose --replay",
            Reader("diagnose --replay {P}", Some(256 * MIB)),
        ),
        (
            "watch --textfile",
            DirWriter("watch --duration 1 --interval 1 --textfile {P}"),
        ),
        (
            "watch --flight-dir",
            DirWriter("watch --duration 1 --interval 1 --flight-dir {P}"),
        ),
        (
            "watch --config",
            Reader("watch --duration 1 --config {P}", Some(MIB)),
        ),
        (
            "lab submit --out",
            Writer("lab submit 0-demo --dir {STATE} --out {P}"),
        ),
        (
            "answer --dir",
            DirWriter("answer 0-demo who.comm io-app --dir {P}"),
        ),
        (
            "workload build-module --out",
            DirWriter("workload build-module io --kernel-dir {KDIR} --out {P}"),
        ),
        (
            "lab solution --out",
            DirWriter("lab solution 0-demo --course {COURSE} --learner ada --out {P}"),
        ),
        ("elf-check <FILE>", Reader("elf-check {P}", None)),
        (
            "check --answers",
            Reader("check 0-demo --answers {P}", Some(MIB)),
        ),
        (
            "check --submission",
            Reader("check 0-demo --submission {P}", Some(64 * MIB)),
        ),
        (
            "check --course",
            Reader("check 0-demo --course {P} --learner ada", Some(MIB)),
        ),
        (
            "grade <PATH>",
            Reader("grade 0-demo {P} --course {COURSE}", Some(64 * MIB)),
        ),
        (
            "grade --course",
            Reader("grade 0-demo {SUBS} --course {P}", Some(MIB)),
        ),
        (
            "grade --roster",
            Reader(
                "grade 0-demo {SUBS} --course {COURSE} --roster {P}",
                Some(16 * MIB),
            ),
        ),
        (
            "course seeds <ROSTER>",
            Reader("course seeds {P} --course {COURSE}", Some(16 * MIB)),
        ),
        (
            "course seeds --course",
            Reader("course seeds {ROSTER} --course {P}", Some(MIB)),
        ),
        (
            "course install --course",
            Reader("course install --course {P}", Some(MIB)),
        ),
        (
            "course install --roster",
            Reader(
                "course install --course {COURSE} --roster {P}",
                Some(16 * MIB),
            ),
        ),
        (
            "course verify --course",
            Reader("course verify ada k3m9-x2pq-7vtz --course {P}", Some(MIB)),
        ),
        (
            "lab solution --course",
            Reader("lab solution 0-demo --course {P} --learner ada", Some(MIB)),
        ),
        ("lab list --labs", DirReader("lab list --labs {P}")),
        (
            "workload build-module --kernel-dir",
            DirReader("workload build-module io --kernel-dir {P} --out {OUT}"),
        ),
        // lab::Files (--dir, --labs) is flattened into these commands.
        (
            "course gradebook <GRADED>",
            Reader("course gradebook {P}", Some(256 * MIB)),
        ),
        // Read by the same function as the graded files.
        (
            "course gradebook --previous",
            Same("course gradebook <GRADED>"),
        ),
        (
            "lab --log",
            Transcript("lab 0-demo --plain --dir {STATE} --log {P}"),
        ),
        ("lab --dir", Same("answer --dir")),
        ("lab --labs", Same("lab list --labs")),
        ("lab list --dir", Same("answer --dir")),
        ("lab submit --dir", Same("answer --dir")),
        ("lab reset --dir", Same("answer --dir")),
        ("lab reset --labs", Same("lab list --labs")),
        ("lab submit --labs", Same("lab list --labs")),
        ("lab solution --dir", Same("answer --dir")),
        ("lab solution --labs", Same("lab list --labs")),
        ("answer --labs", Same("lab list --labs")),
        ("check --dir", Same("answer --dir")),
        ("check --labs", Same("lab list --labs")),
        ("grade --labs", Same("lab list --labs")),
    ])
}

/// Every argument of the command line that takes a path.
fn path_arguments() -> Vec<String> {
    fn walk(cmd: &clap::Command, prefix: &str, out: &mut Vec<String>) {
        for arg in cmd.get_arguments() {
            let path = matches!(
                arg.get_value_hint(),
                clap::ValueHint::AnyPath | clap::ValueHint::FilePath | clap::ValueHint::DirPath
            );
            if !path {
                continue;
            }
            let name = match arg.get_long() {
                Some(long) => format!("--{long}"),
                None => format!("<{}>", arg.get_id().as_str().to_uppercase()),
            };
            out.push(format!("{prefix}{name}"));
        }
        for sub in cmd.get_subcommands() {
            walk(sub, &format!("{prefix}{} ", sub.get_name()), out);
        }
    }
    let mut out = Vec::new();
    walk(&kdiag::cli::Cli::command(), "", &mut out);
    out
}

#[test]
fn every_path_argument_has_a_case() {
    let table = cases();
    let found = path_arguments();
    let missing: Vec<&String> = found
        .iter()
        .filter(|k| !table.contains_key(k.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "path arguments without a case in tests/user_files_sudo.rs: {missing:?}"
    );
    let stale: Vec<&&str> = table
        .keys()
        .filter(|k| !found.iter().any(|f| f == *k))
        .collect();
    assert!(
        stale.is_empty(),
        "cases for arguments that no longer exist: {stale:?}"
    );
    for (key, case) in &table {
        if let Case::Same(of) = case {
            assert!(
                matches!(table.get(of), Some(c) if !matches!(c, Case::Same(_))),
                "{key}: {of} is not a real case"
            );
        }
    }
}

/// A root-owned target and the learner's own folder, set up once per case.
struct Env {
    /// Root-owned, world-readable: where targets live.
    root_dir: tempfile::TempDir,
    /// The learner's own folder (0700), where they name paths.
    mine: PathBuf,
    _mine_guard: tempfile::TempDir,
    uid: u32,
    vars: Vec<(&'static str, String)>,
}

const SECRET: &str = "KDIAG-ROOT-ONLY-SECRET-7f3a";

impl Env {
    fn new(uid: u32, gid: u32) -> Env {
        let root_dir = tempfile::Builder::new()
            .prefix("kdiag-root-")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(root_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let guard = tempfile::Builder::new()
            .prefix("kdiag-learner-")
            .tempdir()
            .unwrap();
        let mine = guard.path().to_path_buf();
        // Test set-up only: kdiag itself never chowns.
        std::os::unix::fs::chown(&mine, Some(uid), Some(gid)).unwrap();
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o700)).unwrap();
        let mut env = Env {
            root_dir,
            mine,
            _mine_guard: guard,
            uid,
            vars: Vec::new(),
        };
        env.prepare();
        env
    }

    /// What the command lines need besides the path under test, made by
    /// the learner with kdiag itself.
    fn prepare(&mut self) {
        let m = self.mine.display().to_string();
        let course = format!("{m}/course.toml");
        let out = kdiag_as_learner()
            .args(["course", "init", "--out", &course])
            .output()
            .unwrap();
        assert!(out.status.success(), "course init: {}", stderr(&out));
        as_learner(&format!(
            "set -e; cd {m}; mkdir -p subs state kdir labs/labs; \
             printf 'id\\nada\\n' > roster.csv; \
             printf 'modules:\\n\\ttrue\\n' > kdir/Makefile"
        ));
        let out = kdiag_as_learner()
            .args(["answer", "0-demo", "who.comm", "io-app", "--dir"])
            .arg(format!("{m}/state"))
            .output()
            .unwrap();
        assert!(out.status.success(), "answer: {}", stderr(&out));
        self.vars = vec![
            ("{COURSE}", course),
            ("{STATE}", format!("{m}/state")),
            ("{SUBS}", format!("{m}/subs")),
            ("{ROSTER}", format!("{m}/roster.csv")),
            ("{KDIR}", format!("{m}/kdir")),
            ("{OUT}", format!("{m}/module-out")),
            (
                "{BUSY}",
                "sh -c 'i=0; while [ $i -lt 40000 ]; do i=$((i+1)); done'".into(),
            ),
        ];
    }

    /// The argv of `template` with `path` in place of {P}.
    fn argv(&self, template: &str, path: &Path) -> Vec<String> {
        let mut words = shell_words(template);
        for w in &mut words {
            if w == "{P}" {
                *w = path.display().to_string();
            }
            for (k, v) in &self.vars {
                if w == k {
                    *w = v.clone();
                }
            }
        }
        // {BUSY} is a command line of its own.
        words
            .into_iter()
            .flat_map(|w| {
                if w.starts_with("sh -c ") {
                    shell_words(&w)
                } else {
                    vec![w]
                }
            })
            .collect()
    }

    fn run(&self, template: &str, path: &Path) -> (Output, bool) {
        use std::os::unix::process::CommandExt;
        let mut cmd = kdiag_as_learner();
        cmd.args(self.argv(template, path)).process_group(0);
        output_within(&mut cmd, Duration::from_secs(60))
    }

    /// A root-owned file (mode `mode`) holding the secret.
    fn root_file(&self, name: &str, mode: u32) -> PathBuf {
        let p = self.root_dir.path().join(name);
        std::fs::write(&p, format!("# {SECRET}\nsecret = \"{SECRET}\"\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    /// A root-owned directory (mode `mode`) with a secret file inside.
    fn root_dir_with_secret(&self, name: &str, mode: u32) -> PathBuf {
        let d = self.root_dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("lab.toml"), SECRET).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
        d
    }

    fn mkfifo(&self, name: &str) -> PathBuf {
        let p = self.mine.join(name);
        as_learner(&format!("mkfifo '{}'", p.display()));
        p
    }

    fn symlink(&self, name: &str, to: &Path) -> PathBuf {
        let p = self.mine.join(name);
        as_learner(&format!("ln -s '{}' '{}'", to.display(), p.display()));
        p
    }
}

/// Words of a command line, with '...' quoting.
fn shell_words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in s.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    words.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            _ => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(cur);
    }
    words
}

/// Owner, mode, size and content of a file (None: it does not exist).
fn snapshot(p: &Path) -> Option<(u32, u32, u64, Vec<u8>)> {
    let m = std::fs::symlink_metadata(p).ok()?;
    let content = if m.is_file() {
        std::fs::read(p).unwrap()
    } else {
        Vec::new()
    };
    Some((m.uid(), m.mode(), m.nlink(), content))
}

/// A directory's owner, mode and entries.
fn dir_snapshot(p: &Path) -> (u32, u32, Vec<PathBuf>) {
    let m = std::fs::metadata(p).unwrap();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    (m.uid(), m.mode(), entries)
}

fn text(out: &Output) -> String {
    format!("{}{}", stdout(out), stderr(out))
}

/// What a refusal says (on stderr, or in a grader's report on stdout).
const REFUSALS: &[&str] = &[
    "a FIFO",
    "not a regular file",
    "a character device",
    "permission denied",
    "Permission denied",
    "symbolic link",
    "over the limit of",
    "no such file or directory",
    "Not a directory",
    "not a directory",
    "File exists",
    "is not empty",
    "names (hard links)",
    "belongs to uid",
    "kernel headers not found",
    "already exists",
];

/// The refusal reads like one: fails, names the problem, no panic.
fn assert_clear_refusal(what: &str, out: &Output, in_time: bool) {
    assert!(in_time, "{what}: did not return in time");
    assert!(!out.status.success(), "{what}: succeeded\n{}", text(out));
    let all = text(out);
    assert!(!all.contains("panicked"), "{what}: {all}");
    assert!(
        REFUSALS.iter().any(|r| all.contains(r)),
        "{what}: no clear reason:\n{all}"
    );
}

/// `ok`: the command's exit code when it writes an ordinary path.
fn check_writer(env: &Env, key: &str, template: &str, ok: i32) {
    let target = env.root_file(&format!("{}-target", key.replace([' ', '-'], "_")), 0o644);
    let before = snapshot(&target);
    // A symlink to a root-owned file.
    let link = env.symlink("to-root", &target);
    let (out, t) = env.run(template, &link);
    assert_clear_refusal(&format!("{key}: symlink to a root file"), &out, t);
    assert_eq!(snapshot(&target), before, "{key}: the root file changed");
    // A symlink to a file that does not exist, in /etc.
    let missing = PathBuf::from(format!("/etc/kdiag-test-missing-{}", std::process::id()));
    let dangling = env.symlink("to-etc", &missing);
    let (out, t) = env.run(template, &dangling);
    assert_clear_refusal(&format!("{key}: symlink into /etc"), &out, t);
    assert!(!missing.exists(), "{key}: created {}", missing.display());
    // A hard link to a root-owned file (made by root: protected_hardlinks
    // would stop the learner).
    let hard = env.mine.join("hard");
    std::fs::hard_link(&target, &hard).unwrap();
    let (out, t) = env.run(template, &hard);
    assert_clear_refusal(&format!("{key}: hard link to a root file"), &out, t);
    let after = snapshot(&target).unwrap();
    let b = before.as_ref().unwrap();
    assert_eq!(
        (after.0, after.1, &after.3),
        (b.0, b.1, &b.3),
        "{key}: the root file changed"
    );
    std::fs::remove_file(&hard).unwrap();
    // A FIFO: refused at once, not waited on.
    let fifo = env.mkfifo("fifo-out");
    let (out, t) = env.run(template, &fifo);
    assert_clear_refusal(&format!("{key}: FIFO"), &out, t);
    // An ordinary path: the learner's file.
    let plain = env
        .mine
        .join(format!("{}.out", key.replace([' ', '-'], "_")));
    let (out, t) = env.run(template, &plain);
    assert!(
        t && out.status.code() == Some(ok),
        "{key}: ordinary path: {}",
        text(&out)
    );
    assert_eq!(
        std::fs::metadata(&plain).unwrap().uid(),
        env.uid,
        "{key}: owner"
    );
    for p in [link, dangling, fifo] {
        std::fs::remove_file(p).unwrap();
    }
}

fn check_dir_writer(env: &Env, key: &str, template: &str) {
    let target = env.root_dir_with_secret(&format!("{}-dir", key.replace([' ', '-'], "_")), 0o755);
    let before = dir_snapshot(&target);
    let link = env.symlink("dir-to-root", &target);
    let (out, t) = env.run(template, &link);
    assert_clear_refusal(&format!("{key}: symlink to a root directory"), &out, t);
    assert_eq!(
        dir_snapshot(&target),
        before,
        "{key}: the root directory changed"
    );
    let missing = PathBuf::from(format!(
        "/etc/kdiag-test-missing-dir-{}",
        std::process::id()
    ));
    let dangling = env.symlink("dir-to-etc", &missing);
    let (out, t) = env.run(template, &dangling);
    assert_clear_refusal(&format!("{key}: symlink into /etc"), &out, t);
    assert!(!missing.exists(), "{key}: created {}", missing.display());
    let fifo = env.mkfifo("fifo-dir");
    let (out, t) = env.run(template, &fifo);
    assert_clear_refusal(&format!("{key}: FIFO"), &out, t);
    let plain = env.mine.join(format!("{}.d", key.replace([' ', '-'], "_")));
    let (out, t) = env.run(template, &plain);
    assert!(
        t && out.status.success(),
        "{key}: ordinary path: {}",
        text(&out)
    );
    let owners: Vec<u32> = walk(&plain)
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().uid())
        .collect();
    assert!(
        owners.iter().all(|&u| u == env.uid),
        "{key}: not all the learner's: {owners:?}"
    );
    for p in [link, dangling, fifo] {
        std::fs::remove_file(p).unwrap();
    }
}

/// A directory and everything under it.
fn walk(p: &Path) -> Vec<PathBuf> {
    let mut out = vec![p.to_path_buf()];
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            out.extend(walk(&e.unwrap().path()));
        }
    }
    out
}

fn assert_no_secret(what: &str, out: &Output) {
    assert!(
        !text(out).contains(SECRET),
        "{what}: the secret leaked:\n{}",
        text(out)
    );
}

fn check_reader(env: &Env, key: &str, template: &str, limit: Option<u64>) {
    let fifo = env.mkfifo("fifo-in");
    let (out, t) = env.run(template, &fifo);
    assert!(t, "{key}: a FIFO hung it");
    assert_clear_refusal(&format!("{key}: FIFO"), &out, t);
    let t0 = std::time::Instant::now();
    let (out, t) = env.run(template, Path::new("/dev/zero"));
    assert_clear_refusal(&format!("{key}: /dev/zero"), &out, t);
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "{key}: /dev/zero took {:?}",
        t0.elapsed()
    );
    if let Some(limit) = limit {
        // Sparse: the size is what counts, and it is refused unread.
        let big = env.mine.join("big");
        as_learner(&format!("truncate -s {} '{}'", limit + 1, big.display()));
        let (out, t) = env.run(template, &big);
        assert_clear_refusal(&format!("{key}: oversized"), &out, t);
        assert!(
            text(&out).contains(&format!("over the limit of {limit} bytes")),
            "{key}: oversized: {}",
            text(&out)
        );
        std::fs::remove_file(big).unwrap();
    }
    let secret = env.root_file(
        &format!("{}-secret", key.replace([' ', '-', '<', '>'], "_")),
        0o600,
    );
    let (out, t) = env.run(template, &secret);
    assert_clear_refusal(&format!("{key}: root-only file"), &out, t);
    assert_no_secret(key, &out);
    assert!(
        text(&out).contains("permission denied"),
        "{key}: {}",
        text(&out)
    );
    std::fs::remove_file(fifo).unwrap();
}

fn check_dir_reader(env: &Env, key: &str, template: &str) {
    let fifo = env.mkfifo("fifo-dir-in");
    let (out, t) = env.run(template, &fifo);
    assert_clear_refusal(&format!("{key}: FIFO"), &out, t);
    let (out, t) = env.run(template, Path::new("/dev/zero"));
    assert_clear_refusal(&format!("{key}: /dev/zero"), &out, t);
    // A root-only directory whose files hold the secret (labs/ for --labs).
    let secret =
        env.root_dir_with_secret(&format!("{}-secret", key.replace([' ', '-'], "_")), 0o700);
    let inner = secret.join("labs");
    std::fs::create_dir(&inner).unwrap();
    std::fs::create_dir(inner.join("x")).unwrap();
    std::fs::write(inner.join("x/lab.toml"), SECRET).unwrap();
    std::fs::write(
        secret.join("Makefile"),
        format!("modules:\n\techo {SECRET}\n"),
    )
    .unwrap();
    let (out, t) = env.run(template, &secret);
    assert_clear_refusal(&format!("{key}: root-only directory"), &out, t);
    assert_no_secret(key, &out);
    std::fs::remove_file(fifo).unwrap();
}

fn check_admin_only(env: &Env, key: &str, template: &str) {
    let path = env.root_dir.path().join("admin-only");
    let (out, in_time) = env.run(template, &path);
    assert!(in_time, "{key}: did not finish");
    assert_eq!(out.status.code(), Some(2), "{key}: {}", stderr(&out));
    assert!(
        stderr(&out).contains("administrator"),
        "{key}: {}",
        stderr(&out)
    );
    assert!(!path.exists(), "{key}: made {}", path.display());
}

#[test]
fn paths_under_sudo_are_the_learners() {
    let Some((uid, gid)) = learner("paths_under_sudo_are_the_learners") else {
        return;
    };
    let table = cases();
    let env = Env::new(uid, gid);
    for (key, case) in &table {
        let t = std::time::Instant::now();
        match *case {
            Case::Writer(t) => check_writer(&env, key, t, 0),
            Case::Transcript(t) => check_writer(&env, key, t, 1),
            Case::DirWriter(t) => check_dir_writer(&env, key, t),
            Case::Reader(t, limit) => check_reader(&env, key, t, limit),
            Case::DirReader(t) => check_dir_reader(&env, key, t),
            Case::AdminOnly(t) => check_admin_only(&env, key, t),
            Case::Same(_) => continue,
        }
        eprintln!("{key}: {:.1} s", t.elapsed().as_secs_f64());
    }
}

/// The limit is a flag: `--max-input` raises it (and lowers it).
#[test]
fn the_input_limit_is_a_flag() {
    let dir = tempfile::tempdir().unwrap();
    let answers = dir.path().join("answers.toml");
    let mut content = String::from("[who]\ncomm = \"io-app\"\n");
    content.push_str(&"# padding\n".repeat(120_000));
    std::fs::write(&answers, &content).unwrap();
    let run = |extra: &[&str]| -> Output {
        Command::new(env!("CARGO_BIN_EXE_kdiag"))
            .args(extra)
            .args(["check", "0-demo", "--answers"])
            .arg(&answers)
            .output()
            .unwrap()
    };
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("over the limit of 1048576 bytes"),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("--max-input"), "{}", text(&out));
    let out = run(&["--max-input", "2M"]);
    assert_ne!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!text(&out).contains("over the limit"), "{}", text(&out));
    let out = run(&["--max-input", "1K"]);
    assert!(
        text(&out).contains("over the limit of 1024 bytes"),
        "{}",
        text(&out)
    );
}

/// A command kdiag runs for the learner under sudo is theirs: their uid and
/// groups, their HOME, USER and LOGNAME, no SUDO_* variables.
#[test]
fn commands_run_as_the_learner_with_their_environment() {
    let Some((uid, gid)) = learner("commands_run_as_the_learner_with_their_environment") else {
        return;
    };
    let home = {
        let out = Command::new("getent")
            .args(["passwd", LEARNER])
            .output()
            .unwrap();
        stdout(&out).trim().split(':').nth(5).unwrap().to_string()
    };
    let script = "id -u; id -g; echo \"$HOME $USER $LOGNAME\"; env | grep -c '^SUDO_' || true";
    for sub in [
        &["time", "--"][..],
        &["diagnose", "-d", "0.3", "--json", "--"][..],
    ] {
        let out = kdiag_as_learner()
            .args(sub)
            .args(["sh", "-c", script])
            .output()
            .unwrap();
        let lines: Vec<String> = stdout(&out).lines().map(String::from).collect();
        assert!(lines.len() >= 4, "{sub:?}: {}", text(&out));
        assert_eq!(lines[0], uid.to_string(), "{sub:?}: uid");
        assert_eq!(lines[1], gid.to_string(), "{sub:?}: gid");
        assert_eq!(
            lines[2],
            format!("{home} {LEARNER} {LEARNER}"),
            "{sub:?}: environment"
        );
        assert_eq!(lines[3], "0", "{sub:?}: SUDO_* variables leaked");
    }
}

/// `check --dir` names where the learner's answers are: a folder they may
/// not read is refused as such, not graded as "no answer yet"; a folder of
/// theirs without answers still is.
#[test]
fn check_in_a_folder_the_learner_cannot_read_says_permission_denied() {
    if learner("check_in_a_folder_the_learner_cannot_read_says_permission_denied").is_none() {
        return;
    }
    let out = kdiag_as_learner()
        .args(["check", "0-demo", "--dir", "/root"])
        .output()
        .unwrap();
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(
        all.contains("/root/0-demo/answers.toml: permission denied"),
        "{all}"
    );
    assert!(all.contains("give --dir a folder of yours"), "{all}");
    assert!(!all.contains("no answer"), "{all}");

    let mine = tempfile::tempdir().unwrap();
    std::fs::set_permissions(mine.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = kdiag_as_learner()
        .args(["check", "0-demo", "--dir"])
        .arg(mine.path())
        .output()
        .unwrap();
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("no answer for who.comm yet"), "{all}");
}
