//! JIT and interpreter frame names from `/tmp/perf-PID.map`, the file that
//! Python 3.12+ (`-X perf`), Node (`--perf-basic-prof`), perf-map-agent
//! (Java) and LuaJIT write: one `START SIZE name` line (hex addresses) per
//! piece of generated code.
//!
//! The file is written by the profiled program, so by whoever runs it, and
//! kdiag often reads it as root: it is opened without following a symlink,
//! must be a regular file owned by the profiled process's user, and only
//! its first `MAX_BYTES` are read. Anything else is ignored, with the
//! reason counted in the report.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

/// The most of a perf map that is read (Node writes one line per compiled
/// function; 64 MiB is about a million).
pub const MAX_BYTES: u64 = 64 << 20;

/// A parsed perf map.
#[derive(Debug, Default, Clone)]
pub struct PerfMap {
    /// (start, end, name), sorted by start; for the same start the entry
    /// written last wins (the code was replaced).
    entries: Vec<(u64, u64, String)>,
}

impl PerfMap {
    /// The name of the code at `addr`.
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self.entries.partition_point(|e| e.0 <= addr);
        let (start, end, name) = self.entries.get(i.checked_sub(1)?)?;
        (*start <= addr && addr < *end).then_some(name.as_str())
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Parse the text of a perf map; malformed lines are skipped.
    pub fn parse(text: &str) -> PerfMap {
        let mut entries: Vec<(u64, u64, String)> = Vec::new();
        for line in text.lines() {
            let mut parts = line.splitn(3, ' ');
            let (Some(start), Some(size), Some(name)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
            let (Some(start), Some(size)) = (hex(start), hex(size)) else {
                continue;
            };
            entries.push((start, start.saturating_add(size), name.trim().to_string()));
        }
        PerfMap::from_entries(entries)
    }

    /// Read `/tmp/perf-PID.map` safely for a process running as `uid`.
    /// Ok(None) when there is no such file.
    pub fn load(pid: u32, uid: Option<u32>) -> Result<Option<PerfMap>, String> {
        Self::load_from(&format!("/tmp/perf-{pid}.map"), uid)
    }

    fn load_from(path: &str, uid: Option<u32>) -> Result<Option<PerfMap>, String> {
        let Some(file) = open_owned(path, uid)? else {
            return Ok(None);
        };
        let mut bytes = Vec::new();
        file.take(MAX_BYTES)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("{path}: unreadable ({e})"))?;
        Ok(Some(PerfMap::parse(&String::from_utf8_lossy(&bytes))))
    }

    /// Entries (start, end, name) in the order written: for the same start
    /// the later one wins.
    pub fn from_entries(mut entries: Vec<(u64, u64, String)>) -> PerfMap {
        entries.retain(|e| e.1 > e.0 && !e.2.is_empty());
        // Stable: for equal starts the later entry stays last, then wins.
        entries.sort_by_key(|e| e.0);
        entries.reverse();
        entries.dedup_by_key(|e| e.0);
        entries.reverse();
        PerfMap { entries }
    }

    /// This map with `later`'s entries written after its own.
    pub fn then(mut self, later: PerfMap) -> PerfMap {
        self.entries.extend(later.entries);
        PerfMap::from_entries(self.entries)
    }
}

/// Open a file the profiled process wrote, for reading as whoever kdiag
/// runs as: without following a symlink, only a regular file, only if
/// owned by the process's user `uid`. Ok(None) when there is no such file.
pub(crate) fn open_owned(path: &str, uid: Option<u32>) -> Result<Option<File>, String> {
    let file = match File::options()
        .read(true)
        // O_NONBLOCK: a FIFO planted there must not hang us (it is then
        // refused as not a regular file).
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(format!("{path} is a symbolic link (ignored)"));
        }
        Err(e) => return Err(format!("{path}: unreadable ({e})")),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("{path}: unreadable ({e})"))?;
    if !meta.file_type().is_file() {
        return Err(format!("{path} is not a regular file (ignored)"));
    }
    let Some(uid) = uid else {
        return Err(format!(
            "{path}: the process's user is unknown, so its owner cannot be checked (ignored)"
        ));
    };
    if meta.uid() != uid {
        return Err(format!(
            "{path} belongs to uid {}, not to the profiled process's uid {uid} (ignored)",
            meta.uid()
        ));
    }
    Ok(Some(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_looks_up() {
        let map = PerfMap::parse(
            "7f0000001000 40 py::hot:/app/x.py\n\
             0x7f0000002000 0x10 LazyCompile:~f /app/y.js:3\n\
             bogus line\n\
             7f0000003000 0 empty\n\
             7f0000001000 20 py::replaced:/app/x.py\n",
        );
        assert_eq!(map.len(), 2);
        assert_eq!(map.lookup(0x7f0000001010), Some("py::replaced:/app/x.py"));
        assert_eq!(map.lookup(0x7f0000001030), None, "past the replacement");
        assert_eq!(
            map.lookup(0x7f000000200f),
            Some("LazyCompile:~f /app/y.js:3")
        );
        assert_eq!(map.lookup(0x7f0000002010), None);
        assert_eq!(map.lookup(0x1000), None);
    }

    #[test]
    fn refuses_links_foreign_owners_and_non_files() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.map");
        std::fs::write(&real, "1000 10 f\n").unwrap();
        let me = std::fs::metadata(&real).unwrap().uid();
        let p = real.to_str().unwrap();
        let ok = PerfMap::load_from(p, Some(me)).unwrap().unwrap();
        assert_eq!(ok.lookup(0x1008), Some("f"));
        let err = PerfMap::load_from(p, Some(me + 1)).unwrap_err();
        assert!(err.contains("not to the profiled process's uid"), "{err}");
        assert!(PerfMap::load_from(p, None).is_err());

        let link = dir.path().join("link.map");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = PerfMap::load_from(link.to_str().unwrap(), Some(me)).unwrap_err();
        assert!(err.contains("symbolic link"), "{err}");

        let fifo = dir.path().join("fifo.map");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: c is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = PerfMap::load_from(fifo.to_str().unwrap(), Some(me)).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");

        let none = dir.path().join("none.map");
        assert!(
            PerfMap::load_from(none.to_str().unwrap(), Some(me))
                .unwrap()
                .is_none()
        );
    }
}
