//! errno numbers, names and messages, for explaining failed syscalls.

/// errno value, name and strerror text (Linux x86-64/generic numbers).
pub const ERRNOS: &[(i32, &str, &str)] = &[
    (1, "EPERM", "Operation not permitted"),
    (2, "ENOENT", "No such file or directory"),
    (3, "ESRCH", "No such process"),
    (4, "EINTR", "Interrupted system call"),
    (5, "EIO", "Input/output error"),
    (6, "ENXIO", "No such device or address"),
    (7, "E2BIG", "Argument list too long"),
    (8, "ENOEXEC", "Exec format error"),
    (9, "EBADF", "Bad file descriptor"),
    (11, "EAGAIN", "Resource temporarily unavailable"),
    (12, "ENOMEM", "Cannot allocate memory"),
    (13, "EACCES", "Permission denied"),
    (14, "EFAULT", "Bad address"),
    (16, "EBUSY", "Device or resource busy"),
    (17, "EEXIST", "File exists"),
    (19, "ENODEV", "No such device"),
    (20, "ENOTDIR", "Not a directory"),
    (21, "EISDIR", "Is a directory"),
    (22, "EINVAL", "Invalid argument"),
    (23, "ENFILE", "Too many open files in system"),
    (24, "EMFILE", "Too many open files"),
    (26, "ETXTBSY", "Text file busy"),
    (27, "EFBIG", "File too large"),
    (36, "ENAMETOOLONG", "File name too long"),
    (40, "ELOOP", "Too many levels of symbolic links"),
    (75, "EOVERFLOW", "Value too large for defined data type"),
    (79, "ELIBACC", "Can not access a needed shared library"),
    (80, "ELIBBAD", "Accessing a corrupted shared library"),
    (95, "EOPNOTSUPP", "Operation not supported"),
    (524, "ENOTSUPP", "Operation not supported (kernel-internal)"),
];

/// "EINVAL" for 22; None for numbers outside the table.
pub fn errno_name(errno: i32) -> Option<&'static str> {
    ERRNOS.iter().find(|e| e.0 == errno).map(|e| e.1)
}

/// strerror text for an errno name.
pub fn errno_message(name: &str) -> &'static str {
    ERRNOS
        .iter()
        .find(|e| e.1 == name)
        .map_or("unknown error", |e| e.2)
}

/// errno number for a name.
pub fn errno_number(name: &str) -> Option<i32> {
    ERRNOS.iter().find(|e| e.1 == name).map(|e| e.0)
}
