//! One run of `kdiag diagnose` as one plain value: where and when, what it
//! watched, what it concluded and what the drill-downs found. The live run
//! and `--replay` render the very same value; `--record` saves it as JSON
//! lines, the record format of docs/diagnose.md ("Record format"): a header
//! line, then one line per record kind.
//!
//! (`Why`, what the drill-downs found, is defined in model::drill.)

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::diagnosis::Observation;
use crate::model::drill::Why;
use crate::model::verdict::Diagnosis;

/// The header's `format`: what the file is.
pub const RECORD_FORMAT: &str = "kdiag-diagnose";
/// The record format's major version: raised when a field or record kind is
/// removed or renamed or changes meaning (a reader refuses a newer one).
/// New fields and kinds keep it: readers skip what they do not know.
/// Version 2 stores the verdict as data (`model::verdict`); version 1's
/// were sentences, and are refused.
pub const RECORD_VERSION: u32 = 2;

/// Where and when the run happened.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunMeta {
    /// The kdiag version that watched.
    pub kdiag: String,
    /// The machine's host name and kernel release.
    pub host: String,
    pub kernel: String,
    /// When watching started (UTC, RFC 3339).
    pub started: String,
}

/// Everything one run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct DiagnoseRun {
    pub meta: RunMeta,
    pub observation: Observation,
    pub diagnosis: Diagnosis,
    /// The drill-downs' findings (None with `--why none`, or none called for).
    pub why: Option<Why>,
}

/// The first line of a record.
#[derive(Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    #[serde(flatten)]
    meta: RunMeta,
}

/// One line after the header: `{"kind": "observation", "data": {...}}`.
#[derive(Serialize, Deserialize)]
struct Line<T> {
    kind: String,
    data: T,
}

/// A record file that cannot be replayed: where, and why.
#[derive(Debug, PartialEq, thiserror::Error)]
pub struct RecordError {
    /// The file (set by the caller that read it).
    pub path: Option<PathBuf>,
    /// 1-based.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = &self.path {
            write!(f, "{}:", p.display())?;
        }
        write!(f, "{}: {}", self.line, self.message)
    }
}

impl RecordError {
    pub fn in_file(self, path: impl Into<PathBuf>) -> RecordError {
        RecordError {
            path: Some(path.into()),
            ..self
        }
    }
}

fn fail(line: usize, message: impl Into<String>) -> RecordError {
    RecordError {
        path: None,
        line,
        message: message.into(),
    }
}

impl DiagnoseRun {
    /// The record: the header line, then one line per record kind.
    pub fn to_record(&self) -> String {
        let header = Header {
            format: RECORD_FORMAT.into(),
            version: RECORD_VERSION,
            meta: self.meta.clone(),
        };
        let mut out = json_line(&header);
        out += &json_line(&Line {
            kind: "observation".into(),
            data: &self.observation,
        });
        out += &json_line(&Line {
            kind: "diagnosis".into(),
            data: &self.diagnosis,
        });
        // A new kind (the trend's series) is one more line here and one
        // more arm in `from_record`.
        if let Some(why) = &self.why {
            out += &json_line(&Line {
                kind: "why".into(),
                data: why,
            });
        }
        out
    }

    /// Read a record back (see `to_record`); errors name the line.
    pub fn from_record(text: &str) -> Result<DiagnoseRun, RecordError> {
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
        let not_ours = "not a kdiag diagnose record (made by `kdiag diagnose --record FILE`)";
        let (_, first) = lines
            .next()
            .ok_or_else(|| fail(1, format!("empty: {not_ours}")))?;
        let header: Header = serde_json::from_str(first)
            .ok()
            .filter(|h: &Header| h.format == RECORD_FORMAT)
            .ok_or_else(|| fail(1, format!("{not_ours}: its first line is no header")))?;
        if header.version > RECORD_VERSION || header.version == 0 {
            return Err(fail(
                1,
                format!(
                    "recorded by kdiag {} in record format version {}; this kdiag ({}) reads \
                     version {RECORD_VERSION}: replay it with a kdiag as new as the one that recorded it",
                    header.meta.kdiag,
                    header.version,
                    env!("CARGO_PKG_VERSION")
                ),
            ));
        }
        if header.version < RECORD_VERSION {
            return Err(fail(
                1,
                format!(
                    "recorded by kdiag {} in record format version {}, whose verdicts are \
                     sentences; this kdiag ({}) reads version {RECORD_VERSION}, verdicts as data: \
                     replay it with the kdiag that recorded it, or record the run again",
                    header.meta.kdiag,
                    header.version,
                    env!("CARGO_PKG_VERSION")
                ),
            ));
        }
        let (mut observation, mut diagnosis, mut why) = (None, None, None);
        let mut last = 1;
        for (n, text) in lines {
            last = n;
            if text.trim().is_empty() {
                continue;
            }
            let line: Line<Value> = serde_json::from_str(text)
                .map_err(|e| fail(n, format!("damaged: not a record line ({e})")))?;
            let data = line.data;
            let damaged =
                |e: serde_json::Error| fail(n, format!("damaged {} record: {e}", line.kind));
            let twice = || fail(n, format!("a second {} record", line.kind));
            match line.kind.as_str() {
                "observation" if observation.is_some() => return Err(twice()),
                "observation" => observation = Some(serde_json::from_value(data).map_err(damaged)?),
                "diagnosis" if diagnosis.is_some() => return Err(twice()),
                "diagnosis" => diagnosis = Some((n, data)),
                "why" if why.is_some() => return Err(twice()),
                "why" => why = Some(serde_json::from_value(data).map_err(damaged)?),
                // A kind added later, within the same major version.
                _ => {}
            }
        }
        let missing = |kind: &str| {
            fail(
                last,
                format!(
                    "no {kind} record by the end: the file is incomplete (was the recording cut short?)"
                ),
            )
        };
        let observation: Observation = observation.ok_or_else(|| missing("observation"))?;
        let (n, mut data) = diagnosis.ok_or_else(|| missing("diagnosis"))?;
        fault_reads_as_finding(&mut data, observation.window_s);
        let diagnosis = serde_json::from_value(data)
            .map_err(|e| fail(n, format!("damaged diagnosis record: {e}")))?;
        Ok(DiagnoseRun {
            meta: header.meta,
            observation,
            diagnosis,
            why,
        })
    }
}

/// Records made before the fault reads were a finding kept them in
/// `diagnosis.fault_reads`: read that as the finding, last, where the
/// report printed it then.
fn fault_reads_as_finding(diagnosis: &mut Value, window_s: f64) {
    let Some(d) = diagnosis.as_object_mut() else {
        return;
    };
    let Some(reads) = d.remove("fault_reads").filter(|r| !r.is_null()) else {
        return;
    };
    if let Some(Value::Array(findings)) = d.get_mut("findings") {
        findings.push(serde_json::json!({
            "kind": "fault-reads", "reads": reads, "window_s": window_s
        }));
    }
}

fn json_line(v: &impl Serialize) -> String {
    // Plain data with string keys always serialises.
    let mut s = serde_json::to_string(v).expect("plain data serialises");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::diagnosis::{Class, Confidence, MemoryPoint};
    use crate::model::verdict::{Cause, Finding};

    fn run() -> DiagnoseRun {
        let mut observation = Observation {
            pid: 42,
            comm: "burn".into(),
            window_s: 0.1 + 0.2,
            busy: vec![1.0 / 3.0, 2.5],
            ..Default::default()
        };
        observation.memory.series.push(MemoryPoint {
            t: 0.25,
            anon_kib: 1024,
            ..Default::default()
        });
        DiagnoseRun {
            meta: RunMeta {
                kdiag: "0.1.0".into(),
                host: "box".into(),
                kernel: "6.18.0".into(),
                started: "2026-11-25T22:40:06Z".into(),
            },
            observation,
            diagnosis: Diagnosis {
                verdict: Class::Cpu,
                confidence: Confidence::High,
                cause: Cause::Cpu {
                    share: 1.0,
                    cpus: 1.0,
                    kernel: false,
                    also: vec![],
                    children: 0.0,
                    gc: None,
                },
                states: vec![],
                working_threads: 1.0,
                periodic: None,
                busiest: vec![],
                carriers: vec![],
                findings: vec![Finding::SyscallsUnreadable],
                next: vec![],
                trend: Default::default(),
            },
            why: Some(Why {
                window_s: 2.0,
                skipped: vec!["off-CPU profile: no BPF".into()],
                ..Default::default()
            }),
        }
    }

    #[test]
    fn a_record_reads_back_the_same_run() {
        let r = run();
        let text = r.to_record();
        assert!(
            text.starts_with(
                r#"{"format":"kdiag-diagnose","version":2,"kdiag":"0.1.0","host":"box""#
            ),
            "{text}"
        );
        assert_eq!(text.lines().count(), 4);
        assert_eq!(DiagnoseRun::from_record(&text).unwrap(), r);
        let no_why = DiagnoseRun { why: None, ..r };
        assert_eq!(
            DiagnoseRun::from_record(&no_why.to_record()).unwrap(),
            no_why
        );
    }

    #[test]
    fn an_older_records_fault_reads_read_as_the_finding() {
        let r = run();
        let text = r.to_record().replacen(
            r#""findings":["#,
            r#""fault_reads":{"major_faults":4,"minor_faults":6,"read_bytes":8192,"kernel_s":0.5,"system_s":0.75},"findings":["#,
            1,
        );
        let back = DiagnoseRun::from_record(&text).unwrap();
        let last = back.diagnosis.findings.last().unwrap();
        let Finding::FaultReads { reads, window_s } = last else {
            panic!("{last:?}");
        };
        assert_eq!((reads.major_faults, reads.kernel_s), (4, 0.5));
        assert_eq!(*window_s, r.observation.window_s);
        assert_eq!(
            back.diagnosis.findings.len(),
            r.diagnosis.findings.len() + 1
        );
    }

    #[test]
    fn unknown_kinds_and_fields_are_skipped() {
        let mut text = run().to_record();
        text += "{\"kind\":\"trend-of-the-future\",\"data\":[1,2]}\n";
        let text = text.replacen("\"pid\":42", "\"pid\":42,\"new_field\":true", 1);
        assert_eq!(DiagnoseRun::from_record(&text).unwrap(), run());
    }

    #[test]
    fn damaged_and_foreign_files_say_which_line() {
        let err = |t: &str| DiagnoseRun::from_record(t).unwrap_err();
        assert_eq!(err("").line, 1);
        let e = err("{\"format\":\"something-else\",\"version\":1}\n");
        assert!(e.message.contains("not a kdiag diagnose record"), "{e}");
        let e = err("hello\n");
        assert!(e.message.contains("not a kdiag diagnose record"), "{e}");
        let text = run().to_record();
        let newer = text.replacen("\"version\":2", "\"version\":3", 1);
        let e = err(&newer);
        assert!(
            e.message.contains("version 3") && e.message.contains("reads version 2"),
            "{e}"
        );
        // Version 1 stored the verdict as sentences.
        let older = text.replacen("\"version\":2", "\"version\":1", 1);
        let e = err(&older);
        assert!(
            e.message.contains("record format version 1") && e.message.contains("reads version 2"),
            "{e}"
        );
        // Cut in the middle of the diagnosis line.
        let cut: String = text.lines().take(3).collect::<Vec<_>>().join("\n");
        let cut = &cut[..cut.len() - 20];
        let e = err(cut);
        assert_eq!(e.line, 3, "{e}");
        // A record whose data has the wrong shape.
        let wrong = text.replacen("\"verdict\":\"cpu\"", "\"verdict\":\"fast\"", 1);
        let e = err(&wrong);
        assert!(
            e.line == 3 && e.message.contains("damaged diagnosis record"),
            "{e}"
        );
        // The last lines missing.
        let short: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
        let e = err(&short);
        assert!(e.message.contains("no diagnosis record"), "{e}");
        assert_eq!(
            e.in_file("/tmp/r.jsonl").to_string().split(':').next(),
            Some("/tmp/r.jsonl")
        );
    }
}
