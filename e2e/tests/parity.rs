//! The two deployments are one pipeline: the same git repository indexed
//! once by the embedded `weft index` and once by weft-crawler → NATS →
//! weft-chunker → weft-embedder (a real nats-server, embedded stores, the
//! real model) ends in equal catalogs and equal chunks — the same document
//! ids, content hashes, identities, chunk ids, chunk order, contents and
//! spans — after the first run and after an incremental run (a file
//! changed, one removed, one renamed), which both read by git diff.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use weft_core::ports::{Catalog, DocumentRecord};
use weft_core::{Chunk, ChunkId};
use weft_e2e::{Service, bin, crawl, model_dir, write_files};
use weft_nats::testing::NatsServer;

const PROJECT: &str = "parity";

const FILES: &[(&str, &str)] = &[
    (
        "src/main/java/demo/Throttle.java",
        "package demo;\n\nimport java.util.concurrent.TimeUnit;\n\n/** Hands out permits at a fixed rate. */\npublic final class Throttle {\n  private final double rate;\n\n  /** A throttle of `rate` permits per second. */\n  public Throttle(double rate) {\n    this.rate = rate;\n  }\n\n  /** Waits for one permit. */\n  public void acquire() throws InterruptedException {\n    TimeUnit.MILLISECONDS.sleep((long) (1000 / rate));\n  }\n}\n",
    ),
    (
        "src/main/java/demo/Changing.java",
        "package demo;\n\n/** Counts things. */\npublic final class Changing {\n  private long count;\n\n  /** Adds one. */\n  public void add() {\n    count++;\n  }\n}\n",
    ),
    (
        "web/retry.ts",
        "/** Options of a retry. */\nexport interface RetryOptions {\n  attempts: number;\n  delayMs: number;\n}\n\n/** Calls `f` until it succeeds, at most `attempts` times. */\nexport async function retry<T>(f: () => Promise<T>, o: RetryOptions): Promise<T> {\n  let last: unknown;\n  for (let i = 0; i < o.attempts; i++) {\n    try {\n      return await f();\n    } catch (e) {\n      last = e;\n      await new Promise((r) => setTimeout(r, o.delayMs));\n    }\n  }\n  throw last;\n}\n",
    ),
    (
        "web/Moved.ts",
        "/** A point on the plane. */\nexport class Point {\n  constructor(readonly x: number, readonly y: number) {}\n\n  /** The distance to the origin. */\n  norm(): number {\n    return Math.hypot(this.x, this.y);\n  }\n}\n",
    ),
    (
        "tools/cache.py",
        "\"\"\"A small LRU cache.\"\"\"\n\nfrom collections import OrderedDict\n\n\nclass Cache:\n    \"\"\"Keeps the most recently used entries.\"\"\"\n\n    def __init__(self, size):\n        self.size = size\n        self.items = OrderedDict()\n\n    def get(self, key):\n        \"\"\"The value of `key`, marked as used.\"\"\"\n        self.items.move_to_end(key)\n        return self.items[key]\n",
    ),
    (
        "crates/ring/src/lib.rs",
        "//! A ring buffer.\n\n/// A fixed-size ring of values.\npub struct Ring<T> {\n    items: Vec<Option<T>>,\n    next: usize,\n}\n\nimpl<T> Ring<T> {\n    /// Pushes a value, overwriting the oldest.\n    pub fn push(&mut self, value: T) {\n        let n = self.items.len();\n        self.items[self.next % n] = Some(value);\n        self.next += 1;\n    }\n}\n",
    ),
    (
        "README.md",
        "# Parity fixture\n\nA small tree of several languages for the parity test.\n\n## Layout\n\n- `src/` Java\n- `web/` TypeScript\n- `tools/` Python\n",
    ),
    (
        "docs/guide.md",
        "# Guide\n\n## Install\n\nRun the installer and restart the service.\n\n## Configure\n\nSet the rate in `weft.toml`, then reload.\n\n```toml\n[throttle]\nrate = 10\n```\n\n## Troubleshooting\n\nIf permits are slow, check the clock source.\n",
    ),
    (
        "docs/old.md",
        "# Old notes\n\nThese notes are about to be removed from the repository.\n",
    ),
    (
        "notes.txt",
        "Plain notes.\n\nThe second paragraph of the notes, long enough to be a paragraph of its own.\n",
    ),
];

fn git(repo: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["-c", "user.name=weft", "-c", "user.email=weft@example.org"])
        .args(args)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The embedded deployment: `weft index URL --json`; returns the run's summary.
fn weft_index(url: &str, data: &Path) -> serde_json::Value {
    weft_index_with(url, data, &[])
}

/// [`weft_index`] with `extra` arguments (`--branch B`).
fn weft_index_with(url: &str, data: &Path, extra: &[&str]) -> serde_json::Value {
    let out = Command::new(bin("weft"))
        .args(["index", url, "--project", PROJECT, "--json", "--data-dir"])
        .arg(data)
        .args(extra)
        .env("WEFT_MODEL_DIR", model_dir())
        .env("WEFT_LOG", "warn")
        .output()
        .expect("run weft index");
    assert!(
        out.status.success(),
        "weft index failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("weft index --json");
    json["runs"][0].clone()
}

/// What a catalog and the vector index hold for the project: every record
/// (without its version, which only the distributed pipeline orders) and
/// every chunk of it, by id, in chunk order.
#[derive(Debug, PartialEq)]
struct Snapshot {
    records: BTreeMap<String, (String, String, u32, String)>,
    chunks: BTreeMap<String, Vec<Chunk>>,
    points: u64,
}

/// What `data`'s vector and text indexes hold of the project, as the
/// catalog records it: `catalog`, or else the data directory's own.
async fn snapshot(catalog: Option<&dyn Catalog>, data: &Path) -> Snapshot {
    snapshot_of(catalog, data, PROJECT).await
}

/// [`snapshot`] of `project`.
async fn snapshot_of(catalog: Option<&dyn Catalog>, data: &Path, project: &str) -> Snapshot {
    let stores = weft_wiring::DataDir::new(data).open_existing().unwrap();
    let catalog = catalog.unwrap_or(stores.catalog.as_ref());
    let records: Vec<DocumentRecord> = catalog.documents(Some(project)).await.unwrap();
    let mut chunks = BTreeMap::new();
    for r in &records {
        // One past the end too: nothing may be stored beyond chunk_count.
        let ids: Vec<ChunkId> = (0..=r.chunk_count)
            .map(|i| ChunkId::new(&r.document_id, i))
            .collect();
        let mut found = stores.vectors.get(&ids).await.unwrap();
        found.sort_by_key(|c| c.chunk_index);
        assert_eq!(
            found.len() as u32,
            r.chunk_count,
            "{}: stored chunks vs the catalog",
            r.uri
        );
        chunks.insert(r.uri.clone(), found);
    }
    let points = stores.vectors.count().await.unwrap();
    assert_eq!(points, stores.text.count().await.unwrap(), "both indexes");
    Snapshot {
        records: records
            .into_iter()
            .map(|r| {
                (
                    r.document_id.as_str().to_owned(),
                    (r.uri, r.content_hash, r.chunk_count, r.identity.tag()),
                )
            })
            .collect(),
        chunks,
        points,
    }
}

fn assert_same(embedded: &Snapshot, distributed: &Snapshot, when: &str) {
    assert_eq!(
        embedded.records.keys().collect::<Vec<_>>(),
        distributed.records.keys().collect::<Vec<_>>(),
        "{when}: document ids"
    );
    for (id, record) in &embedded.records {
        assert_eq!(
            Some(record),
            distributed.records.get(id),
            "{when}: record of {id}"
        );
    }
    for (uri, chunks) in &embedded.chunks {
        let other = &distributed.chunks[uri];
        let ids = |c: &[Chunk]| c.iter().map(Chunk::id).collect::<Vec<_>>();
        assert_eq!(ids(chunks), ids(other), "{when}: chunk ids of {uri}");
        for (a, b) in chunks.iter().zip(other) {
            assert_eq!(
                (a.start_line, a.end_line, a.start_byte, a.end_byte),
                (b.start_line, b.end_line, b.start_byte, b.end_byte),
                "{when}: span of {uri}#{}",
                a.chunk_index
            );
            assert_eq!(a, b, "{when}: chunk {uri}#{}", a.chunk_index);
        }
    }
    assert_eq!(embedded, distributed, "{when}: everything");
}

/// Waits until the distributed catalog records exactly the documents and
/// content hashes of `target`, and both queues are empty.
async fn converge(
    jet: &weft_nats::Jet,
    catalog: &dyn Catalog,
    target: &Snapshot,
    services: &mut [&mut Service],
) {
    converge_of(jet, catalog, target, services, PROJECT).await
}

/// [`converge`] for `project`.
async fn converge_of(
    jet: &weft_nats::Jet,
    catalog: &dyn Catalog,
    target: &Snapshot,
    services: &mut [&mut Service],
    project: &str,
) {
    let want: BTreeMap<String, String> = target
        .records
        .iter()
        .map(|(id, (_, hash, ..))| (id.clone(), hash.clone()))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let have: BTreeMap<String, String> = catalog
            .documents(Some(project))
            .await
            .unwrap()
            .into_iter()
            .map(|r| (r.document_id.as_str().to_owned(), r.content_hash))
            .collect();
        let queued = jet.stream_messages("WEFT_DOCS").await.unwrap()
            + jet.stream_messages("WEFT_CHUNKS").await.unwrap();
        if have == want && queued == 0 {
            return;
        }
        for s in services.iter_mut() {
            assert!(s.running(), "{} died:\n{}", s.name, s.log());
        }
        assert!(
            Instant::now() < deadline,
            "the distributed pipeline did not converge: {} of {} records, {queued} messages queued",
            have.len(),
            want.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_and_distributed_indexing_agree() {
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "--quiet", "--initial-branch=main"]);
    write_files(repo.path(), FILES);
    std::fs::write(repo.path().join("logo.png"), [0x89, b'P', b'N', b'G', 0, 1]).unwrap();
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "--quiet", "-m", "first"]);
    let url = format!("file://{}", repo.path().display());

    let embedded_data = tempfile::tempdir().unwrap();
    let distributed_data = tempfile::tempdir().unwrap();
    let checkouts = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let server = NatsServer::start();
    let jet = weft_nats::Jet::connect(&server.config()).await.unwrap();
    let catalog = jet.catalog().await.unwrap();
    let env = vec![
        ("WEFT__NATS__URL", server.url()),
        ("WEFT_MODEL_DIR", model_dir().display().to_string()),
        (
            "WEFT_DATA_DIR",
            distributed_data.path().display().to_string(),
        ),
        // The fixture is a local repository, which weft-crawler refuses
        // unless configured.
        ("WEFT__CRAWL__GIT_PROTOCOLS", "https,ssh,file".to_owned()),
    ];
    let checkout_args = |url: &str| {
        vec![
            url.to_owned(),
            "--project".to_owned(),
            PROJECT.to_owned(),
            "--checkout-dir".to_owned(),
            checkouts.path().display().to_string(),
        ]
    };
    let run_crawler = |url: &str| {
        let args = checkout_args(url);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        crawl(&args, &env)["sources"][0].clone()
    };

    // First run: everything is new.
    let first = weft_index(&url, embedded_data.path());
    assert!(first["diffed_from"].is_null(), "{first}");
    let embedded_first = snapshot(None, embedded_data.path()).await;
    assert_eq!(
        embedded_first.records.len(),
        FILES.len() + 1,
        "and the binary"
    );

    let mut chunker = Service::start("chunker", "weft-chunker", &[], &env, logs.path());
    let mut embedder = Service::start("embedder", "weft-embedder", &[], &env, logs.path());
    let crawled = run_crawler(&url);
    assert!(crawled["diffed_from"].is_null(), "{crawled}");
    assert_eq!(crawled["documents_published"], FILES.len() + 1, "{crawled}");
    converge(
        &jet,
        &catalog,
        &embedded_first,
        &mut [&mut chunker, &mut embedder],
    )
    .await;
    embedder.stop();
    let distributed_first = snapshot(Some(&catalog), distributed_data.path()).await;
    assert_same(&embedded_first, &distributed_first, "first run");

    // A commit that changes one file, removes one and renames one.
    std::fs::write(
        repo.path().join("src/main/java/demo/Changing.java"),
        "package demo;\n\n/** Counts things, by steps. */\npublic final class Changing {\n  private long count;\n\n  /** Adds `step`. */\n  public void add(long step) {\n    count += step;\n  }\n\n  /** The count so far. */\n  public long count() {\n    return count;\n  }\n}\n",
    )
    .unwrap();
    git(repo.path(), &["rm", "--quiet", "docs/old.md"]);
    std::fs::create_dir_all(repo.path().join("web/geometry")).unwrap();
    git(
        repo.path(),
        &["mv", "web/Moved.ts", "web/geometry/Point.ts"],
    );
    git(repo.path(), &["commit", "--quiet", "-am", "second"]);

    let second = weft_index(&url, embedded_data.path());
    assert_eq!(
        second["diffed_from"], first["revision"],
        "the embedded re-index reads the git diff: {second}"
    );
    assert_eq!(second["documents_seen"], 2, "changed and added: {second}");
    let embedded_second = snapshot(None, embedded_data.path()).await;
    assert!(
        embedded_second
            .records
            .values()
            .any(|r| r.0 == "web/geometry/Point.ts")
    );
    assert!(
        !embedded_second
            .records
            .values()
            .any(|r| r.0 == "docs/old.md")
    );

    let mut embedder = Service::start("embedder", "weft-embedder", &[], &env, logs.path());
    let crawled = run_crawler(&url);
    assert_eq!(
        crawled["diffed_from"], first["revision"],
        "the crawler reads the git diff too: {crawled}"
    );
    assert_eq!(crawled["documents_seen"], 2, "{crawled}");
    assert_eq!(crawled["documents_published"], 2, "{crawled}");
    assert_eq!(
        crawled["documents_deleted"], 2,
        "removed and renamed away: {crawled}"
    );
    converge(
        &jet,
        &catalog,
        &embedded_second,
        &mut [&mut chunker, &mut embedder],
    )
    .await;
    embedder.stop();
    let distributed_second = snapshot(Some(&catalog), distributed_data.path()).await;
    assert_same(&embedded_second, &distributed_second, "incremental run");

    // A branch, as an overlay: `weft index --branch` and a manifest's
    // `branches` store the same documents and hide the same ones.
    git(repo.path(), &["checkout", "--quiet", "-b", "feature"]);
    std::fs::write(
        repo.path().join("notes.txt"),
        "Plain notes, edited on the branch.\n",
    )
    .unwrap();
    git(repo.path(), &["rm", "--quiet", "tools/cache.py"]);
    write_files(
        repo.path(),
        &[(
            "web/extra.ts",
            "/** Doubles `x`. */\nexport function double(x: number): number {\n  return 2 * x;\n}\n",
        )],
    );
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "--quiet", "-m", "branch"]);
    git(repo.path(), &["checkout", "--quiet", "main"]);
    let overlay = "parity@feature";
    let branch = weft_index_with(&url, embedded_data.path(), &["--branch", "feature"]);
    assert_eq!(branch["documents_indexed"], 2, "{branch}");
    assert_eq!(branch["overlay"]["hidden"], 3, "{branch}");
    let embedded_branch = snapshot_of(None, embedded_data.path(), overlay).await;
    assert_eq!(embedded_branch.records.len(), 2);

    let manifest = logs.path().join("parity-sources.toml");
    std::fs::write(
        &manifest,
        format!(
            "[[sources]]\nsource = \"{url}\"\nproject = \"{PROJECT}\"\nbranches = [\"feature\"]\n"
        ),
    )
    .unwrap();
    let mut embedder = Service::start("embedder", "weft-embedder", &[], &env, logs.path());
    let job = crawl(
        &[
            "--manifest",
            manifest.to_str().unwrap(),
            "--checkout-dir",
            checkouts.path().to_str().unwrap(),
        ],
        &env,
    );
    let crawled: Vec<&serde_json::Value> = job["sources"].as_array().unwrap().iter().collect();
    assert_eq!(crawled.len(), 2, "the project, then its branch: {job}");
    assert_eq!(crawled[1]["project"], overlay, "{job}");
    assert_eq!(crawled[1]["documents_published"], 2, "{job}");
    converge_of(
        &jet,
        &catalog,
        &embedded_branch,
        &mut [&mut chunker, &mut embedder],
        overlay,
    )
    .await;
    embedder.stop();
    chunker.stop();
    let distributed_branch = snapshot_of(Some(&catalog), distributed_data.path(), overlay).await;
    assert_eq!(
        embedded_branch.records, distributed_branch.records,
        "the overlay's records"
    );
    assert_eq!(
        embedded_branch.chunks, distributed_branch.chunks,
        "the overlay's chunks"
    );
    let embedded_catalog = weft_wiring::DataDir::new(embedded_data.path())
        .open_existing()
        .unwrap()
        .catalog;
    let hidden = |state: Option<weft_core::ports::ProjectState>| {
        state.and_then(|s| s.overlay).map(|o| (o.base, o.hidden))
    };
    assert_eq!(
        hidden(embedded_catalog.project(overlay).await.unwrap()),
        Some((
            PROJECT.to_owned(),
            ["notes.txt", "tools/cache.py", "web/extra.ts"]
                .map(String::from)
                .to_vec()
        )),
    );
    assert_eq!(
        hidden(catalog.project(overlay).await.unwrap()),
        hidden(embedded_catalog.project(overlay).await.unwrap()),
        "the crawler records the same overlay"
    );

    // weft-query resolves the overlay from the NATS catalog: the branch's
    // notes and none of the base's versions of what the branch changed or
    // deleted.
    let (_query, mut client) = weft_e2e::start_query(&env, logs.path()).await;
    for query in [
        "plain notes",
        "a small LRU cache",
        "doubles x",
        "hands out permits",
    ] {
        let response = client
            .search(weft_proto::v1::SearchRequest {
                query: query.into(),
                projects: vec![overlay.into()],
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert!(!response.results.is_empty(), "{query}");
        if query == "hands out permits" {
            // A file the branch left alone: read from the project.
            assert!(
                response
                    .results
                    .iter()
                    .any(|d| d.project == PROJECT && d.uri == "src/main/java/demo/Throttle.java"),
                "{query}: the project's unchanged files are not read through the overlay: {:?}",
                response
                    .results
                    .iter()
                    .map(|d| (&d.project, &d.uri))
                    .collect::<Vec<_>>()
            );
        }
        for document in &response.results {
            assert!(
                document.project == overlay
                    || !["notes.txt", "tools/cache.py", "web/extra.ts"]
                        .contains(&document.uri.as_str()),
                "{query}: the base's {} came through the overlay",
                document.uri
            );
        }
    }

    // The branch deleted on the remote: the next crawl deletes the
    // overlay's documents and its project record.
    git(repo.path(), &["branch", "--quiet", "-D", "feature"]);
    let mut chunker = Service::start("chunker", "weft-chunker", &[], &env, logs.path());
    let mut embedder = Service::start("embedder", "weft-embedder", &[], &env, logs.path());
    let job = crawl(
        &[
            "--manifest",
            manifest.to_str().unwrap(),
            "--checkout-dir",
            checkouts.path().to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(job["sources"][1]["project"], overlay, "{job}");
    assert_eq!(job["sources"][1]["documents_deleted"], 2, "{job}");
    let nothing = Snapshot {
        records: BTreeMap::new(),
        chunks: BTreeMap::new(),
        points: 0,
    };
    converge_of(
        &jet,
        &catalog,
        &nothing,
        &mut [&mut chunker, &mut embedder],
        overlay,
    )
    .await;
    assert_eq!(catalog.project(overlay).await.unwrap(), None);
    assert!(catalog.project(PROJECT).await.unwrap().is_some());
}
