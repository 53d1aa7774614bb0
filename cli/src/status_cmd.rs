//! `weft status`: what the data directory holds.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use serde_json::json;

use weft_core::ports::Catalog;
use weft_wiring::QueryEmbedder;

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
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let stores = runtime.block_on(ctx.open_query(QueryEmbedder::NotNeeded))?;
    let catalog: std::sync::Arc<dyn Catalog> = match &stores.catalog {
        Some(catalog) => catalog.clone(),
        None => std::sync::Arc::new(ctx.data_dir().open_catalog()?),
    };
    let generations = ctx.data_dir().generations()?;
    let (projects, documents, vector_chunks, text_chunks) = runtime.block_on(async {
        anyhow::Ok((
            catalog.projects().await?,
            catalog.documents(None).await?,
            stores.vectors.count().await?,
            stores.text.count().await?,
        ))
    })?;
    let per_project: Vec<_> = projects
        .iter()
        .map(|(name, state)| {
            let docs: Vec<_> = documents.iter().filter(|d| &d.project == name).collect();
            json!({
                "name": name,
                "source": state.source,
                "revision": state.revision,
                "documents": docs.len(),
                "chunks": docs.iter().map(|d| u64::from(d.chunk_count)).sum::<u64>(),
            })
        })
        .collect();
    let disk_bytes = dir_size(&ctx.locations.data_dir);
    let model_present = ctx.locations.model_dir.join("model.safetensors").exists();
    let out = json!({
        "data_dir": ctx.locations.data_dir,
        "generation": stores.generation,
        "generations": generations.generations,
        "stores": stores.description,
        "model": stores.model,
        "dimension": stores.dimension,
        "model_dir": ctx.locations.model_dir,
        "model_present": model_present,
        "projects": per_project,
        "documents": documents.len(),
        "chunks": {"vector_index": vector_chunks, "text_index": text_chunks},
        "disk_bytes": disk_bytes,
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut o = std::io::stdout().lock();
    writeln!(
        o,
        "data directory  {} ({:.1} MiB)",
        ctx.locations.data_dir.display(),
        disk_bytes as f64 / 1048576.0
    )?;
    writeln!(o, "stores          {}", stores.description)?;
    let others: Vec<String> = generations
        .generations
        .iter()
        .filter(|g| g.number != stores.generation)
        .map(|g| format!("{} {}", g.number, g.state))
        .collect();
    writeln!(
        o,
        "generation      {}{}",
        stores.generation,
        if others.is_empty() {
            String::new()
        } else {
            format!(" (also: {})", others.join(", "))
        }
    )?;
    writeln!(
        o,
        "model           {} ({} dimensions){}",
        stores.model,
        stores.dimension,
        if model_present {
            String::new()
        } else {
            format!(
                "; not found in {} (text search only)",
                ctx.locations.model_dir.display()
            )
        }
    )?;
    writeln!(o, "documents       {}", documents.len())?;
    writeln!(
        o,
        "chunks          {vector_chunks} vectors, {text_chunks} text"
    )?;
    writeln!(o, "projects        {}", projects.len())?;
    for p in &per_project {
        writeln!(
            o,
            "  {:<24} {:>7} documents {:>8} chunks  {}{}",
            p["name"].as_str().unwrap_or_default(),
            p["documents"],
            p["chunks"],
            p["source"].as_str().unwrap_or_default(),
            p["revision"]
                .as_str()
                .map(|r| format!(" @ {}", &r[..r.len().min(12)]))
                .unwrap_or_default()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn dir_size(path: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(entry.path()),
                Ok(t) if t.is_file() => total += entry.metadata().map(|m| m.len()).unwrap_or(0),
                _ => {}
            }
        }
    }
    total
}
