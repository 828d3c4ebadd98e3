//! Block devices of a test's own: a loop device over a sparse file, and an
//! ext4 made on one and mounted. What happens on them is the test's alone,
//! whatever the rest of the machine writes (other sessions' builds reach
//! tens of thousands of IOPS on the root disk, and a `sync` anywhere can
//! write any process's dirty pages there).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A loop device over a file in the target's scratch directory.
pub struct LoopDisk {
    /// "loop3"
    pub name: String,
    /// /dev/loop3
    dev: PathBuf,
    backing: PathBuf,
}

impl LoopDisk {
    pub fn new(name: &str, len: usize) -> LoopDisk {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        std::fs::create_dir_all(&dir).unwrap();
        let backing = dir.join(format!("loop-{name}-{}", std::process::id()));
        let f = File::create(&backing).unwrap();
        f.set_len(len as u64).unwrap();
        drop(f);
        let out = run(Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&backing));
        let dev = PathBuf::from(out.trim());
        let name = dev.file_name().unwrap().to_string_lossy().into_owned();
        LoopDisk { name, dev, backing }
    }

    pub fn path(&self) -> &Path {
        &self.dev
    }

    /// The device number as the block tracepoints' `dev` field holds it
    /// (the kernel's major << 20 | minor), for a perf filter.
    pub fn kernel_dev(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        let rdev = std::fs::metadata(&self.dev).unwrap().rdev();
        ((libc::major(rdev) as u64) << 20) | libc::minor(rdev) as u64
    }
}

impl Drop for LoopDisk {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
        let _ = std::fs::remove_file(&self.backing);
    }
}

/// An empty ext4 of the test's own, mounted, with one writer: the blocks
/// of a file written there lie in one range of the device, even when
/// another task's writeback (a `sync` anywhere) allocates part of them
/// (delayed allocation): nothing else allocates in between, and the free
/// space is one piece. (`nodelalloc` would not help: it wrote every other
/// 4 KiB block.)
pub struct Ext4 {
    mount: PathBuf,
    // Dropped after the unmount.
    disk: LoopDisk,
}

impl Ext4 {
    pub fn new(name: &str, len: usize) -> Ext4 {
        let disk = LoopDisk::new(name, len);
        run(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-b", "4096"])
            // Everything initialised now: no lazy-init thread writing later.
            .args(["-E", "lazy_itable_init=0,lazy_journal_init=0"])
            .arg(disk.path()));
        let mount = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("mnt-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&mount).unwrap();
        run(Command::new("mount")
            .args(["-t", "ext4"])
            .arg(disk.path())
            .arg(&mount));
        Ext4 { mount, disk }
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.mount
    }

    /// The device's name ("loop3").
    pub fn disk(&self) -> &str {
        &self.disk.name
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        // Busy for a moment after a run, seen once in about 60 (the holder
        // was gone before it could be named): try again, with a deadline.
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !Command::new("umount")
            .arg(&self.mount)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
            && std::time::Instant::now() < end
        {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = std::fs::remove_dir(&self.mount);
    }
}

/// Run a set-up command, which must succeed: its stdout.
fn run(cmd: &mut Command) -> String {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{program} does not run: {e}"));
    assert!(
        out.status.success(),
        "{program}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
