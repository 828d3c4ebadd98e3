//! /proc/PID/maps: the executable mappings of a process, for unwinding and
//! symbolizing its samples.

/// One executable mapping of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// File offset of `start`.
    pub pgoff: u64,
    /// The file, or a pseudo name such as `[vdso]`, or empty for anonymous.
    pub path: String,
}

/// Parse the executable lines of /proc/PID/maps.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut rest = line;
        let mut field = || {
            let t = rest.trim_start();
            let end = t.find(' ').unwrap_or(t.len());
            rest = &t[end..];
            &t[..end]
        };
        let (range, perms, off, _dev, _inode) = (field(), field(), field(), field(), field());
        if !perms.contains('x') {
            continue;
        }
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end), Ok(pgoff)) = (
            u64::from_str_radix(a, 16),
            u64::from_str_radix(b, 16),
            u64::from_str_radix(off, 16),
        ) else {
            continue;
        };
        out.push(Mapping {
            start,
            end,
            pgoff,
            path: rest.trim().to_string(),
        });
    }
    out
}
