//! `kdiag diagnose` on a stalled server: one thread asleep in one call the
//! whole window while connections wait in its accept queue is a `stall`,
//! not `idle`; the same server with an empty queue stays `idle`.

mod common;

use std::io::BufRead;
use std::net::TcpStream;
use std::process::{Child, Stdio};

use common::{command, require_program};
use serde_json::Value;

/// A server that listens, prints its port, and sleeps (as a server inside
/// a long call, Redis in `DEBUG SLEEP`, would).
const SERVER: &str = r#"
import socket, time
s = socket.socket()
s.bind(('127.0.0.1', 0))
s.listen(64)
print(s.getsockname()[1], flush=True)
time.sleep(600)
"#;

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Python running `script` with `args`, and its stdout to read lines from.
fn python_with_stdout(
    python: &str,
    script: &str,
    args: &[&std::ffi::OsStr],
) -> (Child, std::io::BufReader<std::process::ChildStdout>) {
    let mut child = command(python)
        .args(["-c", script])
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let out = std::io::BufReader::new(child.stdout.take().unwrap());
    (child, out)
}

/// Python running `script` with `args`, once it printed its first line.
fn start(python: &str, script: &str, args: &[&std::ffi::OsStr]) -> (Child, String) {
    let (child, mut out) = python_with_stdout(python, script, args);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    (child, line)
}

fn server(python: &str) -> Server {
    let (child, line) = start(python, SERVER, &[]);
    let port = line.trim().parse().expect("the port");
    Server { child, port }
}

fn diagnose(s: &Server) -> Value {
    common::diagnose_json(&["-d", "2", "--why", "none", "-p", &s.child.id().to_string()])
}

/// Held by each test: one stalled server and its control at a time, so a
/// test's 2 s window (and the time since the server last ran) is not
/// stretched by the other test's pair.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Both diagnosed at once: the same seconds, the same load.
fn both(stalled: &Server, quiet: &Server) -> (Value, Value) {
    std::thread::scope(|s| {
        let q = s.spawn(|| diagnose(quiet));
        (diagnose(stalled), q.join().unwrap())
    })
}

#[test]
fn a_server_asleep_with_connections_queued_is_stalled_not_idle() {
    let Some(python) = require_program(
        "a_server_asleep_with_connections_queued_is_stalled_not_idle",
        &["python3"],
        "python3",
    ) else {
        return;
    };
    let _g = one_at_a_time();
    let (stalled, quiet) = (server(python), server(python));
    // 20 clients the kernel has connected and nobody accepted.
    let _clients: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(("127.0.0.1", stalled.port)).unwrap())
        .collect();
    let (v, control) = both(&stalled, &quiet);
    let d = &v["diagnosis"];
    assert_eq!(d["verdict"], "stall", "{d:#}");
    let stall = &v["observation"]["stalls"][0];
    assert_eq!(stall["pid"], stalled.child.id(), "{stall}");
    assert_eq!(stall["call"], "clock_nanosleep", "{stall}");
    let l = &stall["waiting"]["listeners"][0];
    assert_eq!(l["port"], stalled.port, "{stall}");
    assert_eq!(
        (l["queued_start"].as_u64(), l["queued_end"].as_u64()),
        (Some(20), Some(20)),
        "{stall}"
    );
    // It slept since before the window (where the kernel keeps the time).
    if std::path::Path::new("/proc/self/sched").exists() {
        assert!(stall["so_far_s"].as_f64().unwrap() >= 1.9, "{stall}");
    }
    // Its stack: the interpreter's frames; the kernel's where root may read them.
    let stack: Vec<&str> = stall["stack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(!stack.is_empty(), "{stall}");
    if unsafe { libc::geteuid() } == 0 {
        assert!(
            stack
                .iter()
                .any(|f| f.contains("nanosleep") && f.ends_with("[k]")),
            "{stack:?}"
        );
    }
    let evidence = common::evidence_text(d).join("\n");
    assert!(evidence.contains("Thread states alone: idle"), "{evidence}");
    assert!(common::verdict_text(d).contains("20 connections"), "{d}");

    // The control: asleep the same way, nobody waiting.
    let c = &control["diagnosis"];
    assert_eq!(c["verdict"], "idle", "{c:#}");
    assert_eq!(
        control["observation"]["stalls"],
        serde_json::json!([]),
        "{control}"
    );
}

/// A server on a unix socket at `path`, asleep like `SERVER`.
const UNIX_SERVER: &str = r#"
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(64)
print('ready', flush=True)
time.sleep(600)
"#;

fn unix_server(python: &str, path: &std::path::Path) -> Server {
    let (child, line) = start(python, UNIX_SERVER, &[path.as_os_str()]);
    assert_eq!(line, "ready\n");
    Server { child, port: 0 }
}

/// The same on a unix socket: the connections queued on its listener are
/// the connecting sockets /proc/net/unix lists at its path.
#[test]
fn a_server_asleep_with_connections_queued_on_a_unix_socket_is_stalled() {
    let Some(python) = require_program(
        "a_server_asleep_with_connections_queued_on_a_unix_socket_is_stalled",
        &["python3"],
        "python3",
    ) else {
        return;
    };
    let _g = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let (path, quiet_path) = (
        dir.path().join("stalled.sock"),
        dir.path().join("quiet.sock"),
    );
    let (stalled, quiet) = (unix_server(python, &path), unix_server(python, &quiet_path));
    let _clients: Vec<_> = (0..5)
        .map(|_| std::os::unix::net::UnixStream::connect(&path).unwrap())
        .collect();
    let (v, control) = both(&stalled, &quiet);
    let d = &v["diagnosis"];
    assert_eq!(d["verdict"], "stall", "{d:#}");
    let stall = &v["observation"]["stalls"][0];
    let l = &stall["waiting"]["listeners"][0];
    assert_eq!(l["path"], path.to_str().unwrap(), "{stall}");
    assert_eq!(
        (l["queued_start"].as_u64(), l["queued_end"].as_u64()),
        (Some(5), Some(5)),
        "{stall}"
    );
    let summary = common::verdict_text(d);
    assert!(
        summary.contains(&format!(
            "5 connections wait in the accept queue of unix socket {}",
            path.display()
        )),
        "{summary}"
    );
    assert_eq!(control["diagnosis"]["verdict"], "idle", "{control}");
}

/// A server that accepts one connection, says so, and sleeps without
/// reading it (one long call, as a server inside `DEBUG SLEEP` would).
const READER: &str = r#"
import socket, time
s = socket.socket()
s.bind(('127.0.0.1', 0))
s.listen(64)
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
print('accepted', flush=True)
time.sleep(600)
"#;

/// The same on a unix socket at its first argument.
const UNIX_READER: &str = r#"
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(64)
print('ready', flush=True)
c, _ = s.accept()
print('accepted', flush=True)
time.sleep(600)
"#;

/// Starts `script` (with `args`), connects to it with `connect` (given
/// its first line), writes 3000 bytes it never reads, and checks the
/// verdict: a `stall` with those bytes unread on 1 connected socket, its
/// control asleep with nobody waiting `idle`.
fn bytes_unread_stall<W: std::io::Write>(
    python: &str,
    script: &str,
    args: &[&std::ffi::OsStr],
    connect: impl FnOnce(&str) -> W,
) {
    let _g = one_at_a_time();
    let (child, mut out) = python_with_stdout(python, script, args);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let stalled = Server { port: 0, child };
    let mut client = connect(line.trim());
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "accepted\n");
    // Written before the window; the server never reads them.
    client.write_all(&[b'x'; 3000]).unwrap();
    let quiet = server(python);
    let (v, control) = both(&stalled, &quiet);
    let d = &v["diagnosis"];
    assert_eq!(d["verdict"], "stall", "{d:#}");
    let stall = &v["observation"]["stalls"][0];
    assert_eq!(stall["pid"], stalled.child.id(), "{stall}");
    assert_eq!(stall["call"], "clock_nanosleep", "{stall}");
    let w = &stall["waiting"];
    assert_eq!(
        (w["unread_bytes"].as_u64(), w["unread_sockets"].as_u64()),
        (Some(3000), Some(1)),
        "{stall}"
    );
    assert_eq!(w["listeners"], serde_json::json!([]), "{stall}");
    if std::path::Path::new("/proc/self/sched").exists() {
        assert!(stall["so_far_s"].as_f64().unwrap() >= 1.9, "{stall}");
    }
    // The verdict names the call, how long, and the bytes waiting.
    let summary = common::verdict_text(d);
    for words in [
        "stayed in clock_nanosleep",
        "s so far",
        "3000 bytes lie unread on 1 connected socket",
    ] {
        assert!(summary.contains(words), "{words:?} in {summary}");
    }
    assert_eq!(control["diagnosis"]["verdict"], "idle", "{control}");
}

/// The work waiting is bytes a client wrote on a connection the server
/// accepted and never reads: the receive queue of its connected socket in
/// /proc/net/tcp, matched to its socket inode.
#[test]
fn a_server_asleep_with_bytes_unread_on_a_connection_is_stalled() {
    let Some(python) = require_program(
        "a_server_asleep_with_bytes_unread_on_a_connection_is_stalled",
        &["python3"],
        "python3",
    ) else {
        return;
    };
    bytes_unread_stall(python, READER, &[], |port| {
        TcpStream::connect(("127.0.0.1", port.parse().expect("the port"))).unwrap()
    });
}

/// The same on a unix connection, whose receive queue /proc/net/unix does
/// not show: the kernel's socket diagnosis (netlink) gives it.
#[test]
fn a_server_asleep_with_bytes_unread_on_a_unix_connection_is_stalled() {
    let Some(python) = require_program(
        "a_server_asleep_with_bytes_unread_on_a_unix_connection_is_stalled",
        &["python3"],
        "python3",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reader.sock");
    bytes_unread_stall(python, UNIX_READER, &[path.as_os_str()], |line| {
        assert_eq!(line, "ready");
        std::os::unix::net::UnixStream::connect(&path).unwrap()
    });
}
