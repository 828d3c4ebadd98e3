//! The service's loop: accept a connection, learn from the kernel who is
//! on the other end, read one bounded request (with the caller's stdin,
//! stdout, stderr and working directory attached), let `Decide` refuse it
//! or say what to run, and run kdiag for the caller in a child of ours
//! writing straight to the caller's own descriptors, until it ends or the
//! caller goes.
//!
//! Bounded everywhere, so that one caller cannot starve another: a
//! deadline for the request, at most `per_user` connections of one uid and
//! `total` of everyone, at most `runs_per_minute` runs of one uid. Each
//! connection has a thread of its own; its child dies with it
//! (PDEATHSIG), and with the service, SIGKILL included.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::protocol::{self, Reply, Request, VERSION};
use crate::sys::peer::{self, Peer};
use crate::sys::process::privilege;

/// How much one caller, and everyone, may ask.
#[derive(Debug, Clone)]
pub struct Limits {
    pub per_user: usize,
    pub total: usize,
    pub runs_per_minute: usize,
    /// For the request to arrive whole.
    pub request_deadline: Duration,
}

/// What the service does for `peer` asking `argv`: the arguments to run
/// kdiag with, or a refusal (message, exit code).
pub type Decide = dyn Fn(&Peer, &[String]) -> Result<Vec<String>, (String, u8)> + Send + Sync;

/// The environment a run keeps from its caller: how their terminal looks.
const CALLER_ENV: &[&str] = &[
    "TERM", "COLUMNS", "LINES", "LANG", "LC_ALL", "LC_CTYPE", "NO_COLOR",
];
/// Signals a caller may pass on to their run.
const SIGNALS: &[i32] = &[
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGWINCH,
];

#[derive(Default)]
struct Load {
    open: HashMap<u32, usize>,
    runs: HashMap<u32, VecDeque<Instant>>,
    total: usize,
}

/// One open connection counted until it is dropped.
struct Slot {
    load: Arc<Mutex<Load>>,
    uid: u32,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut load = self.load.lock().unwrap_or_else(|p| p.into_inner());
        load.total -= 1;
        if let Some(n) = load.open.get_mut(&self.uid) {
            *n -= 1;
        }
    }
}

/// Serve until `stop` is set (checked every quarter second).
pub fn serve(
    listener: &UnixListener,
    limits: Limits,
    decide: Arc<Decide>,
    stop: &AtomicBool,
) -> io::Result<()> {
    let load = Arc::new(Mutex::new(Load::default()));
    listener.set_nonblocking(true)?;
    while !stop.load(Ordering::Relaxed) {
        let mut pfd = libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, 250) };
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                continue;
            }
            Err(e)
                if e.raw_os_error() == Some(libc::EMFILE)
                    || e.raw_os_error() == Some(libc::ENFILE) =>
            {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            Err(e) => return Err(e),
        };
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
        let Ok(peer) = Peer::of(&stream) else {
            continue;
        };
        let slot = match admit(&load, &limits, peer.uid) {
            Ok(slot) => slot,
            Err(why) => {
                let _ = protocol::write(
                    &mut &stream,
                    &Reply::Refused {
                        message: why,
                        code: 1,
                    },
                );
                continue;
            }
        };
        let (limits, decide) = (limits.clone(), decide.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("serve-{}", peer.uid))
            .spawn(move || {
                let _slot = slot;
                connection(stream, peer, &limits, &*decide);
            });
        if let Err(e) = spawned {
            eprintln!("kdiag serve: no thread for a connection: {e}");
        }
    }
    Ok(())
}

fn admit(load: &Arc<Mutex<Load>>, limits: &Limits, uid: u32) -> Result<Slot, String> {
    let mut l = load.lock().unwrap_or_else(|p| p.into_inner());
    let open = l.open.get(&uid).copied().unwrap_or(0);
    if open >= limits.per_user {
        return Err(format!(
            "the kdiag service runs at most {} requests of one user at a time",
            limits.per_user
        ));
    }
    if l.total >= limits.total {
        return Err("the kdiag service is busy: try again in a moment".into());
    }
    let runs = l.runs.entry(uid).or_default();
    let minute_ago = Instant::now() - Duration::from_secs(60);
    while runs.front().is_some_and(|t| *t < minute_ago) {
        runs.pop_front();
    }
    if runs.len() >= limits.runs_per_minute {
        return Err(format!(
            "the kdiag service takes at most {} requests a minute from one user",
            limits.runs_per_minute
        ));
    }
    runs.push_back(Instant::now());
    l.total += 1;
    *l.open.entry(uid).or_default() += 1;
    Ok(Slot {
        load: load.clone(),
        uid,
    })
}

fn connection(stream: UnixStream, peer: Peer, limits: &Limits, decide: &Decide) {
    let refuse = |message: String, code: u8| {
        eprintln!(
            "kdiag serve: uid {} pid {}: refused: {message}",
            peer.uid, peer.pid
        );
        let _ = protocol::write(&mut &stream, &Reply::Refused { message, code });
    };
    let _ = stream.set_read_timeout(Some(limits.request_deadline));
    let (request, fds) = match first_request(&stream) {
        Ok(r) => r,
        Err(e) => return refuse(format!("not a kdiag request: {e}"), 2),
    };
    let Request::Run { version, argv, env } = request else {
        return refuse("a connection starts with a run request".into(), 2);
    };
    if version != VERSION {
        return refuse(
            format!(
                "this kdiag speaks version {version} of the service's protocol, the service {VERSION}: use the same kdiag"
            ),
            2,
        );
    }
    let Ok([stdin, stdout, stderr, cwd]) = <[OwnedFd; 4]>::try_from(fds) else {
        return refuse(
            "a run request carries stdin, stdout, stderr and the working directory".into(),
            2,
        );
    };
    if !is_dir(&cwd) {
        return refuse("the fourth descriptor is not a directory".into(), 2);
    }
    let argv = match decide(&peer, &argv) {
        Ok(a) => a,
        Err((message, code)) => return refuse(message, code),
    };
    let env: Vec<_> = env
        .into_iter()
        .filter(|(k, v)| CALLER_ENV.contains(&k.as_str()) && !v.contains('\0'))
        .collect();
    let mut child = match start(&peer, &argv, env, [stdin, stdout, stderr], &cwd) {
        Ok(c) => c,
        Err(e) => return refuse(format!("the service could not start kdiag: {e}"), 1),
    };
    eprintln!(
        "kdiag serve: uid {} pid {}: kdiag {}",
        peer.uid,
        peer.pid,
        argv.join(" ")
    );
    let code = match protocol::write(&mut &stream, &Reply::Started) {
        Ok(()) => supervise(&stream, &mut child),
        Err(_) => None,
    };
    match code {
        Some(code) => {
            let _ = protocol::write(&mut &stream, &Reply::Exit { code });
        }
        None => end(&mut child), // the caller went: so does their run
    }
}

/// The first request and the descriptors attached to its first bytes.
fn first_request(stream: &UnixStream) -> io::Result<(Request, Vec<OwnedFd>)> {
    let (mut header, mut got, mut fds) = ([0u8; 4], 0, Vec::new());
    while got < 4 {
        match peer::recv_with_fds(stream, &mut header[got..], &mut fds)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => got += n,
        }
    }
    let mut body = vec![0u8; protocol::frame_len(header, protocol::MAX_REQUEST)?];
    io::Read::read_exact(&mut &*stream, &mut body)?;
    Ok((protocol::decode(&body)?, fds))
}

fn is_dir(fd: &OwnedFd) -> bool {
    // SAFETY: fstat into a zeroed stat of a valid fd.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    unsafe {
        libc::fstat(fd.as_raw_fd(), &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFDIR
    }
}

/// kdiag run as root for `peer` (SUDO_UID and SUDO_GID name them, as sudo
/// does: files they name are opened as them, commands run as them), in
/// their working directory, on their terminal, in a session of its own.
fn start(
    peer: &Peer,
    argv: &[String],
    env: Vec<(String, String)>,
    stdio: [OwnedFd; 3],
    cwd: &OwnedFd,
) -> io::Result<Child> {
    let [stdin, stdout, stderr] = stdio;
    let name = privilege::user_name(peer.uid).unwrap_or_else(|| peer.uid.to_string());
    let mut cmd = std::process::Command::new("/proc/self/exe");
    cmd.arg0("kdiag")
        .args(argv)
        .env_clear()
        .envs(env)
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .env("HOME", "/root")
        .env("SUDO_UID", peer.uid.to_string())
        .env("SUDO_GID", peer.gid.to_string())
        .env("SUDO_USER", name)
        .env(privilege::SERVED, "1")
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr));
    let cwd = cwd.as_raw_fd();
    // SAFETY: async-signal-safe calls only. PDEATHSIG: this thread waits for
    // the child, so the child ends when the thread's connection or the
    // whole service does.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fchdir(cwd) != 0
                || libc::setsid() < 0
                || libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        })
    };
    cmd.spawn()
}

/// Wait for the run to end, passing the caller's signals on: its exit code,
/// or None when the caller went first.
fn supervise(stream: &UnixStream, child: &mut Child) -> Option<u8> {
    let pidfd = peer::pidfd_open(child.id()).ok()?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    loop {
        let mut fds = [
            libc::pollfd {
                fd: stream.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: pidfd.as_fd().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfds.
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
            continue; // EINTR
        }
        if fds[1].revents != 0 {
            let status = child.wait().ok()?;
            return Some(match (status.code(), status.signal()) {
                (Some(c), _) => c as u8,
                (None, Some(s)) => 128 + s as u8,
                _ => 1,
            });
        }
        match protocol::read::<Request>(&mut &*stream) {
            Ok(Some(Request::Signal { signal })) if SIGNALS.contains(&signal) => {
                let _ = peer::pidfd_signal(&pidfd, signal);
            }
            Ok(Some(_)) => {} // nothing else is asked mid-run
            Ok(None) | Err(_) => return None,
        }
    }
}

/// Stop a run whose caller has gone: SIGTERM (kdiag stops its tracing and
/// its commands), SIGKILL after 3 s.
fn end(child: &mut Child) {
    // SAFETY: our own unreaped child: its PID is still its own.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(3) {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}
