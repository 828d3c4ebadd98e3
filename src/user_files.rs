//! The one way kdiag touches a path a user named: answers, artifacts,
//! submissions, ELF files, output files, lab state.
//!
//! kdiag often runs as root through sudo, on course servers where a sudoers
//! rule lets students run kdiag and nothing else. So every such path is
//! opened with the invoking user's file-system identity (setfsuid/setfsgid
//! and their groups, on a thread of its own: they are per-thread), never as
//! root: what the user could not read, kdiag does not read for them, and
//! what it creates belongs to them from the start, with no chown after.
//! On top of that:
//! - writes never follow a symlink in the last component (O_NOFOLLOW) and
//!   create with O_EXCL; an existing file is truncated only when it is the
//!   user's own regular file with one name (no hard link to someone else's);
//! - inputs are regular files only (a FIFO would hang a grader, /dev/zero
//!   would fill memory), opened O_NONBLOCK, and read up to a size limit,
//!   whatever the file claims.
//!
//! Without sudo the same checks apply with kdiag's own identity.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Defined with the other error kinds, so `error` needs nothing from sys/.
pub use crate::error::UserFileError;
use crate::sys::process::fs_identity::{acting, as_user, owner_uid};

/// What a read accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Refuse files larger than this.
    pub max_bytes: u64,
    /// Follow a symlink in the last component (as the user, so only to
    /// what they could open themselves).
    pub follow_symlinks: bool,
}

/// The input limit set with `--max-input` (0: the default).
static INPUT_LIMIT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Set the size limit of inputs (`kdiag --max-input SIZE`): `Limits::input`
/// uses it, and the larger limits of archives and artifacts grow to it.
pub fn set_input_limit(bytes: u64) {
    INPUT_LIMIT.store(bytes, std::sync::atomic::Ordering::Relaxed);
}

fn input_limit_set() -> Option<u64> {
    match INPUT_LIMIT.load(std::sync::atomic::Ordering::Relaxed) {
        0 => None,
        n => Some(n),
    }
}

impl Limits {
    /// The default size limit for a file a user hands kdiag to read.
    pub const INPUT_MAX: u64 = 1 << 20;

    /// An input the user names on the command line (answers, artifacts):
    /// INPUT_MAX, or what `--max-input` says.
    pub fn input() -> Limits {
        Limits {
            max_bytes: input_limit_set().unwrap_or(Self::INPUT_MAX),
            follow_symlinks: true,
        }
    }

    /// A file inside a submission: symlinks are refused, since a
    /// submission must carry its evidence, not point at the grader's files.
    pub fn submission() -> Limits {
        Limits {
            follow_symlinks: false,
            ..Limits::input()
        }
    }

    /// A file kdiag reads only parts of, with pread (elf-check): any size.
    pub fn parts_only() -> Limits {
        Limits {
            max_bytes: u64::MAX,
            ..Limits::input()
        }
    }

    /// The same with another size limit (or `--max-input`'s, if larger).
    pub fn max(self, max_bytes: u64) -> Limits {
        Limits {
            max_bytes: max_bytes.max(input_limit_set().unwrap_or(0)),
            ..self
        }
    }
}

impl UserFileError {
    fn from_errno(path: &Path, err: io::Error, acting: bool) -> UserFileError {
        let path = path.to_path_buf();
        match err.raw_os_error() {
            Some(libc::ENOENT) => UserFileError::NotFound(path),
            Some(libc::EACCES | libc::EPERM) => UserFileError::Denied { path, acting },
            Some(libc::ELOOP) => UserFileError::Symlink(path),
            // O_WRONLY|O_NONBLOCK on a FIFO with no reader.
            Some(libc::ENXIO) => UserFileError::NotRegular {
                path,
                what: "a FIFO or a device",
            },
            _ => UserFileError::Io { path, source: err },
        }
    }

    /// True when the error is about the file (refused or missing), not a
    /// passing I/O failure: reports treat it as "not gradable".
    pub fn is_refusal(&self) -> bool {
        !matches!(self, UserFileError::Io { .. })
    }
}

fn c_path(path: &Path) -> Result<CString, UserFileError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| UserFileError::Io {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "the path contains a NUL byte"),
    })
}

fn open_raw(path: &CString, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    // SAFETY: a valid NUL-terminated path; the fd returned is ours.
    let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC, mode) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What a file type is called in messages.
fn kind_name(mode: u32) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => "a directory",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFSOCK => "a socket",
        libc::S_IFLNK => "a symbolic link",
        _ => "not a regular file",
    }
}

/// Open `path` to read, as the user, refusing what is not a regular file
/// or is over the limit; returns the file and its size.
pub fn open(path: &Path, limits: &Limits) -> Result<(File, u64), UserFileError> {
    let c = c_path(path)?;
    let mut flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
    if !limits.follow_symlinks {
        flags |= libc::O_NOFOLLOW;
    }
    let opened = as_user(|| open_raw(&c, flags, 0))
        .and_then(|r| r)
        .map_err(|e| UserFileError::from_errno(path, e, acting()))?;
    let file = File::from(opened);
    let meta = file.metadata().map_err(|e| UserFileError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    if !meta.file_type().is_file() {
        return Err(UserFileError::NotRegular {
            path: path.to_path_buf(),
            what: kind_name(meta.mode()),
        });
    }
    if meta.len() > limits.max_bytes {
        return Err(UserFileError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
            max: limits.max_bytes,
        });
    }
    Ok((file, meta.len()))
}

/// `n` bytes at `off` of a file from `open` (fewer at its end), with
/// pread: what readers of parts of a big file use.
pub fn read_at(file: &File, path: &Path, off: u64, n: usize) -> Result<Vec<u8>, UserFileError> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; n];
    let mut len = 0;
    while len < n {
        match file.read_at(&mut buf[len..], off + len as u64) {
            Ok(0) => break,
            Ok(k) => len += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(UserFileError::Io {
                    path: path.to_path_buf(),
                    source: e,
                });
            }
        }
    }
    buf.truncate(len);
    Ok(buf)
}

/// What is at a path as the user would find it, following symlinks as
/// execve does: used for paths a file names (an interpreter), never read
/// beyond `head` bytes, and only when it is a regular file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peek {
    Missing,
    Denied,
    /// Not a regular file (a directory, FIFO, device...).
    NotRegular,
    /// A regular file: its mode, and its first bytes (None when the user
    /// cannot read it).
    File {
        mode: u32,
        head: Option<Vec<u8>>,
    },
}

/// Look at `path` as the user (see `Peek`).
pub fn peek(path: &Path, head: usize) -> Peek {
    let Ok(c) = c_path(path) else {
        return Peek::Missing;
    };
    let look = || -> Peek {
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return Peek::Denied,
            Err(_) => return Peek::Missing,
        };
        if !meta.file_type().is_file() {
            return Peek::NotRegular;
        }
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
        let head = open_raw(&c, flags, 0).ok().and_then(|fd| {
            let file = File::from(fd);
            // Swapped for something else since the stat: read nothing.
            if !file.metadata().ok()?.file_type().is_file() {
                return None;
            }
            let mut buf = Vec::with_capacity(head);
            file.take(head as u64).read_to_end(&mut buf).ok()?;
            Some(buf)
        });
        Peek::File {
            mode: meta.mode(),
            head,
        }
    };
    as_user(look).unwrap_or(Peek::Denied)
}

/// Read a whole input file, as the user, within `limits`.
pub fn read(path: &Path, limits: &Limits) -> Result<Vec<u8>, UserFileError> {
    let (file, size) = open(path, limits)?;
    let mut data = Vec::with_capacity(size as usize);
    // Files may grow, or claim size 0 (/proc): read at most one byte past
    // the limit to know it was crossed.
    file.take(limits.max_bytes + 1)
        .read_to_end(&mut data)
        .map_err(|e| UserFileError::Io {
            path: path.to_path_buf(),
            source: e,
        })?;
    if data.len() as u64 > limits.max_bytes {
        return Err(UserFileError::TooLarge {
            path: path.to_path_buf(),
            size: data.len() as u64,
            max: limits.max_bytes,
        });
    }
    Ok(data)
}

/// Read a whole input file as UTF-8 text.
pub fn read_to_string(path: &Path, limits: &Limits) -> Result<String, UserFileError> {
    let data = read(path, limits)?;
    String::from_utf8(data).map_err(|_| UserFileError::Io {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidData, "is not UTF-8 text"),
    })
}

/// Create `path` for the user (mode 0644 before the umask), or truncate it
/// when it is already their own regular file with a single name.
pub fn create(path: &Path) -> Result<File, UserFileError> {
    create_mode(path, 0o644)
}

/// `create` with another mode (e.g. 0o600 for a file holding a secret).
pub fn create_mode(path: &Path, mode: u32) -> Result<File, UserFileError> {
    let c = c_path(path)?;
    let acting = acting();
    let err = |e| UserFileError::from_errno(path, e, acting);
    let fresh = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
    let existing = libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
    let (fd, created) = as_user(|| match open_raw(&c, fresh, mode) {
        Ok(fd) => Ok((fd, true)),
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
            open_raw(&c, existing, 0).map(|fd| (fd, false))
        }
        Err(e) => Err(e),
    })
    .and_then(|r| r)
    .map_err(err)?;
    let file = File::from(fd);
    if !created {
        let meta = file.metadata().map_err(err)?;
        if !meta.file_type().is_file() {
            return Err(UserFileError::NotRegular {
                path: path.to_path_buf(),
                what: kind_name(meta.mode()),
            });
        }
        if meta.uid() != owner_uid() {
            return Err(UserFileError::NotOwned {
                path: path.to_path_buf(),
                owner: meta.uid(),
            });
        }
        if meta.nlink() > 1 {
            return Err(UserFileError::HardLinked {
                path: path.to_path_buf(),
                links: meta.nlink(),
            });
        }
        file.set_len(0).map_err(err)?;
    }
    Ok(file)
}

/// Write a whole file for the user (see `create`).
pub fn write(path: &Path, data: impl AsRef<[u8]>) -> Result<(), UserFileError> {
    let mut file = create(path)?;
    file.write_all(data.as_ref())
        .and_then(|()| file.flush())
        .map_err(|e| UserFileError::Io {
            path: path.to_path_buf(),
            source: e,
        })
}

/// Write a whole file for the user that only they can read (0600, an
/// existing one of theirs made so too): a learner's answers and notes.
pub fn write_private(path: &Path, data: impl AsRef<[u8]>) -> Result<(), UserFileError> {
    let mut file = create_mode(path, 0o600)?;
    let io = |e| UserFileError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    // create_mode checked that it is the user's own; fchmod as them.
    let fd = file.as_raw_fd();
    // SAFETY: fchmod on a descriptor we hold.
    as_user(|| unsafe { libc::fchmod(fd, 0o600) } == 0)
        .map_err(io)?
        .then_some(())
        .ok_or_else(|| io(io::Error::last_os_error()))?;
    file.write_all(data.as_ref())
        .and_then(|()| file.flush())
        .map_err(io)
}

/// Create `dir` (0700) and its missing parents as the user, and make an
/// existing `dir` of theirs 0700 too: a learner's lab folder is theirs alone.
pub fn create_private_dir(dir: &Path) -> Result<(), UserFileError> {
    let err = |e| UserFileError::from_errno(dir, e, acting());
    as_user(|| {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let c = CString::new(dir.as_os_str().as_bytes())?;
        let fd = open_raw(&c, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW, 0)?;
        // SAFETY: fchmod on a descriptor we hold, with the user's fsuid:
        // the kernel allows it on their own directory only.
        if unsafe { libc::fchmod(fd.as_raw_fd(), 0o700) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    })
    .and_then(|r| r)
    .map_err(err)
}

/// Create `dir` and its missing parents as the user.
pub fn create_dir_all(dir: &Path) -> Result<(), UserFileError> {
    as_user(|| std::fs::create_dir_all(dir))
        .and_then(|r| r)
        .map_err(|e| UserFileError::from_errno(dir, e, acting()))
}

/// Remove a file as the user (a symbolic link itself, never its target);
/// a file already gone is no error.
pub fn remove_file(path: &Path) -> Result<(), UserFileError> {
    match as_user(|| std::fs::remove_file(path)).and_then(|r| r) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other.map_err(|e| UserFileError::from_errno(path, e, acting())),
    }
}

/// Rename `from` to `to` as the user, replacing `to` (a symbolic link
/// itself, never its target): how a file is replaced atomically.
pub fn rename(from: &Path, to: &Path) -> Result<(), UserFileError> {
    as_user(|| std::fs::rename(from, to))
        .and_then(|r| r)
        .map_err(|e| UserFileError::from_errno(to, e, acting()))
}

/// The entries of a directory the user names, as the user, sorted.
pub fn read_dir(dir: &Path) -> Result<Vec<PathBuf>, UserFileError> {
    let list = as_user(|| -> io::Result<Vec<PathBuf>> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)?
            .map(|e| e.map(|e| e.path()))
            .collect::<io::Result<_>>()?;
        v.sort();
        Ok(v)
    });
    list.and_then(|r| r)
        .map_err(|e| UserFileError::from_errno(dir, e, acting()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn reads_regular_files_within_the_limit() {
        let d = tmp();
        let f = d.path().join("a.toml");
        std::fs::write(&f, "x = 1\n").unwrap();
        assert_eq!(read_to_string(&f, &Limits::input()).unwrap(), "x = 1\n");
        let e = read(&f, &Limits::input().max(3)).unwrap_err();
        assert!(
            matches!(
                e,
                UserFileError::TooLarge {
                    size: 6,
                    max: 3,
                    ..
                }
            ),
            "{e}"
        );
        assert!(matches!(
            read(&d.path().join("nope"), &Limits::input()),
            Err(UserFileError::NotFound(_))
        ));
    }

    #[test]
    fn refuses_what_is_not_a_regular_file() {
        let d = tmp();
        let fifo = d.path().join("fifo");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        // Must not block waiting for a writer.
        let e = read(&fifo, &Limits::input()).unwrap_err();
        assert!(
            matches!(e, UserFileError::NotRegular { what: "a FIFO", .. }),
            "{e}"
        );
        let e = read(Path::new("/dev/zero"), &Limits::input()).unwrap_err();
        assert!(matches!(e, UserFileError::NotRegular { .. }), "{e}");
        let e = read(d.path(), &Limits::input()).unwrap_err();
        assert!(
            matches!(
                e,
                UserFileError::NotRegular {
                    what: "a directory",
                    ..
                }
            ),
            "{e}"
        );
        // A FIFO as an output is refused too, without blocking.
        let e = create(&fifo).unwrap_err();
        assert!(matches!(e, UserFileError::NotRegular { .. }), "{e}");
    }

    #[test]
    fn symlinks_follow_only_when_allowed() {
        let d = tmp();
        let target = d.path().join("t");
        std::fs::write(&target, "data").unwrap();
        let link = d.path().join("l");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(read(&link, &Limits::input()).unwrap(), b"data");
        let e = read(&link, &Limits::submission()).unwrap_err();
        assert!(matches!(e, UserFileError::Symlink(_)), "{e}");
        // Writes never follow: the target is left alone.
        let e = write(&link, "new").unwrap_err();
        assert!(matches!(e, UserFileError::Symlink(_)), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"data");
    }

    #[test]
    fn truncates_only_own_single_named_files() {
        let d = tmp();
        let f = d.path().join("out");
        write(&f, "first").unwrap();
        write(&f, "2").unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"2");
        let other = d.path().join("other");
        std::fs::hard_link(&f, &other).unwrap();
        let e = write(&f, "3").unwrap_err();
        assert!(
            matches!(e, UserFileError::HardLinked { links: 2, .. }),
            "{e}"
        );
        assert_eq!(std::fs::read(&other).unwrap(), b"2");
    }

    #[test]
    fn creates_directories() {
        let d = tmp();
        let deep = d.path().join("a/b/c");
        create_dir_all(&deep).unwrap();
        assert!(deep.is_dir());
        create_dir_all(&deep).unwrap();
        assert_eq!(
            read_dir(&d.path().join("a")).unwrap(),
            vec![d.path().join("a/b")]
        );
    }
}
