//! `--otlp URL`: each scan's metrics, and the verdict changes and flight
//! records as log records, POSTed to an OpenTelemetry collector as
//! OTLP/HTTP with protobuf bodies (`URL/v1/metrics`, `URL/v1/logs`, as the
//! OTLP exporters' base URL is read), through the export sender
//! (sender.rs: its own thread, a bounded queue dropping the oldest,
//! retries).

use super::sender::{self, Endpoint, Limits, Request, Sender};
use crate::model::watch::{Event, Snapshot};
use crate::render::otlp::{self, CONTENT_TYPE};

/// OTLP/HTTP's default port.
pub const PORT: u16 = 4318;

/// `--otlp`'s value parser.
pub fn endpoint(url: &str) -> Result<Endpoint, String> {
    sender::endpoint(
        url,
        PORT,
        "http://127.0.0.1:4318 (a collector's OTLP/HTTP address)",
    )
}

/// A few scans' requests wait at most: the sums are cumulative, so the
/// newest export carries what a dropped one had.
const LIMITS: Limits = Limits {
    requests: 8,
    bytes: 8 << 20,
};

pub struct Exporter {
    source: otlp::Sender,
    sender: Sender,
}

impl Exporter {
    pub fn start(to: Endpoint) -> anyhow::Result<Exporter> {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let (_, now) = crate::instruments::target::utc_now();
        Ok(Exporter {
            source: otlp::Sender {
                host: host.trim().to_string(),
                start_unix_ns: now,
            },
            sender: Sender::start("OTLP export", to, LIMITS)?,
        })
    }

    /// Queue the scan's metrics and events.
    pub fn send(&self, s: &Snapshot, events: &[Event]) {
        let (_, now) = crate::instruments::target::utc_now();
        let request = |path, body| Request {
            path,
            content_type: CONTENT_TYPE,
            headers: &[],
            body,
        };
        self.sender
            .send(request("/v1/metrics", otlp::metrics(s, &self.source, now)));
        if !events.is_empty() {
            self.sender.send(request(
                "/v1/logs",
                otlp::logs(events, s, &self.source, now),
            ));
        }
    }
}
