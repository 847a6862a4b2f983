#!/bin/sh
# The host settings a kind cluster with the ITBench stack needs; kind's nodes are containers on
# the host's kernel, so these are the host's own.
#
#   deploy/kind/host.sh check   report what is missing (exit 1 when something is)
#   deploy/kind/host.sh apply   set the limits and load the modules (needs root: sudo)
#
# inotify: every node's kubelet, containerd and the stack's log shipper watch files; with the
# usual defaults (8192 watches, 128 instances per user) pods fail with "too many open files",
# the limit kind's known-issues page describes. Modules: Chaos Mesh's NetworkChaos shapes traffic
# with tc netem (sch_netem) and partitions it with ipset and iptables (ip_set, xt_set).
set -eu

WATCHES=524288
INSTANCES=512
MODULES="sch_netem ip_set xt_set"
PROC_SYS=${PROC_SYS:-/proc/sys}      # overridable to check a copy of them
SYS_MODULE=${SYS_MODULE:-/sys/module}

have_module() {
    # Loaded or built into the kernel: both show under /sys/module.
    [ -d "$SYS_MODULE/$1" ]
}

check() {
    missing=0
    watches=$(cat "$PROC_SYS/fs/inotify/max_user_watches")
    instances=$(cat "$PROC_SYS/fs/inotify/max_user_instances")
    if [ "$watches" -lt "$WATCHES" ]; then
        echo "fs.inotify.max_user_watches is $watches, kind needs $WATCHES" >&2
        missing=1
    fi
    if [ "$instances" -lt "$INSTANCES" ]; then
        echo "fs.inotify.max_user_instances is $instances, kind needs $INSTANCES" >&2
        missing=1
    fi
    for module in $MODULES; do
        if ! have_module "$module"; then
            echo "kernel module $module is not loaded (Chaos Mesh's NetworkChaos needs it)" >&2
            missing=1
        fi
    done
    if [ "$missing" -ne 0 ]; then
        echo "fix: sudo deploy/kind/host.sh apply (or make kind-host); to persist, put the two" \
            "sysctls in /etc/sysctl.d/ and the modules in /etc/modules-load.d/" >&2
        return 1
    fi
    echo "host ready for kind: inotify $watches watches, $instances instances; modules $MODULES"
}

apply() {
    # Raise, never lower, a limit the host already has above ours.
    [ "$(cat "$PROC_SYS/fs/inotify/max_user_watches")" -ge "$WATCHES" ] \
        || sysctl -w fs.inotify.max_user_watches="$WATCHES"
    [ "$(cat "$PROC_SYS/fs/inotify/max_user_instances")" -ge "$INSTANCES" ] \
        || sysctl -w fs.inotify.max_user_instances="$INSTANCES"
    for module in $MODULES; do
        have_module "$module" || modprobe "$module"
    done
    check
}

case "${1:-}" in
    check) check ;;
    apply) apply ;;
    *) echo "usage: $0 check|apply" >&2; exit 2 ;;
esac
