//! A rendered overlay's containers as local commands: the volumes
//! written, the environment resolved, and the remapping of paths, listen
//! ports and endpoints.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::objects::{self, Body, Container, IntOrString, KeysSource, Volume};
use super::{
    Data, ImageConfig, Probe, Proc, Workload, containers, free_port, image_name, open_up,
    others_can_run, running_as_root, workloads,
};

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
        let Some(c) = text[i..].chars().next() else {
            break;
        };
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
    /// Mounted files and volumes go under `root`. An object that does not
    /// type (a field of the wrong type, a required one missing) is an
    /// error naming it and the field.
    pub fn new(
        name: &str,
        objects: &[Value],
        image: ImageConfig,
        operator_secrets: &BTreeMap<String, BTreeMap<String, Vec<u8>>>,
        locate: Locate<'_>,
        root: &Path,
    ) -> Result<Self, String> {
        let objects = objects::parse(objects)?;
        let workloads = workloads(&objects);
        let mut data = Data::from_objects(&objects)?;
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
                        || c.command
                            .first()
                            .is_some_and(|command| locate(command, false).is_some())
                })
            })
            .map(Workload::id)
            .collect::<BTreeSet<_>>();
        let mut ports = BTreeMap::new();
        for w in workloads.iter().filter(|w| runnable.contains(&w.id())) {
            for (_, c) in containers(&w.pod) {
                for p in &c.ports {
                    ports.insert((w.id(), p.container_port), free_port());
                }
            }
        }
        let mut services = BTreeMap::new();
        for s in &objects {
            let Body::Service(spec) = &s.body else {
                continue;
            };
            let (name, namespace) = (&s.metadata.name, s.namespace());
            if spec.selector.is_empty() {
                continue;
            }
            let backends: Vec<&Workload> = workloads
                .iter()
                .filter(|w| {
                    w.namespace == namespace
                        && spec
                            .selector
                            .iter()
                            .all(|(k, v)| w.labels.get(k) == Some(v))
                })
                .collect();
            for p in &spec.ports {
                let target = p
                    .target_port
                    .clone()
                    .unwrap_or(IntOrString::Int(i64::from(p.port)));
                for w in &backends {
                    for (_, c) in containers(&w.pod) {
                        for cp in &c.ports {
                            let matches = match &target {
                                IntOrString::String(n) => cp.name.as_deref() == Some(n.as_str()),
                                IntOrString::Int(n) => i64::from(cp.container_port) == *n,
                            };
                            if matches {
                                for host in [
                                    name.to_owned(),
                                    format!("{name}.{namespace}"),
                                    format!("{name}.{namespace}.svc"),
                                    format!("{name}.{namespace}.svc.cluster.local"),
                                ] {
                                    services.insert((host, p.port), (w.id(), cp.container_port));
                                }
                            }
                        }
                    }
                }
            }
        }
        Ok(Self {
            name: name.to_owned(),
            workloads,
            data,
            image,
            runnable,
            ports,
            services,
            root: root.to_owned(),
        })
    }

    /// The local port of an in-cluster Service's `host:port`, when the
    /// workload behind it runs here.
    pub fn local_port(&self, host: &str, port: u16) -> Option<u16> {
        let (workload, container_port) = self.services.get(&(host.to_ascii_lowercase(), port))?;
        if !self.runnable.contains(workload) {
            return None;
        }
        self.ports
            .get(&(workload.clone(), *container_port))
            .copied()
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
            let (stand_scheme, stand_authority, _) =
                split_url(&url).ok_or_else(|| format!("the stand-in's {url:?} is not a URL"))?;
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
            let weft = image_name(c) == "weft";
            if init && !weft {
                continue;
            }
            let id = format!("{} {}", workload.id(), c.name);
            plans.push(
                self.plan_container(workload, c, init, weft, locate, stand_ins)
                    .map_err(|e| format!("{id}: {e}"))?,
            );
        }
        Ok(plans)
    }

    fn plan_container(
        &self,
        workload: &Workload,
        c: &Container,
        init: bool,
        weft: bool,
        locate: Locate<'_>,
        stand_ins: &mut dyn StandIns,
    ) -> Result<ContainerPlan, String> {
        let name = c.name.as_str();
        let id = format!("{} {name}", workload.id());
        // Kubernetes: command replaces the image's ENTRYPOINT, args its CMD.
        let (command, args) = (c.command.clone(), c.args.clone());
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
        for p in &c.ports {
            let local = *self
                .ports
                .get(&(workload.id(), p.container_port))
                .ok_or_else(|| format!("{} does not run here", workload.id()))?;
            ports.insert(p.container_port, local);
            if let Some(n) = &p.name {
                named.insert(n.clone(), local);
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
            let (container, pod) = (
                c.security_context.clone().unwrap_or_default(),
                workload.pod.security_context.clone().unwrap_or_default(),
            );
            let group = container.run_as_group.or(pod.run_as_group).or(pod.fs_group);
            container
                .run_as_user
                .or(pod.run_as_user)
                .map(|uid| (uid, group.unwrap_or(uid)))
        } else {
            None
        };
        let mut mounts = BTreeMap::new();
        let mut files = Vec::new();
        for m in &c.volume_mounts {
            let (volume_name, path) = (m.name.as_str(), m.mount_path.as_str());
            let volume = workload.pod.volumes.iter().find(|v| v.name == volume_name);
            let (local, written) = match volume {
                Some(v) if v.empty_dir.is_some() || v.persistent_volume_claim.is_some() => {
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
            let local = match m.sub_path.as_deref() {
                Some(sub) if !sub.is_empty() => local.join(sub),
                _ => local,
            };
            mounts.insert(path.to_owned(), local);
            files.extend(written);
        }

        // Environment: the image's, then envFrom, then env.
        let mut env: Vec<(String, String)> = if weft { self.image.env.clone() } else { vec![] };
        for from in &c.env_from {
            let (kind, reference) = match (&from.config_map_ref, &from.secret_ref) {
                (Some(r), _) => ("ConfigMap", r),
                (None, Some(r)) => ("Secret", r),
                (None, None) => return Err("envFrom: neither configMapRef nor secretRef".into()),
            };
            let source = reference.name.as_str();
            let entries = match kind {
                "ConfigMap" => self.data.config_map(source),
                _ => self.data.secret(source),
            };
            match entries {
                Some(entries) => {
                    for (k, v) in entries {
                        set_env(
                            &mut env,
                            &format!("{}{k}", from.prefix),
                            String::from_utf8_lossy(v).into_owned(),
                        );
                    }
                }
                None if reference.optional => {}
                None => return Err(format!("envFrom: {kind} {source} does not exist")),
            }
        }
        for e in &c.env {
            let key = e.name.as_str();
            let value = match &e.value_from {
                None => Some(expand(e.value.as_deref().unwrap_or_default(), &env)),
                Some(from) => {
                    if let Some((kind, r)) = from
                        .config_map_key_ref
                        .as_ref()
                        .map(|r| ("ConfigMap", r))
                        .or_else(|| from.secret_key_ref.as_ref().map(|r| ("Secret", r)))
                    {
                        let (source, k) = (r.name.as_str(), r.key.as_str());
                        let entries = match kind {
                            "ConfigMap" => self.data.config_map(source),
                            _ => self.data.secret(source),
                        };
                        match entries.and_then(|m| m.get(k)) {
                            Some(v) => Some(String::from_utf8_lossy(v).into_owned()),
                            None if r.optional => None,
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
                    } else if let Some(field) = &from.field_ref {
                        Some(match field.field_path.as_str() {
                            "metadata.namespace" => workload.namespace.clone(),
                            "metadata.name" | "spec.nodeName" => format!("{}-0", workload.name),
                            _ => "127.0.0.1".to_owned(),
                        })
                    } else {
                        return Err(format!("env {key}: this valueFrom is not resolved here"));
                    }
                }
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
        let workdir = c
            .working_dir
            .clone()
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
        let port_of = |p: &IntOrString| -> Result<u16, String> {
            match p {
                IntOrString::String(n) => named.get(n).copied().ok_or_else(|| {
                    format!("probe port {n:?} is not a named port of the container")
                }),
                IntOrString::Int(n) => u16::try_from(*n)
                    .ok()
                    .and_then(|n| ports.get(&n).copied())
                    .ok_or_else(|| format!("probe port {n} is not a declared containerPort")),
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
    fn write_volume(&self, volume: &Volume, dir: &Path) -> Result<Vec<PathBuf>, String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        open_up(dir, None);
        let sources: Vec<(Option<&KeysSource>, Option<&KeysSource>)> = match &volume.projected {
            Some(projected) => projected
                .sources
                .iter()
                .map(|s| (s.config_map.as_ref(), s.secret.as_ref()))
                .collect(),
            None => vec![(volume.config_map.as_ref(), volume.secret.as_ref())],
        };
        let mut written = Vec::new();
        for source in sources {
            let (kind, name, entries, spec) = match source {
                (Some(spec), _) => {
                    let name = spec.name.clone().unwrap_or_default();
                    let entries = self.data.config_map(&name);
                    ("ConfigMap", name, entries, spec)
                }
                (None, Some(spec)) => {
                    let name = spec
                        .secret_name
                        .clone()
                        .or_else(|| spec.name.clone())
                        .unwrap_or_default();
                    let entries = self.data.secret(&name);
                    ("Secret", name, entries, spec)
                }
                (None, None) => {
                    return Err(
                        "only configMap, secret, projected, emptyDir and claim volumes (and configMap and secret projections) are mounted here".into(),
                    );
                }
            };
            let Some(entries) = entries else {
                if spec.optional {
                    continue;
                }
                return Err(format!(
                    "{kind} {name} is neither rendered nor one deploy/README.md tells the operator to create"
                ));
            };
            let items: Vec<(String, String)> = match &spec.items {
                Some(items) => items
                    .iter()
                    .map(|i| (i.key.clone(), i.path.clone()))
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
