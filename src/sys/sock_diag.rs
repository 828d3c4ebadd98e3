//! The receive queues of unix sockets, which /proc/net/unix does not show,
//! from the kernel's socket-diagnosis netlink family (NETLINK_SOCK_DIAG, as
//! `ss -x` reads them): one dump of every unix socket of kdiag's network
//! namespace, each with UNIX_DIAG_RQLEN. The structures are those of
//! linux/sock_diag.h, linux/unix_diag.h and linux/netlink.h.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// One unix socket's type and queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnixQueue {
    /// SOCK_STREAM, SOCK_DGRAM or SOCK_SEQPACKET.
    pub kind: u8,
    /// TCP_ESTABLISHED (1) connected, TCP_LISTEN (10) listening, ...
    pub state: u8,
    /// Listening: connections not yet accepted; else bytes unread (for a
    /// datagram socket, the first datagram's).
    pub rqueue: u32,
}

/// TCP_ESTABLISHED in `state`: a connected socket.
pub const ESTABLISHED: u8 = 1;

/// SOCK_DIAG_BY_FAMILY (linux/sock_diag.h).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// linux/netlink.h.
const NLM_F_REQUEST: u16 = 0x01;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
/// UDIAG_SHOW_RQLEN and its answer, UNIX_DIAG_RQLEN (linux/unix_diag.h).
const UDIAG_SHOW_RQLEN: u32 = 0x10;
const UNIX_DIAG_RQLEN: u16 = 4;
/// The sequence number of kdiag's one request.
const SEQ: u32 = 1;

/// struct nlmsghdr (linux/netlink.h).
#[repr(C)]
#[derive(Clone, Copy)]
struct NlMsgHdr {
    len: u32,
    kind: u16,
    flags: u16,
    seq: u32,
    pid: u32,
}

/// struct unix_diag_req (linux/unix_diag.h).
#[repr(C)]
#[derive(Clone, Copy)]
struct UnixDiagReq {
    sdiag_family: u8,
    sdiag_protocol: u8,
    pad: u16,
    udiag_states: u32,
    udiag_ino: u32,
    udiag_show: u32,
    udiag_cookie: [u32; 2],
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Request {
    hdr: NlMsgHdr,
    req: UnixDiagReq,
}

const HDR: usize = std::mem::size_of::<NlMsgHdr>();
/// struct unix_diag_msg: family, type, state, pad (u8 each), ino (u32),
/// cookie (2 × u32).
const MSG: usize = 16;

/// Whether `pid` is in kdiag's network namespace (the only one the dump
/// answers for); false when either link cannot be read.
pub fn same_netns(pid: i32) -> bool {
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/net")).ok();
    match (ns("self"), ns(&pid.to_string())) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// Every unix socket of kdiag's network namespace by inode.
pub fn unix_queues() -> io::Result<HashMap<u64, UnixQueue>> {
    // SAFETY: plain socket(2); the fd is owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by socket(2) and nobody else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let request = Request {
        hdr: NlMsgHdr {
            len: std::mem::size_of::<Request>() as u32,
            kind: SOCK_DIAG_BY_FAMILY,
            flags: NLM_F_REQUEST | NLM_F_DUMP,
            seq: SEQ,
            pid: 0,
        },
        req: UnixDiagReq {
            sdiag_family: libc::AF_UNIX as u8,
            sdiag_protocol: 0,
            pad: 0,
            udiag_states: u32::MAX,
            udiag_ino: 0,
            udiag_show: UDIAG_SHOW_RQLEN,
            udiag_cookie: [0; 2],
        },
    };
    // SAFETY: an all-zero sockaddr_nl is valid; the kernel is port 0.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as u16;
    // SAFETY: the request and the address are valid for their sizes.
    let sent = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            (&request as *const Request).cast(),
            std::mem::size_of::<Request>(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut all = HashMap::new();
    // Large enough for any one datagram of the dump (the kernel sizes them
    // to the reader's buffer, up to 32 KiB).
    let mut buf = vec![0u8; 64 << 10];
    loop {
        // SAFETY: buf is valid for its length.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if parse(&buf[..n as usize], &mut all)? {
            return Ok(all);
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().unwrap())
}

/// Netlink's 4-byte alignment.
fn align(n: usize) -> usize {
    (n + 3) & !3
}

/// One datagram of the dump (one or more messages) into `all`; true once
/// NLMSG_DONE ends it, an error for NLMSG_ERROR or a malformed message.
fn parse(buf: &[u8], all: &mut HashMap<u64, UnixQueue>) -> io::Result<bool> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed sock_diag message");
    let mut at = 0;
    while at + HDR <= buf.len() {
        let len = u32_at(buf, at) as usize;
        let kind = u16_at(buf, at + 4);
        if len < HDR || at + len > buf.len() {
            return Err(bad());
        }
        let msg = &buf[at..at + len];
        at += align(len);
        if u32_at(msg, 8) != SEQ {
            continue;
        }
        match kind {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                // struct nlmsgerr: a negative errno (0 is an acknowledgement).
                let errno = msg.get(HDR..HDR + 4).ok_or_else(bad)?;
                let errno = i32::from_ne_bytes(errno.try_into().unwrap());
                return Err(io::Error::from_raw_os_error(-errno));
            }
            SOCK_DIAG_BY_FAMILY => {}
            _ => continue,
        }
        let body = &msg[HDR..];
        if body.len() < MSG {
            return Err(bad());
        }
        let (kind, state, ino) = (body[1], body[2], u32_at(body, 4));
        // The attributes (struct rtattr: len, type, then the value).
        let mut a = MSG;
        while a + 4 <= body.len() {
            let alen = u16_at(body, a) as usize;
            if alen < 4 || a + alen > body.len() {
                return Err(bad());
            }
            if u16_at(body, a + 2) == UNIX_DIAG_RQLEN && alen >= 12 {
                let rqueue = u32_at(body, a + 4);
                all.insert(
                    ino as u64,
                    UnixQueue {
                        kind,
                        state,
                        rqueue,
                    },
                );
            }
            a += align(alen);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A datagram of a dump laid out as the kernel sends it (little-endian,
    /// NLM_F_MULTI, the fields checked against `ss -x`'s): a connected
    /// stream socket (inode 0x1b2d3 = 111315) with 3000 bytes unread, a
    /// listener (inode 111316) with 2 connections queued and a backlog of
    /// 64, then NLMSG_DONE.
    const CAPTURED: &str = "\
        2c000000 1400 0200 01000000 00000000 \
        01 01 01 00 d3b20100 01000000 00000000 \
        0c00 0400 b80b0000 00000000 \
        2c000000 1400 0200 01000000 00000000 \
        01 01 0a 00 d4b20100 02000000 00000000 \
        0c00 0400 02000000 40000000 \
        14000000 0300 0200 01000000 00000000 00000000";

    fn bytes(hex: &str) -> Vec<u8> {
        let hex: String = hex.split_whitespace().collect();
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn parses_a_dump_to_its_end() {
        let mut all = HashMap::new();
        assert!(parse(&bytes(CAPTURED), &mut all).unwrap());
        assert_eq!(
            all[&111315],
            UnixQueue {
                kind: libc::SOCK_STREAM as u8,
                state: ESTABLISHED,
                rqueue: 3000
            }
        );
        assert_eq!((all[&111316].state, all[&111316].rqueue), (10, 2));
        // Without NLMSG_DONE the dump goes on; an error ends it.
        let b = bytes(CAPTURED);
        assert!(!parse(&b[..88], &mut HashMap::new()).unwrap());
        let mut err = bytes("24000000 0200 0000 01000000 00000000 feffffff");
        err.extend([0; 16]);
        let e = parse(&err, &mut HashMap::new()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        // A message longer than the datagram is refused, not read past.
        assert!(parse(&b[..60], &mut HashMap::new()).is_err());
    }

    /// A connected pair of this process: the bytes written on one end lie
    /// unread on the other.
    #[test]
    fn a_real_socket_pair() {
        use std::io::Write;
        use std::os::linux::fs::MetadataExt;
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.write_all(&[b'x'; 1234]).unwrap();
        let ino = |fd: i32| {
            std::fs::metadata(format!("/proc/self/fd/{fd}"))
                .unwrap()
                .st_ino()
        };
        let all = unix_queues().unwrap();
        let q = all[&ino(b.as_raw_fd())];
        assert_eq!((q.state, q.rqueue), (ESTABLISHED, 1234));
        assert_eq!(all[&ino(a.as_raw_fd())].rqueue, 0);
        assert!(same_netns(std::process::id() as i32));
    }
}
