#!/usr/bin/env bash
# A one-node Slurm cluster on localhost, for the `slurm` tests and CI: start | stop | status.
#
#   bash scripts/slurm_local.sh start    # installs slurm-wlm + munge if missing (needs root), starts
#                                        # munged, slurmctld, slurmd; waits until the node is idle
#   bash scripts/slurm_local.sh stop     # stops the daemons this script started
#   bash scripts/slurm_local.sh status   # sinfo, or "not running"
#
# Idempotent: `start` on a running cluster only checks it. Job end states: there is no slurmdbd, so
# sacct has nothing to read; regressbisect reads a finished job's state and reason from
# `scontrol show job`, which the controller keeps for MinJobAge seconds after the end (600 here),
# and the completion log (JobCompType=jobcomp/filetxt) keeps every end state for a person to read.
set -euo pipefail

STATE_DIR=${SLURM_LOCAL_DIR:-/var/tmp/regressbisect-slurm}
CONF_DIR=/etc/slurm
HOST=$(hostname -s)
CPUS=$(nproc)

log() { echo "slurm_local: $*" >&2; }

install_if_missing() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
    return
  fi
  if [ "$(id -u)" != 0 ]; then
    log "slurm-wlm and munge are not installed and this is not root: apt-get install slurm-wlm munge"
    exit 1
  fi
  log "installing slurm-wlm and munge (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
}

write_config() {
  mkdir -p "$CONF_DIR" "$STATE_DIR"/{ctld,d,log} /etc/munge /var/log/munge /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
  fi
  chown -R munge:munge /etc/munge /var/log/munge /run/munge 2>/dev/null || true
  chmod 0400 /etc/munge/munge.key
  cat > "$CONF_DIR/slurm.conf" <<EOF
# Written by regressbisect's scripts/slurm_local.sh: one node, localhost, for tests.
ClusterName=regressbisect-local
SlurmctldHost=$HOST
SlurmUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
StateSaveLocation=$STATE_DIR/ctld
SlurmdSpoolDir=$STATE_DIR/d
SlurmctldPidFile=$STATE_DIR/slurmctld.pid
SlurmdPidFile=$STATE_DIR/slurmd.pid
SlurmctldLogFile=$STATE_DIR/log/slurmctld.log
SlurmdLogFile=$STATE_DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE_DIR/log/jobcomp.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# schedule a batch job at submit (default: up to 3 s later) and again as soon as a job ends:
# probes are seconds long, and the default delays doubled the time of a hunt
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
MpiDefault=none
ReturnToService=2
MinJobAge=600
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$HOST CPUs=$CPUS State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
  : > "$CONF_DIR/cgroup.conf"
}

running() { pgrep -x slurmctld >/dev/null && pgrep -x slurmd >/dev/null; }

node_idle() { timeout 10 sinfo -h -n "$HOST" -o '%t' 2>/dev/null | grep -Eq '^(idle|mix|alloc)'; }

start() {
  install_if_missing
  if running && node_idle; then
    log "already running"; sinfo; return
  fi
  write_config
  if [ ! -S /run/munge/munge.socket.2 ] || ! pgrep -x munged >/dev/null; then
    # munged refuses to start beside a live one; a stale socket from a killed one is removed.
    runuser -u munge -- munged --force 2>/dev/null || munged --force
    for _ in $(seq 1 20); do [ -S /run/munge/munge.socket.2 ] && break; sleep 0.25; done
    [ -S /run/munge/munge.socket.2 ] || { log "munged did not start (no /run/munge/munge.socket.2)"; exit 1; }
  fi
  pgrep -x slurmctld >/dev/null || slurmctld
  pgrep -x slurmd >/dev/null || slurmd
  for _ in $(seq 1 60); do
    if node_idle; then log "node $HOST idle ($CPUS CPUs)"; sinfo; return; fi
    # A node that came back after a stop is DOWN until told otherwise.
    timeout 10 scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true
    sleep 1
  done
  log "the node did not become idle within 60 s; logs in $STATE_DIR/log"
  tail -n 5 "$STATE_DIR"/log/slurmctld.log "$STATE_DIR"/log/slurmd.log >&2 || true
  exit 1
}

stop_daemon() {
  local name=$1 pidfile=$2 pid
  pid=$(cat "$pidfile" 2>/dev/null || pgrep -x "$name" || true)
  [ -n "$pid" ] || return 0
  kill $pid 2>/dev/null || true
  for _ in $(seq 1 20); do kill -0 $pid 2>/dev/null || return 0; sleep 0.25; done
  kill -9 $pid 2>/dev/null || true
}

stop() {
  if running; then timeout 20 scancel --full --user=root >/dev/null 2>&1 || true; fi
  stop_daemon slurmd "$STATE_DIR/slurmd.pid"
  stop_daemon slurmctld "$STATE_DIR/slurmctld.pid"
  stop_daemon munged /run/munge/munged.pid
  log "stopped"
}

status() {
  if running; then sinfo; else echo "slurm_local: not running"; exit 3; fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
