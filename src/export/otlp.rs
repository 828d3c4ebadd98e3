//! `--otlp URL`: each scan's metrics, and the verdict changes and flight
//! records as log records, POSTed to an OpenTelemetry collector as
//! OTLP/HTTP with protobuf bodies (`URL/v1/metrics`, `URL/v1/logs`, as the
//! OTLP exporters' base URL is read). Sent on a thread of its own, so a
//! slow collector never delays a scan: at most one scan's requests wait,
//! and a scan that finds them still waiting is dropped (the sums are
//! cumulative, so the next export carries them). A failure is logged once,
//! and the recovery once. Plain HTTP only: TLS is the collector's job on
//! the way out.

use std::io::{Read as _, Write as _};
use std::net::{TcpStream, ToSocketAddrs as _};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::model::watch::{Event, Snapshot};
use crate::render::otlp::{self, CONTENT_TYPE, Sender};

/// OTLP/HTTP's default port.
const PORT: u16 = 4318;

/// Where the requests go: `http://HOST[:PORT][/PATH]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// HOST:PORT, as the Host header says it.
    authority: String,
    /// The base path, without a trailing slash ("" for none).
    base: String,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "http://{}{}", self.authority, self.base)
    }
}

/// `--otlp`'s value parser.
pub fn endpoint(url: &str) -> Result<Endpoint, String> {
    if url.starts_with("https://") {
        return Err(format!(
            "{url}: kdiag sends OTLP/HTTP without TLS; give the http:// address of a collector on this host or network (an OpenTelemetry Collector forwards with TLS)"
        ));
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return Err(format!(
            "{url}: give a collector's OTLP/HTTP address, e.g. http://127.0.0.1:4318"
        ));
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let has_port = match authority.rsplit_once(':') {
        // An IPv6 address's colons are inside its brackets.
        Some((host, port)) if !port.contains(']') => {
            port.parse::<u16>()
                .map_err(|_| format!("{url}: {port} is not a port (1 to 65535)"))?;
            if host.is_empty() {
                return Err(format!("{url}: no host"));
            }
            true
        }
        _ => false,
    };
    if authority.is_empty() || authority.contains(['@', '?', '#']) || path.contains(['?', '#']) {
        return Err(format!(
            "{url}: give a collector's OTLP/HTTP address, e.g. http://127.0.0.1:4318"
        ));
    }
    Ok(Endpoint {
        authority: if has_port {
            authority.to_string()
        } else {
            format!("{authority}:{PORT}")
        },
        base: path.trim_end_matches('/').to_string(),
    })
}

/// One scan's requests: (path, protobuf body).
type Batch = Vec<(&'static str, Vec<u8>)>;

pub struct Exporter {
    source: Sender,
    tx: Option<SyncSender<Batch>>,
    thread: Option<JoinHandle<()>>,
}

impl Exporter {
    pub fn start(to: Endpoint) -> anyhow::Result<Exporter> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(1);
        let thread = std::thread::Builder::new()
            .name("watch-otlp".into())
            .spawn(move || {
                let mut failing = false;
                for batch in rx {
                    let sent = batch
                        .iter()
                        .try_for_each(|(path, body)| post(&to, path, body));
                    match sent {
                        Err(e) if !failing => {
                            eprintln!(
                                "kdiag watch: OTLP export to {to} failed: {e}; trying again each scan"
                            );
                            failing = true;
                        }
                        Ok(()) if failing => {
                            eprintln!("kdiag watch: OTLP export to {to} works again");
                            failing = false;
                        }
                        _ => {}
                    }
                }
            })?;
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let (_, now) = crate::instruments::target::utc_now();
        Ok(Exporter {
            source: Sender {
                host: host.trim().to_string(),
                start_unix_ns: now,
            },
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Queue the scan's metrics and events, unless the last scan's are
    /// still waiting.
    pub fn send(&self, s: &Snapshot, events: &[Event]) {
        let (_, now) = crate::instruments::target::utc_now();
        let mut batch = vec![("/v1/metrics", otlp::metrics(s, &self.source, now))];
        if !events.is_empty() {
            batch.push(("/v1/logs", otlp::logs(events, s, &self.source, now)));
        }
        if let Some(tx) = &self.tx
            && let Err(TrySendError::Full(_)) = tx.try_send(batch)
        {
            // The collector is slow: this scan is dropped.
        }
    }
}

impl Drop for Exporter {
    /// The requests under way are finished (each has its timeouts).
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// POST `body` to the collector; Ok on a 2xx answer.
fn post(to: &Endpoint, path: &str, body: &[u8]) -> Result<(), String> {
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
    let head = format!(
        "POST {}{path} HTTP/1.1\r\nHost: {}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\nUser-Agent: kdiag/{}\r\nConnection: close\r\n\r\n",
        to.base,
        to.authority,
        body.len(),
        env!("CARGO_PKG_VERSION")
    );
    conn.write_all(head.as_bytes()).map_err(io)?;
    conn.write_all(body).map_err(io)?;
    // The status line is all that matters; the body (an Export*Response,
    // or an error) is not read further.
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
        Some(_) => Err(format!("the collector answered {line:?} to {path}")),
        None => Err(format!("no HTTP answer to {path}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_take_a_port_and_a_base_path() {
        let e = endpoint("http://127.0.0.1:4318").unwrap();
        assert_eq!(e.to_string(), "http://127.0.0.1:4318");
        let e = endpoint("http://collector/otlp/").unwrap();
        assert_eq!(
            (e.authority.as_str(), e.base.as_str()),
            ("collector:4318", "/otlp")
        );
        assert_eq!(endpoint("http://[::1]").unwrap().authority, "[::1]:4318");
        assert_eq!(endpoint("http://[::1]:9").unwrap().authority, "[::1]:9");
        assert!(
            endpoint("https://c:4318")
                .unwrap_err()
                .contains("without TLS")
        );
        assert!(
            endpoint("c:4318")
                .unwrap_err()
                .contains("http://127.0.0.1:4318")
        );
        assert!(
            endpoint("http://c:99999")
                .unwrap_err()
                .contains("not a port")
        );
        assert!(endpoint("http://").is_err());
        assert!(endpoint("http://u@c").is_err());
    }
}
