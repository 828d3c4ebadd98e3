//! `kdiag diagnose` on a stalled server: one thread asleep in one call the
//! whole window while connections wait in its accept queue is a `stall`,
//! not `idle`; the same server with an empty queue stays `idle`.

mod common;

use std::io::BufRead;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use common::require_program;
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

fn server(python: &str) -> Server {
    let mut child = Command::new(python)
        .args(["-c", SERVER])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().parse().expect("the port");
    Server { child, port }
}

fn diagnose(s: &Server) -> Value {
    common::diagnose_json(&["-d", "2", "--why", "none", "-p", &s.child.id().to_string()])
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
    let (stalled, quiet) = (server(python), server(python));
    // 20 clients the kernel has connected and nobody accepted.
    let _clients: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(("127.0.0.1", stalled.port)).unwrap())
        .collect();
    // Both watched at once: the same seconds, the same load.
    let (v, control) = std::thread::scope(|s| {
        let q = s.spawn(|| diagnose(&quiet));
        (diagnose(&stalled), q.join().unwrap())
    });
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
