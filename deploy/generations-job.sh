#!/usr/bin/env bash
# One index-generations command as a Kubernetes Job: the admin Job template
# is the CronJob weft-generations-gc (its image, configuration, store keys,
# volumes and security context), with the command's arguments and no retry.
# It needs no running weft pod (the workers may be scaled to zero), and the
# Job's log is the command's output.
#
#   deploy/generations-job.sh list            every generation, its state and counts
#   deploy/generations-job.sh switch N        make generation N the live one
#   deploy/generations-job.sh abort N         stop building generation N and drop it
#   deploy/generations-job.sh gc              remove aborted and retired generations
#
# Add --json for a JSON record. NAMESPACE (default weft) and KUBECTL
# (default kubectl) are read from the environment. It prints the Job's name
# and the command that follows its log.
set -euo pipefail

usage() {
  echo "usage: $0 list | switch N | abort N | gc   [--json]" >&2
  exit 2
}

json=()
words=()
for a in "$@"; do
  if [ "$a" = --json ]; then json=(--json); else words+=("$a"); fi
done
case "${words[0]:-}" in
  list | gc) [ "${#words[@]}" -eq 1 ] || usage ;;
  switch | abort)
    [ "${#words[@]}" -eq 2 ] || usage
    [[ ${words[1]} =~ ^[0-9]+$ ]] || { echo "$0: ${words[1]}: a generation is a number (see: $0 list)" >&2; exit 2; }
    ;;
  *) usage ;;
esac

ns=${NAMESPACE:-weft}
kubectl=${KUBECTL:-kubectl}
name="weft-generations-${words[0]}-$(date +%s)"
args=$(printf '"%s",' generations "${words[@]}" "${json[@]}")
patch="[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/args\",\"value\":[${args%,}]},{\"op\":\"replace\",\"path\":\"/spec/backoffLimit\",\"value\":0}]"

"$kubectl" -n "$ns" create job "$name" --from=cronjob/weft-generations-gc --dry-run=client -o json |
  "$kubectl" patch --local -f - --type=json -o json -p "$patch" |
  "$kubectl" -n "$ns" create -f -
echo "follow it: $kubectl -n $ns logs -f job/$name"
