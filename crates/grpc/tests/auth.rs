//! The query API's API keys, project scopes, rate limits and TLS, over real
//! gRPC: two projects indexed with the real model in one data directory,
//! served with a keys file made by `auth::mint`, asked through the generated
//! client. `cargo test -p weft-grpc --test auth -- --nocapture` prints the
//! key × project × RPC matrix.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tonic::Code;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use weft_auth::{self as auth, KeyEntry, KeysFile, Minted};
use weft_core::{ContentType, DocumentId};
use weft_index::{IndexOptions, Indexer};
use weft_proto::v1;
use weft_proto::v1::query_service_client::QueryServiceClient;
use weft_sources::SourceSpec;
use weft_wiring::DataDir;

fn model_dir() -> PathBuf {
    std::env::var_os("WEFT_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(weft_config::default_model_dir)
}

/// Project alpha: code and a guide.
const THROTTLE: &str = "package demo;\n\n/** Hands out permits at a fixed rate: a token bucket. */\npublic final class Throttle {\n  private double permits;\n\n  /** Blocks until a permit is available, then takes it. */\n  public void acquirePermit() {\n    while (permits < 1.0) {\n      refill();\n    }\n    permits -= 1.0;\n  }\n\n  /** Adds the permits earned since the last refill. */\n  private void refill() {\n    permits += 0.5;\n  }\n}\n";
const ALPHA_GUIDE: &str = "# Guide\n\nHow to run the alpha demo.\n\n## Installing\n\nDownload the archive and unpack it into your home directory.\n\n## Deployment\n\nDeploy the alpha service with the release script; it rolls the replicas one by one.\n\n## Logging\n\nLogs go to standard error unless a log file is configured.\n";
/// Project beta: the same path, other text, and a secret of its own.
const BETA_GUIDE: &str = "# Guide\n\nHow to run the beta payroll system.\n\n## Deployment\n\nDeploy the beta payroll service from the vault; the deployment key is rotated monthly.\n\n## Payroll export\n\nThe quarterly payroll export holds every salary in the company.\n";

/// Branch `next` of alpha, a worktree: Throttle.java rewritten, the guide
/// deleted.
const THROTTLE_NEXT: &str = "package demo;\n\n/** Hands out permits with a sliding window of recent calls. */\npublic final class Throttle {\n  private final java.util.ArrayDeque<Long> calls = new java.util.ArrayDeque<>();\n\n  /** Blocks until the window has room, then records the call. */\n  public void acquirePermit() {\n    calls.addLast(System.nanoTime());\n  }\n}\n";

/// The canary words only beta's documents hold.
const BETA_ONLY: &[&str] = &["payroll", "salary"];

struct Fixture {
    addr: std::net::SocketAddr,
    keys_path: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), weft_grpc::ServiceError>>>,
    _dirs: Vec<tempfile::TempDir>,
}

/// Indexes alpha and beta into one fresh data directory.
async fn index_two_projects() -> (tempfile::TempDir, Vec<tempfile::TempDir>) {
    let alpha = tempfile::tempdir().unwrap();
    let alpha_next = tempfile::tempdir().unwrap();
    let beta = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    std::fs::write(alpha.path().join("Throttle.java"), THROTTLE).unwrap();
    std::fs::write(alpha_next.path().join("Throttle.java"), THROTTLE_NEXT).unwrap();
    std::fs::write(alpha.path().join("guide.md"), ALPHA_GUIDE).unwrap();
    std::fs::write(beta.path().join("guide.md"), BETA_GUIDE).unwrap();
    let config = weft_config::WeftConfig::default();
    let model = weft_embed_local::LocalEmbedder::load(&model_dir(), 256)
        .expect("these tests need the embedding model (run tools/fetch-model.sh)");
    let model: Arc<dyn weft_core::ports::Embedder> = Arc::new(model);
    let stores = DataDir::new(data.path())
        .open_for(model.model_id(), model.dimension())
        .unwrap();
    let indexer = Indexer::new(stores, model.clone(), &config, data.path().join("s")).unwrap();
    for (dir, project, count) in [
        (&alpha, "alpha", 2),
        (&beta, "beta", 1),
        (&alpha_next, "alpha@next", 1),
    ] {
        let summary = indexer
            .index(
                &SourceSpec::Dir(dir.path().to_owned()),
                &IndexOptions {
                    project: Some(project.into()),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(summary.documents_indexed, count, "{summary:#?}");
    }
    (data, vec![alpha, alpha_next, beta])
}

fn write_keys(path: &Path, entries: &[KeyEntry]) {
    let text = toml::to_string(&KeysFile {
        keys: entries.to_vec(),
    })
    .unwrap();
    // Written beside and renamed, as a Secret's volume swaps its files.
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Serves the two projects with the keys `entries`, over TLS when `tls`
/// is given.
async fn serve(entries: &[KeyEntry], query: weft_config::QueryServiceConfig) -> Fixture {
    let (data, mut dirs) = index_two_projects().await;
    let keys_dir = tempfile::tempdir().unwrap();
    let keys_path = keys_dir.path().join("keys.toml");
    write_keys(&keys_path, entries);
    let config = weft_config::WeftConfig {
        query: weft_config::QueryServiceConfig {
            api_keys_file: Some(keys_path.clone()),
            api_keys_reload_secs: 1,
            ..query
        },
        ..Default::default()
    };
    let locations =
        weft_config::Locations::resolve(&config, Some(data.path().to_owned()), Some(model_dir()));
    let auth =
        auth::from_config(&config.query, "127.0.0.1:0", auth::AuthDefault::Required).unwrap();
    let server = weft_grpc::open(&config, &locations, weft_wiring::LiveSource::DataDir)
        .await
        .unwrap()
        .0
        .with_auth(auth);
    let listener = weft_grpc::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut options = weft_grpc::ServeOptions::from_config(&config.query);
    options.tls = weft_grpc::tls::from_config(&config.query).unwrap();
    let task = tokio::spawn(async move {
        weft_grpc::serve(server, listener, &options, async {
            let _ = stopped.await;
        })
        .await
    });
    dirs.push(data);
    dirs.push(keys_dir);
    Fixture {
        addr,
        keys_path,
        stop: Some(stop),
        task: Some(task),
        _dirs: dirs,
    }
}

impl Fixture {
    async fn channel(&self) -> Channel {
        Endpoint::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect()
            .await
            .unwrap()
    }

    async fn stop(mut self) {
        self.stop.take().unwrap().send(()).unwrap();
        self.task.take().unwrap().await.unwrap().unwrap();
    }
}

fn with_key<T>(message: T, key: Option<&str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(key) = key {
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {key}").parse().unwrap());
    }
    request
}

fn search(query: &str, projects: &[&str]) -> v1::SearchRequest {
    v1::SearchRequest {
        query: query.into(),
        projects: projects.iter().map(|p| p.to_string()).collect(),
        limit: 10,
        // Wide expansion: every neighbour the plan can reach.
        expansion: Some(v1::Expansion {
            expand_hits: Some(10),
            prose_window: Some(5),
            code_window: Some(5),
            api_reference_window: Some(5),
            whole_units: Some(true),
            max_chunks: Some(200),
        }),
        max_tokens: Some(4000),
        ..Default::default()
    }
}

/// Every chunk of a response: hits, neighbours and the packed context.
fn projects_of(response: &v1::SearchResponse) -> (BTreeSet<String>, Vec<String>) {
    let mut projects = BTreeSet::new();
    let mut texts = Vec::new();
    for document in &response.results {
        projects.insert(document.project.clone());
        for span in &document.spans {
            for c in &span.chunks {
                let chunk = c.chunk.as_ref().unwrap();
                projects.insert(chunk.project.clone());
                texts.push(chunk.content.to_lowercase());
            }
        }
    }
    if let Some(context) = &response.context {
        for span in &context.spans {
            projects.insert(span.project.clone());
            texts.push(span.content.to_lowercase());
        }
        texts.push(context.markdown.to_lowercase());
    }
    (projects, texts)
}

/// One row of the printed matrix.
struct Row {
    key: &'static str,
    rpc: String,
    expected: String,
    got: String,
}

impl Row {
    fn ok(&self) -> bool {
        self.expected == self.got
    }
}

fn outcome<T>(result: &Result<T, tonic::Status>, ok: impl FnOnce(&T) -> String) -> String {
    match result {
        Ok(body) => ok(body),
        Err(status) => format!("{:?}", status.code()),
    }
}

fn print_matrix(rows: &[Row]) {
    let w =
        |f: fn(&Row) -> usize, title: &str| rows.iter().map(f).max().unwrap_or(0).max(title.len());
    let (wk, wr, we) = (
        w(|r| r.key.len(), "key"),
        w(|r| r.rpc.len(), "RPC"),
        w(|r| r.expected.len(), "expected"),
    );
    println!();
    println!(
        "| {:wk$} | {:wr$} | {:we$} | result |",
        "key", "RPC", "expected"
    );
    println!(
        "|{}|{}|{}|--------|",
        "-".repeat(wk + 2),
        "-".repeat(wr + 2),
        "-".repeat(we + 2)
    );
    for r in rows {
        println!(
            "| {:wk$} | {:wr$} | {:we$} | {} |",
            r.key,
            r.rpc,
            r.expected,
            if r.ok() {
                "pass".to_owned()
            } else {
                format!("FAIL: {}", r.got)
            }
        );
    }
    println!();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_scope_every_rpc_to_their_projects() {
    let alpha = auth::mint("alpha-reader", vec!["alpha".into()], vec![]).unwrap();
    let beta = auth::mint("beta-reader", vec!["beta".into()], vec![]).unwrap();
    let both = auth::mint("both", vec!["alpha".into(), "beta".into()], vec![]).unwrap();
    let all = auth::mint("admin", vec!["*".into()], vec![]).unwrap();
    let prose = auth::mint(
        "alpha-prose",
        vec!["alpha".into()],
        vec![ContentType::Prose],
    )
    .unwrap();
    let revoked = auth::mint("revoked-later", vec!["alpha".into()], vec![]).unwrap();
    let entries: Vec<KeyEntry> = [&alpha, &beta, &both, &all, &prose, &revoked]
        .iter()
        .map(|m| m.entry.clone())
        .collect();
    let fixture = serve(&entries, Default::default()).await;
    let mut client = QueryServiceClient::new(fixture.channel().await);
    let mut rows = Vec::new();

    // The documents' ids, computed as anyone can (DESIGN §3).
    let alpha_guide = DocumentId::new("alpha", "guide.md");
    let alpha_code = DocumentId::new("alpha", "Throttle.java");
    let beta_guide = DocumentId::new("beta", "guide.md");

    // --- Search -----------------------------------------------------------
    let keys: [(&'static str, &Minted, &[&str]); 5] = [
        ("alpha-reader", &alpha, &["alpha"]),
        ("beta-reader", &beta, &["beta"]),
        ("both", &both, &["alpha", "beta"]),
        ("admin (*)", &all, &["alpha", "beta"]),
        ("alpha-prose", &prose, &["alpha"]),
    ];
    let query = "how do I deploy the service";
    for (name, key, readable) in keys {
        let readable: BTreeSet<String> = readable.iter().map(|s| s.to_string()).collect();
        // No project filter: limited to the key's projects, neighbours and
        // the packed context included.
        let result = client
            .search(with_key(search(query, &[]), Some(&key.key)))
            .await
            .map(|r| r.into_inner());
        let got = outcome(&result, |r| {
            let (projects, texts) = projects_of(r);
            let leaks = BETA_ONLY
                .iter()
                .any(|w| texts.iter().any(|t| t.contains(w)));
            if projects.is_empty() {
                "OK, no results".into()
            } else if projects.is_subset(&readable) && (readable.contains("beta") || !leaks) {
                format!(
                    "OK, projects {}",
                    projects.into_iter().collect::<Vec<_>>().join("+")
                )
            } else {
                format!("LEAK: projects {projects:?}")
            }
        });
        // Every readable project has a guide about deployment: each is found.
        rows.push(Row {
            key: name,
            rpc: "Search, no project filter".into(),
            expected: format!(
                "OK, projects {}",
                readable.iter().cloned().collect::<Vec<_>>().join("+")
            ),
            got,
        });
        for project in ["alpha", "beta"] {
            let result = client
                .search(with_key(search(query, &[project]), Some(&key.key)))
                .await
                .map(|r| r.into_inner());
            let allowed = readable.contains(project);
            rows.push(Row {
                key: name,
                rpc: format!("Search, projects=[{project}]"),
                // Another project is answered as one that is not indexed.
                expected: if allowed {
                    format!("OK, projects {project}")
                } else {
                    "NotFound".into()
                },
                got: outcome(&result, |r| {
                    let (projects, _) = projects_of(r);
                    format!(
                        "OK, projects {}",
                        projects.into_iter().collect::<Vec<_>>().join("+")
                    )
                }),
            });
        }
        // GetChunks by computed document id: another project's document is
        // answered as one that does not exist.
        for (doc, project, content) in [
            (&alpha_guide, "alpha", ContentType::Prose),
            (&alpha_code, "alpha", ContentType::Code),
            (&beta_guide, "beta", ContentType::Prose),
        ] {
            let result = client
                .get_chunks(with_key(
                    v1::GetChunksRequest {
                        document_id: doc.as_str().into(),
                        start_index: 0,
                        end_index: None,
                    },
                    Some(&key.key),
                ))
                .await
                .map(|r| r.into_inner());
            let visible = readable.contains(project)
                && (name != "alpha-prose" || content == ContentType::Prose);
            rows.push(Row {
                key: name,
                rpc: format!(
                    "GetChunks {project}/{}",
                    if content == ContentType::Code {
                        "Throttle.java"
                    } else {
                        "guide.md"
                    }
                ),
                expected: if visible {
                    "OK, chunks".into()
                } else {
                    "NotFound".into()
                },
                got: outcome(&result, |r| {
                    if r.chunks.is_empty() && r.total_chunks == 0 {
                        "OK, 0 chunks".into()
                    } else if r.chunks.iter().all(|c| c.project == project) {
                        "OK, chunks".into()
                    } else {
                        "LEAK".into()
                    }
                }),
            });
        }
    }
    // A content-type-limited key: code is refused when asked for.
    let mut code = search("acquire a permit", &[]);
    code.content_types = vec![v1::ContentType::Code as i32];
    let result = client.search(with_key(code, Some(&prose.key))).await;
    rows.push(Row {
        key: "alpha-prose",
        rpc: "Search, content_types=[code]".into(),
        expected: "PermissionDenied".into(),
        got: outcome(&result, |_| "OK".into()),
    });
    let result = client
        .search(with_key(search("acquire a permit", &[]), Some(&prose.key)))
        .await
        .map(|r| r.into_inner());
    rows.push(Row {
        key: "alpha-prose",
        rpc: "Search \"acquire a permit\", no filter".into(),
        expected: "OK, prose only".into(),
        got: outcome(&result, |r| {
            let code = r
                .results
                .iter()
                .flat_map(|d| d.spans.iter().flat_map(|s| s.chunks.iter()))
                .any(|c| c.chunk.as_ref().unwrap().content_type != v1::ContentType::Prose as i32);
            if code {
                "code returned".into()
            } else {
                "OK, prose only".into()
            }
        }),
    });

    // --- Guessing beta's ids with alpha's key: every index, every guess --
    let mut guessed = 0;
    for uri in [
        "guide.md",
        "./guide.md",
        "GUIDE.md",
        "Guide.md",
        "README.md",
    ] {
        let id = DocumentId::new("beta", uri);
        for start in [0u32, 1, 2, 5] {
            // Answered as a document that does not exist: no chunk, no
            // count, the same status for every guess.
            let status = client
                .get_chunks(with_key(
                    v1::GetChunksRequest {
                        document_id: id.as_str().into(),
                        start_index: start,
                        end_index: Some(start + 3),
                    },
                    Some(&alpha.key),
                ))
                .await
                .expect_err(uri);
            assert_eq!(status.code(), Code::NotFound, "{uri}: {status:?}");
            guessed += 1;
        }
    }
    rows.push(Row {
        key: "alpha-reader",
        rpc: format!("GetChunks, {guessed} guessed beta ids/ranges"),
        expected: "NotFound".into(),
        got: "NotFound".into(),
    });

    // --- No key, a wrong key, a malformed header -------------------------
    let mut wrong = alpha.key.clone();
    wrong.replace_range(10..12, if &wrong[10..12] == "00" { "11" } else { "00" });
    for (name, key) in [
        ("(none)", None),
        ("(wrong key)", Some(wrong.as_str())),
        ("(hash as key)", Some(alpha.entry.sha256.as_str())),
    ] {
        let result = client.search(with_key(search(query, &[]), key)).await;
        rows.push(Row {
            key: name,
            rpc: "Search".into(),
            expected: "Unauthenticated".into(),
            got: outcome(&result, |_| "OK".into()),
        });
        let result = client
            .get_chunks(with_key(
                v1::GetChunksRequest {
                    document_id: alpha_guide.as_str().into(),
                    ..Default::default()
                },
                key,
            ))
            .await;
        rows.push(Row {
            key: name,
            rpc: "GetChunks alpha/guide.md".into(),
            expected: "Unauthenticated".into(),
            got: outcome(&result, |_| "OK".into()),
        });
    }
    let mut basic = tonic::Request::new(search(query, &[]));
    basic.metadata_mut().insert(
        "authorization",
        format!("Basic {}", alpha.key).parse().unwrap(),
    );
    let result = client.search(basic).await;
    rows.push(Row {
        key: "(Basic scheme)",
        rpc: "Search".into(),
        expected: "Unauthenticated".into(),
        got: outcome(&result, |_| "OK".into()),
    });
    // Invalid arguments are not looked at before the key.
    let result = client
        .get_chunks(with_key(
            v1::GetChunksRequest {
                document_id: "nothex".into(),
                ..Default::default()
            },
            None,
        ))
        .await;
    rows.push(Row {
        key: "(none)",
        rpc: "GetChunks, malformed id".into(),
        expected: "Unauthenticated".into(),
        got: outcome(&result, |_| "OK".into()),
    });

    // --- Health and reflection stay open ----------------------------------
    let mut health = tonic_health::pb::health_client::HealthClient::new(fixture.channel().await);
    let reply = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "weft.v1.QueryService".into(),
        })
        .await;
    rows.push(Row {
        key: "(none)",
        rpc: "grpc.health.v1 Check".into(),
        expected: "OK, SERVING".into(),
        got: outcome(&reply, |r| {
            if r.get_ref().status
                == tonic_health::pb::health_check_response::ServingStatus::Serving as i32
            {
                "OK, SERVING".into()
            } else {
                format!("{:?}", r.get_ref().status)
            }
        }),
    });

    // --- Revocation by editing the file, without restart ------------------
    let before = client
        .search(with_key(search(query, &[]), Some(&revoked.key)))
        .await;
    rows.push(Row {
        key: "revoked-later",
        rpc: "Search, before its entry is deleted".into(),
        expected: "OK".into(),
        got: outcome(&before, |_| "OK".into()),
    });
    let rotated = auth::mint("alpha-rotated", vec!["alpha".into()], vec![]).unwrap();
    let mut new_entries: Vec<KeyEntry> = entries
        .iter()
        .filter(|e| e.id != "revoked-later")
        .cloned()
        .collect();
    new_entries.push(rotated.entry.clone());
    write_keys(&fixture.keys_path, &new_entries);
    let deadline = Instant::now() + Duration::from_secs(15);
    let after = loop {
        let r = client
            .get_chunks(with_key(
                v1::GetChunksRequest {
                    document_id: alpha_guide.as_str().into(),
                    ..Default::default()
                },
                Some(&revoked.key),
            ))
            .await;
        if r.is_err() || Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    rows.push(Row {
        key: "revoked-later",
        rpc: "GetChunks, after its entry is deleted".into(),
        expected: "Unauthenticated".into(),
        got: outcome(&after, |_| "OK".into()),
    });
    let result = client
        .search(with_key(search(query, &[]), Some(&rotated.key)))
        .await;
    rows.push(Row {
        key: "alpha-rotated (new)",
        rpc: "Search, after the file change".into(),
        expected: "OK".into(),
        got: outcome(&result, |_| "OK".into()),
    });
    // A broken file keeps the keys in force.
    std::fs::write(&fixture.keys_path, "[[keys]]\nthis is not toml\n").unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let result = client
        .search(with_key(search(query, &["alpha"]), Some(&alpha.key)))
        .await;
    rows.push(Row {
        key: "alpha-reader",
        rpc: "Search, after the file is broken".into(),
        expected: "OK".into(),
        got: outcome(&result, |_| "OK".into()),
    });

    print_matrix(&rows);
    let failed: Vec<_> = rows
        .iter()
        .filter(|r| !r.ok())
        .map(|r| format!("{} / {}: {}", r.key, r.rpc, r.got))
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
    fixture.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_key_has_its_own_token_bucket() {
    let limited = auth::mint("limited", vec!["alpha".into()], vec![]).unwrap();
    let mut fast = auth::mint("fast", vec!["alpha".into()], vec![]).unwrap();
    fast.entry.rate_per_sec = Some(1000.0);
    fast.entry.burst = Some(1000);
    let fixture = serve(
        &[limited.entry.clone(), fast.entry.clone()],
        weft_config::QueryServiceConfig {
            rate_limit_per_sec: Some(1.0),
            rate_limit_burst: Some(3),
            ..Default::default()
        },
    )
    .await;
    let mut client = QueryServiceClient::new(fixture.channel().await);
    let get = |key: &str| {
        with_key(
            v1::GetChunksRequest {
                document_id: DocumentId::new("alpha", "guide.md").as_str().into(),
                ..Default::default()
            },
            Some(key),
        )
    };
    let mut codes = Vec::new();
    for _ in 0..5 {
        codes.push(match client.get_chunks(get(&limited.key)).await {
            Ok(_) => Code::Ok,
            Err(status) => {
                assert!(status.message().contains("limited"), "{status:?}");
                status.code()
            }
        });
    }
    // The burst of 3, then refused (a second has not passed).
    assert_eq!(&codes[..3], &[Code::Ok; 3], "{codes:?}");
    assert!(
        codes[3..].iter().all(|c| *c == Code::ResourceExhausted),
        "{codes:?}"
    );
    // Another key is not slowed by it: its own, larger bucket.
    for _ in 0..20 {
        client.get_chunks(get(&fast.key)).await.unwrap();
    }
    // A second later the limited key has a token again.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    client.get_chunks(get(&limited.key)).await.unwrap();
    println!("rate limit: limited key (1/s, burst 3) gave {codes:?}; the fast key 20 calls OK");
    fixture.stop().await;
}

/// Issue 38: a search naming a project the key cannot search is
/// `NOT_FOUND` naming the field and the project, listing the indexed
/// projects the key may read and no other; a project that exists outside
/// the key's scope gets exactly the answer of one that exists nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_out_of_scope_projects_are_answered_alike_within_the_keys_scope() {
    let alpha = auth::mint("alpha-reader", vec!["alpha".into()], vec![]).unwrap();
    let all = auth::mint("admin", vec!["*".into()], vec![]).unwrap();
    let fixture = serve(
        &[alpha.entry.clone(), all.entry.clone()],
        Default::default(),
    )
    .await;
    let mut client = QueryServiceClient::new(fixture.channel().await);
    let mut ask = async |key: &str, projects: &[&str]| {
        client
            .search(with_key(search("deploy", projects), Some(key)))
            .await
            .map(|r| r.into_inner())
    };

    // alpha's key: beta exists, nope does not; the same status and text.
    let beta = ask(&alpha.key, &["beta"]).await.unwrap_err();
    let nope = ask(&alpha.key, &["nope"]).await.unwrap_err();
    let both = ask(&alpha.key, &["alpha", "beta"]).await.unwrap_err();
    for status in [&beta, &nope, &both] {
        assert_eq!(status.code(), Code::NotFound, "{status:?}");
        assert!(
            status
                .message()
                .starts_with("weft.v1.SearchRequest.projects: project "),
            "{status:?}"
        );
        assert!(
            status
                .message()
                .ends_with("; indexed projects this caller may read: alpha, alpha@next"),
            "{status:?}"
        );
    }
    assert_eq!(
        beta.message().replace("\"beta\"", "\"X\""),
        nope.message().replace("\"nope\"", "\"X\""),
        "an out-of-scope project and a missing one look alike"
    );
    assert_eq!(beta.message(), both.message());
    println!("alpha's key, beta: {:?} {}", beta.code(), beta.message());
    println!("alpha's key, nope: {:?} {}", nope.code(), nope.message());
    // Its own project searches.
    let ok = ask(&alpha.key, &["alpha"]).await.unwrap();
    assert!(!ok.results.is_empty());

    // The admin key (every project): every indexed project is listed, and
    // a near miss suggested.
    let status = ask(&all.key, &["alpha", "betta"]).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    assert_eq!(
        status.message(),
        "weft.v1.SearchRequest.projects: project \"betta\" is not indexed \
         (did you mean \"beta\"?); indexed projects: alpha, alpha@next, beta"
    );
    println!("admin key, betta: {:?} {}", status.code(), status.message());
    assert!(!ask(&all.key, &["beta"]).await.unwrap().results.is_empty());
    fixture.stop().await;
}

/// A branch overlay over gRPC: alpha's key reads `alpha@next` (the branch's
/// Throttle.java and none of alpha's: the guide the branch deleted and the
/// Throttle it rewrote stay hidden); beta's key is told it does not exist;
/// a search of every project reads no branch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_is_read_through_its_project_and_its_key() {
    let alpha = auth::mint("alpha-reader", vec!["alpha".into()], vec![]).unwrap();
    let beta = auth::mint("beta-reader", vec!["beta".into()], vec![]).unwrap();
    let fixture = serve(
        &[alpha.entry.clone(), beta.entry.clone()],
        Default::default(),
    )
    .await;
    let mut client = QueryServiceClient::new(fixture.channel().await);
    for query in [
        "deploy the alpha service",
        "permits",
        "sliding window of recent calls",
    ] {
        let branch = client
            .search(with_key(search(query, &["alpha@next"]), Some(&alpha.key)))
            .await
            .unwrap()
            .into_inner();
        for document in &branch.results {
            for span in &document.spans {
                for c in &span.chunks {
                    let chunk = c.chunk.as_ref().unwrap();
                    assert_eq!(
                        chunk.project, "alpha@next",
                        "{query}: alpha's {} came through the branch",
                        chunk.uri
                    );
                }
            }
        }
        let (_, texts) = projects_of(&branch);
        assert!(
            texts
                .iter()
                .all(|t| !t.contains("token bucket") && !t.contains("rolls the replicas")),
            "{query}: the branch shows alpha's versions"
        );
        // Every project the key reads: alpha, not its branch.
        let all = client
            .search(with_key(search(query, &[]), Some(&alpha.key)))
            .await
            .unwrap()
            .into_inner();
        let (projects, _) = projects_of(&all);
        assert!(
            projects.iter().all(|p| p == "alpha"),
            "{query}: {projects:?}"
        );
    }
    let window = client
        .search(with_key(
            search("sliding window of recent calls", &["alpha@next"]),
            Some(&alpha.key),
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(window.results[0].uri, "Throttle.java");
    let refused = client
        .search(with_key(
            search("permits", &["alpha@next"]),
            Some(&beta.key),
        ))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::NotFound, "{refused:?}");
    assert!(
        refused
            .message()
            .ends_with("indexed projects this caller may read: beta"),
        "{refused:?}"
    );
    fixture.stop().await;
}

/// A CA, and a certificate it signs for `name` (a server's for localhost, a
/// client's).
struct Pki {
    ca_pem: String,
    ca: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl Pki {
    fn new() -> Self {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "weft test CA");
        let cert = params.self_signed(&key).unwrap();
        Self {
            ca_pem: cert.pem(),
            ca: rcgen::Issuer::new(params, key),
        }
    }

    /// (certificate PEM, key PEM).
    fn issue(&self, name: &str, client: bool) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
        params.extended_key_usages = vec![if client {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        } else {
            rcgen::ExtendedKeyUsagePurpose::ServerAuth
        }];
        let cert = params.signed_by(&key, &self.ca).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_client_certificates_and_keys() {
    let server_pki = Pki::new();
    let client_pki = Pki::new();
    let stranger_pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let (server_cert, server_key) = server_pki.issue("localhost", false);
    let (client_cert, client_key) = client_pki.issue("weft-client", true);
    let (stranger_cert, stranger_key) = stranger_pki.issue("stranger", true);
    let key = auth::mint("tls-client", vec!["alpha".into()], vec![]).unwrap();
    let fixture = serve(
        std::slice::from_ref(&key.entry),
        weft_config::QueryServiceConfig {
            tls_cert_file: Some(file("server.pem", &server_cert)),
            tls_key_file: Some(file("server.key", &server_key)),
            tls_client_ca_file: Some(file("clients-ca.pem", &client_pki.ca_pem)),
            ..Default::default()
        },
    )
    .await;
    let tls_channel = |identity: Option<(&str, &str)>| {
        let mut tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&server_pki.ca_pem))
            .domain_name("localhost");
        if let Some((cert, key)) = identity {
            tls = tls.identity(Identity::from_pem(cert, key));
        }
        let endpoint = Endpoint::from_shared(format!("https://localhost:{}", fixture.addr.port()))
            .unwrap()
            .tls_config(tls)
            .unwrap()
            .connect_timeout(Duration::from_secs(5));
        async move { endpoint.connect().await }
    };
    let ask = |channel: Channel, key: Option<String>| async move {
        QueryServiceClient::new(channel)
            .search(with_key(search("deploy", &[]), key.as_deref()))
            .await
    };

    // A client certificate from the configured CA and a key: answered.
    let channel = tls_channel(Some((&client_cert, &client_key)))
        .await
        .unwrap();
    let response = ask(channel.clone(), Some(key.key.clone()))
        .await
        .unwrap()
        .into_inner();
    assert!(response.results.iter().all(|d| d.project == "alpha"));
    assert!(!response.results.is_empty());
    // TLS does not replace the key.
    let status = ask(channel, None).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);

    // No client certificate, or one from another CA: no call gets through.
    for identity in [None, Some((stranger_cert.as_str(), stranger_key.as_str()))] {
        let outcome = match tls_channel(identity).await {
            Err(_) => "handshake refused".to_owned(),
            Ok(channel) => match ask(channel, Some(key.key.clone())).await {
                Ok(_) => "answered".to_owned(),
                Err(status) => format!("{:?}", status.code()),
            },
        };
        assert_ne!(outcome, "answered", "{identity:?}");
    }
    // Plain text to the TLS port: refused.
    let plain = Endpoint::from_shared(format!("http://{}", fixture.addr))
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await;
    if let Ok(channel) = plain {
        assert!(ask(channel, Some(key.key.clone())).await.is_err());
    }
    fixture.stop().await;
}

#[tokio::test]
async fn keys_are_required_unless_turned_off_and_tls_files_are_named() {
    use weft_config::{QueryAuth, QueryServiceConfig};
    let none = QueryServiceConfig::default();
    let err = auth::from_config(&none, "0.0.0.0:50051", auth::AuthDefault::Required).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("query.api_keys_file") && message.contains("query.auth = \"none\""),
        "{message}"
    );
    // weft serve: open on loopback, keys elsewhere.
    assert!(matches!(
        auth::from_config(&none, "127.0.0.1:50051", auth::AuthDefault::OpenOnLoopback).unwrap(),
        auth::Auth::Open
    ));
    assert!(matches!(
        auth::from_config(&none, "[::1]:50051", auth::AuthDefault::OpenOnLoopback).unwrap(),
        auth::Auth::Open
    ));
    let message = auth::from_config(&none, "0.0.0.0:50051", auth::AuthDefault::OpenOnLoopback)
        .unwrap_err()
        .to_string();
    assert!(message.contains("not a loopback address"), "{message}");
    // Loopback in weft-query still needs keys.
    assert!(auth::from_config(&none, "127.0.0.1:50051", auth::AuthDefault::Required).is_err());
    // The explicit "none" opens anything.
    let open = QueryServiceConfig {
        auth: Some(QueryAuth::None),
        ..Default::default()
    };
    for default in [
        auth::AuthDefault::Required,
        auth::AuthDefault::OpenOnLoopback,
    ] {
        assert!(matches!(
            auth::from_config(&open, "0.0.0.0:50051", default).unwrap(),
            auth::Auth::Open
        ));
    }
    // A keys file that is missing is named.
    let missing = QueryServiceConfig {
        api_keys_file: Some("/nonexistent/keys.toml".into()),
        ..Default::default()
    };
    let message = auth::from_config(&missing, "127.0.0.1:1", auth::AuthDefault::OpenOnLoopback)
        .unwrap_err()
        .to_string();
    assert!(message.contains("/nonexistent/keys.toml"), "{message}");
    // TLS files that are missing or not PEM are named with their setting.
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate").unwrap();
    for (cert, key, expect) in [
        (
            dir.path().join("none.pem"),
            junk.clone(),
            "query.tls_cert_file",
        ),
        (junk.clone(), junk.clone(), "query.tls_cert_file"),
    ] {
        let config = QueryServiceConfig {
            tls_cert_file: Some(cert),
            tls_key_file: Some(key),
            ..Default::default()
        };
        let message = weft_grpc::tls::from_config(&config)
            .unwrap_err()
            .to_string();
        assert!(message.contains(expect), "{message}");
    }
}

/// A message that is not a `SearchRequest`: field 1 (`query`, a string)
/// as a fixed64, which no decoder of `SearchRequest` accepts.
#[derive(Clone, PartialEq, prost::Message)]
struct NotASearch {
    #[prost(fixed64, tag = "1")]
    query: u64,
    #[prost(string, repeated, tag = "2")]
    padding: Vec<String>,
}

/// Calls Search with `message` in place of a search request.
async fn search_with(
    channel: Channel,
    message: NotASearch,
    key: Option<&str>,
) -> Result<v1::SearchResponse, tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(channel).max_encoding_message_size(64 << 20);
    grpc.ready().await.unwrap();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/weft.v1.QueryService/Search");
    let codec = tonic_prost::ProstCodec::<NotASearch, v1::SearchResponse>::default();
    grpc.unary(with_key(message, key), path, codec)
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_are_authenticated_before_their_message_is_read() {
    let alpha = auth::mint("alpha-reader", vec!["alpha".into()], vec![]).unwrap();
    let fixture = serve(std::slice::from_ref(&alpha.entry), Default::default()).await;
    let undecodable = NotASearch {
        query: 1,
        padding: Vec::new(),
    };
    // A message no decoder accepts: refused for want of a key, so it was
    // never decoded; with the key, decoding is what fails.
    let refused = search_with(fixture.channel().await, undecodable.clone(), None)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    let wrong = search_with(
        fixture.channel().await,
        undecodable.clone(),
        Some("weft_nope"),
    )
    .await
    .unwrap_err();
    assert_eq!(wrong.code(), Code::Unauthenticated, "{wrong:?}");
    let decoded = search_with(fixture.channel().await, undecodable, Some(&alpha.key))
        .await
        .unwrap_err();
    assert_eq!(decoded.code(), Code::Internal, "{decoded:?}");
    assert!(decoded.message().contains("decode"), "{decoded:?}");

    // Over query.max_request_bytes (1 MiB by default): refused unread,
    // for want of a key first. Issue 33's attack: 900k strings, 14.4 MB.
    let huge = NotASearch {
        query: 1,
        padding: vec!["0123456789abcde".into(); 900_000],
    };
    let refused = search_with(fixture.channel().await, huge.clone(), None)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    let too_large = search_with(fixture.channel().await, huge, Some(&alpha.key))
        .await
        .unwrap_err();
    assert!(
        too_large.message().contains("message length too large"),
        "{too_large:?}"
    );
    fixture.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_query_embedding_cache_tells_no_key_what_another_asked() {
    let alpha = auth::mint("alpha-reader", vec!["alpha".into()], vec![]).unwrap();
    let other = auth::mint("other-alpha-reader", vec!["alpha".into()], vec![]).unwrap();
    let fixture = serve(
        &[alpha.entry.clone(), other.entry.clone()],
        Default::default(),
    )
    .await;
    let mut client = QueryServiceClient::new(fixture.channel().await);
    let query = "where do certificates go";
    let cached = |key: &str| with_key(search(query, &["alpha"]), Some(key));
    let first = client
        .search(cached(&other.key))
        .await
        .unwrap()
        .into_inner();
    assert!(!first.cached_embedding);
    // other asked it; alpha's first time is not a cache hit.
    let alpha_first = client
        .search(cached(&alpha.key))
        .await
        .unwrap()
        .into_inner();
    assert!(
        !alpha_first.cached_embedding,
        "alpha learns what other asked"
    );
    let alpha_again = client
        .search(cached(&alpha.key))
        .await
        .unwrap()
        .into_inner();
    assert!(alpha_again.cached_embedding, "a key's own repeat is cached");
    fixture.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_connections_new_connections_are_closed_until_one_ends() {
    let alpha = auth::mint("alpha-reader", vec!["alpha".into()], vec![]).unwrap();
    let fixture = serve(
        std::slice::from_ref(&alpha.entry),
        weft_config::QueryServiceConfig {
            max_connections: 2,
            ..Default::default()
        },
    )
    .await;
    let call = |channel: Channel| {
        let key = alpha.key.clone();
        async move {
            QueryServiceClient::new(channel)
                .search(with_key(search("certificates", &["alpha"]), Some(&key)))
                .await
        }
    };
    // Two connections that never authenticate hold both slots.
    let idle: Vec<tokio::net::TcpStream> = vec![
        tokio::net::TcpStream::connect(fixture.addr).await.unwrap(),
        tokio::net::TcpStream::connect(fixture.addr).await.unwrap(),
    ];
    tokio::time::sleep(Duration::from_millis(200)).await;
    let refused = match Endpoint::from_shared(format!("http://{}", fixture.addr))
        .unwrap()
        .connect()
        .await
    {
        Err(e) => format!("connect: {e}"),
        Ok(channel) => match call(channel).await {
            // The connection closed under the client: tonic says
            // UNAVAILABLE or CANCELLED ("connection was not ready"), or
            // UNKNOWN "transport error" when the close comes mid-write
            // (a broken pipe).
            Err(status) => {
                assert!(
                    matches!(status.code(), Code::Unavailable | Code::Cancelled)
                        || (status.code() == Code::Unknown
                            && status.message() == "transport error"),
                    "{status:?}"
                );
                format!("{status:?}")
            }
            Ok(_) => panic!("a third connection was served past query.max_connections = 2"),
        },
    };
    println!("third connection: {refused}");
    // One of them ends: a new connection is served again.
    drop(idle);
    let started = Instant::now();
    loop {
        if let Ok(channel) = Endpoint::from_shared(format!("http://{}", fixture.addr))
            .unwrap()
            .connect()
            .await
            && call(channel).await.is_ok()
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no connection served after the others closed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    fixture.stop().await;
}
