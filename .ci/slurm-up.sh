#!/usr/bin/env bash
# Bring up a single-node SLURM "cluster" on loopback for CI and tests/test_slurm.py.
#
#   sudo bash .ci/slurm-up.sh        # idempotent: a second call returns at once
#
# Installs Debian's slurm-wlm (22.05) + munge if they are missing, writes
# /etc/slurm/{slurm,gres,cgroup}.conf for one node called `localhost` (partition
# `local`, fake GPUs so that `gpu=1` / `gres=gpu:1` jobs schedule), starts
# munged, slurmctld and slurmd, and waits until `sinfo` shows the node idle.
# No accounting daemon: `sacct` cannot answer here, so the snakemake SLURM
# plugin must poll with `--slurm-status-command squeue` (MinJobAge is set high
# enough for that; tests/test_slurm.py passes it in an overlay profile).
#
# Exits non-zero with a message on stderr when SLURM cannot be brought up
# (not root, no apt, packages not installable, daemons not starting).
#
# Environment knobs:
#   SLURM_UP_TIMEOUT   seconds to wait for the node to become idle (default 60)
#   SLURM_UP_GPUS      number of fake GPUs on the node (default 2)
#   SLURM_UP_FORCE=1   skip the "already idle" shortcut: rewrite the config if it
#                      differs (restarting slurmctld/slurmd then) and start what is down
set -euo pipefail

NODE=localhost
PARTITION=local
CONF_DIR=/etc/slurm
STATE_DIR=/var/lib/slurm
LOG_DIR=/var/log/slurm
TIMEOUT=${SLURM_UP_TIMEOUT:-60}
# Fake GPUs on the node: 2 lets two 1-GPU cells run side by side on the 2 cores.
GPUS=${SLURM_UP_GPUS:-2}

log() { echo "[slurm-up] $*" >&2; }
die() {
    echo "[slurm-up] ERROR: $*" >&2
    for f in "$LOG_DIR/slurmctld.log" "$LOG_DIR/slurmd.log" /var/log/munge/munged.log; do
        if [ -s "$f" ]; then
            echo "[slurm-up] --- last lines of $f ---" >&2
            tail -n 15 "$f" >&2 || true
        fi
    done
    exit 1
}

running() { pgrep -x "$1" >/dev/null 2>&1; }  # pgrep -x: names of at most 15 chars
node_state() { timeout 15 sinfo -h -N -n "$NODE" -o '%T' 2>/dev/null | head -n1 || true; }

# ---------------------------------------------------------------- fast path
# (sinfo against a controller that is not running blocks ~10 s, hence the pgrep)
if [ "${SLURM_UP_FORCE:-0}" != 1 ] && command -v sinfo >/dev/null 2>&1 \
    && running slurmctld && running slurmd; then
    case "$(node_state)" in
        idle*|mixed*|allocated*|completing*)
            log "SLURM already up: $(sinfo -h -o '%P %a %D %T %G' | head -n1)"
            exit 0 ;;
    esac
fi

[ "$(id -u)" = 0 ] || die "must run as root (apt-get install, daemons, /etc/slurm); current uid $(id -u)"

# ---------------------------------------------------------------- install
need_install=0
for b in slurmctld slurmd sbatch squeue sinfo scontrol munged munge; do
    command -v "$b" >/dev/null 2>&1 || need_install=1
done
if [ "$need_install" = 1 ]; then
    command -v apt-get >/dev/null 2>&1 || die "slurm/munge not installed and apt-get not available"
    log "installing slurm-wlm + munge with apt-get (no recommends)"
    export DEBIAN_FRONTEND=noninteractive
    # Keep the packages' init scripts from starting daemons during install;
    # this script starts them itself with its own config.
    created_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        created_policy=1
    fi
    pkgs=(slurm-wlm munge)
    apt=(apt-get -y -q -o DPkg::Lock::Timeout=180)  # wait for another apt/dpkg instead of failing
    if ! "${apt[@]}" install --no-install-recommends "${pkgs[@]}" >/tmp/slurm-up-apt.log 2>&1; then
        log "apt-get install failed; running apt-get update and retrying"
        "${apt[@]}" update >>/tmp/slurm-up-apt.log 2>&1 || true
        if ! "${apt[@]}" install --no-install-recommends "${pkgs[@]}" >>/tmp/slurm-up-apt.log 2>&1; then
            [ "$created_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
            tail -n 20 /tmp/slurm-up-apt.log >&2 || true
            die "apt-get install ${pkgs[*]} failed (full log: /tmp/slurm-up-apt.log)"
        fi
    fi
    [ "$created_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
    for b in slurmctld slurmd sbatch squeue sinfo munged; do
        command -v "$b" >/dev/null 2>&1 || die "$b still missing after apt-get install"
    done
fi

# ---------------------------------------------------------------- munge
mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
if [ ! -s /etc/munge/munge.key ]; then
    log "creating munge key"
    if command -v mungekey >/dev/null 2>&1; then
        mungekey --create --keyfile=/etc/munge/munge.key --force
    else
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    fi
fi
chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
chmod 0700 /etc/munge /var/lib/munge /var/log/munge
chmod 0755 /run/munge
chmod 0400 /etc/munge/munge.key

munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
if ! munge_ok && running munged; then
    # a munged that is still starting up or shutting down
    for _ in $(seq 1 20); do munge_ok && break; running munged || break; sleep 0.5; done
    munge_ok || ! running munged || die "munged is running but 'munge -n | unmunge' fails"
fi
if ! munge_ok; then
    log "starting munged"
    rm -f /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock /run/munge/munged.pid
    runuser -u munge -- /usr/sbin/munged --force || die "munged failed to start"
    for _ in $(seq 1 50); do
        munge_ok && break
        sleep 0.2
    done
    munge_ok || die "munge credential round-trip fails after starting munged"
fi

# ---------------------------------------------------------------- config
cpus=$(nproc)
mem_total_mb=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 ))
# Leave headroom for the OS and the controller; a node configured with more
# memory than it reports is drained as "Low RealMemory".
real_mem=$(( mem_total_mb * 9 / 10 ))
[ "$real_mem" -ge 1024 ] || real_mem=1024
def_mem=$(( real_mem / cpus ))
[ "$def_mem" -le 2048 ] || def_mem=2048
# Take the socket/core layout from slurmd -C when it agrees with nproc, so
# slurmd does not log "Node configuration differs from hardware".
topology="CPUs=$cpus"
hw=$(slurmd -C 2>/dev/null | head -n1 || true)
if [ -n "$hw" ] && [ "$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$hw")" = "$cpus" ]; then
    topology=$(grep -o -E '(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=[0-9]+' <<<"$hw" | tr '\n' ' ' | sed 's/ $//')
fi

MARKER="# Written by .ci/slurm-up.sh"
if [ -s "$CONF_DIR/slurm.conf" ] && ! grep -qF "$MARKER" "$CONF_DIR/slurm.conf"; then
    die "$CONF_DIR/slurm.conf exists and was not written by this script; refusing to overwrite a real cluster's config"
fi
mkdir -p "$CONF_DIR" "$STATE_DIR/slurmctld" "$STATE_DIR/slurmd" "$LOG_DIR"

new_conf=$(cat <<EOF
# Written by .ci/slurm-up.sh: single-node SLURM on loopback for CI/tests only.
ClusterName=reprokit
SlurmctldHost=$NODE
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
# The snakemake plugin polls with squeue: finished jobs must stay visible to it
# for at least 3x slurm-init-seconds-before-status-checks, otherwise it falls
# back to sacct (which has no accounting storage here).
MinJobAge=600
DefMemPerCPU=$def_mem
KillWait=5
InactiveLimit=0
Waittime=0
SlurmctldTimeout=30
SlurmdTimeout=60
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$STATE_DIR/slurmctld
SlurmdSpoolDir=$STATE_DIR/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
NodeName=$NODE NodeAddr=127.0.0.1 $topology RealMemory=$real_mem Gres=gpu:$GPUS State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
)
# Fake GPUs: slurmd only counts a gpu gres that has a device file, one per GPU;
# any distinct character devices do (nothing is bound to them: task/none).
fake_devs=(/dev/null /dev/zero /dev/full /dev/urandom)
[ "$GPUS" -ge 1 ] && [ "$GPUS" -le "${#fake_devs[@]}" ] || die "SLURM_UP_GPUS must be 1..${#fake_devs[@]}"
new_gres="# Written by .ci/slurm-up.sh: fake GPUs so GPU-requesting jobs can be scheduled."
for i in $(seq 0 $((GPUS - 1))); do
    new_gres+=$'\n'"NodeName=$NODE Name=gpu File=${fake_devs[$i]}"
done
# slurmd 22.05 always loads a cgroup plugin (CgroupPlugin=disabled only exists
# from 23.x on); autodetect picks v1/v2. Nothing uses it for jobs, since
# proctrack/linuxproc and task/none are configured.
new_cgroup="# Written by .ci/slurm-up.sh: cgroups are not used by the job plugins here.
CgroupPlugin=autodetect
IgnoreSystemd=yes"

changed=0
write_if_changed() {  # path content
    if [ ! -f "$1" ] || [ "$(cat "$1")" != "$2" ]; then
        printf '%s\n' "$2" > "$1"
        changed=1
    fi
}
write_if_changed "$CONF_DIR/slurm.conf" "$new_conf"
write_if_changed "$CONF_DIR/gres.conf" "$new_gres"
write_if_changed "$CONF_DIR/cgroup.conf" "$new_cgroup"

# ---------------------------------------------------------------- daemons
if [ "$changed" = 1 ] && { running slurmctld || running slurmd; }; then
    # slurmd does not re-read gres.conf/node layout on reconfigure: restart both.
    log "config changed while SLURM was running; stopping slurmctld/slurmd to restart them"
    if running slurmctld; then
        timeout 15 scontrol shutdown >/dev/null 2>&1 || true
        for _ in $(seq 1 15); do { running slurmctld || running slurmd; } || break; sleep 1; done
    fi
    for d in slurmctld slurmd; do  # what is left (e.g. slurmd without a controller): by pid file
        if running "$d" && [ -s "/run/$d.pid" ]; then kill "$(cat "/run/$d.pid")" 2>/dev/null || true; fi
    done
    for _ in $(seq 1 10); do { running slurmctld || running slurmd; } || break; sleep 1; done
    { running slurmctld || running slurmd; } && die "could not stop the running slurmctld/slurmd"
fi
if ! running slurmctld; then
    log "starting slurmctld"
    slurmctld || die "slurmctld failed to start"
fi
for _ in $(seq 1 "$TIMEOUT"); do
    scontrol ping 2>/dev/null | grep -q 'is UP' && break
    sleep 1
done
scontrol ping 2>/dev/null | grep -q 'is UP' || die "slurmctld does not answer 'scontrol ping'"

if ! running slurmd; then
    log "starting slurmd -N $NODE"
    slurmd -N "$NODE" || die "slurmd failed to start"
fi

# ---------------------------------------------------------------- wait for idle
resumed=0
state=""
for _ in $(seq 1 "$TIMEOUT"); do
    state=$(node_state)
    case "$state" in
        idle*|mixed*|allocated*|completing*) break ;;
        drain*|down*|fail*)
            if [ "$resumed" = 0 ]; then
                log "node is $state; resuming it"
                scontrol update NodeName="$NODE" State=RESUME 2>/dev/null || true
                resumed=1
            fi ;;
    esac
    sleep 1
done
case "$state" in
    idle*|mixed*|allocated*|completing*) ;;
    *) die "node $NODE did not become idle within ${TIMEOUT}s (state: '${state:-unknown}'; $(scontrol show node "$NODE" 2>/dev/null | grep -o 'Reason=.*' || true))" ;;
esac
log "SLURM up: $(sinfo -h -o '%P %a %D %T cpus=%c mem=%m gres=%G' | head -n1)"
