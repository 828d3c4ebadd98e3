//! Who is on the other end of a Unix socket, as the kernel says
//! (`SO_PEERCRED`, `SO_PEERPIDFD`), and file descriptors passed over it
//! (`SCM_RIGHTS`): the service's identity and the client's terminal.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

/// `SO_PEERPIDFD` (Linux 6.5): not yet in the libc crate.
const SO_PEERPIDFD: libc::c_int = 77;

/// The peer of a connected socket: its credentials as of `connect()` and a
/// pidfd of its process (which, unlike a PID, cannot name another process
/// later).
#[derive(Debug)]
pub struct Peer {
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
    pub pidfd: OwnedFd,
}

impl Peer {
    /// The peer of `stream`; an error when the kernel cannot say, or when
    /// its process is already gone.
    pub fn of(stream: &UnixStream) -> io::Result<Peer> {
        let fd = stream.as_raw_fd();
        let mut cred = libc::ucred {
            pid: 0,
            uid: 0,
            gid: 0,
        };
        getsockopt(fd, libc::SO_PEERCRED, &mut cred)?;
        let mut raw: libc::c_int = -1;
        // Before 6.5 a pidfd of the PID: a race with the peer's exit and its
        // PID's reuse, closed by checking the credentials again after.
        let pidfd = match getsockopt(fd, SO_PEERPIDFD, &mut raw) {
            // SAFETY: the kernel gave us this new descriptor.
            Ok(()) => unsafe { OwnedFd::from_raw_fd(raw) },
            Err(_) => pidfd_open(cred.pid as u32)?,
        };
        let peer = Peer {
            uid: cred.uid,
            gid: cred.gid,
            pid: cred.pid as u32,
            pidfd,
        };
        if !peer.alive() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "the peer has exited",
            ));
        }
        Ok(peer)
    }

    /// Whether the peer's process still runs (signal 0 through its pidfd).
    pub fn alive(&self) -> bool {
        pidfd_signal(&self.pidfd, 0).is_ok()
    }

    /// Whether the peer sees the PIDs we see (the same PID namespace): a
    /// PID it names is then the process we would trace. Checked alive
    /// after, so the namespace read was the peer's.
    pub fn shares_pid_namespace(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        let ns = |pid: &str| {
            std::fs::metadata(format!("/proc/{pid}/ns/pid")).map(|m| (m.dev(), m.ino()))
        };
        matches!((ns("self"), ns(&self.pid.to_string())), (Ok(a), Ok(b)) if a == b) && self.alive()
    }
}

fn getsockopt<T>(fd: RawFd, opt: libc::c_int, out: &mut T) -> io::Result<()> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `out` is a valid T of `len` bytes.
    let rc =
        unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, opt, (out as *mut T).cast(), &mut len) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A pidfd of `pid` (it may be gone: the error says so).
pub fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    // SAFETY: a plain syscall; the result is a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel gave us this new descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Send `signal` (0: only check it lives) to the process of `pidfd`.
pub fn pidfd_signal(pidfd: &OwnedFd, signal: i32) -> io::Result<()> {
    // SAFETY: a plain syscall on a pidfd we own.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The most descriptors one message carries (stdin, stdout, stderr, cwd).
pub const MAX_FDS: usize = 4;

/// Send `data` with `fds` attached (`SCM_RIGHTS`): the receiver gets its
/// own copies of the open files, which the kernel checked when they were
/// opened by the sender.
pub fn send_with_fds(stream: &UnixStream, data: &[u8], fds: &[RawFd]) -> io::Result<()> {
    assert!(fds.len() <= MAX_FDS);
    let mut cmsg = [0u64; 8]; // aligned, room for MAX_FDS ints
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut _,
        iov_len: data.len(),
    };
    // SAFETY: zeroed msghdr is valid; the pointers outlive the call, and the
    // cmsg macros write within `cmsg`, whose size CMSG_SPACE bounds.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        let bytes = std::mem::size_of_val(fds) as u32;
        if !fds.is_empty() {
            msg.msg_control = cmsg.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(bytes) as _;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(bytes) as _;
            std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c).cast(), fds.len());
        }
        let n = libc::sendmsg(stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if (n as usize) < data.len() {
            // The descriptors went with the first bytes; the rest plainly.
            use std::io::Write;
            (&*stream).write_all(&data[n as usize..])?;
        }
    }
    Ok(())
}

/// Read up to `buf.len()` bytes, keeping any descriptors that came with
/// them in `fds` (owned: closed when dropped; more than MAX_FDS, or a cut
/// control message, is an error). 0 at end of stream.
pub fn recv_with_fds(
    stream: &UnixStream,
    buf: &mut [u8],
    fds: &mut Vec<OwnedFd>,
) -> io::Result<usize> {
    let mut cmsg = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: as in send_with_fds; every descriptor the kernel installed is
    // wrapped at once, so none leaks whatever follows.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cmsg) as _;
        let n = libc::recvmsg(stream.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let count =
                    ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / size_of::<RawFd>();
                let data = libc::CMSG_DATA(c).cast::<RawFd>();
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        if msg.msg_flags & libc::MSG_CTRUNC != 0 || fds.len() > MAX_FDS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "too many descriptors",
            ));
        }
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_socket_pair_knows_its_peer_and_passes_descriptors() {
        let (a, b) = UnixStream::pair().unwrap();
        let peer = Peer::of(&a).unwrap();
        // SAFETY: getuid cannot fail.
        assert_eq!(
            (peer.pid, peer.uid),
            (std::process::id(), unsafe { libc::getuid() })
        );
        assert!(peer.alive() && peer.shares_pid_namespace());

        let (mut r, w) = UnixStream::pair().unwrap();
        send_with_fds(&a, b"hello", &[w.as_raw_fd()]).unwrap();
        drop(w);
        let (mut buf, mut fds) = ([0u8; 16], Vec::new());
        let n = recv_with_fds(&b, &mut buf, &mut fds).unwrap();
        assert_eq!((&buf[..n], fds.len()), (&b"hello"[..], 1));
        // The passed copy writes to the same socket.
        let mut passed = UnixStream::from(fds.pop().unwrap());
        passed.write_all(b"x").unwrap();
        drop(passed);
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut r, &mut got).unwrap();
        assert_eq!(got, b"x");
    }
}
