//! Files kdiag causes another program to create, removed when kdiag is done
//! with them or has gone, SIGKILL included: a small forked process holds
//! their paths and waits for EOF on a pipe whose write end only kdiag
//! holds (the supervisor's way of knowing kdiag has gone). Then, as the
//! files' owner (setfsuid), it removes each path that is now a regular
//! file of that owner — the paths did not exist when it started, so what
//! is there was made since — and exits.
//!
//! Between fork and exit it makes only async-signal-safe calls on buffers
//! prepared before the fork, as the supervisor does.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A running janitor: dropping it ends it, which removes the files.
#[derive(Debug)]
pub struct Janitor {
    pid: libc::pid_t,
    // Only kdiag holds this end: its close, at drop or at kdiag's end,
    // is the janitor's signal.
    pipe: Option<OwnedFd>,
}

impl Janitor {
    /// Watch `paths` (none may exist yet; those that do are left out), to
    /// be removed as `uid`'s when the janitor is dropped or kdiag ends.
    pub fn start(paths: &[String], uid: u32) -> io::Result<Janitor> {
        let paths: Vec<CString> = paths
            .iter()
            .filter(|p| std::fs::symlink_metadata(p).is_err())
            .filter_map(|p| CString::new(p.as_str()).ok())
            .collect();
        let mut fds = [0; 2];
        // SAFETY: fds has room for the two descriptors pipe2 returns.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors are new and ours.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let ptrs: Vec<*const libc::c_char> = paths.iter().map(|p| p.as_ptr()).collect();
        // SAFETY: the child makes only async-signal-safe calls on memory
        // prepared above, and leaves with _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            unsafe { clean_when_gone(read.as_raw_fd(), &ptrs, uid) }
        }
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Janitor {
            pid,
            pipe: Some(write),
        })
    }
}

impl Drop for Janitor {
    fn drop(&mut self) {
        drop(self.pipe.take());
        let mut status = 0;
        // SAFETY: pid is our child; reaping it leaves no zombie. It ends
        // as soon as it has read EOF and removed the files.
        while unsafe { libc::waitpid(self.pid, &mut status, 0) } < 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
    }
}

/// The janitor's whole life, in the forked child.
///
/// # Safety
/// Only in the child of a fork; `paths` point at NUL-terminated strings.
unsafe fn clean_when_gone(read: libc::c_int, paths: &[*const libc::c_char], uid: u32) -> ! {
    unsafe {
        // Its own process group, deaf to the terminal's signals: a Ctrl-C
        // for kdiag (or a kill of kdiag's group) must not end it first.
        libc::setpgid(0, 0);
        for sig in [
            libc::SIGINT,
            libc::SIGQUIT,
            libc::SIGHUP,
            libc::SIGTERM,
            libc::SIGPIPE,
        ] {
            libc::signal(sig, libc::SIG_IGN);
        }
        // Hold nothing of kdiag's but the pipe: no write end of another
        // pipe (its own included) kept open past kdiag.
        libc::dup2(read, 0);
        libc::syscall(libc::SYS_close_range, 1u32, u32::MAX, 0u32);
        let mut byte = 0u8;
        loop {
            let n = libc::read(0, (&raw mut byte).cast(), 1);
            if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
                break;
            }
        }
        // As the files' owner, as kdiag acts for a user.
        libc::setfsuid(uid);
        for &p in paths {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::lstat(p, &mut st) == 0
                && st.st_mode & libc::S_IFMT == libc::S_IFREG
                && st.st_uid == uid
            {
                libc::unlink(p);
            }
        }
        libc::_exit(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> String {
        let dir = std::env::temp_dir().join(format!("kdiag-janitor-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        dir.to_string_lossy().into_owned()
    }

    #[test]
    fn files_made_after_the_start_are_removed_at_the_end() {
        let dir = scratch("made");
        let (made, before, other) = (
            format!("{dir}/made"),
            format!("{dir}/before"),
            format!("{dir}/not-watched"),
        );
        std::fs::write(&before, "was there").unwrap();
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        let j = Janitor::start(&[made.clone(), before.clone()], me).unwrap();
        std::fs::write(&made, "kdiag caused this").unwrap();
        std::fs::write(&other, "not ours").unwrap();
        assert!(std::path::Path::new(&made).exists());
        drop(j);
        assert!(
            !std::path::Path::new(&made).exists(),
            "{made} outlived the janitor"
        );
        assert!(
            std::path::Path::new(&before).exists(),
            "a file that was there was removed"
        );
        assert!(std::path::Path::new(&other).exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_symbolic_link_or_another_owners_file_is_left() {
        let dir = scratch("links");
        let (link, target) = (format!("{dir}/link"), format!("{dir}/target"));
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        let j = Janitor::start(std::slice::from_ref(&link), me).unwrap();
        std::fs::write(&target, "kept").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        drop(j);
        assert!(
            std::fs::symlink_metadata(&link).is_ok(),
            "a link was removed"
        );
        assert!(std::path::Path::new(&target).exists());
        // Another owner's file at the path: not the one kdiag caused.
        std::fs::remove_file(&link).unwrap();
        let j = Janitor::start(std::slice::from_ref(&link), me + 1).unwrap();
        std::fs::write(&link, "mine, not uid+1's").unwrap();
        drop(j);
        assert!(std::path::Path::new(&link).exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
