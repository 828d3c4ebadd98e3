//! Signal names, for saying how a process ended or what it was sent.

const SIGNALS: [&str; 32] = [
    "0",
    "SIGHUP",
    "SIGINT",
    "SIGQUIT",
    "SIGILL",
    "SIGTRAP",
    "SIGABRT",
    "SIGBUS",
    "SIGFPE",
    "SIGKILL",
    "SIGUSR1",
    "SIGSEGV",
    "SIGUSR2",
    "SIGPIPE",
    "SIGALRM",
    "SIGTERM",
    "SIGSTKFLT",
    "SIGCHLD",
    "SIGCONT",
    "SIGSTOP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGVTALRM",
    "SIGPROF",
    "SIGWINCH",
    "SIGIO",
    "SIGPWR",
    "SIGSYS",
];

/// "SIGKILL" for 9; real-time signals as SIGRTMIN+n.
pub fn signal_name(sig: i32) -> String {
    match sig {
        1..=31 => SIGNALS[sig as usize].to_string(),
        _ if sig >= libc::SIGRTMIN() => format!("SIGRTMIN+{}", sig - libc::SIGRTMIN()),
        _ => format!("signal {sig}"),
    }
}

/// 9 for "SIGKILL"; None for names outside the standard 31.
pub fn signal_number(name: &str) -> Option<i32> {
    SIGNALS
        .iter()
        .position(|n| *n == name)
        .filter(|&i| i > 0)
        .map(|i| i as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(11), "SIGSEGV");
        assert_eq!(signal_name(libc::SIGRTMIN() + 2), "SIGRTMIN+2");
        assert_eq!(signal_name(0), "signal 0");
        assert_eq!(signal_number("SIGKILL"), Some(9));
        assert_eq!(signal_number("0"), None);
        assert_eq!(signal_number("SIGNOPE"), None);
    }
}
