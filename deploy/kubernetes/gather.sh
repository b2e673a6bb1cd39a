#!/bin/sh
# The records of an Indexed Job's pods, from their logs, and their report as one run.
#
#   deploy/kubernetes/gather.sh [JOB] [DIR]      (default: infertop-load, records-JOB)
#
# Each pod's stdout is its record (--jsonl); its log also has infertop's own lines (stderr,
# "infertop: ..."), which are left out here: every record line is a JSON object.
set -eu
job=${1:-infertop-load}
out=${2:-records-$job}
kubectl wait --for=condition=complete --timeout=24h "job/$job"
n=$(kubectl get job "$job" -o jsonpath='{.spec.completions}')
mkdir -p "$out"
i=0
while [ "$i" -lt "$n" ]; do
  pod=$(kubectl get pods -l "job-name=$job,batch.kubernetes.io/job-completion-index=$i" \
    -o jsonpath='{.items[0].metadata.name}')
  kubectl logs "$pod" | grep '^{' > "$out/shard-$i.jsonl"
  i=$((i + 1))
done
infertop report "$out"/shard-*.jsonl
