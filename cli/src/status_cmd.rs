//! `weft status`: what the data directory holds.
//!
//! [`gather`] reads the stores into a [`Status`]; `--json` prints it as
//! JSON, people read its [`Display`](std::fmt::Display).

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use serde::Serialize;

use weft_core::generations::Generation;
use weft_core::ports::Catalog;
use weft_wiring::QueryEmbedder;
use weft_wiring::{DiskUsage, GenerationUsage, Size};

use crate::context::{Context, StoreArgs};

/// Arguments of `weft status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub store: StoreArgs,

    /// Print JSON for machines instead of text for people.
    #[arg(long)]
    pub json: bool,
}

pub fn run(config_file: Option<&Path>, args: &StatusArgs) -> anyhow::Result<ExitCode> {
    let ctx = Context::load(config_file, &args.store)?;
    let status = gather(&ctx)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&status)?)?;
    } else {
        write!(out, "{status}")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What `weft status` reports (its JSON, field for field).
#[derive(Debug, Serialize)]
pub struct Status {
    data_dir: PathBuf,
    /// The live generation.
    generation: u32,
    generations: Vec<Generation>,
    stores: String,
    model: String,
    dimension: usize,
    /// The local model's precision, as `embedding.precision` resolves on
    /// this CPU (`fp32`, `int8`); none for an embedding API.
    precision: Option<&'static str>,
    model_dir: PathBuf,
    model_present: bool,
    projects: Vec<ProjectStatus>,
    documents: usize,
    /// Whether the data directory has a catalog (projects and documents
    /// come from it). The distributed pipeline's embedders write stores
    /// without one: its catalog is in NATS.
    catalog: bool,
    chunks: Chunks,
    /// The space used on disk (as `du` counts it).
    disk_bytes: u64,
    /// The apparent size (as `ls -l` adds up: sparse, preallocated files
    /// in full).
    apparent_bytes: u64,
    /// Both, per generation and store.
    disk: Disk,
}

/// One indexed project.
#[derive(Debug, Serialize)]
struct ProjectStatus {
    name: String,
    source: String,
    revision: Option<String>,
    documents: usize,
    chunks: u64,
    /// For a branch overlay: its base, branch and what it hides.
    #[serde(skip_serializing_if = "Option::is_none")]
    overlay: Option<weft_core::overlays::Overlay>,
}

/// Chunks counted by each store.
#[derive(Debug, Serialize)]
struct Chunks {
    vector_index: u64,
    text_index: u64,
}

/// [`DiskUsage`] with each generation's state.
#[derive(Debug, Serialize)]
struct Disk {
    generations: Vec<GenerationDisk>,
    sources: Size,
    other: Size,
    total: Size,
}

/// One generation's space and state.
#[derive(Debug, Serialize)]
struct GenerationDisk {
    #[serde(flatten)]
    usage: GenerationUsage,
    state: String,
}

/// Reads the data directory's stores and sizes.
pub fn gather(ctx: &Context) -> anyhow::Result<Status> {
    // Measured before this command opens the stores, so that its own read
    // lease and overlay (removed when it exits) are not counted.
    let usage = ctx.data_dir().disk_usage();
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let stores = runtime.block_on(ctx.open_query(QueryEmbedder::NotNeeded))?;
    // A data directory written by the distributed pipeline's embedders has
    // stores but no catalog (it is in NATS): none is made here, a status
    // writes nothing.
    let catalog: Option<std::sync::Arc<dyn Catalog>> = match &stores.catalog {
        Some(catalog) => Some(catalog.clone()),
        None if ctx.data_dir().catalog_path()?.exists() => {
            Some(std::sync::Arc::new(ctx.data_dir().open_catalog()?))
        }
        None => None,
    };
    let generations = ctx.data_dir().generations()?;
    let (projects, documents, vector_chunks, text_chunks) = runtime.block_on(async {
        let (projects, documents) = match &catalog {
            Some(catalog) => (catalog.projects().await?, catalog.documents(None).await?),
            None => Default::default(),
        };
        anyhow::Ok((
            projects,
            documents,
            stores.vectors.count().await?,
            stores.text.count().await?,
        ))
    })?;
    let projects = projects
        .into_iter()
        .map(|(name, state)| {
            let docs: Vec<_> = documents.iter().filter(|d| d.project == name).collect();
            ProjectStatus {
                documents: docs.len(),
                chunks: docs.iter().map(|d| u64::from(d.chunk_count)).sum(),
                name,
                source: state.source,
                revision: state.revision,
                overlay: state.overlay,
            }
        })
        .collect();
    let state_of = |number: u32| {
        generations
            .get(number)
            .map(|g| g.state.to_string())
            // Generation 0 made in place before generations were recorded.
            .unwrap_or_else(|| {
                if number == stores.generation {
                    "live".to_owned()
                } else {
                    "unrecorded".to_owned()
                }
            })
    };
    let DiskUsage {
        generations: generation_usage,
        sources,
        other,
        total,
    } = usage;
    let disk = Disk {
        generations: generation_usage
            .into_iter()
            .map(|usage| GenerationDisk {
                state: state_of(usage.number),
                usage,
            })
            .collect(),
        sources,
        other,
        total,
    };
    Ok(Status {
        data_dir: ctx.locations.data_dir.clone(),
        generation: stores.generation,
        generations: generations.generations.clone(),
        stores: stores.description.clone(),
        model: stores.model.clone(),
        dimension: stores.dimension,
        precision: (ctx.config.embedding.provider == weft_config::EmbeddingProvider::Local)
            .then(|| weft_wiring::local_precision(&ctx.config.embedding).name()),
        model_present: ctx.locations.model_dir.join("model.safetensors").exists(),
        model_dir: ctx.locations.model_dir.clone(),
        projects,
        documents: documents.len(),
        catalog: catalog.is_some(),
        chunks: Chunks {
            vector_index: vector_chunks,
            text_index: text_chunks,
        },
        disk_bytes: total.on_disk_bytes,
        apparent_bytes: total.apparent_bytes,
        disk,
    })
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "data directory  {} ({} on disk, apparent size {})",
            self.data_dir.display(),
            human(self.disk_bytes),
            human(self.apparent_bytes)
        )?;
        writeln!(f, "stores          {}", self.stores)?;
        let others: Vec<String> = self
            .generations
            .iter()
            .filter(|g| g.number != self.generation)
            .map(|g| format!("{} {}", g.number, g.state))
            .collect();
        write!(f, "generation      {}", self.generation)?;
        if others.is_empty() {
            writeln!(f)?;
        } else {
            writeln!(f, " (also: {})", others.join(", "))?;
        }
        write!(
            f,
            "model           {} ({} dimensions{})",
            self.model,
            self.dimension,
            self.precision.map_or(String::new(), |p| format!(", {p}"))
        )?;
        if self.model_present {
            writeln!(f)?;
        } else {
            writeln!(
                f,
                "; not found in {} (text search only)",
                self.model_dir.display()
            )?;
        }
        if self.catalog {
            writeln!(f, "documents       {}", self.documents)?;
        } else {
            writeln!(
                f,
                "documents       no catalog here (the distributed pipeline keeps it in NATS: weft-crawler generations list)"
            )?;
        }
        writeln!(
            f,
            "chunks          {} vectors, {} text",
            self.chunks.vector_index, self.chunks.text_index
        )?;
        if self.catalog {
            writeln!(f, "projects        {}", self.projects.len())?;
        }
        for p in &self.projects {
            let revision = p
                .revision
                .as_deref()
                .map(|r| format!(" @ {}", r.get(..12).unwrap_or(r)))
                .unwrap_or_default();
            writeln!(
                f,
                "  {:<24} {:>7} documents {:>8} chunks  {}{revision}",
                p.name, p.documents, p.chunks, p.source
            )?;
            if let Some(o) = &p.overlay {
                writeln!(
                    f,
                    "  {:<24} branch {} over {}: hides it at {} paths (changed, added or deleted)",
                    "",
                    o.branch,
                    o.base,
                    o.hidden.len()
                )?;
            }
        }
        self.disk.fmt(f)
    }
}

impl fmt::Display for Disk {
    /// Space used on disk (allocated blocks, as `du`), per generation and
    /// store; the apparent size (sparse files in full, as `ls -l`) beside it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "space on disk   {} (apparent size {}: preallocated, sparse files count in full)",
            human(self.total.on_disk_bytes),
            human(self.total.apparent_bytes)
        )?;
        for GenerationDisk { usage: g, state } in &self.generations {
            writeln!(
                f,
                "  {:<22} {:>10}  vectors {}, text {}, catalog {}, other {}  (apparent {})",
                format!("generation {} ({state})", g.number),
                human(g.total.on_disk_bytes),
                human(g.vectors.on_disk_bytes),
                human(g.text.on_disk_bytes),
                human(g.catalog.on_disk_bytes),
                human(g.other.on_disk_bytes),
                human(g.total.apparent_bytes)
            )?;
        }
        for (name, size) in [("git checkouts", self.sources), ("other", self.other)] {
            writeln!(
                f,
                "  {:<22} {:>10}  (apparent {})",
                name,
                human(size.on_disk_bytes),
                human(size.apparent_bytes)
            )?;
        }
        Ok(())
    }
}

/// `bytes` for people: B, KiB, MiB or GiB with one decimal.
fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::human;

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(1023), "1023 B");
        assert_eq!(human(1024), "1.0 KiB");
        assert_eq!(human(12 * 1024 * 1024 + 512 * 1024), "12.5 MiB");
        assert_eq!(human(3 << 30), "3.0 GiB");
    }
}
