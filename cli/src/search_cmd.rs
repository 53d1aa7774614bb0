//! `weft search QUERY`: the best chunks and their neighbours, by document.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use serde_json::{Value, json};
use weft_core::ContentType;
use weft_core::query::{DEFAULT_LIMIT, RequestError, SearchMode, SearchRequest, SearchResponse};
use weft_core::retrieval::SearchFilter;
use weft_wiring::{QueryEmbedder, QueryStack};

use crate::context::{Context, StoreArgs};

/// Arguments of `weft search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// The question, in plain words.
    pub query: String,

    /// Only these projects, as `weft status` lists them (repeatable). One that
    /// is not indexed is an error naming the indexed ones.
    #[arg(long)]
    pub project: Vec<String>,

    /// Only this content type: code, prose or api_reference (repeatable).
    #[arg(long = "type", value_name = "TYPE")]
    pub content_type: Vec<String>,

    /// Only this language, e.g. java, markdown (repeatable).
    #[arg(long)]
    pub language: Vec<String>,

    /// Only documents at or under this path.
    #[arg(long, value_name = "PREFIX")]
    pub path: Option<String>,

    /// Number of hits (matched chunks) before neighbour expansion, at most
    /// `query.max_limit` (100).
    #[arg(long, default_value_t = DEFAULT_LIMIT)]
    pub limit: usize,

    /// hybrid (vector and text, fused), vector, or text (no model needed).
    #[arg(long, default_value = "hybrid")]
    pub mode: SearchMode,

    /// Return the matched chunks only, without their neighbours.
    #[arg(long)]
    pub no_expand: bool,

    /// Show vector and text ranks and scores, fused score and boost per chunk.
    #[arg(long)]
    pub explain: bool,

    /// Pack the results into a context of at most N tokens (chars / 4):
    /// deduplicated, merged, by relevance, whole lines, each span under its
    /// citation `uri#Lstart-Lend`; what does not fit is listed as references.
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<usize>,

    /// With --max-tokens: markdown (ready to paste into a prompt; the
    /// default) or json (the default under --json).
    #[arg(long, value_name = "FORMAT", requires = "max_tokens")]
    pub format: Option<PackFormat>,

    #[command(flatten)]
    pub store: StoreArgs,

    /// Print JSON for machines instead of text for people.
    #[arg(long)]
    pub json: bool,
}

/// How `--max-tokens` prints the packed context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PackFormat {
    /// Markdown, ready to paste into a prompt.
    Markdown,
    /// The pack as JSON.
    Json,
}

pub fn run(config_file: Option<&Path>, args: &SearchArgs) -> anyhow::Result<ExitCode> {
    let content_types = args
        .content_type
        .iter()
        .map(|t| {
            t.parse::<ContentType>()
                .map_err(|e| anyhow::anyhow!("--type: {e}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let ctx = Context::load(config_file, &args.store)?;
    // Held to the query API's bounds (`[query]`), before anything is opened.
    let request = SearchRequest {
        query: args.query.clone(),
        filter: SearchFilter {
            projects: args.project.clone(),
            content_types,
            languages: args.language.clone(),
            path_prefix: args.path.clone(),
        },
        limit: args.limit,
        mode: args.mode,
        expand: !args.no_expand,
        adjacency: None,
        rerank: false,
        max_tokens: args.max_tokens,
        cache_partition: None,
        hidden: Default::default(),
    }
    .checked(&ctx.config.query.request_bounds())
    .map_err(refusal)?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let need = match args.mode {
        SearchMode::Text => QueryEmbedder::NotNeeded,
        _ => QueryEmbedder::Needed,
    };
    let stack = runtime.block_on(ctx.open_query(need))?;
    check_projects(&ctx, &stack, &runtime, &args.project)?;
    let engine = stack.engine.clone();
    let mut request = SearchRequest {
        rerank: engine.has_reranker(),
        ..request
    };
    // A branch overlay (`--project P@B`) reads its base, minus what the
    // branch changed or deleted.
    let catalog = stack.catalog_now(&ctx.data_dir());
    match catalog {
        Ok(catalog) => {
            request.hidden =
                runtime.block_on(weft_core::overlays::resolve(&*catalog, &mut request.filter))?;
        }
        Err(e)
            if args
                .project
                .iter()
                .any(|p| weft_core::overlays::split_overlay(p).is_some()) =>
        {
            return Err(anyhow::Error::new(e)
                .context("--project names a branch overlay, whose catalog record cannot be read"));
        }
        Err(_) => {}
    }
    let response = runtime.block_on(engine.search(&request))?;
    if let Some(max_tokens) = args.max_tokens {
        // Citations carry each project's indexed commit, from the catalog
        // of the generation searched.
        let revisions = runtime.block_on(stack.catalog_now(&ctx.data_dir())?.revisions())?;
        return print_pack(args, max_tokens, &response, &revisions);
    }
    if args.json {
        let out = to_json(args, &response, engine.reranker_name());
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_text(args, &response)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A search out of bounds, naming the argument as the command line spells
/// it: `--max-tokens must be at least 1`, `the query is empty`.
fn refusal(e: RequestError) -> anyhow::Error {
    let argument = match e.field {
        "query" => "the query",
        "limit" => "--limit",
        "max_tokens" => "--max-tokens",
        "projects" => "--project",
        "languages" => "--language",
        "path_prefix" => "--path",
        other => other,
    };
    anyhow::anyhow!("{argument} {}", e.problem)
}

/// The projects `--project` names must be indexed (`weft_core::projects`):
/// a typo is an error naming the indexed projects, not a search that finds
/// nothing. A catalog that cannot be read is a warning: the search runs.
fn check_projects(
    ctx: &Context,
    stack: &QueryStack,
    runtime: &tokio::runtime::Runtime,
    projects: &[String],
) -> anyhow::Result<()> {
    if projects.is_empty() {
        return Ok(());
    }
    let listed = match stack.catalog_now(&ctx.data_dir()) {
        Ok(catalog) => runtime.block_on(catalog.projects()),
        Err(e) => Err(weft_core::ports::PortError::unavailable("catalog", e)),
    };
    match listed {
        Ok(listed) => {
            let known: Vec<&str> = listed.iter().map(|(name, _)| name.as_str()).collect();
            weft_core::projects::check_projects("--project", projects, &known, false)?;
        }
        Err(e) => tracing::warn!("cannot check the projects --project names: {e}"),
    }
    Ok(())
}

/// DESIGN §7: results[] → spans[] → chunks[] (chunk fields plus matched,
/// score, and under --explain the components).
fn to_json(args: &SearchArgs, response: &SearchResponse, reranker: Option<&str>) -> Value {
    let results: Vec<Value> = response
        .results
        .iter()
        .map(|doc| {
            let spans: Vec<Value> = doc
                .spans
                .iter()
                .map(|span| {
                    let chunks: Vec<Value> = span
                        .chunks
                        .iter()
                        .map(|c| {
                            let mut v = serde_json::to_value(&c.chunk).unwrap_or(Value::Null);
                            if let Value::Object(map) = &mut v {
                                map.insert("matched".into(), json!(c.matched));
                                map.insert("score".into(), json!(c.score));
                                if args.explain {
                                    map.insert(
                                        "explain".into(),
                                        json!({
                                            "vector_rank": c.vector.map(|x| x.rank),
                                            "vector_score": c.vector.map(|x| x.score),
                                            "text_rank": c.text.map(|x| x.rank),
                                            "text_score": c.text.map(|x| x.score),
                                            "fused_score": c.score,
                                            "boost": c.boost,
                                        }),
                                    );
                                }
                            }
                            v
                        })
                        .collect();
                    let mut s = json!({
                        "start_line": span.start_line,
                        "end_line": span.end_line,
                        "chunks": chunks,
                    });
                    if let Some(r) = span.rerank_score {
                        s["rerank_score"] = json!(r);
                    }
                    s
                })
                .collect();
            json!({
                "document_id": doc.document_id.as_str(),
                "uri": doc.uri,
                "title": doc.title,
                "score": doc.score,
                "spans": spans,
            })
        })
        .collect();
    json!({
        "query": args.query,
        "mode": args.mode,
        "expand": !args.no_expand,
        "reranker": reranker,
        "cached_embedding": response.cached_embedding,
        "neighbours_requested": response.neighbours_requested,
        "timings": response.timings,
        "results": results,
    })
}

fn print_text(args: &SearchArgs, response: &SearchResponse) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if response.results.is_empty() {
        writeln!(out, "no results for {:?}", args.query)?;
        return Ok(());
    }
    for (i, doc) in response.results.iter().enumerate() {
        writeln!(
            out,
            "{}. {}  (score {:.4}){}",
            i + 1,
            doc.uri,
            doc.score,
            if doc.title.is_empty() || doc.uri.ends_with(&doc.title) {
                String::new()
            } else {
                format!("  {}", doc.title)
            }
        )?;
        for span in &doc.spans {
            write!(out, "   lines {}-{}", span.start_line, span.end_line)?;
            if let Some(r) = span.rerank_score {
                write!(out, "  (rerank {r:.3})")?;
            }
            writeln!(out)?;
            for c in &span.chunks {
                let section = if c.chunk.section.is_empty() {
                    String::new()
                } else {
                    format!("  {}", c.chunk.section)
                };
                writeln!(
                    out,
                    "   {} L{}-{}{}  [{:.4}]",
                    if c.matched { "match  " } else { "context" },
                    c.chunk.start_line,
                    c.chunk.end_line,
                    section,
                    c.score
                )?;
                if args.explain {
                    let component = |x: Option<weft_core::retrieval::Component>| {
                        x.map_or("-".to_owned(), |x| format!("#{} {:.4}", x.rank, x.score))
                    };
                    writeln!(
                        out,
                        "           vector {}  text {}  boost x{:.3}  fused {:.5}",
                        component(c.vector),
                        component(c.text),
                        c.boost,
                        c.score
                    )?;
                }
                for (n, line) in c.chunk.content.lines().enumerate() {
                    writeln!(out, "     {:>5} | {line}", c.chunk.start_line as usize + n)?;
                }
            }
        }
        writeln!(out)?;
    }
    let t = &response.timings;
    writeln!(
        out,
        "{} documents in {:.0} ms (embed {:.0}{}, search {:.0}, neighbour fetch {:.0} for {} ids, rerank {:.0})",
        response.results.len(),
        t.total_ms,
        t.embed_ms,
        if response.cached_embedding {
            " cached"
        } else {
            ""
        },
        t.search_ms,
        t.fetch_ms,
        response.neighbours_requested,
        t.rerank_ms
    )?;
    Ok(())
}

/// `--max-tokens`: the response packed into the budget, as Markdown or JSON.
fn print_pack(
    args: &SearchArgs,
    max_tokens: usize,
    response: &SearchResponse,
    revisions: &std::collections::HashMap<String, String>,
) -> anyhow::Result<ExitCode> {
    let pack = weft_core::retrieval::pack(
        &response.results,
        revisions,
        &weft_core::retrieval::PackOptions { max_tokens },
        &weft_core::retrieval::ApproxTokenCounter,
    );
    let json = match args.format {
        Some(format) => format == PackFormat::Json,
        None => args.json,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&pack)?);
    } else {
        print!("{}", pack.to_markdown());
    }
    Ok(ExitCode::SUCCESS)
}
