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
    // Measured before this command opens the stores, so that its own read
    // lease and overlay (removed when it exits) are not counted.
    let disk = ctx.data_dir().disk_usage();
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
    let mut disk_json = serde_json::to_value(&disk)?;
    if let Some(list) = disk_json["generations"].as_array_mut() {
        for g in list {
            let state = g["number"].as_u64().map(|n| state_of(n as u32));
            g["state"] = json!(state);
        }
    }
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
        // The space used on disk (as `du` counts it), and the apparent
        // size (as `ls -l` adds up: sparse, preallocated files in full);
        // per generation and store under `disk`.
        "disk_bytes": disk.total.on_disk_bytes,
        "apparent_bytes": disk.total.apparent_bytes,
        "disk": disk_json,
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut o = std::io::stdout().lock();
    writeln!(
        o,
        "data directory  {} ({} on disk, apparent size {})",
        ctx.locations.data_dir.display(),
        human(disk.total.on_disk_bytes),
        human(disk.total.apparent_bytes)
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
    // Space used on disk (allocated blocks, as `du`), per generation and
    // store; the apparent size (sparse files in full, as `ls -l`) beside it.
    writeln!(
        o,
        "space on disk   {} (apparent size {}: preallocated, sparse files count in full)",
        human(disk.total.on_disk_bytes),
        human(disk.total.apparent_bytes)
    )?;
    for g in &disk.generations {
        writeln!(
            o,
            "  {:<22} {:>10}  vectors {}, text {}, catalog {}, other {}  (apparent {})",
            format!("generation {} ({})", g.number, state_of(g.number)),
            human(g.total.on_disk_bytes),
            human(g.vectors.on_disk_bytes),
            human(g.text.on_disk_bytes),
            human(g.catalog.on_disk_bytes),
            human(g.other.on_disk_bytes),
            human(g.total.apparent_bytes)
        )?;
    }
    for (name, size) in [("git checkouts", disk.sources), ("other", disk.other)] {
        writeln!(
            o,
            "  {:<22} {:>10}  (apparent {})",
            name,
            human(size.on_disk_bytes),
            human(size.apparent_bytes)
        )?;
    }
    Ok(ExitCode::SUCCESS)
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
