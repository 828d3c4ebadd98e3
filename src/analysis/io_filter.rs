//! Which requests the user asked for: iosnoop's -d, -i, -p and -n.

use crate::model::block::{BlockIo, DevId, LatencyCount};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IoFilter {
    pub dev: Option<DevId>,
    /// An rwbs glob such as `*R*` or `WS` (`*` matches any run of characters).
    pub rwbs: Option<String>,
    /// The process that caused or issued the request.
    pub pid: Option<u32>,
    /// Part of the command name of the process that caused or issued it.
    pub name: Option<String>,
}

impl IoFilter {
    pub fn matches(&self, io: &BlockIo) -> bool {
        let issuer = io.issuer.as_ref();
        self.dev.is_none_or(|d| d == io.dev)
            && self.rwbs.as_deref().is_none_or(|g| glob(g, &io.rwbs))
            && self
                .pid
                .is_none_or(|p| p == io.pid || issuer.is_some_and(|t| t.pid == p))
            && self
                .name
                .as_deref()
                .is_none_or(|n| io.comm.contains(n) || issuer.is_some_and(|t| t.comm.contains(n)))
    }

    /// The same test on a histogram bucket, which knows only the process
    /// that caused the requests.
    pub fn matches_count(&self, c: &LatencyCount) -> bool {
        self.dev.is_none_or(|d| d == c.dev)
            && self.rwbs.as_deref().is_none_or(|g| glob(g, &c.rwbs))
            && self.pid.is_none_or(|p| p == c.pid)
            && self.name.as_deref().is_none_or(|n| c.comm.contains(n))
    }
}

/// Shell-style matching with `*` only (rwbs has no other metacharacters).
pub fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, rest)) => {
            let Some(mut text) = text.strip_prefix(head) else {
                return false;
            };
            // Try every split point for the part after the star.
            loop {
                if glob(rest, text) {
                    return true;
                }
                let mut chars = text.chars();
                if chars.next().is_none() {
                    return false;
                }
                text = chars.as_str();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_like_iosnoop() {
        assert!(glob("*R*", "R"));
        assert!(glob("*R*", "RA"));
        assert!(glob("*R*", "FR"));
        assert!(!glob("*R*", "WS"));
        assert!(glob("WS", "WS"));
        assert!(!glob("WS", "WSM"));
        assert!(glob("W*", "WFS"));
        assert!(glob("*S", "WFS"));
        assert!(!glob("*S", "WSM"));
        assert!(glob("*", ""));
    }
}
