//! `weft eval --derive PATH`: a labelled query set from a tree's own doc
//! comments and headings, written to a file with the hard copy beside it
//! (see [`weft_eval::derive`] for the rules).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, bail};
use serde_json::json;
use weft_chunking::Chunker;
use weft_eval::derive::{DeriveOptions, DeriveStats, Deriver, HardCopy};

/// The file in a hard copy that says `weft eval --derive` wrote it (hidden,
/// so no index reads it), so that deriving again may replace it.
const MARKER: &str = ".weft-derived";

/// A derived set on disk.
pub(super) struct DerivedSet {
    pub root: PathBuf,
    pub name: String,
    pub queries_file: PathBuf,
    pub hard_dir: PathBuf,
    pub files: usize,
    pub code: usize,
    pub prose: usize,
    pub stats: DeriveStats,
    pub elapsed_ms: u64,
}

/// Derives the set of `root` into `out` (default `<eval_dir>/derived/<name>.jsonl`)
/// and its hard copy into `<out stem>.hard/` beside it.
pub(super) fn derive(
    config_file: Option<&Path>,
    root: &Path,
    name: Option<&str>,
    out: Option<&Path>,
    eval_dir: &Path,
) -> anyhow::Result<DerivedSet> {
    let started = Instant::now();
    if !root.is_dir() {
        bail!("--derive {}: not a directory", root.display());
    }
    let root =
        std::fs::canonicalize(root).with_context(|| format!("--derive {}", root.display()))?;
    let name = match name {
        Some(n) => n.to_owned(),
        None => root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "project".to_owned()),
    };
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        bail!(
            "--name {name:?}: use letters, digits, '-', '_' and '.' (it names the corpus and its project)"
        );
    }
    let out = match out {
        Some(o) => o.to_path_buf(),
        None => eval_dir.join("derived").join(format!("{name}.jsonl")),
    };
    if out.is_dir() {
        bail!(
            "{}: is a directory; give the query file to write",
            out.display()
        );
    }
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let parent = std::fs::canonicalize(parent)?;
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| name.clone());
    let out = parent.join(
        out.file_name()
            .unwrap_or(std::ffi::OsStr::new("queries.jsonl")),
    );
    let hard_name = format!("{stem}.hard");
    let hard_dir = parent.join(&hard_name);
    if hard_dir.exists() {
        if !hard_dir.join(MARKER).is_file() {
            bail!(
                "{}: exists and is not a hard copy weft eval --derive wrote; give another QUERIES.jsonl",
                hard_dir.display()
            );
        }
        std::fs::remove_dir_all(&hard_dir)
            .with_context(|| format!("removing the old hard copy {}", hard_dir.display()))?;
    }
    std::fs::create_dir_all(&hard_dir)?;
    std::fs::write(
        hard_dir.join(MARKER),
        format!(
            "written by weft eval --derive {}: the files of that tree with doc comments blanked and asked headings masked\n",
            root.display()
        ),
    )?;

    let config = weft_config::load(config_file)?.config;
    let selection = weft_sources::DirSelection::new(&config.sources).map_err(anyhow::Error::msg)?;
    let chunker = Chunker::new(config.chunking.clone())?;
    let walk = weft_sources::walk_dir(&root, &selection);
    let mut deriver = Deriver::new(
        &chunker,
        DeriveOptions::new(&name, &root.to_string_lossy(), &hard_name),
    );
    let write = |uri: &str, bytes: &[u8]| -> anyhow::Result<()> {
        let path = hard_dir.join(uri);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))
    };
    let mut files = 0;
    for (uri, path) in &walk.files {
        // The set itself, when written inside the tree, is not part of it.
        if path.starts_with(&hard_dir) || *path == out {
            continue;
        }
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        files += 1;
        if let HardCopy::Now(copy) = deriver.add(uri, &bytes) {
            write(uri, &copy)?;
        }
    }
    let derived = deriver.finish();
    if derived.queries.is_empty() {
        // Nothing to keep: the hard copy goes too.
        let _ = std::fs::remove_dir_all(&hard_dir);
        bail!(
            "--derive {}: no query could be derived (no documented function or method, and no section heading that names its section); nothing to measure",
            root.display()
        );
    }
    for (uri, text) in &derived.held {
        write(uri, text.as_bytes())?;
    }
    let tmp = out.with_extension("jsonl.tmp");
    {
        let mut file = std::io::BufWriter::new(
            std::fs::File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?,
        );
        for q in &derived.queries {
            serde_json::to_writer(&mut file, q)?;
            file.write_all(b"\n")?;
        }
        file.flush()?;
    }
    std::fs::rename(&tmp, &out).with_context(|| format!("writing {}", out.display()))?;
    let prose = derived.queries.iter().filter(|q| q.is_prose()).count();
    Ok(DerivedSet {
        root,
        name,
        queries_file: out,
        hard_dir,
        files,
        code: derived.queries.len() - prose,
        prose,
        stats: derived.stats,
        elapsed_ms: started.elapsed().as_millis() as u64,
    })
}

/// The set as JSON.
pub(super) fn to_json(d: &DerivedSet) -> serde_json::Value {
    json!({
        "root": d.root,
        "corpus": d.name,
        "queries_file": d.queries_file,
        "hard_copy": d.hard_dir,
        "files": d.files,
        "queries": d.code + d.prose,
        "code_queries": d.code,
        "prose_queries": d.prose,
        "counts": d.stats,
        "elapsed_ms": d.elapsed_ms,
    })
}

/// Says what was derived, for people (or as JSON with `--derive-only --json`).
pub(super) fn print(d: &DerivedSet, json: bool) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&to_json(d))?)?;
        return Ok(());
    }
    writeln!(
        out,
        "Derived {} queries from {} ({} files): {} code (doc comment -> its definition), {} prose (heading -> its section).",
        d.code + d.prose,
        d.root.display(),
        d.files,
        d.code,
        d.prose
    )?;
    writeln!(out, "  queries:   {}", d.queries_file.display())?;
    writeln!(
        out,
        "  hard copy: {} (doc comments blanked, asked headings masked: what is indexed)",
        d.hard_dir.display()
    )?;
    let dropped: Vec<String> = d
        .stats
        .iter()
        .filter(|(k, _)| k.starts_with("drop_"))
        .map(|(k, v)| format!("{v} {}", k.trim_start_matches("drop_").replace('_', " ")))
        .collect();
    if !dropped.is_empty() {
        writeln!(out, "  not asked: {}", dropped.join(", "))?;
    }
    writeln!(out, "  rerun:     weft eval {}", d.queries_file.display())?;
    Ok(())
}
