//! Work queued on a process's sockets, without tracing: its socket inodes
//! (`/proc/PID/fd/N` → `socket:[INODE]`) matched to the TCP tables of its
//! network namespace (`/proc/PID/net/tcp`, `tcp6`). A listening socket's
//! receive queue there is its accept queue (connections the kernel has
//! completed and nobody accepted yet), a connected one's the bytes
//! received and not read.

use std::collections::HashSet;

/// One TCP socket of the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSocket {
    pub inode: u64,
    pub port: u16,
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

/// The TCP sockets (v4 and v6) of `pid`'s network namespace that are among
/// `inodes`.
pub fn tcp(pid: i32, inodes: &HashSet<u64>) -> Vec<TcpSocket> {
    if inodes.is_empty() {
        return Vec::new();
    }
    ["tcp", "tcp6"]
        .iter()
        .filter_map(|t| std::fs::read_to_string(format!("/proc/{pid}/net/{t}")).ok())
        .flat_map(|text| parse_tcp(&text))
        .filter(|s| inodes.contains(&s.inode))
        .collect()
}

/// The rows of a /proc/net/tcp or tcp6 table (the header skipped).
fn parse_tcp(text: &str) -> Vec<TcpSocket> {
    text.lines().skip(1).filter_map(row).collect()
}

/// "sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...".
fn row(line: &str) -> Option<TcpSocket> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let port = u16::from_str_radix(f.get(1)?.rsplit(':').next()?, 16).ok()?;
    let state = u8::from_str_radix(f.get(3)?, 16).ok()?;
    let (_, rx) = f.get(4)?.split_once(':')?;
    Some(TcpSocket {
        inode: f.get(9)?.parse().ok()?,
        port,
        listening: state == LISTEN,
        queued: u64::from_str_radix(rx, 16).ok()?,
    })
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
                TcpSocket {
                    inode: 91234,
                    port: 0xa4d1,
                    listening: true,
                    queued: 20
                },
                TcpSocket {
                    inode: 91240,
                    port: 0xa4d1,
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
        let mine = tcp(pid, &socket_inodes(pid));
        let s = mine
            .iter()
            .find(|s| s.listening && s.port == addr.port())
            .expect("the listener");
        assert_eq!(s.queued, 2);
    }
}
