//! # weft-file-locks
//!
//! Who holds a lock on a file. weft's embedded stores lock their
//! directories for the one process that writes them (tantivy's writer lock,
//! qdrant-edge's write-ahead log, the data directory's write lock); when an
//! open fails because another process holds such a lock, the error should
//! say so, name that process and what to do, and never suggest that the
//! index is damaged.
//!
//! [`holder_of`] reads the kernel's table of locks (`/proc/locks` on Linux)
//! and finds the process holding a lock on the file: its pid and its name
//! (`/proc/PID/comm`, never its arguments, which may hold secrets). On other
//! systems, or in a process that cannot see the holder (another PID
//! namespace), it answers `None` and the error says "another process".
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("lock");
//! let file = std::fs::File::create(&path).unwrap();
//! file.try_lock().unwrap();
//! let holder = weft_file_locks::holder_of(&path);
//! # #[cfg(target_os = "linux")]
//! assert_eq!(holder.map(|h| h.pid), Some(std::process::id()));
//! ```

#![warn(missing_docs)]

use std::fmt;
use std::path::Path;

/// A process holding a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHolder {
    /// Its process id, as this process sees it.
    pub pid: u32,
    /// Its name (the kernel's short command name), when readable.
    pub name: Option<String>,
}

impl LockHolder {
    /// Whether the holder is this very process (another handle in it).
    pub fn is_this_process(&self) -> bool {
        self.pid == std::process::id()
    }
}

impl fmt::Display for LockHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_this_process() {
            return write!(f, "this process (pid {})", self.pid);
        }
        match &self.name {
            Some(name) => write!(f, "process {} ({name})", self.pid),
            None => write!(f, "process {}", self.pid),
        }
    }
}

/// How to name the holder of a lock in a message: the process when it is
/// known, else "another process".
pub fn describe(holder: Option<&LockHolder>) -> String {
    match holder {
        Some(h) => h.to_string(),
        None => "another process".to_owned(),
    }
}

/// What an error says of a store another process holds the write lock of
/// (after "text index in DIR "): who holds it, that the store is not
/// damaged, and what to do. The one wording every embedded store uses.
pub fn written_elsewhere(holder: Option<&LockHolder>) -> String {
    format!(
        "is being written by {}: one process writes it at a time. Nothing is wrong with the \
         index: let that process finish or stop it (readers such as weft-query open it \
         read-only and need no lock)",
        describe(holder)
    )
}

/// The process holding a lock (`flock`, POSIX or open-file-description
/// lock, granted, not waiting) on `path`, if one can be seen. `None` when
/// the file is not locked, cannot be read, or this system has no lock
/// table to read.
pub fn holder_of(path: &Path) -> Option<LockHolder> {
    #[cfg(target_os = "linux")]
    {
        linux::holder_of(path)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        None
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;

    use super::LockHolder;

    /// The file's identity as `/proc/locks` writes it: major and minor
    /// device numbers (hex) and inode (decimal).
    #[derive(Debug, PartialEq, Eq)]
    pub(super) struct FileKey {
        pub major: u64,
        pub minor: u64,
        pub inode: u64,
    }

    impl FileKey {
        fn of(path: &Path) -> Option<Self> {
            let meta = std::fs::metadata(path).ok()?;
            let dev = meta.dev();
            // Linux's dev_t encoding (glibc's gnu_dev_major / gnu_dev_minor).
            let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
            let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
            Some(Self {
                major,
                minor,
                inode: meta.ino(),
            })
        }
    }

    pub(super) fn holder_of(path: &Path) -> Option<LockHolder> {
        let key = FileKey::of(path)?;
        let table = std::fs::read_to_string("/proc/locks").ok()?;
        let pid = holder_in(&table, &key)?;
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .ok()
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty());
        Some(LockHolder { pid, name })
    }

    /// The pid of the first granted lock on `key` in a `/proc/locks` table
    /// that names one (an open-file-description lock names pid -1 and is
    /// skipped).
    pub(super) fn holder_in(table: &str, key: &FileKey) -> Option<u32> {
        table.lines().find_map(|line| {
            // "1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF"; a process
            // waiting for the lock is listed as "1: -> FLOCK ...".
            let mut fields = line.split_whitespace().skip(1);
            let kind = fields.next()?;
            if kind == "->" {
                return None;
            }
            let _mode = fields.next()?;
            let _access = fields.next()?;
            let pid: u32 = fields.next()?.parse().ok()?;
            let mut id = fields.next()?.split(':');
            let major = u64::from_str_radix(id.next()?, 16).ok()?;
            let minor = u64::from_str_radix(id.next()?, 16).ok()?;
            let inode: u64 = id.next()?.parse().ok()?;
            (major == key.major && minor == key.minor && inode == key.inode).then_some(pid)
        })
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::linux::{FileKey, holder_in};
    use super::*;

    #[test]
    fn the_table_is_read_for_granted_locks_on_that_file_only() {
        let key = FileKey {
            major: 0xfd,
            minor: 1,
            inode: 5678,
        };
        let table = "\
1: POSIX  ADVISORY  WRITE 99 fd:01:1111 0 EOF
2: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF
2: -> FLOCK  ADVISORY  WRITE 4321 fd:01:5678 0 EOF
3: OFDLCK ADVISORY  WRITE -1 fd:01:5678 0 EOF
";
        assert_eq!(holder_in(table, &key), Some(1234));
        let waiting_only = "1: -> FLOCK  ADVISORY  WRITE 4321 fd:01:5678 0 EOF\n";
        assert_eq!(holder_in(waiting_only, &key), None);
        let other_device = "1: FLOCK  ADVISORY  WRITE 1234 fd:02:5678 0 EOF\n";
        assert_eq!(holder_in(other_device, &key), None);
        assert_eq!(holder_in("garbage\n\n", &key), None);
    }

    #[test]
    fn a_lock_held_by_another_process_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("held");
        std::fs::write(&path, b"").unwrap();
        assert_eq!(holder_of(&path), None, "nobody holds it yet");
        // flock(1) from util-linux holds the lock while `sleep` runs, both
        // in a process group of their own, so the test ends them both.
        use std::os::unix::process::CommandExt;
        let Ok(mut child) = std::process::Command::new("flock")
            .arg(&path)
            .args(["sleep", "30"])
            .process_group(0)
            .spawn()
        else {
            eprintln!("no flock(1) here: the other-process case is not checked");
            return;
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let holder = loop {
            if let Some(h) = holder_of(&path) {
                break h;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the lock never showed"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        // The group: killing flock alone would leave `sleep` holding the
        // lock (and the test's output) for its 30 s.
        let group = format!("-{}", child.id());
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &group])
            .status();
        let _ = child.kill();
        let _ = child.wait();
        assert!(!holder.is_this_process());
        assert!(holder.name.is_some(), "{holder:?}");
        assert!(
            holder
                .to_string()
                .starts_with(&format!("process {}", holder.pid)),
            "{holder}"
        );
        assert_eq!(describe(None), "another process");
    }

    #[test]
    fn a_lock_of_this_process_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mine");
        let file = std::fs::File::create(&path).unwrap();
        file.lock().unwrap();
        let holder = holder_of(&path).expect("held by this process");
        assert!(holder.is_this_process());
        assert!(holder.to_string().starts_with("this process"), "{holder}");
    }
}
