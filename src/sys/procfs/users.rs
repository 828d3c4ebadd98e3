//! User names for uids, looked up once each through NSS (like ps, so LDAP or
//! systemd users resolve too).

use std::collections::HashMap;
use std::ffi::CStr;

#[derive(Debug, Default)]
pub struct Users {
    names: HashMap<u32, String>,
}

impl Users {
    pub fn name(&mut self, uid: u32) -> &str {
        self.names.entry(uid).or_insert_with(|| lookup(uid))
    }
}

/// The user name, or the number when the uid has no entry.
fn lookup(uid: u32) -> String {
    let mut buf = vec![0 as libc::c_char; 4096];
    // SAFETY: a zeroed passwd is a valid out-parameter.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut res: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer refers to live storage of the stated size.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut res) };
    if rc == 0 && !res.is_null() && !pw.pw_name.is_null() {
        // SAFETY: getpwuid_r succeeded, so pw_name is a NUL-terminated string in buf.
        unsafe { CStr::from_ptr(pw.pw_name) }
            .to_string_lossy()
            .into_owned()
    } else {
        uid.to_string()
    }
}

/// The uid of a user name, or of a number given as text.
pub fn uid_of(name: &str) -> Option<u32> {
    if let Ok(n) = name.parse() {
        return Some(n);
    }
    let cname = std::ffi::CString::new(name).ok()?;
    let mut buf = vec![0 as libc::c_char; 4096];
    // SAFETY: as in `lookup`.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut res: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer refers to live storage of the stated size.
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut res,
        )
    };
    (rc == 0 && !res.is_null()).then_some(pw.pw_uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_uid_zero() {
        assert_eq!(Users::default().name(0), "root");
        assert_eq!(uid_of("root"), Some(0));
        assert_eq!(uid_of("1234"), Some(1234));
        assert_eq!(uid_of("no-such-user-kdiag"), None);
        assert_eq!(Users::default().name(4_000_000), "4000000");
    }
}
