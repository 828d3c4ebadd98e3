//! Acting as the sudo invoker on the file system: their fsuid, fsgid and
//! groups taken on a thread of its own (`as_user`), and their runtime
//! directory. What kdiag does with a path a user names, with that identity,
//! is `crate::user_files`.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::privilege::InvokerSwitch;

/// Run `f` with the invoking user's file-system identity (under sudo), on a
/// thread of its own; without sudo, right here.
///
/// fsuid, fsgid and the supplementary groups are per-thread in the kernel
/// (groups set with the raw system call: glibc's setgroups changes every
/// thread), so only this thread acts as the user, and it starts nothing.
pub fn as_user<T: Send>(f: impl FnOnce() -> T + Send) -> io::Result<T> {
    let Some(switch) = invoker() else {
        return Ok(f());
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            let (uid, gid, groups) = switch.identity();
            // SAFETY: plain system calls on this thread's own credentials,
            // with a valid pointer and length for the groups.
            unsafe {
                if libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) != 0 {
                    return Err(io::Error::last_os_error());
                }
                libc::setfsgid(gid);
                libc::setfsuid(uid);
                // setfsuid reports no error: read it back (-1 changes nothing).
                if libc::setfsuid(u32::MAX) as u32 != uid || libc::setfsgid(u32::MAX) as u32 != gid
                {
                    return Err(io::Error::other(
                        "could not take your file-system identity (setfsuid)",
                    ));
                }
            }
            Ok(f())
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("a file operation panicked")))
    })
}

/// The sudo invoker, resolved once (their groups come from /etc/group).
fn invoker() -> Option<&'static InvokerSwitch> {
    static SWITCH: std::sync::OnceLock<Option<InvokerSwitch>> = std::sync::OnceLock::new();
    SWITCH.get_or_init(InvokerSwitch::prepare).as_ref()
}

/// Whether operations act as another user (kdiag is root through sudo).
pub fn acting() -> bool {
    invoker().is_some()
}

/// The uid files made for the user belong to.
pub fn owner_uid() -> u32 {
    match invoker() {
        Some(s) => s.identity().0,
        // SAFETY: geteuid cannot fail.
        None => unsafe { libc::geteuid() },
    }
}

/// Where kdiag keeps runtime directories for sudo invokers who have no
/// /run/user/UID (no login session made one): root's, 0755.
const RUNTIME_PARENT: &str = "/run/kdiag";

/// Under sudo, the invoking user's runtime directory `/run/kdiag/UID`
/// (0700), made now if missing: /run/kdiag is root's and writable by root
/// only, so no other user can take the name first, and the user's own
/// directory in it is made with their file-system identity (CAP_DAC_OVERRIDE
/// raised again for the one mkdir, since setfsuid drops it), theirs from
/// the start, with no chown. None without sudo, or when anything there is
/// not as kdiag makes it.
pub fn runtime_dir() -> Option<PathBuf> {
    let switch = invoker()?;
    let uid = switch.identity().0;
    let parent = Path::new(RUNTIME_PARENT);
    let real_dir = |p: &Path, owner: u32| {
        std::fs::symlink_metadata(p)
            .is_ok_and(|m| m.is_dir() && m.uid() == owner && m.mode() & 0o022 == 0)
    };
    let _ = std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o755)
        .create(parent);
    if !real_dir(parent, 0) {
        return None;
    }
    let dir = parent.join(uid.to_string());
    if std::fs::symlink_metadata(&dir).is_err() {
        let c = CString::new(dir.as_os_str().as_bytes()).ok()?;
        let made = as_user(|| {
            raise_dac_override()?;
            // SAFETY: a valid NUL-terminated path.
            if unsafe { libc::mkdir(c.as_ptr(), 0o700) } != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
        if let Ok(Err(e)) | Err(e) = made
            && e.raw_os_error() != Some(libc::EEXIST)
        {
            return None;
        }
    }
    real_dir(&dir, uid).then_some(dir)
}

/// Put CAP_DAC_OVERRIDE back in this thread's effective set (it stays
/// permitted; a change of fsuid away from 0 only clears it from the
/// effective set), so the thread can write into a root-owned directory
/// while what it creates is the user's.
fn raise_dac_override() -> io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    const CAP_DAC_OVERRIDE: u32 = 1;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: valid header and a two-element data array, as version 3 wants.
    unsafe {
        if libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        data[0].effective |= 1 << CAP_DAC_OVERRIDE;
        if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
