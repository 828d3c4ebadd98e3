//! A test binary that re-runs itself as the process kdiag traces: the
//! helper is an ignored test of that binary, told what to do by an
//! environment variable (`run`: act and exit; `wait`: wait for a line on
//! stdin, act, say `done`, wait for stdin to close), so a test knows when
//! its calls happened.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};

/// The command line that runs the ignored test `name` of this binary.
pub fn args(name: &str) -> Vec<String> {
    vec![
        std::env::current_exe().unwrap().display().to_string(),
        "--exact".into(),
        name.into(),
        "--ignored".into(),
        "--test-threads=1".into(),
        "--nocapture".into(),
    ]
}

/// The helper's body: `act` as `$env` says, or nothing when the test
/// runs as itself (the variable unset).
pub fn main(env: &str, act: impl FnOnce(bool)) {
    let Ok(mode) = std::env::var(env) else {
        return;
    };
    let wait = mode == "wait";
    let mut line = String::new();
    if wait {
        std::io::stdin().read_line(&mut line).unwrap();
    }
    act(wait);
    if wait {
        println!("done");
        std::io::stdout().flush().unwrap();
        let _ = std::io::stdin().read_to_string(&mut line);
    }
}

/// kdiag `kdiag_args` plus `-p` of a waiting helper (`name`, told by
/// `env`): once kdiag's stderr has a line starting with `ready`, the helper
/// acts; once it says `done`, kdiag is stopped with SIGINT. kdiag's exit
/// status, stdout and stderr.
pub fn traced_while_acting(
    env: &str,
    name: &str,
    kdiag_args: &[&str],
    ready: &str,
) -> (ExitStatus, Vec<u8>, String) {
    let args = args(name);
    let mut helper: Child = Command::new(&args[0])
        .args(&args[1..])
        .env(env, "wait")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = helper.id().to_string();
    let mut tracer = super::kdiag()
        .args(kdiag_args)
        .args(["-p", &pid])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(tracer.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        assert_ne!(
            err.read_line(&mut line).unwrap(),
            0,
            "kdiag ended before tracing:\n{seen}"
        );
        seen += &line;
        if line.starts_with(ready) {
            break;
        }
    }
    writeln!(helper.stdin.as_mut().unwrap(), "go").unwrap();
    let mut lines = BufReader::new(helper.stdout.take().unwrap()).lines();
    assert!(
        // The harness writes `test NAME ... ` before it, on the line.
        lines.any(|l| l.unwrap().ends_with("done")),
        "the helper ended without acting"
    );
    // SAFETY: signalling our own child.
    unsafe { libc::kill(tracer.id() as i32, libc::SIGINT) };
    let mut stdout = Vec::new();
    tracer
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    err.read_to_string(&mut seen).unwrap();
    let status = tracer.wait().unwrap();
    drop(helper.stdin.take());
    helper.wait().unwrap();
    (status, stdout, seen)
}
