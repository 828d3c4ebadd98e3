//! The one HTTP sender of watch's exports (OTLP metrics and logs, profiles
//! to Pyroscope or an OpenTelemetry collector): requests POSTed on a thread
//! of its own, so a slow receiver never delays a scan. The queue is bounded
//! in requests and bytes; when full, the oldest request is dropped and
//! counted, so a receiver that is down costs no memory growth. A request
//! that fails is tried again after 1, then 2 s; a failure is logged once,
//! and the recovery once with the requests dropped meanwhile. Plain HTTP
//! only: TLS is a collector's job on the way out.

use std::collections::VecDeque;
use std::io::{Read as _, Write as _};
use std::net::{TcpStream, ToSocketAddrs as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Where the requests go: `http://HOST[:PORT][/PATH]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// HOST:PORT, as the Host header says it.
    pub(super) authority: String,
    /// The base path, without a trailing slash ("" for none).
    pub(super) base: String,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "http://{}{}", self.authority, self.base)
    }
}

/// A receiver's `http://` address, `port` when it names none; `example`
/// is what a bad one is told to look like.
pub fn endpoint(url: &str, port: u16, example: &str) -> Result<Endpoint, String> {
    if url.starts_with("https://") {
        return Err(format!(
            "{url}: kdiag sends plain HTTP without TLS; give the http:// address of a receiver on this host or network (an OpenTelemetry Collector or Alloy forwards with TLS)"
        ));
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return Err(format!("{url}: give an address such as {example}"));
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let has_port = match authority.rsplit_once(':') {
        // An IPv6 address's colons are inside its brackets.
        Some((host, p)) if !p.contains(']') => {
            p.parse::<u16>()
                .map_err(|_| format!("{url}: {p} is not a port (1 to 65535)"))?;
            if host.is_empty() {
                return Err(format!("{url}: no host"));
            }
            true
        }
        _ => false,
    };
    if authority.is_empty() || authority.contains(['@', '?', '#']) || path.contains(['?', '#']) {
        return Err(format!("{url}: give an address such as {example}"));
    }
    Ok(Endpoint {
        authority: if has_port {
            authority.to_string()
        } else {
            format!("{authority}:{port}")
        },
        base: path.trim_end_matches('/').to_string(),
    })
}

/// One POST.
pub struct Request {
    /// Below the endpoint's base path.
    pub path: &'static str,
    pub content_type: &'static str,
    pub headers: &'static [(&'static str, &'static str)],
    pub body: Vec<u8>,
}

/// How much may wait.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub requests: usize,
    pub bytes: usize,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Request>,
    bytes: usize,
    closed: bool,
}

type Shared = Arc<(Mutex<Queue>, Condvar)>;

pub struct Sender {
    shared: Shared,
    limits: Limits,
    dropped: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

/// Waits before the second and third tries of a request.
const RETRY_AFTER: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(2)];

impl Sender {
    /// `what` names the export in the log ("OTLP export", "Pyroscope push").
    pub fn start(what: &'static str, to: Endpoint, limits: Limits) -> anyhow::Result<Sender> {
        let shared: Shared = Arc::default();
        let dropped = Arc::new(AtomicU64::new(0));
        let (queue, counted) = (Arc::clone(&shared), Arc::clone(&dropped));
        let thread = std::thread::Builder::new()
            .name("watch-sender".into())
            .spawn(move || run(what, &to, &queue, &counted))?;
        Ok(Sender {
            shared,
            limits,
            dropped,
            thread: Some(thread),
        })
    }

    /// Queue a request, dropping the oldest ones that no longer fit.
    pub fn send(&self, r: Request) {
        let (lock, ready) = &*self.shared;
        let mut q = lock.lock().expect("the sender never panics holding it");
        q.bytes += r.body.len();
        q.waiting.push_back(r);
        while q.waiting.len() > self.limits.requests || q.bytes > self.limits.bytes {
            let Some(old) = q.waiting.pop_front() else {
                break;
            };
            q.bytes -= old.body.len();
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        ready.notify_one();
    }

    /// Requests dropped so far: the queue full, or every try failed.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl Drop for Sender {
    /// The request under way is finished (each try has its timeouts); the
    /// ones still waiting, and the retries, are given up.
    fn drop(&mut self) {
        let (lock, ready) = &*self.shared;
        lock.lock()
            .expect("the sender never panics holding it")
            .closed = true;
        ready.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(what: &str, to: &Endpoint, shared: &Shared, dropped: &AtomicU64) {
    let (lock, ready) = &**shared;
    let mut failing = false;
    let mut dropped_before = 0;
    loop {
        let request = {
            let mut q = lock.lock().expect("the sender never panics holding it");
            while q.waiting.is_empty() && !q.closed {
                q = ready.wait(q).expect("the sender never panics holding it");
            }
            if q.closed {
                return;
            }
            let r = q.waiting.pop_front().expect("not empty");
            q.bytes -= r.body.len();
            r
        };
        let mut sent = post(to, &request);
        for wait in RETRY_AFTER {
            if sent.is_ok() {
                break;
            }
            // Wait, unless watch is ending.
            let q = lock.lock().expect("the sender never panics holding it");
            let (q, _) = ready
                .wait_timeout_while(q, wait, |q| !q.closed)
                .expect("the sender never panics holding it");
            if q.closed {
                return;
            }
            drop(q);
            sent = post(to, &request);
        }
        match sent {
            Err(e) => {
                dropped.fetch_add(1, Ordering::Relaxed);
                if !failing {
                    eprintln!(
                        "kdiag watch: {what} to {to} failed: {e}; trying again, the oldest requests dropped while it fails"
                    );
                    failing = true;
                    dropped_before = dropped.load(Ordering::Relaxed) - 1;
                }
            }
            Ok(()) if failing => {
                let lost = dropped.load(Ordering::Relaxed) - dropped_before;
                eprintln!("kdiag watch: {what} to {to} works again ({lost} requests dropped)");
                failing = false;
            }
            Ok(()) => {}
        }
    }
}

/// POST the request; Ok on a 2xx answer.
fn post(to: &Endpoint, r: &Request) -> Result<(), String> {
    let addrs: Vec<_> = to
        .authority
        .to_socket_addrs()
        .map_err(|e| format!("{}: {e}", to.authority))?
        .collect();
    let mut conn = addrs
        .iter()
        .find_map(|a| TcpStream::connect_timeout(a, Duration::from_secs(2)).ok())
        .ok_or_else(|| format!("cannot connect to {}", to.authority))?;
    let io = |e: std::io::Error| e.to_string();
    conn.set_write_timeout(Some(Duration::from_secs(5)))
        .map_err(io)?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(io)?;
    let mut head = format!(
        "POST {}{} HTTP/1.1\r\nHost: {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nUser-Agent: kdiag/{}\r\nConnection: close\r\n",
        to.base,
        r.path,
        to.authority,
        r.content_type,
        r.body.len(),
        env!("CARGO_PKG_VERSION")
    );
    for (name, value) in r.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    conn.write_all(head.as_bytes()).map_err(io)?;
    conn.write_all(&r.body).map_err(io)?;
    // The status line is all that matters; the body (the service's
    // response, or an error) is not read further.
    let mut answer = [0u8; 256];
    let mut n = 0;
    while n < answer.len() && !answer[..n].contains(&b'\n') {
        match conn.read(&mut answer[n..]).map_err(io)? {
            0 => break,
            k => n += k,
        }
    }
    let line = String::from_utf8_lossy(&answer[..n]);
    let line = line.lines().next().unwrap_or("");
    match line.split_whitespace().nth(1) {
        Some(code) if code.starts_with('2') => Ok(()),
        Some(_) => Err(format!("the receiver answered {line:?} to {}", r.path)),
        None => Err(format!("no HTTP answer to {}", r.path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "http://127.0.0.1:4318";

    #[test]
    fn endpoints_take_a_port_and_a_base_path() {
        let e = endpoint("http://127.0.0.1:4318", 4318, EXAMPLE).unwrap();
        assert_eq!(e.to_string(), "http://127.0.0.1:4318");
        let e = endpoint("http://collector/otlp/", 4318, EXAMPLE).unwrap();
        assert_eq!(
            (e.authority.as_str(), e.base.as_str()),
            ("collector:4318", "/otlp")
        );
        let v6 = |u| endpoint(u, 4040, EXAMPLE).unwrap().authority;
        assert_eq!(v6("http://[::1]"), "[::1]:4040");
        assert_eq!(v6("http://[::1]:9"), "[::1]:9");
        let err = |u| endpoint(u, 4318, EXAMPLE).unwrap_err();
        assert!(err("https://c:4318").contains("without TLS"));
        assert!(err("c:4318").contains(EXAMPLE));
        assert!(err("http://c:99999").contains("not a port"));
        assert!(endpoint("http://", 1, EXAMPLE).is_err());
        assert!(endpoint("http://u@c", 1, EXAMPLE).is_err());
    }

    /// A receiver that never answers: the queue keeps the newest requests
    /// within its limits and counts the rest.
    #[test]
    fn a_full_queue_drops_the_oldest_and_counts_them() {
        // A port nothing listens on (bound, then closed).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let to = endpoint(&format!("http://127.0.0.1:{port}"), 1, EXAMPLE).unwrap();
        let limits = Limits {
            requests: 3,
            bytes: 1000,
        };
        let s = Sender::start("test", to, limits).unwrap();
        for i in 0..20u8 {
            s.send(Request {
                path: "/x",
                content_type: "a/b",
                headers: &[],
                body: vec![i; 100],
            });
        }
        {
            let q = s.shared.0.lock().unwrap();
            assert!(
                q.waiting.len() <= 3 && q.bytes <= 1000,
                "{}",
                q.waiting.len()
            );
            // The newest is kept.
            assert_eq!(q.waiting.back().unwrap().body[0], 19);
        }
        // 20 sent, at most 3 waiting and 1 being tried: the rest counted.
        assert!(s.dropped() >= 16, "{}", s.dropped());
        let big = Request {
            path: "/x",
            content_type: "a/b",
            headers: &[],
            body: vec![0; 2000],
        };
        s.send(big);
        assert!(s.shared.0.lock().unwrap().bytes <= 1000);
    }
}
