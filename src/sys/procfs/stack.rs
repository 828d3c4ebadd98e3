//! A blocked thread's user stack from /proc, without tracing: the system
//! call it sleeps in with its user stack and instruction pointers
//! (`/proc/PID/task/TID/syscall`: "NR ARG1..ARG6 SP PC"), and the bytes
//! of its stack above SP (`/proc/PID/task/TID/mem`, which needs ptrace
//! access). A thread asleep in a call does not move, so the copy is as
//! good as a sample's.

use std::os::unix::fs::FileExt;

/// Where a thread sleeps in a system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blocked {
    pub nr: u64,
    pub args: [u64; 6],
    pub sp: u64,
    pub pc: u64,
}

/// The system call `tid` sleeps in; None when it runs, is not in one, or
/// the file cannot be read.
pub fn blocked(pid: i32, tid: i32) -> Option<Blocked> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall")).ok()?;
    parse(&text)
}

fn parse(text: &str) -> Option<Blocked> {
    let mut words = text.split_whitespace();
    let nr = words.next()?.parse().ok()?;
    let mut hex = words.map(|w| u64::from_str_radix(w.trim_start_matches("0x"), 16).ok());
    let mut args = [0; 6];
    for a in &mut args {
        *a = hex.next()??;
    }
    Some(Blocked {
        nr,
        args,
        sp: hex.next()??,
        pc: hex.next()??,
    })
}

/// Up to `len` bytes of `tid`'s memory from `addr` (less at the end of
/// the mapping); empty when unreadable.
pub fn read_stack(pid: i32, tid: i32, addr: u64, len: usize) -> Vec<u8> {
    let Ok(f) = std::fs::File::open(format!("/proc/{pid}/task/{tid}/mem")) else {
        return Vec::new();
    };
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        match f.read_at(&mut buf[got..], addr + got as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    buf.truncate(got);
    buf
}

/// A thread's kernel stack (/proc/PID/task/TID/stack, root only), the
/// innermost function first, without offsets; empty when unreadable.
pub fn kernel(pid: i32, tid: i32) -> Vec<String> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stack"))
        .map(|t| kernel_frames(&t))
        .unwrap_or_default()
}

/// "[<0>] do_nanosleep+0x6d/0x1a0" lines → "do_nanosleep".
fn kernel_frames(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(|f| f.split('+').next().unwrap_or(f).to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_kernel_stack() {
        let t = "[<0>] do_nanosleep+0x6d/0x1a0\n[<0>] hrtimer_nanosleep+0xd8/0x190\n";
        assert_eq!(kernel_frames(t), ["do_nanosleep", "hrtimer_nanosleep"]);
    }

    #[test]
    fn reads_the_syscall_file() {
        let b = parse("202 0x7f1 0x189 0x0 0x0 0x0 0xffffffff 0x7ffd10 0x7f2a\n").unwrap();
        assert_eq!(
            (b.nr, b.args[1], b.sp, b.pc),
            (202, 0x189, 0x7ffd10, 0x7f2a)
        );
        assert_eq!(parse("running\n"), None);
        assert_eq!(parse("-1 0x7ffd10 0x7f2a\n"), None);
    }

    /// A thread of this process asleep in nanosleep: its call, and its
    /// stack read back.
    #[test]
    fn a_sleeping_threads_call_and_stack() {
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            tx.send(unsafe { libc::gettid() }).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(300));
        });
        let tid = rx.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let pid = std::process::id() as i32;
        let b = blocked(pid, tid).expect("asleep in a call");
        assert_eq!(b.nr, libc::SYS_clock_nanosleep as u64);
        assert_eq!(read_stack(pid, tid, b.sp, 64).len(), 64);
        t.join().unwrap();
    }
}
