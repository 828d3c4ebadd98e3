//! JIT frame names from jitdump files (`jit-PID.dump`), which Node
//! (`--perf-prof`), the JVM (perf's libperf-jvmti agent), Python 3.13
//! (`-X perf_jit`) and others write. The runtime maps the file executable
//! so that a profiler finds it in the process's memory map; kdiag reads its
//! code-load and code-move records (tools/perf/Documentation/
//! jitdump-specification.txt) into the same table as a perf map.
//!
//! Like a perf map, the file is the profiled program's: it is opened
//! without following a symlink and must be a regular file owned by the
//! process's user (`perf_map::open_owned`). Its code bytes are skipped, not read.

use std::collections::HashMap;
use std::io::{BufReader, Read, Seek};

use crate::instruments::profile::perf_map::{PerfMap, open_owned};

const MAGIC: u32 = 0x4A69_5444; // "JiTD" in the writer's byte order
const HEADER: u64 = 40;
const RECORD_HEADER: u32 = 16;
const CODE_LOAD: u32 = 0;
const CODE_MOVE: u32 = 1;
/// Past this many code records the rest of the file is not read (a
/// runtime that compiled millions of functions; memory stays bounded).
const MAX_RECORDS: usize = 4_000_000;
/// The most of a name that is kept (the file's own sizes are not trusted
/// for an allocation).
const MAX_NAME: u64 = 4096;

/// The file name a process `pid` gives its jitdump, in any directory.
pub fn file_name(pid: u32) -> String {
    format!("jit-{pid}.dump")
}

/// Read the jitdump at `path` of a process running as `uid`.
/// Ok(None) when there is no such file.
pub fn load(path: &str, uid: Option<u32>) -> Result<Option<PerfMap>, String> {
    let Some(file) = open_owned(path, uid)? else {
        return Ok(None);
    };
    parse(BufReader::new(file))
        .map(Some)
        .map_err(|e| format!("{path}: {e}"))
}

/// The names of a jitdump's code. A record cut short at the end (the
/// runtime is still writing) ends the file.
pub fn parse<R: Read + Seek>(mut r: BufReader<R>) -> Result<PerfMap, String> {
    let mut header = [0u8; HEADER as usize];
    r.read_exact(&mut header)
        .map_err(|_| "too short for a jitdump header".to_string())?;
    if u32_at(&header, 0) != MAGIC {
        return Err("not a jitdump of this machine (bad magic)".into());
    }
    let size = u32_at(&header, 8) as u64;
    if size < HEADER {
        return Err(format!("header size {size} is below {HEADER}"));
    }
    skip(&mut r, size - HEADER).map_err(|_| "too short for its header".to_string())?;

    let mut entries = Vec::new();
    // code_index → name, for the moves.
    let mut by_index = HashMap::new();
    while entries.len() < MAX_RECORDS {
        let mut rec = [0u8; RECORD_HEADER as usize];
        if r.read_exact(&mut rec).is_err() {
            break;
        }
        let (id, total) = (u32_at(&rec, 0), u32_at(&rec, 4));
        let Some(body) = total.checked_sub(RECORD_HEADER) else {
            return Err(format!("a record of {total} bytes, below its own header"));
        };
        let body = body as u64;
        let ok = match id {
            CODE_LOAD => code_load(&mut r, body, &mut entries, &mut by_index),
            CODE_MOVE => code_move(&mut r, body, &mut entries, &by_index),
            _ => skip(&mut r, body),
        };
        if ok.is_err() {
            break;
        }
    }
    Ok(PerfMap::from_entries(entries))
}

/// pid, tid, vma, code_addr, code_size, code_index, the name (NUL-ended), the code.
fn code_load<R: Read + Seek>(
    r: &mut BufReader<R>,
    body: u64,
    entries: &mut Vec<(u64, u64, String)>,
    by_index: &mut HashMap<u64, String>,
) -> std::io::Result<()> {
    let mut fixed = [0u8; 40];
    r.read_exact(&mut fixed)?;
    let (addr, size, index) = (u64_at(&fixed, 16), u64_at(&fixed, 24), u64_at(&fixed, 32));
    let Some(rest) = body.checked_sub(40) else {
        return Err(std::io::ErrorKind::InvalidData.into());
    };
    let name_len = rest.saturating_sub(size);
    let mut name = vec![0u8; name_len.min(MAX_NAME) as usize];
    r.read_exact(&mut name)?;
    skip(r, rest - name.len() as u64)?;
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    let name = String::from_utf8_lossy(&name[..end]).into_owned();
    by_index.insert(index, name.clone());
    entries.push((addr, addr.saturating_add(size), name));
    Ok(())
}

/// pid, tid, vma, old_code_addr, new_code_addr, code_size, code_index.
fn code_move<R: Read + Seek>(
    r: &mut BufReader<R>,
    body: u64,
    entries: &mut Vec<(u64, u64, String)>,
    by_index: &HashMap<u64, String>,
) -> std::io::Result<()> {
    let mut fixed = [0u8; 48];
    r.read_exact(&mut fixed)?;
    skip(r, body.saturating_sub(48))?;
    let (to, size, index) = (u64_at(&fixed, 24), u64_at(&fixed, 32), u64_at(&fixed, 40));
    if let Some(name) = by_index.get(&index) {
        entries.push((to, to.saturating_add(size), name.clone()));
    }
    Ok(())
}

fn skip<R: Read + Seek>(r: &mut BufReader<R>, n: u64) -> std::io::Result<()> {
    let n = i64::try_from(n).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidData))?;
    r.seek_relative(n)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn header() -> Vec<u8> {
        let mut h = Vec::new();
        for v in [MAGIC, 1, HEADER as u32, 62, 0, 1234] {
            h.extend(v.to_ne_bytes());
        }
        h.extend(0u64.to_ne_bytes()); // timestamp
        h.extend(0u64.to_ne_bytes()); // flags
        h
    }

    fn record(id: u32, body: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend(id.to_ne_bytes());
        r.extend((RECORD_HEADER + body.len() as u32).to_ne_bytes());
        r.extend(7u64.to_ne_bytes());
        r.extend(body);
        r
    }

    fn load_rec(addr: u64, size: u64, index: u64, name: &str) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(1234u32.to_ne_bytes());
        b.extend(1234u32.to_ne_bytes());
        for v in [addr, addr, size, index] {
            b.extend(v.to_ne_bytes());
        }
        b.extend(name.as_bytes());
        b.push(0);
        b.extend(vec![0xcc; size as usize]); // the code
        record(CODE_LOAD, &b)
    }

    fn move_rec(from: u64, to: u64, size: u64, index: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(1234u32.to_ne_bytes());
        b.extend(1234u32.to_ne_bytes());
        for v in [to, from, to, size, index] {
            b.extend(v.to_ne_bytes());
        }
        record(CODE_MOVE, &b)
    }

    fn read(bytes: Vec<u8>) -> Result<PerfMap, String> {
        parse(BufReader::new(Cursor::new(bytes)))
    }

    #[test]
    fn names_loaded_and_moved_code() {
        let mut f = header();
        f.extend(load_rec(0x1000, 0x40, 1, "JS:*leafWork /app/hot.js:1:18"));
        f.extend(record(2, &[0u8; 24])); // debug info: skipped
        f.extend(load_rec(0x2000, 0x10, 2, "JS:~outer /app/hot.js:3:10"));
        f.extend(move_rec(0x2000, 0x3000, 0x10, 2));
        f.extend(load_rec(0x1000, 0x20, 3, "replaced")); // same start: later wins
        // A record the runtime is still writing.
        f.extend(&load_rec(0x4000, 0x10, 4, "half")[..30]);
        let map = read(f).unwrap();
        assert_eq!(map.lookup(0x1010), Some("replaced"));
        assert_eq!(map.lookup(0x1030), None);
        assert_eq!(map.lookup(0x2008), Some("JS:~outer /app/hot.js:3:10"));
        assert_eq!(map.lookup(0x300f), Some("JS:~outer /app/hot.js:3:10"));
        assert_eq!(map.lookup(0x4000), None);
        assert_eq!(map.len(), 3);
    }

    #[test]
    fn a_huge_name_is_cut_not_allocated() {
        let mut f = header();
        f.extend(load_rec(0x1000, 0x10, 1, &"n".repeat(10_000)));
        f.extend(load_rec(0x2000, 0x10, 2, "next"));
        let map = read(f).unwrap();
        assert_eq!(map.lookup(0x1000).map(str::len), Some(MAX_NAME as usize));
        assert_eq!(map.lookup(0x2000), Some("next"));
    }

    #[test]
    fn refuses_what_is_not_a_jitdump() {
        assert!(read(b"JiT".to_vec()).unwrap_err().contains("too short"));
        let mut swapped = header();
        swapped[..4].copy_from_slice(&MAGIC.swap_bytes().to_ne_bytes());
        assert!(read(swapped).unwrap_err().contains("bad magic"));
        let mut bad = header();
        bad.extend(5u32.to_ne_bytes());
        bad.extend(8u32.to_ne_bytes()); // shorter than a record header
        bad.extend(0u64.to_ne_bytes());
        assert!(read(bad).unwrap_err().contains("below its own header"));
    }
}
