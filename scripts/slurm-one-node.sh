#!/usr/bin/env bash
# A real one-node Slurm cluster on this machine, for tests/deploy.rs's sbatch test: Debian's
# slurm-wlm and munge, slurmctld and slurmd as root, this host as the only node, one partition.
# Each CPU takes up to 4 tasks (the node is declared with 4 CPUs a core, which slurmd accepts
# with config_overrides), so a load of several tasks fits on a small machine, as load generators
# that mostly wait on the network do. Installs the packages when missing; starts the daemons
# unless they answer.
#
#   sudo scripts/slurm-one-node.sh        # then: sinfo; INFERTOP_SLURM=1 cargo test --test deploy
set -euo pipefail
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >/dev/null
fi
if sinfo -h >/dev/null 2>&1; then
  exit 0
fi
host=$(hostname -s)
cpus=$(( $(nproc) * 4 ))
mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
cat > /etc/slurm/slurm.conf <<EOF
ClusterName=infertop
SlurmctldHost=$host
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SlurmUser=root
SlurmdUser=root
SlurmdParameters=config_overrides
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
# munge: a key, then the daemon (it refuses a key or folders others can read).
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
fi
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
chmod 0700 /etc/munge
chmod 0400 /etc/munge/munge.key
pgrep -x munged >/dev/null || su -s /bin/sh munge -c /usr/sbin/munged
pgrep -x slurmctld >/dev/null || slurmctld
pgrep -x slurmd >/dev/null || slurmd
for _ in $(seq 1 30); do
  if sinfo -h -o '%T' 2>/dev/null | grep -qE 'idle|mix|alloc'; then
    sinfo
    exit 0
  fi
  sleep 1
done
echo "slurm did not come up; see /var/log/slurm/" >&2
exit 1
