//! Work queued on a process's sockets, without tracing: its socket inodes
//! (`/proc/PID/fd/N` → `socket:[INODE]`) matched to the socket tables of
//! its network namespace. In the TCP tables (`/proc/PID/net/tcp`, `tcp6`)
//! a listening socket's receive queue is its accept queue (connections the
//! kernel has completed and nobody accepted yet), a connected one's the
//! bytes received and not read. The unix table (`/proc/PID/net/unix`)
//! shows no queue, but lists each connection queued on a listener as a
//! socket of its own: connecting, with no inode yet, at the listener's
//! path; the bytes unread on a connected unix socket come from the
//! kernel's socket diagnosis (`sys::sock_diag`), when the process is in
//! kdiag's network namespace (the only one it answers for).

use std::collections::{HashMap, HashSet};

use crate::sys::sock_diag;

/// One socket of the process with its queue: TCP (a port) or unix (a
/// listener's path, or a connected socket's unread bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Socket {
    pub inode: u64,
    pub port: u16,
    /// A unix listener's path ("@name" for an abstract one).
    pub path: Option<String>,
    pub listening: bool,
    /// Listening: connections waiting to be accepted; else bytes unread.
    /// (The table shows no backlog limit: its tx_queue of a listener is 0.)
    pub queued: u64,
}

/// The TCP state of a listening socket in /proc/net/tcp.
const LISTEN: u8 = 0x0a;

/// The inodes of the sockets `pid` has open; empty when its fds cannot be
/// read (gone, or not ours).
pub fn socket_inodes(pid: i32) -> HashSet<u64> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return HashSet::new();
    };
    dir.filter_map(|e| {
        let link = std::fs::read_link(e.ok()?.path()).ok()?;
        let s = link.to_str()?;
        s.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
    })
    .collect()
}

/// The socket tables of one round (a window's start or its end), each
/// read once: the tables of every network namespace met, for all its
/// processes, and kdiag's own namespace's unix queues, dumped once.
#[derive(Default)]
pub struct Tables {
    /// By the namespace's link ("net:[4026531840]"): tcp, tcp6 and unix.
    netns: HashMap<std::path::PathBuf, [String; 3]>,
    /// None until first needed; empty when the dump fails.
    own_queues: Option<HashMap<u64, sock_diag::UnixQueue>>,
}

impl Tables {
    /// `pid`'s TCP sockets, unix listeners (with the connections queued on
    /// each) and connected unix sockets with bytes unread (known only in
    /// kdiag's network namespace); none when its fds cannot be read.
    pub fn of(&mut self, pid: i32) -> Vec<Socket> {
        let inodes = socket_inodes(pid);
        let Some(netns) = (!inodes.is_empty())
            .then(|| std::fs::read_link(format!("/proc/{pid}/ns/net")).ok())
            .flatten()
        else {
            return Vec::new();
        };
        let [tcp, tcp6, unix] = self.netns.entry(netns).or_insert_with(|| {
            ["tcp", "tcp6", "unix"].map(|t| {
                std::fs::read_to_string(format!("/proc/{pid}/net/{t}")).unwrap_or_default()
            })
        });
        let mut all: Vec<Socket> = parse_tcp(tcp)
            .into_iter()
            .chain(parse_tcp(tcp6))
            .filter(|s| inodes.contains(&s.inode))
            .collect();
        all.extend(parse_unix(unix, &inodes));
        if sock_diag::same_netns(pid) {
            let queues = self
                .own_queues
                .get_or_insert_with(|| sock_diag::unix_queues().unwrap_or_default());
            all.extend(unread_unix(queues, &inodes));
        }
        all
    }
}

/// The rows of a /proc/net/tcp or tcp6 table (the header skipped).
fn parse_tcp(text: &str) -> Vec<Socket> {
    text.lines().skip(1).filter_map(row).collect()
}

/// "sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...".
fn row(line: &str) -> Option<Socket> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let port = u16::from_str_radix(f.get(1)?.rsplit(':').next()?, 16).ok()?;
    let state = u8::from_str_radix(f.get(3)?, 16).ok()?;
    let (_, rx) = f.get(4)?.split_once(':')?;
    Some(Socket {
        inode: f.get(9)?.parse().ok()?,
        port,
        path: None,
        listening: state == LISTEN,
        queued: u64::from_str_radix(rx, 16).ok()?,
    })
}

/// The connected stream (or seqpacket) sockets among `inodes` with bytes
/// unread; their queues count every byte, a datagram socket's only the
/// first datagram's.
fn unread_unix(queues: &HashMap<u64, sock_diag::UnixQueue>, inodes: &HashSet<u64>) -> Vec<Socket> {
    let mut v: Vec<Socket> = inodes
        .iter()
        .filter_map(|&inode| {
            let q = queues.get(&inode)?;
            let byte_stream = [libc::SOCK_STREAM, libc::SOCK_SEQPACKET].contains(&(q.kind as i32));
            (byte_stream && q.state == sock_diag::ESTABLISHED && q.rqueue > 0).then_some(Socket {
                inode,
                port: 0,
                path: None,
                listening: false,
                queued: q.rqueue as u64,
            })
        })
        .collect();
    v.sort_by_key(|s| s.inode);
    v
}

/// The socket is listening (`__SO_ACCEPTCON` in the Flags column).
const ACCEPTCON: u32 = 0x10000;
/// SS_CONNECTING in the St column: a connection queued on a listener.
const CONNECTING: u8 = 2;

/// "Num RefCount Protocol Flags Type St Inode Path": the listeners among
/// `inodes`, with the connecting sockets (inode 0) at their path counted.
fn parse_unix(text: &str, inodes: &HashSet<u64>) -> Vec<Socket> {
    let rows: Vec<(u32, u8, u64, &str)> = text
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            Some((
                u32::from_str_radix(f.get(3)?, 16).ok()?,
                u8::from_str_radix(f.get(5)?, 16).ok()?,
                f.get(6)?.parse().ok()?,
                f.get(7).copied().unwrap_or(""),
            ))
        })
        .collect();
    rows.iter()
        .filter(|(flags, _, inode, path)| {
            flags & ACCEPTCON != 0 && !path.is_empty() && inodes.contains(inode)
        })
        .map(|&(_, _, inode, path)| Socket {
            inode,
            port: 0,
            path: Some(path.to_string()),
            listening: true,
            queued: rows
                .iter()
                .filter(|r| r.1 == CONNECTING && r.2 == 0 && r.3 == path)
                .count() as u64,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:A4D1 00000000:0000 0A 00000080:00000014 00:00000000 00000000     0        0 91234 1 0000000000000000 100 0 0 10 0
   1: 0100007F:A4D1 0100007F:C350 01 00000000:00000005 00:00000000 00000000     0        0 91240 1 0000000000000000 20 4 30 10 -1
";

    #[test]
    fn reads_the_accept_queue_and_unread_bytes() {
        let s = parse_tcp(TABLE);
        assert_eq!(
            s,
            vec![
                Socket {
                    inode: 91234,
                    port: 0xa4d1,
                    path: None,
                    listening: true,
                    queued: 20
                },
                Socket {
                    inode: 91240,
                    port: 0xa4d1,
                    path: None,
                    listening: false,
                    queued: 5
                },
            ]
        );
    }

    /// A listener of this process with two connections nobody accepted.
    #[test]
    fn a_real_accept_queue() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let _c: Vec<_> = (0..2)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        let pid = std::process::id() as i32;
        let mine = Tables::default().of(pid);
        let s = mine
            .iter()
            .find(|s| s.listening && s.port == addr.port())
            .expect("the listener");
        assert_eq!(s.queued, 2);
    }

    const UNIX: &str = "Num       RefCount Protocol Flags    Type St Inode Path
0000000039f787f6: 00000003 00000000 00000000 0001 02     0 /run/app.sock
0000000022ea3210: 00000003 00000000 00000000 0001 02     0 /run/app.sock
000000007a848e98: 00000002 00000000 00010000 0001 01 1645920 /run/app.sock
000000007a848e99: 00000002 00000000 00010000 0001 01 1645921 @abstract
0000000001ebe29e: 00000003 00000000 00000000 0001 03 1618834
";

    #[test]
    fn counts_the_connections_queued_on_a_unix_listener() {
        let mine: HashSet<u64> = [1645920, 1645921, 1618834].into();
        let s = parse_unix(UNIX, &mine);
        let queued: Vec<(&str, u64)> = s
            .iter()
            .map(|s| (s.path.as_deref().unwrap(), s.queued))
            .collect();
        assert_eq!(queued, [("/run/app.sock", 2), ("@abstract", 0)]);
        // Another process's listener is not ours.
        assert!(parse_unix(UNIX, &[1618834].into()).is_empty());
    }

    /// A unix listener of this process with three connections nobody
    /// accepted.
    #[test]
    fn a_real_unix_accept_queue() {
        use std::os::unix::net::{UnixListener, UnixStream};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("queue.sock");
        let _l = UnixListener::bind(&path).unwrap();
        let _c: Vec<_> = (0..3)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        let pid = std::process::id() as i32;
        let mine = Tables::default().of(pid);
        let s = mine
            .iter()
            .find(|s| s.path.as_deref() == path.to_str())
            .expect("the listener");
        assert_eq!(s.queued, 3);
    }

    /// A connected unix pair of this process: the bytes one end wrote lie
    /// unread on the other.
    #[test]
    fn bytes_unread_on_a_real_unix_connection() {
        use std::io::Write;
        let (mut a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.write_all(&[b'x'; 3000]).unwrap();
        let pid = std::process::id() as i32;
        let unread: Vec<u64> = Tables::default()
            .of(pid)
            .iter()
            .filter(|s| !s.listening)
            .map(|s| s.queued)
            .collect();
        assert!(unread.contains(&3000), "{unread:?}");
    }
}
