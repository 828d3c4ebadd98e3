//! The client's side: kdiag run by a user who may not trace asks the
//! service to run it for them, handing over its stdin, stdout, stderr and
//! working directory, passing on its signals, and exits with the run's code.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::listener::DEFAULT_SOCKET;
use super::protocol::{self, Reply, Request, VERSION};
use crate::sys::peer;

/// Whether this kdiag needs the service to trace: not root, and without
/// CAP_BPF and CAP_PERFMON.
pub fn needed() -> bool {
    !(crate::sys::process::privilege::is_root() || crate::sys::process::privilege::can_trace())
}

/// The service's socket, when there is one: `$KDIAG_SOCKET`, else the default.
pub fn socket() -> Option<PathBuf> {
    let path = std::env::var_os("KDIAG_SOCKET")
        .map_or_else(|| PathBuf::from(DEFAULT_SOCKET), PathBuf::from);
    path.exists().then_some(path)
}

/// Run kdiag `argv` through the service at `path`: the run's exit code.
pub fn run(path: &Path, argv: Vec<String>) -> anyhow::Result<u8> {
    let stream = UnixStream::connect(path)
        .with_context(|| format!("connecting to the kdiag service at {}", path.display()))?;
    // SAFETY: opening "." with O_PATH; the fd is wrapped at once.
    let cwd = unsafe {
        libc::open(
            c".".as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    anyhow::ensure!(
        cwd >= 0,
        "the working directory: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: a new fd of ours.
    let cwd = unsafe { OwnedFd::from_raw_fd(cwd) };
    let env = [
        "TERM", "COLUMNS", "LINES", "LANG", "LC_ALL", "LC_CTYPE", "NO_COLOR",
    ]
    .iter()
    .filter_map(|k| Some((k.to_string(), std::env::var(k).ok()?)))
    .collect();
    let request = protocol::encode(&Request::Run {
        version: VERSION,
        argv,
        env,
    });
    peer::send_with_fds(&stream, &request, &[0, 1, 2, cwd.as_raw_fd()])
        .context("sending the request to the kdiag service")?;
    drop(cwd);
    forward_signals(stream.try_clone()?)?;
    loop {
        match protocol::read::<Reply>(&mut &stream).context("reading the kdiag service's answer")? {
            Some(Reply::Started) => {}
            Some(Reply::Exit { code }) => return Ok(code),
            Some(Reply::Refused { message, code }) => {
                eprintln!("kdiag: error: {message}");
                return Ok(code);
            }
            None => anyhow::bail!("the kdiag service ended the run without its exit code"),
        }
    }
}

/// Ctrl-C and the like reach the client (the terminal's foreground
/// process): they go on to the run, which ends as it would with them.
fn forward_signals(stream: UnixStream) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGWINCH};
    let mut signals =
        signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH])?;
    std::thread::spawn(move || {
        for signal in signals.forever() {
            if protocol::write(&mut &stream, &Request::Signal { signal }).is_err() {
                break;
            }
        }
    });
    Ok(())
}
