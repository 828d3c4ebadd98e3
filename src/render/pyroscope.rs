//! Pyroscope's push API (grafana/pyroscope, api/push/v1/push.proto), as
//! Grafana Alloy calls it: `POST /push.v1.PusherService/Push`, the Connect
//! protocol's unary call with a protobuf body, a `PushRequest` of
//! `RawProfileSeries` (labels = 1, each a `types.v1.LabelPair`: name = 1,
//! value = 2; samples = 2, each a `RawSample`: raw_profile = 1, the gzip'd
//! pprof bytes of render::pprof).

use crate::render::protobuf::Msg;

pub const PATH: &str = "/push.v1.PusherService/Push";
/// Connect's protobuf encoding of a unary call.
pub const CONTENT_TYPE: &str = "application/proto";
pub const HEADERS: &[(&str, &str)] = &[("Connect-Protocol-Version", "1")];

/// One series: its labels (`service_name`, `__name__`, ...) and one
/// profile, gzip'd pprof.
pub struct Series {
    pub labels: Vec<(&'static str, String)>,
    pub pprof_gz: Vec<u8>,
}

/// The `PushRequest` of `series`, labels sorted by name as Pyroscope
/// keeps them.
pub fn push_request(series: &[Series]) -> Vec<u8> {
    let mut req = Msg::default();
    for s in series {
        let mut labels: Vec<_> = s.labels.iter().collect();
        labels.sort();
        let mut raw = Msg::default();
        for (name, value) in labels {
            let mut pair = Msg::default();
            pair.string(1, name).string(2, value);
            raw.msg(1, &pair);
        }
        let mut sample = Msg::default();
        sample.bytes(1, &s.pprof_gz);
        raw.msg(2, &sample);
        req.msg(1, &raw);
    }
    req.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_is_its_labels_then_its_profile() {
        let body = push_request(&[Series {
            labels: vec![("service_name", "b".into()), ("__name__", "a".into())],
            pprof_gz: vec![0x1f, 0x8b],
        }]);
        // series (1) { labels (1) {name "__name__" value "a"} labels (1)
        // {...} samples (2) {raw_profile (1) 1f 8b} }
        let pair = |n: &str, v: &str| {
            let mut m = vec![0x0a, n.len() as u8];
            m.extend(n.bytes());
            m.extend([0x12, v.len() as u8]);
            m.extend(v.bytes());
            m
        };
        let mut raw = Vec::new();
        for (n, v) in [("__name__", "a"), ("service_name", "b")] {
            let p = pair(n, v);
            raw.extend([0x0a, p.len() as u8]);
            raw.extend(p);
        }
        raw.extend([0x12, 4, 0x0a, 2, 0x1f, 0x8b]);
        let mut want = vec![0x0a, raw.len() as u8];
        want.extend(raw);
        assert_eq!(body, want);
    }
}
