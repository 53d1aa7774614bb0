//! The rendered Kubernetes objects, typed: exactly the fields the emulator
//! reads, with Kubernetes' names (`camelCase`), `Option` or a default
//! where Kubernetes allows a field to be left out (or `null`), and every
//! other field ignored. A field of the wrong type, or a required one
//! missing, is an error naming the object (`Kind/name`) and the field's
//! path (`spec.template.spec.containers[0].ports[0].containerPort`).

use std::collections::BTreeMap;

use serde::de::{Deserialize, DeserializeOwned, Deserializer};
use serde_json::Value;

/// `null` read as the type's default (Kubernetes treats a `null` list or
/// map as an omitted one).
fn or_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// `value` as a `T`; an error names `id` and the path of the bad field.
fn typed<T: DeserializeOwned>(value: &Value, id: &str) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| match e.path().to_string() {
        path if path == "." => format!("{id}: {}", e.inner()),
        path => format!("{id}: {path}: {}", e.inner()),
    })
}

/// A rendered object: its header and, for the kinds the emulator reads,
/// its typed body.
#[derive(Debug, Clone)]
pub struct Object {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata`.
    pub metadata: ObjectMeta,
    /// What the emulator reads of the rest.
    pub body: Body,
}

/// The part of an object the emulator reads, by kind.
#[derive(Debug, Clone)]
pub enum Body {
    /// A Deployment, StatefulSet, DaemonSet, ReplicaSet, Job or CronJob:
    /// its pod template (a CronJob's is under `spec.jobTemplate.spec`).
    Workload(WorkloadSpec),
    /// A ConfigMap.
    ConfigMap(ConfigMap),
    /// A Secret.
    Secret(Secret),
    /// A Service's `spec`.
    Service(ServiceSpec),
    /// Any other kind: not read.
    Other,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Header {
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
}

impl Object {
    /// Types one rendered object.
    pub fn from_value(value: &Value) -> Result<Self, String> {
        // Before the header is read, the message names what it can.
        let raw = |field: &Value| field.as_str().unwrap_or("?").to_owned();
        let header: Header = typed(
            value,
            &format!(
                "{}/{}",
                raw(&value["kind"]),
                raw(&value["metadata"]["name"])
            ),
        )?;
        let id = format!("{}/{}", header.kind, header.metadata.name);
        let body = match header.kind.as_str() {
            "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => {
                Body::Workload(typed::<Spec<WorkloadSpec>>(value, &id)?.spec)
            }
            "CronJob" => Body::Workload(
                typed::<Spec<CronJobSpec>>(value, &id)?
                    .spec
                    .job_template
                    .spec,
            ),
            "ConfigMap" => Body::ConfigMap(typed(value, &id)?),
            "Secret" => Body::Secret(typed(value, &id)?),
            "Service" => Body::Service(typed::<ServiceObject>(value, &id)?.spec),
            _ => Body::Other,
        };
        Ok(Self {
            api_version: header.api_version,
            kind: header.kind,
            metadata: header.metadata,
            body,
        })
    }

    /// `Kind/name`, for messages.
    pub fn id(&self) -> String {
        format!("{}/{}", self.kind, self.metadata.name)
    }

    /// Its namespace (`default` when the render names none).
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or("default")
    }
}

/// Types every rendered object; the first error stops.
pub fn parse(values: &[Value]) -> Result<Vec<Object>, String> {
    values.iter().map(Object::from_value).collect()
}

/// An object's `metadata`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// `name` (required: kustomize renders no object without one).
    pub name: String,
    /// `namespace`.
    pub namespace: Option<String>,
    /// `labels`.
    #[serde(default, deserialize_with = "or_default")]
    pub labels: BTreeMap<String, String>,
}

#[derive(serde::Deserialize)]
struct Spec<T> {
    spec: T,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct CronJobSpec {
    job_template: Spec<WorkloadSpec>,
}

/// The `spec` of a workload: its pod template and, for a StatefulSet, its
/// volume claim templates.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpec {
    /// `template`.
    pub template: PodTemplateSpec,
    /// `volumeClaimTemplates` (a StatefulSet's).
    #[serde(default, deserialize_with = "or_default")]
    pub volume_claim_templates: Vec<ClaimTemplate>,
}

/// A StatefulSet's volume claim template: only its name is read.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct ClaimTemplate {
    /// `metadata`.
    pub metadata: ObjectMeta,
}

/// A pod template.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct PodTemplateSpec {
    /// `metadata`.
    #[serde(default, deserialize_with = "or_default")]
    pub metadata: TemplateMeta,
    /// `spec`.
    pub spec: PodSpec,
}

/// A pod template's `metadata`: its labels.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct TemplateMeta {
    /// `labels`.
    #[serde(default, deserialize_with = "or_default")]
    pub labels: BTreeMap<String, String>,
}

/// A pod's `spec`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    /// `containers` (required).
    pub containers: Vec<Container>,
    /// `initContainers`.
    #[serde(default, deserialize_with = "or_default")]
    pub init_containers: Vec<Container>,
    /// `volumes`.
    #[serde(default, deserialize_with = "or_default")]
    pub volumes: Vec<Volume>,
    /// `securityContext`.
    pub security_context: Option<PodSecurityContext>,
    /// `terminationGracePeriodSeconds`.
    pub termination_grace_period_seconds: Option<u64>,
}

/// A pod's `securityContext`: the user and groups it runs as.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSecurityContext {
    /// `runAsUser`.
    pub run_as_user: Option<u32>,
    /// `runAsGroup`.
    pub run_as_group: Option<u32>,
    /// `fsGroup`.
    pub fs_group: Option<u32>,
}

/// A container.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    /// `name` (required).
    pub name: String,
    /// `image`.
    #[serde(default, deserialize_with = "or_default")]
    pub image: String,
    /// `command`: replaces the image's ENTRYPOINT.
    #[serde(default, deserialize_with = "or_default")]
    pub command: Vec<String>,
    /// `args`: replace the image's CMD.
    #[serde(default, deserialize_with = "or_default")]
    pub args: Vec<String>,
    /// `workingDir`.
    pub working_dir: Option<String>,
    /// `env`.
    #[serde(default, deserialize_with = "or_default")]
    pub env: Vec<EnvVar>,
    /// `envFrom`.
    #[serde(default, deserialize_with = "or_default")]
    pub env_from: Vec<EnvFromSource>,
    /// `ports`.
    #[serde(default, deserialize_with = "or_default")]
    pub ports: Vec<ContainerPort>,
    /// `volumeMounts`.
    #[serde(default, deserialize_with = "or_default")]
    pub volume_mounts: Vec<VolumeMount>,
    /// `startupProbe`.
    pub startup_probe: Option<Probe>,
    /// `readinessProbe`.
    pub readiness_probe: Option<Probe>,
    /// `livenessProbe`.
    pub liveness_probe: Option<Probe>,
    /// `securityContext`.
    pub security_context: Option<SecurityContext>,
}

/// A container's `securityContext`: the user and group it runs as.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecurityContext {
    /// `runAsUser`.
    pub run_as_user: Option<u32>,
    /// `runAsGroup`.
    pub run_as_group: Option<u32>,
}

/// An `env` entry.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVar {
    /// `name` (required).
    pub name: String,
    /// `value`.
    pub value: Option<String>,
    /// `valueFrom`.
    pub value_from: Option<EnvVarSource>,
}

/// An env entry's `valueFrom`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVarSource {
    /// `configMapKeyRef`.
    pub config_map_key_ref: Option<KeySelector>,
    /// `secretKeyRef`.
    pub secret_key_ref: Option<KeySelector>,
    /// `fieldRef`.
    pub field_ref: Option<FieldSelector>,
}

/// A key of a ConfigMap or Secret.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct KeySelector {
    /// `name`.
    #[serde(default, deserialize_with = "or_default")]
    pub name: String,
    /// `key` (required).
    pub key: String,
    /// `optional`.
    #[serde(default, deserialize_with = "or_default")]
    pub optional: bool,
}

/// A `fieldRef`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldSelector {
    /// `fieldPath` (required).
    pub field_path: String,
}

/// An `envFrom` entry.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvFromSource {
    /// `prefix`.
    #[serde(default, deserialize_with = "or_default")]
    pub prefix: String,
    /// `configMapRef`.
    pub config_map_ref: Option<Reference>,
    /// `secretRef`.
    pub secret_ref: Option<Reference>,
}

/// A whole ConfigMap or Secret, by name.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Reference {
    /// `name`.
    #[serde(default, deserialize_with = "or_default")]
    pub name: String,
    /// `optional`.
    #[serde(default, deserialize_with = "or_default")]
    pub optional: bool,
}

/// A `ports` entry of a container.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPort {
    /// `containerPort` (required).
    pub container_port: u16,
    /// `name`.
    pub name: Option<String>,
}

/// A `volumeMounts` entry.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMount {
    /// `name` (required).
    pub name: String,
    /// `mountPath` (required).
    pub mount_path: String,
    /// `subPath`.
    pub sub_path: Option<String>,
}

/// A probe.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    /// `httpGet`.
    pub http_get: Option<HttpGetAction>,
    /// `grpc`.
    pub grpc: Option<GrpcAction>,
    /// `tcpSocket`.
    pub tcp_socket: Option<TcpSocketAction>,
    /// `periodSeconds` (10 by default).
    pub period_seconds: Option<u64>,
    /// `failureThreshold` (3 by default).
    pub failure_threshold: Option<u64>,
    /// `initialDelaySeconds` (0 by default).
    pub initial_delay_seconds: Option<u64>,
}

/// A probe's `httpGet`.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct HttpGetAction {
    /// `path` (`/` by default).
    pub path: Option<String>,
    /// `port` (required): a number or a container port's name.
    pub port: IntOrString,
}

/// A probe's `grpc`.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct GrpcAction {
    /// `port` (required; Kubernetes takes a number only).
    pub port: i64,
    /// `service` (the server as a whole by default).
    #[serde(default, deserialize_with = "or_default")]
    pub service: String,
}

/// A probe's `tcpSocket`.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct TcpSocketAction {
    /// `port` (required): a number or a container port's name.
    pub port: IntOrString,
}

/// A number or a name (Kubernetes' IntOrString).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(untagged)]
pub enum IntOrString {
    /// A number.
    Int(i64),
    /// A name.
    String(String),
}

impl std::fmt::Display for IntOrString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Int(n) => write!(f, "{n}"),
            Self::String(s) => write!(f, "{s:?}"),
        }
    }
}

/// A pod's volume: only the sources the emulator mounts are typed
/// (another source leaves them all `None`).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    /// `name` (required).
    pub name: String,
    /// `configMap`.
    pub config_map: Option<KeysSource>,
    /// `secret`.
    pub secret: Option<KeysSource>,
    /// `projected`.
    pub projected: Option<ProjectedVolume>,
    /// `emptyDir`.
    pub empty_dir: Option<Ignored>,
    /// `persistentVolumeClaim`.
    pub persistent_volume_claim: Option<Ignored>,
}

/// A volume source whose settings are not read (only its presence).
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct Ignored {}

/// A `projected` volume.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct ProjectedVolume {
    /// `sources`.
    #[serde(default, deserialize_with = "or_default")]
    pub sources: Vec<VolumeProjection>,
}

/// A source of a projected volume.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeProjection {
    /// `configMap`.
    pub config_map: Option<KeysSource>,
    /// `secret`.
    pub secret: Option<KeysSource>,
}

/// The files of a ConfigMap or Secret: a `configMap` or `secret` volume,
/// or such a source of a projected volume.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeysSource {
    /// `name` (a ConfigMap's, or a Secret's in a projected volume).
    pub name: Option<String>,
    /// `secretName` (a `secret` volume's).
    pub secret_name: Option<String>,
    /// `items`: which keys, at which paths (every key at its own name by
    /// default).
    pub items: Option<Vec<KeyToPath>>,
    /// `optional`.
    #[serde(default, deserialize_with = "or_default")]
    pub optional: bool,
}

/// An `items` entry.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct KeyToPath {
    /// `key` (required).
    pub key: String,
    /// `path` (required).
    pub path: String,
}

/// A ConfigMap's data.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMap {
    /// `data`.
    #[serde(default, deserialize_with = "or_default")]
    pub data: BTreeMap<String, String>,
    /// `binaryData` (base64).
    #[serde(default, deserialize_with = "or_default")]
    pub binary_data: BTreeMap<String, String>,
}

/// A Secret's data.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Secret {
    /// `data` (base64).
    #[serde(default, deserialize_with = "or_default")]
    pub data: BTreeMap<String, String>,
    /// `stringData`.
    #[serde(default, deserialize_with = "or_default")]
    pub string_data: BTreeMap<String, String>,
}

#[derive(serde::Deserialize)]
struct ServiceObject {
    #[serde(default, deserialize_with = "or_default")]
    spec: ServiceSpec,
}

/// A Service's `spec`.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct ServiceSpec {
    /// `selector`.
    #[serde(default, deserialize_with = "or_default")]
    pub selector: BTreeMap<String, String>,
    /// `ports`.
    #[serde(default, deserialize_with = "or_default")]
    pub ports: Vec<ServicePort>,
}

/// A Service's port.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    /// `port` (required).
    pub port: u16,
    /// `targetPort` (`port` by default).
    pub target_port: Option<IntOrString>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> Value {
        serde_norway::from_str(text).expect("test YAML")
    }

    #[test]
    fn a_deployment_is_typed() {
        let o = Object::from_value(&yaml(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w, namespace: n}\nspec:\n  template:\n    metadata: {labels: {app: w}}\n    spec:\n      containers:\n      - name: c\n        image: ghcr.io/x/weft:1\n        env: [{name: A, value: b}, {name: B, valueFrom: {secretKeyRef: {name: s, key: k}}}]\n        ports: [{containerPort: 9090, name: metrics}]\n        readinessProbe: {httpGet: {path: /metrics, port: metrics}}\n        livenessProbe: {tcpSocket: {port: 9090}}\n      volumes: [{name: v, emptyDir: {}}, {name: p, projected: {sources: [{secret: {name: s}}]}}]\n",
        ))
        .expect("typed");
        assert_eq!(o.id(), "Deployment/w");
        assert_eq!(o.namespace(), "n");
        let Body::Workload(w) = o.body else {
            panic!("not a workload: {o:?}")
        };
        assert_eq!(w.template.metadata.labels["app"], "w");
        let c = &w.template.spec.containers[0];
        assert_eq!(c.ports[0].container_port, 9090);
        assert_eq!(
            c.readiness_probe
                .as_ref()
                .and_then(|p| p.http_get.as_ref())
                .map(|h| &h.port),
            Some(&IntOrString::String("metrics".into()))
        );
        assert_eq!(
            c.liveness_probe
                .as_ref()
                .and_then(|p| p.tcp_socket.as_ref())
                .map(|t| &t.port),
            Some(&IntOrString::Int(9090))
        );
        assert_eq!(
            c.env[1]
                .value_from
                .as_ref()
                .and_then(|f| f.secret_key_ref.as_ref())
                .map(|r| r.key.as_str()),
            Some("k")
        );
        assert!(w.template.spec.volumes[0].empty_dir.is_some());
        assert!(w.template.spec.volumes[1].projected.is_some());
    }

    #[test]
    fn a_wrong_typed_field_is_an_error_naming_the_object_and_field() {
        let e = Object::from_value(&yaml(
            "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: nats}\nspec:\n  template:\n    spec:\n      containers:\n      - name: nats\n        ports: [{containerPort: client}]\n",
        ))
        .expect_err("a port that is not a number");
        assert!(e.starts_with("StatefulSet/nats: "), "{e}");
        assert!(
            e.contains("spec.template.spec.containers[0].ports[0].containerPort"),
            "{e}"
        );
        assert!(e.contains("invalid type: string \"client\""), "{e}");
    }

    #[test]
    fn a_missing_required_field_is_an_error_naming_the_object_and_field() {
        let e = Object::from_value(&yaml(
            "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly}\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers:\n          - name: c\n            volumeMounts: [{name: v}]\n",
        ))
        .expect_err("a volumeMount without mountPath");
        assert!(e.starts_with("CronJob/nightly: "), "{e}");
        assert!(
            e.contains("spec.jobTemplate.spec.template.spec.containers[0].volumeMounts[0]"),
            "{e}"
        );
        assert!(e.contains("missing field `mountPath`"), "{e}");
        let e = Object::from_value(&yaml("apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n"))
            .expect_err("no name");
        assert!(e.starts_with("ConfigMap/?: metadata"), "{e}");
        assert!(e.contains("missing field `name`"), "{e}");
    }

    #[test]
    fn nulls_are_omitted_fields_and_other_kinds_are_not_read() {
        let o = Object::from_value(&yaml(
            "apiVersion: v1\nkind: Secret\nmetadata: {name: s, labels: null}\ndata: null\nstringData: {a: b}\n",
        ))
        .expect("typed");
        let Body::Secret(s) = o.body else {
            panic!("not a Secret")
        };
        assert!(s.data.is_empty());
        assert_eq!(s.string_data["a"], "b");
        let o = Object::from_value(&yaml(
            "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: x}\nspec: {triggers: 3}\n",
        ))
        .expect("not read");
        assert!(matches!(o.body, Body::Other));
    }
}
