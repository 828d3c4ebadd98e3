//! The service's listening socket: handed over by systemd (socket
//! activation: `LISTEN_FDS`, `LISTEN_PID`, the socket at fd 3, also what
//! `systemd-socket-activate` does), or bound here when started by hand.

use std::fs;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The socket a client looks for unless `$KDIAG_SOCKET` names another.
pub const DEFAULT_SOCKET: &str = "/run/kdiag/kdiag.sock";

/// The listener, and the path to remove at the end when we bound it.
pub struct Listening {
    pub listener: UnixListener,
    pub bound: Option<PathBuf>,
}

impl Drop for Listening {
    fn drop(&mut self) {
        if let Some(path) = &self.bound {
            let _ = fs::remove_file(path);
        }
    }
}

/// The socket systemd passed, else `path` bound now: its folder made 0755
/// if missing, a stale socket replaced, the socket 0666 (anyone may ask;
/// the service decides by who asks).
pub fn listen(path: &Path) -> anyhow::Result<Listening> {
    if !crate::sys::process::privilege::is_root() {
        return Err(crate::error::usage(
            "kdiag serve runs as root (it traces for its callers)",
        ));
    }
    if let Some(listener) = activated()? {
        return Ok(Listening {
            listener,
            bound: None,
        });
    }
    if let Some(dir) = path.parent().filter(|d| !d.exists()) {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o755))?;
    }
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                bail!("{} is served already (another kdiag serve)", path.display());
            }
            fs::remove_file(path)?;
        }
        Ok(_) => bail!(
            "{} exists and is not a socket: not replacing it",
            path.display()
        ),
        Err(_) => {}
    }
    let listener =
        UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o666))?;
    Ok(Listening {
        listener,
        bound: Some(path.to_path_buf()),
    })
}

/// The listening socket of socket activation (sd_listen_fds' rules: only
/// when LISTEN_PID is ours; the variables unset so children do not take
/// the socket for theirs).
fn activated() -> anyhow::Result<Option<UnixListener>> {
    let pid = std::env::var("LISTEN_PID")
        .ok()
        .and_then(|p| p.parse::<u32>().ok());
    let fds = std::env::var("LISTEN_FDS")
        .ok()
        .and_then(|n| n.parse::<u32>().ok());
    // SAFETY: before any thread, in the service's start.
    unsafe {
        std::env::remove_var("LISTEN_PID");
        std::env::remove_var("LISTEN_FDS");
        std::env::remove_var("LISTEN_FDNAMES");
    }
    if pid != Some(std::process::id()) || fds.unwrap_or(0) == 0 {
        return Ok(None);
    }
    const FIRST: RawFd = 3;
    let (mut listening, mut len): (libc::c_int, libc::socklen_t) = (0, 4);
    // SAFETY: fd 3 is ours by the protocol; getsockopt only reads it.
    let rc = unsafe {
        libc::getsockopt(
            FIRST,
            libc::SOL_SOCKET,
            libc::SO_ACCEPTCONN,
            (&mut listening as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 || listening == 0 {
        bail!("socket activation passed fd 3, which is not a listening socket");
    }
    // SAFETY: a listening socket passed to us alone; the flag keeps it from
    // the runs we start.
    unsafe { libc::fcntl(FIRST, libc::F_SETFD, libc::FD_CLOEXEC) };
    Ok(Some(unsafe { UnixListener::from_raw_fd(FIRST) }))
}
