//! `weft chunk PATH`: what the chunkers make of a file or a tree.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use weft_chunking::{ChunkedDocument, Chunker};
use weft_core::{Chunk, ContentType};
use weft_sources::{DirSelection, SourceSpec, walk_dir};

/// Arguments of `weft chunk`.
#[derive(Debug, Args)]
pub struct ChunkArgs {
    /// A file, or a directory (walked recursively, honouring .gitignore).
    pub path: PathBuf,

    /// Project the documents belong to (default: the directory's name).
    #[arg(long)]
    pub project: Option<String>,

    /// Print every chunk's content, not only its outline.
    #[arg(long)]
    pub full: bool,

    /// Print JSON for machines instead of text for people.
    #[arg(long)]
    pub json: bool,
}

/// A file that was not chunked, and why.
#[derive(Debug, Serialize)]
struct Skipped {
    path: String,
    reason: String,
}

#[derive(Debug, Default, Serialize)]
struct Summary {
    files: usize,
    chunks: usize,
    bytes: u64,
    skipped: usize,
    warnings: usize,
    elapsed_ms: u128,
}

#[derive(Serialize)]
struct FileReport<'a> {
    uri: &'a str,
    document_id: &'a str,
    language: &'a str,
    content_type: ContentType,
    title: &'a str,
    is_index_doc: bool,
    warnings: &'a [String],
    chunks: &'a [Chunk],
}

pub fn run(config_file: Option<&Path>, args: &ChunkArgs) -> anyhow::Result<ExitCode> {
    let loaded = weft_config::load(config_file)?;
    let selection = DirSelection::new(&loaded.config.sources).map_err(anyhow::Error::msg)?;
    let chunker = Chunker::new(loaded.config.chunking)?;
    let started = Instant::now();
    let metadata =
        std::fs::metadata(&args.path).with_context(|| format!("{}", args.path.display()))?;
    // The same selection as `weft index`: .gitignore, hidden files,
    // vendored and build directories, include/exclude globs.
    let walk = walk_dir(&args.path, &selection);
    let files = walk.files;
    let mut skipped: Vec<Skipped> = walk
        .skipped
        .into_iter()
        .chain(walk.errors)
        .map(|i| Skipped {
            path: i.uri,
            reason: i.reason,
        })
        .collect();
    let project = match &args.project {
        Some(p) if p.trim().is_empty() => bail!("--project must not be empty"),
        Some(p) => p.clone(),
        None => SourceSpec::Dir(args.path.clone()).default_project(),
    };

    let progress = if metadata.is_dir() && !args.json {
        progress_bar(files.len())
    } else {
        ProgressBar::hidden()
    };
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut summary = Summary::default();
    if args.json {
        write!(
            out,
            "{{\"project\":{},\"files\":[",
            serde_json::to_string(&project)?
        )?;
    }
    for (uri, path) in &files {
        let uri = uri.clone();
        progress.set_message(uri.clone());
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) => {
                skipped.push(Skipped {
                    path: uri,
                    reason: e.to_string(),
                });
                progress.inc(1);
                continue;
            }
        };
        match chunker.chunk_bytes(&project, &uri, &bytes) {
            Ok(doc) => {
                if args.json {
                    if summary.files > 0 {
                        out.write_all(b",")?;
                    }
                    serde_json::to_writer(&mut out, &report(&uri, &doc))?;
                } else {
                    progress.suspend(|| print_document(&mut out, &uri, &doc, args.full))?;
                }
                summary.files += 1;
                summary.chunks += doc.chunks.len();
                summary.bytes += bytes.len() as u64;
                summary.warnings += doc.warnings.len();
            }
            Err(e) => skipped.push(Skipped {
                path: uri,
                reason: e.reason(),
            }),
        }
        progress.inc(1);
    }
    progress.finish_and_clear();
    summary.skipped = skipped.len();
    summary.elapsed_ms = started.elapsed().as_millis();
    if args.json {
        write!(
            out,
            "],\"skipped\":{},\"summary\":{}}}",
            serde_json::to_string(&skipped)?,
            serde_json::to_string(&summary)?
        )?;
        writeln!(out)?;
    } else {
        for s in &skipped {
            writeln!(out, "skipped {}: {}", s.path, s.reason)?;
        }
        writeln!(
            out,
            "{} files, {} chunks, {:.1} MB, {} skipped, {} warnings in {:.2}s",
            summary.files,
            summary.chunks,
            summary.bytes as f64 / 1e6,
            summary.skipped,
            summary.warnings,
            summary.elapsed_ms as f64 / 1000.0
        )?;
    }
    out.flush()?;
    // A single file that could not be chunked is a failure; in a tree,
    // skipped files are reported and the rest goes on.
    let failed = !metadata.is_dir() && summary.files == 0;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn report<'a>(uri: &'a str, doc: &'a ChunkedDocument) -> FileReport<'a> {
    FileReport {
        uri,
        document_id: doc.document_id.as_str(),
        language: &doc.kind.language,
        content_type: doc.kind.content_type,
        title: &doc.title,
        is_index_doc: doc.kind.is_index_doc,
        warnings: &doc.warnings,
        chunks: &doc.chunks,
    }
}

fn print_document(
    out: &mut impl Write,
    uri: &str,
    doc: &ChunkedDocument,
    full: bool,
) -> io::Result<()> {
    writeln!(
        out,
        "{uri}  [{} {}]  {} chunk{}  \"{}\"",
        doc.kind.language,
        doc.kind.content_type,
        doc.chunks.len(),
        if doc.chunks.len() == 1 { "" } else { "s" },
        doc.title
    )?;
    for warning in &doc.warnings {
        writeln!(out, "  warning: {warning}")?;
    }
    for c in &doc.chunks {
        let lines = format!("L{}-{}", c.start_line, c.end_line);
        let overlap = if c.overlap_bytes > 0 {
            format!("  (overlap {} bytes)", c.overlap_bytes)
        } else {
            String::new()
        };
        writeln!(
            out,
            "  #{:<3} {:<12} {:<24} {}  ({} chars){overlap}",
            c.chunk_index,
            lines,
            c.node_type,
            if c.section.is_empty() {
                "-"
            } else {
                &c.section
            },
            c.content.chars().count()
        )?;
        if full {
            for line in c.content.lines() {
                writeln!(out, "      | {line}")?;
            }
        }
    }
    Ok(())
}

fn progress_bar(len: usize) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} chunking [{bar:30}] {pos}/{len} files {wide_msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}
