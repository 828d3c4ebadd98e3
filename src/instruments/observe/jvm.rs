//! A JVM's heap and garbage collector over diagnose's window: its -Xmx
//! flag and its hsperfdata file (/tmp/hsperfdata_USER/PID, the perf-data
//! memory jstat reads: sun.gc.* counters), read at both ends. Only for a
//! target whose program is `java`; the file is opened without following a
//! symlink and only if the JVM's user owns it. A JVM in another mount or
//! PID namespace, or started with -XX:-UsePerfData, gives its flag only.

use std::collections::HashMap;
use std::io::Read;

use crate::instruments::profile::perf_map::open_owned;
use crate::model::diagnosis::JvmHeap;

/// hsperfdata files are 32 KiB by default (-XX:PerfDataMemorySize).
const MOST: u64 = 1 << 20;

pub struct JvmWatch {
    pid: i32,
    uid: Option<u32>,
    xmx: Option<u64>,
    start: Counters,
}

type Counters = HashMap<String, Value>;

#[derive(Debug, Clone, PartialEq)]
enum Value {
    Long(i64),
    Text(String),
}

impl JvmWatch {
    /// None unless `pid` runs java.
    pub fn start(pid: i32) -> Option<JvmWatch> {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let mut args = cmdline.split(|&b| b == 0).map(String::from_utf8_lossy);
        if args.next()?.rsplit('/').next() != Some("java") {
            return None;
        }
        // The last -Xmx given is the one the JVM takes.
        let xmx = args
            .filter_map(|a| a.strip_prefix("-Xmx").and_then(size))
            .next_back();
        let uid = crate::sys::procfs::real_uid(pid as u32);
        let start = read(pid, uid);
        Some(JvmWatch {
            pid,
            uid,
            xmx,
            start,
        })
    }

    pub fn finish(self) -> JvmHeap {
        heap(&self.start, &read(self.pid, self.uid), self.xmx)
    }
}

/// "64m", "2g", "1048576" in bytes.
fn size(s: &str) -> Option<u64> {
    let (n, unit) = match s.char_indices().last()? {
        (i, c) if c.is_ascii_alphabetic() => (&s[..i], c.to_ascii_lowercase()),
        _ => (s, 'b'),
    };
    let shift = match unit {
        'b' => 0,
        'k' => 10,
        'm' => 20,
        'g' => 30,
        't' => 40,
        _ => return None,
    };
    n.parse::<u64>().ok()?.checked_mul(1 << shift)
}

fn read(pid: i32, uid: Option<u32>) -> Counters {
    let Some(name) = uid.and_then(crate::sys::process::privilege::user_name) else {
        return Counters::new();
    };
    let path = format!("/tmp/hsperfdata_{name}/{pid}");
    let Ok(Some(file)) = open_owned(&path, uid) else {
        return Counters::new();
    };
    let mut bytes = Vec::new();
    if file.take(MOST).read_to_end(&mut bytes).is_err() {
        return Counters::new();
    }
    parse(&bytes)
}

/// The counters of a perf-data file (HotSpot's perfMemory.hpp: a prologue,
/// then entries of a name and a long or a byte string). Empty when it is
/// not one.
fn parse(b: &[u8]) -> Counters {
    let mut out = Counters::new();
    if b.len() < 32 || b[..4] != [0xca, 0xfe, 0xc0, 0xc0] {
        return out;
    }
    let little = b[4] == 1;
    let at = |i: usize, n: usize| b.get(i..i + n);
    let u32_at = |i: usize| {
        let x: [u8; 4] = at(i, 4)?.try_into().ok()?;
        Some(if little {
            u32::from_le_bytes(x)
        } else {
            u32::from_be_bytes(x)
        } as usize)
    };
    let i64_at = |i: usize| {
        let x: [u8; 8] = at(i, 8)?.try_into().ok()?;
        Some(if little {
            i64::from_le_bytes(x)
        } else {
            i64::from_be_bytes(x)
        })
    };
    let (Some(mut entry), Some(n)) = (u32_at(24), u32_at(28)) else {
        return out;
    };
    for _ in 0..n.min(10_000) {
        let (Some(len), Some(name_at), Some(vlen), Some(kind), Some(data_at)) = (
            u32_at(entry),
            u32_at(entry + 4),
            u32_at(entry + 8),
            b.get(entry + 12),
            u32_at(entry + 16),
        ) else {
            break;
        };
        if len == 0 {
            break;
        }
        let name = b
            .get(entry + name_at..)
            .and_then(|s| s.split(|&c| c == 0).next())
            .map(String::from_utf8_lossy);
        let value = match (kind, vlen) {
            (b'J', 0) => i64_at(entry + data_at).map(Value::Long),
            (b'B', n) if n > 0 => at(entry + data_at, n).map(|s| {
                let s = s.split(|&c| c == 0).next().unwrap_or_default();
                Value::Text(String::from_utf8_lossy(s).into_owned())
            }),
            _ => None,
        };
        if let (Some(name), Some(value)) = (name, value) {
            out.insert(name.into_owned(), value);
        }
        entry += len;
    }
    out
}

/// The window's heap and collector from the counters at both ends.
fn heap(a: &Counters, b: &Counters, xmx: Option<u64>) -> JvmHeap {
    let long = |c: &Counters, k: &str| match c.get(k) {
        Some(Value::Long(x)) => (*x).max(0) as u64,
        _ => 0,
    };
    let delta = |k: &str| long(b, k).saturating_sub(long(a, k));
    let hz = long(b, "sun.os.hrt.frequency").max(1) as f64;
    let collectors: Vec<usize> = (0..8)
        .filter(|i| b.contains_key(&format!("sun.gc.collector.{i}.time")))
        .collect();
    let max_bytes = (0..4)
        .map(|g| long(b, &format!("sun.gc.generation.{g}.maxCapacity")))
        .sum();
    JvmHeap {
        xmx,
        max_bytes,
        old_used: long(b, "sun.gc.generation.1.space.0.used"),
        old_max: long(b, "sun.gc.generation.1.maxCapacity"),
        gc_s: collectors
            .iter()
            .map(|i| delta(&format!("sun.gc.collector.{i}.time")) as f64 / hz)
            .sum(),
        collections: collectors
            .iter()
            .map(|i| delta(&format!("sun.gc.collector.{i}.invocations")))
            .sum(),
        // jstat's FGC: the old generation's collector.
        full: delta("sun.gc.collector.1.invocations"),
        collectors: collectors
            .iter()
            .filter_map(|i| match b.get(&format!("sun.gc.collector.{i}.name")) {
                Some(Value::Text(t)) => Some(t.clone()),
                _ => None,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A little-endian perf-data file with `entries`.
    fn file(entries: &[(&str, Value)]) -> Vec<u8> {
        let mut b = vec![0xca, 0xfe, 0xc0, 0xc0, 1, 2, 0, 1];
        b.resize(32, 0);
        b[24..28].copy_from_slice(&32u32.to_le_bytes());
        b[28..32].copy_from_slice(&(entries.len() as u32).to_le_bytes());
        for (name, v) in entries {
            let (kind, data, vlen) = match v {
                Value::Long(x) => (b'J', x.to_le_bytes().to_vec(), 0),
                Value::Text(t) => {
                    let mut d = t.as_bytes().to_vec();
                    d.push(0);
                    (b'B', d.clone(), d.len())
                }
            };
            let name_at = 20;
            let data_at = (name_at + name.len() + 1).next_multiple_of(8);
            let len = (data_at + data.len()).next_multiple_of(8);
            let mut e = vec![0u8; len];
            e[0..4].copy_from_slice(&(len as u32).to_le_bytes());
            e[4..8].copy_from_slice(&(name_at as u32).to_le_bytes());
            e[8..12].copy_from_slice(&(vlen as u32).to_le_bytes());
            e[12] = kind;
            e[16..20].copy_from_slice(&(data_at as u32).to_le_bytes());
            e[name_at..name_at + name.len()].copy_from_slice(name.as_bytes());
            e[data_at..data_at + data.len()].copy_from_slice(&data);
            b.extend(e);
        }
        b
    }

    fn gc(time: i64, full: i64, old_used: i64) -> Counters {
        let l = Value::Long;
        parse(&file(&[
            ("sun.os.hrt.frequency", l(1_000_000_000)),
            ("sun.gc.collector.0.name", Value::Text("Copy".into())),
            ("sun.gc.collector.0.time", l(time / 10)),
            ("sun.gc.collector.0.invocations", l(full * 2)),
            ("sun.gc.collector.1.name", Value::Text("MSC".into())),
            ("sun.gc.collector.1.time", l(time)),
            ("sun.gc.collector.1.invocations", l(full)),
            ("sun.gc.generation.0.maxCapacity", l(22 << 20)),
            ("sun.gc.generation.1.maxCapacity", l(42 << 20)),
            ("sun.gc.generation.1.space.0.used", l(old_used)),
        ]))
    }

    #[test]
    fn the_window_of_a_collecting_jvm() {
        let (a, b) = (
            gc(1_000_000_000, 100, 1 << 20),
            gc(5_400_000_000, 540, 41 << 20),
        );
        assert_eq!(
            b.get("sun.gc.collector.1.name"),
            Some(&Value::Text("MSC".into()))
        );
        let h = heap(&a, &b, Some(64 << 20));
        assert_eq!(
            (h.max_bytes, h.old_max, h.old_used),
            (64 << 20, 42 << 20, 41 << 20)
        );
        assert_eq!((h.full, h.collections), (440, 1320));
        assert!((h.gc_s - 4.84).abs() < 1e-9, "{}", h.gc_s);
        assert_eq!(h.collectors, ["Copy", "MSC"]);
    }

    #[test]
    fn not_a_perf_data_file_has_no_counters() {
        assert!(parse(b"not perf data, not at all, no no no").is_empty());
        let mut cut = file(&[("sun.os.hrt.frequency", Value::Long(1))]);
        cut.truncate(40);
        assert!(parse(&cut).is_empty());
    }

    #[test]
    fn xmx_sizes() {
        assert_eq!(size("64m"), Some(64 << 20));
        assert_eq!(size("2G"), Some(2 << 30));
        assert_eq!(size("1048576"), Some(1 << 20));
        assert_eq!(size("x"), None);
    }
}
