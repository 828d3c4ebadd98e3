//! `kdiag serve` with real users (root, kdiag-learner and kdiag-other, as
//! .ci/run makes them): each test starts its own service on a socket in a
//! temporary folder (nothing global touched; the service dies with the
//! test, SIGKILL included, and the folder goes), the two users run
//! workloads of their own, and the learner's unprivileged kdiag asks the
//! service. Who the caller is comes from the kernel: the tests also speak
//! the protocol by hand (python3's socket.send_fds as the learner) to show
//! that nothing in a request names the caller.

mod common;
use common::*;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const OTHER: &str = "kdiag-other";
/// A string only kdiag-other's command line holds.
const SECRET: &str = "kdiag-other-secret-4711";

fn uid_of(user: &str) -> Option<u32> {
    let out = Command::new("id").args(["-u", user]).output().ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// Both users, or a skip (a failure under CI=true).
fn users(test: &str) -> Option<(u32, u32)> {
    if !require_root(test) {
        return None;
    }
    match uid_of(LEARNER).zip(uid_of(OTHER)) {
        Some(ids) => Some(ids),
        None => {
            let why = format!("{test}: needs the users {LEARNER} and {OTHER} (.ci/run makes them)");
            assert!(!in_ci(), "{why}, and CI=true forbids skipping");
            eprintln!("SKIPPED {why}");
            None
        }
    }
}

/// Die with the test thread's process (the harness's), SIGKILL included.
fn dies_with_us(cmd: &mut Command) -> &mut Command {
    // SAFETY: prctl is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            (libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0)
                .then_some(())
                .ok_or_else(std::io::Error::last_os_error)
        })
    }
}

/// A service on a socket of its own, stopped and its folder removed when
/// dropped.
struct Service {
    child: Child,
    dir: tempfile::TempDir,
}

impl Service {
    fn start(extra: &[&str]) -> Service {
        let dir = tempfile::tempdir().unwrap();
        // The users reach the socket through it, as through /run/kdiag.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let socket = dir.path().join("kdiag.sock");
        let child = dies_with_us(
            kdiag()
                .arg("serve")
                .arg("--socket")
                .arg(&socket)
                .args(extra),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kdiag serve starts");
        let t = Instant::now();
        while !socket.exists() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the service never made its socket"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Service { child, dir }
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("kdiag.sock")
    }

    /// kdiag run by `uid` (no sudo, no capabilities), asking this service.
    fn kdiag_as(&self, uid: u32, args: &[&str]) -> Output {
        let mut cmd = kdiag();
        cmd.args(args)
            .uid(uid)
            .gid(uid)
            .current_dir(self.dir.path())
            .env("KDIAG_SOCKET", self.socket());
        let (out, in_time) = output_within(dies_with_us(&mut cmd), Duration::from_secs(60));
        assert!(in_time, "kdiag {args:?} as uid {uid} did not finish");
        out
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A process of `uid` that sleeps until killed (on drop).
struct Workload(Child);

impl Workload {
    fn start(uid: u32, script: &str) -> Workload {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]).uid(uid).gid(uid).current_dir("/");
        Workload(
            dies_with_us(&mut cmd)
                .stdin(Stdio::null())
                .spawn()
                .expect("sh starts"),
        )
    }

    fn pid(&self) -> String {
        self.0.id().to_string()
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The learner's workload and kdiag-other's, whose command line holds SECRET.
fn two_workloads(learner: u32, other: u32) -> (Workload, Workload) {
    (
        Workload::start(learner, "while :; do sleep 1; done"),
        Workload::start(other, &format!("while :; do sleep 1; done; : {SECRET}")),
    )
}

#[test]
fn a_learner_diagnoses_their_own_process_and_is_refused_anothers() {
    let Some((learner, other)) =
        users("a_learner_diagnoses_their_own_process_and_is_refused_anothers")
    else {
        return;
    };
    let service = Service::start(&[]);
    let (mine, theirs) = two_workloads(learner, other);

    let out = service.kdiag_as(learner, &["diagnose", "-p", &mine.pid(), "-d", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = stdout(&out);
    assert!(
        report.starts_with("Verdict:") && report.contains(&format!("PID {} (sh)", mine.pid())),
        "{report}"
    );

    for args in [
        vec!["diagnose", "-p", &theirs.pid(), "-d", "1"],
        vec!["offcpu", "-p", &theirs.pid(), "-d", "1"],
        vec!["profile", "-p", &theirs.pid(), "-d", "1"],
        vec!["iosnoop", "-p", &theirs.pid(), "-d", "1"],
        vec!["faults", "-p", &theirs.pid(), "-d", "1"],
        vec!["syscalls", "-p", &theirs.pid(), "-d", "1"],
        vec!["exec-trace", "-p", &theirs.pid()],
    ] {
        let out = service.kdiag_as(learner, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("PID {} is {OTHER}'s, not yours", theirs.pid())),
            "{args:?}: {err}"
        );
        assert!(
            stdout(&out).is_empty(),
            "{args:?} printed a report: {}",
            stdout(&out)
        );
    }
    // iosnoop's perf tier (it cannot filter by user), or starting a
    // command as root elsewhere.
    for (args, says) in [
        (
            vec!["iosnoop", "--tier", "perf", "-d", "1"],
            "traces every user's",
        ),
        (
            vec!["diagnose", "-d", "1", "--", "true"],
            "does not start them",
        ),
    ] {
        let out = service.kdiag_as(learner, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn ps_through_the_service_shows_only_the_callers_processes() {
    let Some((learner, other)) = users("ps_through_the_service_shows_only_the_callers_processes")
    else {
        return;
    };
    let service = Service::start(&[]);
    let (mine, theirs) = two_workloads(learner, other);
    let out = service.kdiag_as(learner, &["ps"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let table = stdout(&out);
    let pids: Vec<&str> = table
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert!(pids.contains(&mine.pid().as_str()), "{table}");
    assert!(
        !pids.contains(&theirs.pid().as_str()) && !table.contains(SECRET) && !table.contains(OTHER),
        "{table}"
    );
    // And asking for them is refused, by name or by PID.
    for args in [vec!["ps", "-u", OTHER], vec!["ps", "-p", &theirs.pid()]] {
        let out = service.kdiag_as(learner, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stdout(&out));
        assert!(!stdout(&out).contains(SECRET));
    }
}

#[test]
fn the_lab_through_the_service_lists_only_the_callers_processes() {
    let Some((learner, other)) =
        users("the_lab_through_the_service_lists_only_the_callers_processes")
    else {
        return;
    };
    let service = Service::start(&[]);
    // Busy: at the top of a list sorted by CPU, were it listed.
    let theirs = Workload::start(other, &format!("while :; do :; done; : {SECRET}"));
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(dir.path(), Some(learner), Some(learner)).unwrap();
    let t = Tmux::start_sized(
        &format!(
            "setpriv --reuid={learner} --regid={learner} --clear-groups env KDIAG_SOCKET={} \
             {} lab 0-demo --dir {}; sleep 600",
            service.socket().display(),
            env!("CARGO_BIN_EXE_kdiag"),
            dir.path().display()
        ),
        120,
        40,
    );
    t.wait_for("the lab's introduction", |s| s.contains("Press any key"));
    t.keys(&["Space"]);
    // The learner's own workload listed, with its user.
    let screen = t.wait_for("the learner's processes listed", |s| s.contains("kdiag-le"));
    // A few refreshes of the list (one a second).
    std::thread::sleep(Duration::from_secs(3));
    let screen = screen + &t.screen();
    assert!(
        !screen.contains("kdiag-ot") && !screen.contains(&format!(" {} ", theirs.pid())),
        "another user's process listed:\n{screen}"
    );
    t.keys(&["q"]);
}

/// Speak the protocol by hand as `uid` (python3, which passes descriptors
/// with socket.send_fds): the frame `body` with stdin, stdout, stderr and
/// the working directory attached, then print every reply.
fn raw_request(uid: u32, socket: &Path, body: &str) -> String {
    let script = r#"
import json, os, socket, struct, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
body = sys.argv[2].encode()
cwd = os.open(".", os.O_PATH | os.O_DIRECTORY)
socket.send_fds(s, [struct.pack("<I", len(body)) + body], [0, 1, 2, cwd])
data = b""
while chunk := s.recv(4096): data += chunk
while len(data) >= 4:
    n = struct.unpack("<I", data[:4])[0]; print(data[4:4 + n].decode()); data = data[4 + n:]
"#;
    let mut cmd = Command::new("python3");
    cmd.args(["-c", script])
        .arg(socket)
        .arg(body)
        .uid(uid)
        .gid(uid)
        .current_dir("/");
    let (out, in_time) = output_within(dies_with_us(&mut cmd), Duration::from_secs(30));
    assert!(in_time && out.status.success(), "python3: {}", stderr(&out));
    stdout(&out)
}

#[test]
fn the_callers_identity_comes_from_the_kernel_not_the_request() {
    let Some((learner, other)) =
        users("the_callers_identity_comes_from_the_kernel_not_the_request")
    else {
        return;
    };
    let service = Service::start(&[]);
    let (_mine, theirs) = two_workloads(learner, other);
    // A field naming the caller is no part of the protocol: refused whole.
    let spoof = format!(
        r#"{{"type":"run","version":1,"argv":["ps","-p","{}"],"env":[],"uid":{other}}}"#,
        theirs.pid()
    );
    let replies = raw_request(learner, &service.socket(), &spoof);
    assert!(
        replies.contains(r#""type":"refused""#) && replies.contains("unknown field"),
        "{replies}"
    );
    // sudo's variables in the environment are not the caller either.
    let spoof = format!(
        r#"{{"type":"run","version":1,"argv":["ps","-p","{}"],"env":[["SUDO_UID","{other}"],["SUDO_USER","{OTHER}"]]}}"#,
        theirs.pid()
    );
    let replies = raw_request(learner, &service.socket(), &spoof);
    assert!(
        replies.contains("not yours") && !replies.contains(SECRET),
        "{replies}"
    );
    // Nor is a version the service does not speak served.
    let replies = raw_request(
        learner,
        &service.socket(),
        r#"{"type":"run","version":99,"argv":["ps"],"env":[]}"#,
    );
    assert!(replies.contains("version 99"), "{replies}");
    // Commands the service never runs for users.
    for argv in [
        r#"["watch","--listen","0.0.0.0:81"]"#,
        r#"["course","init","x.toml"]"#,
        r#"["workload","list"]"#,
    ] {
        let replies = raw_request(
            learner,
            &service.socket(),
            &format!(r#"{{"type":"run","version":1,"argv":{argv},"env":[]}}"#),
        );
        assert!(
            replies.contains(r#""type":"refused""#) && !replies.contains("started"),
            "{argv}: {replies}"
        );
    }
}

/// Whether the learner is still served within a few seconds.
fn learner_served(service: &Service, learner: u32) {
    let t = Instant::now();
    let out = service.kdiag_as(learner, &["ps"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "served only after {:?}",
        t.elapsed()
    );
}

#[test]
fn the_service_survives_garbage_disconnects_and_floods() {
    let Some((learner, _)) = users("the_service_survives_garbage_disconnects_and_floods") else {
        return;
    };
    let service = Service::start(&["--per-user", "4", "--per-minute", "1000"]);
    let socket = service.socket();
    // Garbage, an oversized frame, a cut frame, a disconnect mid-header,
    // each answered (or dropped) without harm; the test runs as root, a
    // user of its own to the service.
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let oversized = [0xff, 0xff, 0xff, 0x7f, b'{'];
    let cut = [20, 0, 0, 0, b'{', b'"'];
    for bytes in [&garbage[..], &oversized[..], &cut[..], &[7u8][..]] {
        let mut s = UnixStream::connect(&socket).unwrap();
        let _ = s.write_all(bytes);
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut reply = Vec::new();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = s.read_to_end(&mut reply);
        assert!(
            !reply.windows(7).any(|w| w == b"started"),
            "{}",
            String::from_utf8_lossy(&reply)
        );
    }
    // A flood: 200 connections held open without a word. Only `per_user`
    // wait for their deadline; the rest are refused at once.
    let flood: Vec<UnixStream> = (0..200)
        .filter_map(|_| UnixStream::connect(&socket).ok())
        .collect();
    learner_served(&service, learner);
    let mut refused = 0;
    for mut s in flood {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut reply = Vec::new();
        let _ = s.read_to_end(&mut reply);
        refused += String::from_utf8_lossy(&reply)
            .contains("at most 4 requests of one user at a time") as usize;
    }
    assert!(refused >= 190, "{refused} of 200 refused");
    learner_served(&service, learner);
    assert!(service.socket().exists());
}

/// The root kdiag the service runs for `args`, if any.
fn served_run(args: &str) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let words: Vec<_> = cmdline
            .split(|b| *b == 0)
            .map(String::from_utf8_lossy)
            .collect();
        (words.first()? == "kdiag" && words[1..].join(" ").trim() == args).then_some(pid)
    })
}

fn wait_gone(what: &str, args: &str) {
    let t = Instant::now();
    while served_run(args).is_some() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{what}: the service's run outlived it"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_run_ends_with_its_caller_and_with_the_service() {
    let Some((learner, other)) = users("a_run_ends_with_its_caller_and_with_the_service") else {
        return;
    };
    let mut service = Service::start(&[]);
    let (mine, _theirs) = two_workloads(learner, other);
    let args = format!("diagnose -p {} -d 100", mine.pid());
    let start = |service: &Service| {
        let mut cmd = kdiag();
        cmd.args(args.split(' '))
            .uid(learner)
            .gid(learner)
            .current_dir(service.dir.path())
            .env("KDIAG_SOCKET", service.socket())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let client = dies_with_us(&mut cmd).spawn().unwrap();
        let t = Instant::now();
        while served_run(&args).is_none() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the service never started {args}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        client
    };
    // Ctrl-C reaches the client; the run stops early with its report.
    let client = start(&service);
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: our own child.
    unsafe { libc::kill(client.id() as i32, libc::SIGINT) };
    let out = client.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(stdout(&out).contains("Verdict:"), "{}", stdout(&out));
    wait_gone("Ctrl-C", &args);
    // The client killed: so is its run.
    let mut client = start(&service);
    client.kill().unwrap();
    client.wait().unwrap();
    wait_gone("the client killed", &args);
    // The service killed: so are its runs, and its socket goes with the test's folder.
    let mut client = start(&service);
    service.child.kill().unwrap();
    service.child.wait().unwrap();
    wait_gone("the service killed", &args);
    let _ = client.kill();
    let _ = client.wait();
    let dir = service.dir.path().to_path_buf();
    drop(service);
    assert!(!dir.exists());
}

/// Run `podman` with `args`: its output.
fn podman(args: &[&str]) -> Output {
    let (out, in_time) = output_within(Command::new("podman").args(args), Duration::from_secs(120));
    assert!(in_time, "podman {args:?} did not finish");
    out
}

/// The images a test made, removed when dropped.
struct Images(Vec<String>);

impl Drop for Images {
    fn drop(&mut self) {
        for image in &self.0 {
            let _ = Command::new("podman").args(["rmi", "-f", image]).output();
        }
    }
}

#[test]
fn a_workspace_container_is_served_through_the_mounted_socket() {
    let test = "a_workspace_container_is_served_through_the_mounted_socket";
    let Some((learner, other)) = users(test) else {
        return;
    };
    if require_program(test, &["podman"], "podman").is_none()
        || require_program(test, &["runc"], "runc").is_none()
        || require_program(test, &["busybox"], "busybox-static").is_none()
    {
        return;
    }
    // A base image without a registry: static busybox and kdiag's libraries.
    let work = tempfile::tempdir().unwrap();
    let (root, ctx) = (work.path().join("root"), work.path().join("ctx"));
    for d in ["bin", "lib/x86_64-linux-gnu", "lib64", "etc", "tmp"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::create_dir_all(&ctx).unwrap();
    let busybox = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v busybox"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    std::fs::copy(busybox.trim(), root.join("bin/busybox")).unwrap();
    for applet in ["sh", "echo", "mkdir", "chown", "id"] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).unwrap();
    }
    let ldd = Command::new("ldd")
        .arg(env!("CARGO_BIN_EXE_kdiag"))
        .output()
        .unwrap();
    for lib in stdout(&ldd)
        .split_whitespace()
        .filter(|w| w.starts_with('/'))
    {
        std::fs::copy(lib, root.join(lib.trim_start_matches('/'))).unwrap();
    }
    std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    std::fs::write(root.join("etc/group"), "root:x:0:\n").unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_kdiag"), ctx.join("kdiag")).unwrap();
    let tag = format!("localhost/kdiag-test-{}", std::process::id());
    let (base, workspace) = (format!("{tag}-base"), format!("{tag}-workspace"));
    let _images = Images(vec![workspace.clone(), base.clone()]);
    let tar = work.path().join("base.tar");
    assert!(
        Command::new("tar")
            .arg("-C")
            .arg(&root)
            .arg("-cf")
            .arg(&tar)
            .arg(".")
            .status()
            .unwrap()
            .success()
    );
    let out = podman(&["import", tar.to_str().unwrap(), &base]);
    assert!(out.status.success(), "{}", stderr(&out));
    let containerfile = concat!(env!("CARGO_MANIFEST_DIR"), "/packaging/Containerfile");
    let out = podman(&[
        "build",
        "--runtime",
        "runc",
        "--build-arg",
        &format!("BASE={base}"),
        "-f",
        containerfile,
        "-t",
        &workspace,
        ctx.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));

    let service = Service::start(&[]);
    let (mine, theirs) = two_workloads(learner, other);
    let volume = format!("{}:/run/kdiag", service.dir.path().display());
    // The workspace's learner is uid 1001; here it runs as the host's
    // learner, whatever uid that account got (the service knows callers
    // by their host uid, and 1001 may be another account on this machine).
    let user = format!("{learner}:{learner}");
    let run = |pid_host: bool, script: &str| {
        let mut args = vec![
            "--runtime",
            "runc",
            "run",
            "--rm",
            "--user",
            &user,
            "--cap-drop",
            "all",
            "--network",
            "none",
            "--security-opt",
            "no-new-privileges",
            "--cgroup-manager",
            "cgroupfs",
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "nproc=1024:1024",
            "-v",
            &volume,
        ];
        if pid_host {
            args.extend(["--pid", "host"]);
        }
        args.extend([workspace.as_str(), "sh", "-c", script]);
        podman(&args)
    };
    let script = format!(
        "id -u; kdiag ps; echo rc=$?; kdiag diagnose -p {} -d 1; echo rc=$?; kdiag diagnose -p {} -d 1; echo rc=$?",
        mine.pid(),
        theirs.pid()
    );
    let out = run(true, &script);
    let (text, err) = (stdout(&out), stderr(&out));
    assert!(text.starts_with(&format!("{learner}\n")), "{text}");
    assert!(
        text.contains(&format!(" {} ", mine.pid())) && !text.contains(SECRET),
        "{text}"
    );
    assert!(
        text.contains(&format!("PID {} (sh)", mine.pid())),
        "{text}{err}"
    );
    assert!(
        text.matches("rc=0").count() == 2 && text.ends_with("rc=2\n"),
        "{text}"
    );
    assert!(err.contains("not yours"), "{err}");
    // In a PID namespace of its own, its PIDs are not the host's: refused.
    let out = run(
        false,
        &format!("kdiag diagnose -p {} -d 1; echo rc=$?", mine.pid()),
    );
    assert!(
        stdout(&out).ends_with("rc=2\n") && stderr(&out).contains("another PID namespace"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_units_verify_and_socket_activation_serves() {
    let test = "the_units_verify_and_socket_activation_serves";
    let Some((learner, other)) = users(test) else {
        return;
    };
    let Some(_) = require_program(test, &["systemd-analyze"], "systemd") else {
        return;
    };
    let Some(_) = require_program(test, &["systemd-socket-activate"], "systemd") else {
        return;
    };
    // The units as shipped, ExecStart pointed at the binary under test.
    let units = tempfile::tempdir().unwrap();
    let service = include_str!("../packaging/kdiag.service");
    let socket = include_str!("../packaging/kdiag.socket");
    assert!(
        socket.contains("ListenStream=/run/kdiag/kdiag.sock\nSocketMode=0666\n"),
        "{socket}"
    );
    assert!(
        service.contains("ExecStart=/usr/bin/kdiag serve\n"),
        "{service}"
    );
    let service = service.replace(
        "/usr/bin/kdiag serve",
        &format!("{} serve", env!("CARGO_BIN_EXE_kdiag")),
    );
    std::fs::write(units.path().join("kdiag.service"), service).unwrap();
    std::fs::write(units.path().join("kdiag.socket"), socket).unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(units.path().join("kdiag.socket"))
        .arg(units.path().join("kdiag.service"))
        .output()
        .unwrap();
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        out.status.success() && said.trim().is_empty(),
        "systemd-analyze verify: {said}"
    );

    // Socket activation as systemd does it: the socket at fd 3, LISTEN_FDS,
    // LISTEN_PID; --socket is then not bound.
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.path().join("kdiag.sock");
    let unused = dir.path().join("not-bound.sock");
    let mut activator = Command::new("systemd-socket-activate");
    activator
        .arg("-l")
        .arg(&path)
        .arg(env!("CARGO_BIN_EXE_kdiag"))
        .arg("serve")
        .arg("--socket")
        .arg(&unused);
    let mut activator = dies_with_us(&mut activator)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !path.exists() {
        assert!(t.elapsed() < Duration::from_secs(10), "no socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap(); // SocketMode=0666
    let (mine, _theirs) = two_workloads(learner, other);
    let mut cmd = kdiag();
    cmd.args(["ps", "-p", &mine.pid()])
        .uid(learner)
        .gid(learner)
        .current_dir(dir.path())
        .env("KDIAG_SOCKET", &path);
    let (out, in_time) = output_within(dies_with_us(&mut cmd), Duration::from_secs(30));
    assert!(in_time && out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!(" {} ", mine.pid())),
        "{}",
        stdout(&out)
    );
    assert!(!unused.exists());
    let _ = activator.kill();
    let _ = activator.wait();
}

/// A's programs are named `MINE` (an escape sequence in its comm) and
/// exec /bin/true with `MINE_ARG` and raw escapes; B's are named
/// `THEIRS` and exec /bin/true with SECRET. Each user has a process that
/// spins (for the samplers), one that execs and sleeps (for the exec
/// tracers and offcpu) and one that writes to the disk with O_DIRECT as
/// `MINE_IO` or `THEIRS_IO` (dd, for iosnoop: the folder is on a disk).
const MINE: &str = "mine\x1b[2J";
const MINE_SHOWN: &str = "mine?[2J";
const MINE_ARG: &str = "kdiag-learner-own-2323";
const MINE_IO: &str = "mine-io";
const THEIRS: &str = "othr-secret";
const THEIRS_IO: &str = "othr-secret-io";

struct Programs {
    dir: tempfile::TempDir,
    running: Vec<Workload>,
}

impl Programs {
    /// A's spinner and A's exec loop.
    fn spinner(&self) -> String {
        self.running[0].pid()
    }

    fn execs(&self) -> String {
        self.running[1].pid()
    }

    /// A process of A's that execs /bin/true with `MINE_ARG` for a few
    /// seconds, from 2 s on (when a tracer asked now is attached), then exits.
    fn brief_execs(&self, learner: u32) -> Workload {
        let sh = self.dir.path().join(MINE).display().to_string();
        Workload::start(
            learner,
            &format!(
                "exec '{sh}' -c 'sleep 2; i=0; while [ $i -lt 15 ]; do /bin/true {MINE_ARG}; \
                 sleep 0.2; i=$((i+1)); done'"
            ),
        )
    }
}

fn programs(learner: u32, other: u32) -> Programs {
    let dir = tempfile::tempdir().unwrap();
    // Each user's dd writes a file of its own here.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    for name in [MINE, THEIRS] {
        std::os::unix::fs::symlink("/bin/sh", dir.path().join(name)).unwrap();
    }
    for name in [MINE_IO, THEIRS_IO] {
        std::os::unix::fs::symlink("/bin/dd", dir.path().join(name)).unwrap();
    }
    let sh = |name: &str| dir.path().join(name).display().to_string();
    let run = |uid, name: &str, script: String| {
        Workload::start(uid, &format!("exec '{}' -c '{script}'", sh(name)))
    };
    let execs = |arg: &str| format!("while :; do /bin/true {arg}; sleep 0.2; done");
    let writes = |name: &str| {
        format!(
            "while :; do {} if=/dev/zero of={}.out bs=64k count=4 oflag=direct 2>/dev/null; \
             sleep 0.2; done",
            sh(name),
            sh(name)
        )
    };
    let running = vec![
        run(learner, MINE, "while :; do :; done".into()),
        run(
            learner,
            MINE,
            execs(&format!(
                "{MINE_ARG} \"$(printf \"\\033]0;X\\007\\033[2J\")\""
            )),
        ),
        run(other, THEIRS, "while :; do :; done".into()),
        run(
            other,
            THEIRS,
            execs(&format!("{SECRET} \"$(printf \"\\033[2J\")\"")),
        ),
        run(learner, MINE, writes(MINE_IO)),
        run(other, THEIRS, writes(THEIRS_IO)),
    ];
    Programs { dir, running }
}

/// What a learner must never see of kdiag-other's, nor raw escapes.
fn nothing_of_theirs(what: &str, out: &str) {
    for s in [SECRET, THEIRS, OTHER, "\x1b"] {
        assert!(!out.contains(s), "{what} showed {s:?}:\n{out}");
    }
}

#[test]
fn every_instrument_a_learner_runs_shows_theirs_and_never_anothers() {
    let Some((learner, other)) =
        users("every_instrument_a_learner_runs_shows_theirs_and_never_anothers")
    else {
        return;
    };
    let service = Service::start(&[]);
    let programs = programs(learner, other);
    // Both users' programs are running (and so tracing can see them).
    std::thread::sleep(Duration::from_millis(500));
    let (spinner, execs) = (programs.spinner(), programs.execs());

    // Each instrument, with what of the learner's it must show.
    for (args, own) in [
        (vec!["execsnoop", "-d", "2"], MINE_ARG),
        (vec!["execsnoop", "-d", "2", "--json"], MINE_ARG),
        (vec!["iosnoop", "-d", "2"], MINE_IO),
        (vec!["iosnoop", "-d", "2", "--json"], MINE_IO),
        (vec!["iosnoop", "-d", "2", "--summary"], MINE_IO),
        (vec!["profile", "-a", "-d", "2"], MINE_SHOWN),
        (vec!["offcpu", "-a", "-d", "2"], MINE_SHOWN),
        (vec!["top", "--once"], MINE_SHOWN),
        (vec!["ps"], MINE_SHOWN),
        (vec!["diagnose", "-p", &spinner, "-d", "2"], MINE_SHOWN),
        (vec!["faults", "-p", &execs, "-d", "2"], MINE_SHOWN),
        (vec!["syscalls", "-p", &execs, "-d", "2"], MINE_SHOWN),
        (vec!["exec-trace", "-p", "BRIEF"], MINE_ARG),
    ] {
        // exec-trace runs until its process exits: one of its own.
        let brief = (args[0] == "exec-trace").then(|| programs.brief_execs(learner));
        let brief_pid = brief.as_ref().map(Workload::pid);
        let args: Vec<&str> = args
            .iter()
            .map(|&a| match (a, &brief_pid) {
                ("BRIEF", Some(p)) => p.as_str(),
                _ => a,
            })
            .collect();
        let out = service.kdiag_as(learner, &args);
        let (text, err) = (stdout(&out), stderr(&out));
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(
            text.contains(own) || text.contains(&own.replace('?', "\\u001b")),
            "{args:?} did not show the learner's {own:?}:\n{text}\n{err}"
        );
        nothing_of_theirs(&format!("{args:?}"), &format!("{text}{err}"));
    }
}
