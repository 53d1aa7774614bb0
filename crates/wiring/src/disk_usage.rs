//! How much a data directory takes: the space used on disk (what `du`
//! counts: allocated blocks), and beside it the apparent size (what `ls -l`
//! adds up). The two differ: the vector index preallocates sparse files
//! (an index of two small files: ~166 MiB apparent, ~0.7 MiB on disk), and redb
//! grows its file ahead of its data. Counted per generation and per store,
//! each file once however many hard links it has.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::data_dir::{DataDir, GENERATION_ZERO_ENTRIES};

/// A size, two ways.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Size {
    /// Space used on disk: allocated blocks × 512 (as `du` counts).
    pub on_disk_bytes: u64,
    /// The files' lengths added up (as `ls -l` shows; sparse and
    /// preallocated files count in full).
    pub apparent_bytes: u64,
}

impl Size {
    fn add(&mut self, other: Size) {
        self.on_disk_bytes += other.on_disk_bytes;
        self.apparent_bytes += other.apparent_bytes;
    }
}

/// What one generation's stores take.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GenerationUsage {
    /// Its number (0: the stores made in place in the data directory).
    pub number: u32,
    /// The vector index (with its readers' overlays).
    pub vectors: Size,
    /// The text index.
    pub text: Size,
    /// The catalog.
    pub catalog: Size,
    /// Its marker and lock files.
    pub other: Size,
    /// All of it.
    pub total: Size,
}

/// What a data directory takes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DiskUsage {
    /// Every generation with a directory, by number.
    pub generations: Vec<GenerationUsage>,
    /// Git checkouts (`sources/`), shared by every generation.
    pub sources: Size,
    /// Everything else (the generations record, locks, leftovers).
    pub other: Size,
    /// The whole directory.
    pub total: Size,
}

impl DataDir {
    /// What the directory takes on disk, per generation and per store. A
    /// file that vanishes or cannot be read while counting is left out.
    pub fn disk_usage(&self) -> DiskUsage {
        let mut seen = HashSet::new();
        let mut usage = DiskUsage::default();
        let root = self.path();
        let mut zero = GenerationUsage::default();
        let mut zero_found = false;
        let Ok(entries) = std::fs::read_dir(root) else {
            return usage;
        };
        usage.other.add(entry_size(root, &mut seen));
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name == "generations" {
                // Counted by generation, not as one tree (which would mark
                // every file seen first).
                usage
                    .generations
                    .extend(generations(&entry.path(), &mut seen, &mut usage.other));
                continue;
            }
            let size = tree_size(&entry.path(), &mut seen);
            if GENERATION_ZERO_ENTRIES.contains(&name.as_ref()) {
                zero_found |= name != "readers.lock";
                add_store(&mut zero, &name, size);
            } else if name == "sources" {
                usage.sources.add(size);
            } else {
                usage.other.add(size);
            }
        }
        if zero_found {
            usage.generations.push(zero);
        } else {
            // Only a readers lock of generation 0: counted, as other.
            usage.other.add(zero.total);
        }
        usage.generations.sort_by_key(|g| g.number);
        usage.total = usage.sources;
        usage.total.add(usage.other);
        for g in &usage.generations {
            usage.total.add(g.total);
        }
        usage
    }
}

/// Adds `size` of the entry `name` of a generation to its store.
fn add_store(generation: &mut GenerationUsage, name: &str, size: Size) {
    match name {
        "vectors" | "vectors.readers" => generation.vectors.add(size),
        "text" => generation.text.add(size),
        "catalog.redb" => generation.catalog.add(size),
        _ => generation.other.add(size),
    }
    generation.total.add(size);
}

/// The `g<N>` directories under `generations/`; anything else there is
/// added to `other`.
fn generations(
    dir: &Path,
    seen: &mut HashSet<(u64, u64)>,
    other: &mut Size,
) -> Vec<GenerationUsage> {
    let mut out = Vec::new();
    other.add(entry_size(dir, seen));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let number = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix('g'))
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|n| *n > 0 && path.is_dir());
        let Some(number) = number else {
            other.add(tree_size(&path, seen));
            continue;
        };
        let mut generation = GenerationUsage {
            number,
            ..Default::default()
        };
        let own = entry_size(&path, seen);
        generation.other.add(own);
        generation.total.add(own);
        if let Ok(stores) = std::fs::read_dir(&path) {
            for store in stores.flatten() {
                let name = store.file_name();
                let size = tree_size(&store.path(), seen);
                add_store(&mut generation, &name.to_string_lossy(), size);
            }
        }
        out.push(generation);
    }
    out
}

/// The size of one directory entry itself (not what is under it), once
/// per file: a hard link already counted adds nothing, and a symlink's
/// target is not looked at.
fn entry_size(path: &Path, seen: &mut HashSet<(u64, u64)>) -> Size {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Size::default();
    };
    if !seen.insert(file_key(&meta)) {
        return Size::default();
    }
    Size {
        on_disk_bytes: on_disk(&meta),
        apparent_bytes: if meta.is_file() { meta.len() } else { 0 },
    }
}

/// `path` and everything under it, symlinks not followed.
fn tree_size(path: &Path, seen: &mut HashSet<(u64, u64)>) -> Size {
    let mut total = Size::default();
    let mut stack: Vec<PathBuf> = vec![path.to_owned()];
    while let Some(p) = stack.pop() {
        total.add(entry_size(&p, seen));
        if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir())
            && let Ok(entries) = std::fs::read_dir(&p)
        {
            stack.extend(entries.flatten().map(|e| e.path()));
        }
    }
    total
}

#[cfg(unix)]
fn file_key(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

#[cfg(unix)]
fn on_disk(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    // st_blocks counts 512-byte units whatever the file system's block size.
    meta.blocks().saturating_mul(512)
}

#[cfg(not(unix))]
fn file_key(_meta: &std::fs::Metadata) -> (u64, u64) {
    // No inode numbers: every entry counts (hard links twice).
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    (0, NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

#[cfg(not(unix))]
fn on_disk(meta: &std::fs::Metadata) -> u64 {
    // No block counts: the apparent size is the best there is.
    if meta.is_file() { meta.len() } else { 0 }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::io::{Seek, SeekFrom, Write};

    /// A sparse file: `len` bytes long, one block written at the start.
    fn sparse(path: &Path, len: u64) {
        let mut f = std::fs::File::create(path).unwrap();
        f.write_all(&[1u8; 4096]).unwrap();
        f.seek(SeekFrom::Start(len - 1)).unwrap();
        f.write_all(&[0]).unwrap();
    }

    #[test]
    fn sparse_files_count_their_blocks_and_stores_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // Generation 0 in place, generation 2 beside it, a checkout.
        std::fs::create_dir_all(root.join("vectors/segments")).unwrap();
        sparse(&root.join("vectors/segments/mmap.dat"), 64 << 20);
        std::fs::write(root.join("catalog.redb"), vec![7u8; 10_000]).unwrap();
        std::fs::write(root.join("weft-data.json"), b"{}").unwrap();
        let g2 = root.join("generations/g2");
        std::fs::create_dir_all(g2.join("text")).unwrap();
        std::fs::write(g2.join("text/seg"), vec![1u8; 20_000]).unwrap();
        std::fs::create_dir_all(g2.join("vectors")).unwrap();
        sparse(&g2.join("vectors/big"), 32 << 20);
        // A hard link counts once.
        std::fs::hard_link(g2.join("vectors/big"), g2.join("vectors/big.link")).unwrap();
        std::fs::create_dir_all(root.join("sources/repo")).unwrap();
        std::fs::write(root.join("sources/repo/a.txt"), b"hello").unwrap();
        std::fs::write(root.join("generations.json"), b"{}").unwrap();

        let usage = DataDir::new(root).disk_usage();
        let numbers: Vec<u32> = usage.generations.iter().map(|g| g.number).collect();
        assert_eq!(numbers, [0, 2]);
        let (g0, g2) = (&usage.generations[0], &usage.generations[1]);
        assert_eq!(g0.vectors.apparent_bytes, 64 << 20);
        assert!(
            g0.vectors.on_disk_bytes < 1 << 20,
            "a sparse file's blocks, not its length: {g0:?}"
        );
        assert_eq!(g0.catalog.apparent_bytes, 10_000);
        assert!(g0.catalog.on_disk_bytes >= 10_000, "{g0:?}");
        assert_eq!(g0.text, Size::default());
        assert_eq!(g2.text.apparent_bytes, 20_000);
        assert_eq!(g2.vectors.apparent_bytes, 32 << 20, "the link counted once");
        assert_eq!(usage.sources.apparent_bytes, 5);
        assert!(usage.other.apparent_bytes >= 2, "{usage:?}");
        let sum = |f: fn(&Size) -> u64| {
            usage.generations.iter().map(|g| f(&g.total)).sum::<u64>()
                + f(&usage.sources)
                + f(&usage.other)
        };
        assert_eq!(usage.total.apparent_bytes, sum(|s| s.apparent_bytes));
        assert_eq!(usage.total.on_disk_bytes, sum(|s| s.on_disk_bytes));
        for g in &usage.generations {
            let mut parts = g.vectors;
            parts.add(g.text);
            parts.add(g.catalog);
            parts.add(g.other);
            assert_eq!(parts, g.total, "{g:?}");
        }
        assert!(usage.total.on_disk_bytes < usage.total.apparent_bytes / 10);
    }

    #[test]
    fn a_missing_directory_takes_nothing() {
        let usage = DataDir::new("/no/such/weft/dir").disk_usage();
        assert_eq!(usage, DiskUsage::default());
    }
}
