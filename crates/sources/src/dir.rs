//! A local directory: every file, honouring `.gitignore` (in or out of a git
//! checkout), skipping hidden files, vendored and build directories, and
//! applying the configured include/exclude globs. Symlinks within the tree
//! are followed, loops reported, not walked; symlinks leading outside the
//! tree are reported and not followed unless `sources.follow_outside_symlinks`
//! says so. What is not a regular file (a FIFO, a socket, a device) and
//! names that are not UTF-8 are reported and never opened.
//!
//! A listed file is read later ([`read_listed_file`]), when the tree may have
//! changed: it is opened without following a symlink in its place, and it
//! must still be the file (device and inode) the walk listed, so a file or
//! directory swapped for a link out of the tree after listing is not read.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use globset::{Glob, GlobSet, GlobSetBuilder};
use weft_config::SourcesConfig;

use crate::Issue;

/// Which paths of a tree are indexed: compiled from [`SourcesConfig`].
#[derive(Debug, Clone)]
pub struct DirSelection {
    include: Option<GlobSet>,
    exclude: GlobSet,
    skip_dirs: Vec<String>,
    follow_outside_symlinks: bool,
}

impl DirSelection {
    /// Compiles the globs; a bad glob is named.
    pub fn new(config: &SourcesConfig) -> Result<Self, String> {
        let build = |globs: &[String], key: &str| -> Result<GlobSet, String> {
            let mut b = GlobSetBuilder::new();
            for g in globs {
                b.add(Glob::new(g).map_err(|e| format!("sources.{key}: {g:?}: {e}"))?);
            }
            b.build().map_err(|e| format!("sources.{key}: {e}"))
        };
        Ok(Self {
            include: if config.include.is_empty() {
                None
            } else {
                Some(build(&config.include, "include")?)
            },
            exclude: build(&config.exclude, "exclude")?,
            skip_dirs: config.skip_dirs.clone(),
            follow_outside_symlinks: config.follow_outside_symlinks,
        })
    }

    /// Whether the file at `uri` (relative, `/`-separated) is indexed.
    pub fn selects(&self, uri: &str) -> bool {
        self.include.as_ref().is_none_or(|g| g.is_match(uri)) && !self.exclude.is_match(uri)
    }
}

/// What a walk of a directory found.
#[derive(Debug, Default)]
pub struct Walk {
    /// Every selected regular file in name order, as (uri, path).
    pub files: Vec<(String, PathBuf)>,
    /// Entries not read on purpose, with the reason: symlinks leading out
    /// of the tree, FIFOs, sockets and devices, names that are not UTF-8.
    pub skipped: Vec<Issue>,
    /// Entries that could not be walked: unreadable directories, symlink
    /// loops, broken links.
    pub errors: Vec<Issue>,
    /// What each listed file (by its path in [`Walk::files`]) was when
    /// listed, for [`read_listed_file`] to check (unix only).
    pub identities: HashMap<PathBuf, FileIdentity>,
}

/// What a listed file was when it was listed: its device and inode (of the
/// file a symlink within the tree led to), and whether its path was such a
/// symlink. [`read_listed_file`] reads the file only if it is still that one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileIdentity {
    device: u64,
    inode: u64,
    through_link: bool,
}

impl FileIdentity {
    /// The identity of the file at `path` now, following a symlink in its
    /// place (and noting that it did). `None` if it cannot be read, or on a
    /// platform without inodes.
    pub fn of(path: &Path) -> Option<Self> {
        let through_link = std::fs::symlink_metadata(path)
            .ok()?
            .file_type()
            .is_symlink();
        Self::from_metadata(&std::fs::metadata(path).ok()?, through_link)
    }

    /// The identity that `metadata` (of the file itself) describes.
    #[allow(unused_variables)]
    fn from_metadata(metadata: &std::fs::Metadata, through_link: bool) -> Option<Self> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt as _;
            Some(Self {
                device: metadata.dev(),
                inode: metadata.ino(),
                through_link,
            })
        }
        #[cfg(not(unix))]
        {
            None
        }
    }
}

/// Walks `root` as `selection` says.
pub fn walk_dir(root: &Path, selection: &DirSelection) -> Walk {
    let mut walk = Walk::default();
    if root.is_file() {
        let uri = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some(identity) = FileIdentity::of(root) {
            walk.identities.insert(root.to_owned(), identity);
        }
        walk.files.push((uri, root.to_owned()));
        return walk;
    }
    let skip_dirs = selection.skip_dirs.clone();
    // Symlinks are judged by where they lead, against the real root.
    let real_root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_owned());
    let outside = Arc::new(Mutex::new(Vec::new()));
    let leads_outside = {
        let (outside, root) = (outside.clone(), root.to_owned());
        let follow = selection.follow_outside_symlinks;
        move |entry: &ignore::DirEntry| -> bool {
            if follow || entry.depth() == 0 || !entry.path_is_symlink() {
                return false;
            }
            // A broken link is left to the walk, which reports it.
            let Ok(target) = std::fs::canonicalize(entry.path()) else {
                return false;
            };
            if target.starts_with(&real_root) {
                return false;
            }
            if let Ok(mut list) = outside.lock() {
                list.push(Issue {
                    uri: super::relative_uri(&root, entry.path()),
                    reason: format!(
                        "a symlink to {}, outside the tree: not followed (sources.follow_outside_symlinks)",
                        target.display()
                    ),
                });
            }
            true
        }
    };
    let walker = ignore::WalkBuilder::new(root)
        .follow_links(true)
        .require_git(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(move |entry| {
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            let skipped_dir = is_dir
                && entry.depth() > 0
                && skip_dirs
                    .iter()
                    .any(|d| entry.file_name().to_string_lossy() == d.as_str());
            !skipped_dir && !leads_outside(entry)
        })
        .build();
    for entry in walker {
        match entry {
            Ok(entry) => {
                let Some(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() {
                    continue;
                }
                let uri = super::relative_uri(root, entry.path());
                if !selection.selects(&uri) {
                    continue;
                }
                let relative = entry.path().strip_prefix(root).unwrap_or(entry.path());
                if relative.to_str().is_none() {
                    walk.skipped.push(Issue {
                        uri,
                        reason: "its name is not valid UTF-8 (shown with U+FFFD): not read".into(),
                    });
                } else if kind.is_file() {
                    // The metadata of the file a link leads to (the walk
                    // follows links), as the read will open it.
                    let identity = entry.metadata().ok().and_then(|meta| {
                        FileIdentity::from_metadata(&meta, entry.path_is_symlink())
                    });
                    if let Some(identity) = identity {
                        walk.identities.insert(entry.path().to_owned(), identity);
                    }
                    walk.files.push((uri, entry.into_path()));
                } else {
                    walk.skipped.push(Issue {
                        uri,
                        reason: format!("{}, not a regular file: not read", special_kind(&kind)),
                    });
                }
            }
            Err(e) => walk.errors.push(Issue {
                uri: error_path(&e, root),
                reason: e.to_string(),
            }),
        }
    }
    if let Ok(mut list) = outside.lock() {
        walk.skipped.append(&mut list);
    }
    walk
}

/// What a file that is not a regular file or a directory is.
pub(crate) fn special_kind(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if kind.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_block_device() || kind.is_char_device() {
            return "a device";
        }
    }
    if kind.is_symlink() {
        return "a symlink";
    }
    if kind.is_dir() {
        return "a directory";
    }
    "a special file"
}

fn error_path(error: &ignore::Error, root: &Path) -> String {
    match error {
        ignore::Error::WithPath { path, .. } => super::relative_uri(root, path),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            error_path(err, root)
        }
        ignore::Error::Loop { child, .. } => super::relative_uri(root, child),
        _ => root.display().to_string(),
    }
}

/// Reads a listed file, which may have changed since it was listed: it
/// must still be a regular file (opened without blocking, so a FIFO put in
/// its place cannot hang the run) of at most `max_bytes` bytes, and it is
/// read no further than that even if it grows meanwhile.
///
/// A symlink in its place is not followed (`O_NOFOLLOW`) unless the listed
/// path was a symlink within the tree already; and when `listed` (what the
/// listing saw) is known, the file opened must be that one (device and
/// inode): a file, or a directory on its path, swapped for a link out of
/// the tree after listing is not read.
pub fn read_listed_file(
    path: &Path,
    listed: Option<FileIdentity>,
    max_bytes: u64,
) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let follow = listed.is_some_and(|l| l.through_link);
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | nofollow);
    }
    let file = options.open(path).map_err(|e| {
        let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        if !follow && is_link {
            "is a symbolic link now, not a regular file: not read".to_owned()
        } else {
            format!("cannot be read: {e}")
        }
    })?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot be read: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "is {} now, not a regular file: not read",
            special_kind(&meta.file_type())
        ));
    }
    if let Some(listed) = listed
        && FileIdentity::from_metadata(&meta, listed.through_link) != Some(listed)
    {
        return Err(
            "is not the file that was listed any more (it, or a directory on its path, was replaced): not read"
                .into(),
        );
    }
    let too_large = |size: u64| {
        format!(
            "{size} bytes is over chunking.max_file_bytes ({max_bytes}): not read; what was indexed of it stays"
        )
    };
    if meta.len() > max_bytes {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read: {e}"))?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vendored_ignored_hidden_and_excluded_files_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for f in [
            "src/a.rs",
            "src/b.ts",
            "node_modules/x/index.js",
            "target/debug/out.rs",
            ".hidden/c.rs",
            "gen/skip.rs",
            "docs/guide.md",
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        std::fs::write(root.join(".gitignore"), "gen/\n").unwrap();
        let config = SourcesConfig {
            exclude: vec!["**/*.ts".into()],
            ..Default::default()
        };
        let walk = walk_dir(root, &DirSelection::new(&config).unwrap());
        let uris: Vec<&str> = walk.files.iter().map(|(u, _)| u.as_str()).collect();
        assert_eq!(uris, ["docs/guide.md", "src/a.rs"]);
        assert!(walk.errors.is_empty() && walk.skipped.is_empty());
        let only_docs = SourcesConfig {
            include: vec!["docs/**".into()],
            ..Default::default()
        };
        let walk = walk_dir(root, &DirSelection::new(&only_docs).unwrap());
        assert_eq!(walk.files.len(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn hostile_entries_are_reported_not_read() {
        use std::os::unix::ffi::OsStrExt as _;
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("id_rsa"), "PRIVATE KEY").unwrap();
        std::fs::create_dir(outside.path().join("secrets")).unwrap();
        std::fs::write(outside.path().join("secrets/token"), "t").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.rs"), "fn a() {}").unwrap();
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, root.join(name)).unwrap()
        };
        link(&outside.path().join("id_rsa"), "key.txt");
        link(&outside.path().join("secrets"), "secrets");
        link(&root.join("src"), "inside"); // within the tree: followed
        link(&root.join("src/a.rs"), "a-link.rs");
        link(Path::new("."), "src/loop"); // a loop
        link(&root.join("nowhere"), "broken.md");
        let fifo = root.join("pipe.md");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let odd = std::ffi::OsStr::from_bytes(b"caf\xe9.md");
        std::fs::write(root.join(odd), "latin-1 name").unwrap();

        let selection = DirSelection::new(&SourcesConfig::default()).unwrap();
        let walk = walk_dir(root, &selection);
        let uris: Vec<&str> = walk.files.iter().map(|(u, _)| u.as_str()).collect();
        assert_eq!(uris, ["a-link.rs", "inside/a.rs", "src/a.rs"], "{walk:#?}");
        let reason = |list: &[Issue], uri: &str| {
            list.iter()
                .find(|i| i.uri == uri)
                .map(|i| i.reason.clone())
                .unwrap_or_else(|| panic!("{uri} not reported: {walk:#?}"))
        };
        assert!(reason(&walk.skipped, "key.txt").contains("outside the tree: not followed"));
        assert!(reason(&walk.skipped, "secrets").contains("outside the tree"));
        assert!(reason(&walk.skipped, "pipe.md").contains("FIFO"));
        assert!(reason(&walk.skipped, "caf\u{fffd}.md").contains("not valid UTF-8"));
        assert!(
            walk.errors
                .iter()
                .any(|i| i.uri.starts_with("src/loop") || i.reason.contains("loop")),
            "{walk:#?}"
        );
        assert!(
            walk.errors.iter().any(|i| i.uri == "broken.md"),
            "{walk:#?}"
        );

        // Following links out of the tree is a setting.
        let follow = DirSelection::new(&SourcesConfig {
            follow_outside_symlinks: true,
            ..Default::default()
        })
        .unwrap();
        let walk = walk_dir(root, &follow);
        let uris: Vec<&str> = walk.files.iter().map(|(u, _)| u.as_str()).collect();
        assert!(
            uris.contains(&"key.txt") && uris.contains(&"secrets/token"),
            "{uris:?}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_listed_file_is_read_only_if_it_is_still_the_one_listed() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("id_rsa"), "PRIVATE KEY").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("a.md"), "a").unwrap();
        std::fs::write(root.join("b.md"), "b").unwrap();
        std::fs::write(root.join("c.md"), "c").unwrap();
        std::os::unix::fs::symlink(root.join("a.md"), root.join("link.md")).unwrap();
        let walk = walk_dir(root, &DirSelection::new(&SourcesConfig::default()).unwrap());
        let read = |uri: &str| {
            let (_, path) = walk.files.iter().find(|(u, _)| u == uri).unwrap();
            read_listed_file(path, walk.identities.get(path).copied(), 100)
                .map(|b| String::from_utf8(b).unwrap())
        };
        // A link within the tree, as listed, is followed.
        assert_eq!(read("link.md"), Ok("a".to_owned()));
        assert_eq!(read("b.md"), Ok("b".to_owned()));
        // That link pointed elsewhere, a file swapped for a link, a file
        // replaced by another: not read.
        let swap = |name: &str| {
            std::fs::remove_file(root.join(name)).unwrap();
            std::os::unix::fs::symlink(outside.path().join("id_rsa"), root.join(name)).unwrap();
        };
        swap("link.md");
        swap("b.md");
        // (Made before the old one goes, so that it cannot reuse its inode.)
        std::fs::write(root.join("c.md.new"), "another c").unwrap();
        std::fs::rename(root.join("c.md.new"), root.join("c.md")).unwrap();
        let listed_again = |name: &str| walk.identities.get(&root.join(name)).copied();
        assert!(listed_again("c.md").is_some());
        assert_eq!(
            read("link.md"),
            Err("is not the file that was listed any more (it, or a directory on its path, was replaced): not read".into())
        );
        assert_eq!(
            read("b.md"),
            Err("is a symbolic link now, not a regular file: not read".into())
        );
        assert!(
            read("c.md")
                .unwrap_err()
                .contains("not the file that was listed")
        );
        // Without the listing's identity, a link in its place is still
        // refused.
        assert_eq!(
            read_listed_file(&root.join("b.md"), None, 100),
            Err("is a symbolic link now, not a regular file: not read".into())
        );
    }
}
