# Helpers the scenarios share. The default truth of a process scenario,
# measured without kdiag: the CPU of each thread and its run-queue wait
# (pidstat -t, 5 s). Not py-spy dump: it stops the target with ptrace,
# waking every waiting thread in the window kdiag watches.
default_truth() {
    pidstat -t -p "$PID" 5 1 | awk '$1 != "Average:" && $NF ~ /^\|__/ {n++; s += $(NF-2); w += $(NF-3)} END {printf "pidstat: %d threads, %.0f%% CPU, %.0f%% waiting for one\n", n, s, w}'
}

# The innermost Python function of each thread of CPython process $1, counted,
# by py-spy dump --nonblocking (reads its memory, never stops it):
# "spin (<string>:4) x4, join (threading.py:1112) x1".
py_spy_innermost() {
    py-spy dump --nonblocking --pid "$1" 2> /dev/null | awk '/^Thread/ {getline; sub(/^ +/, ""); print}' | sort | uniq -c | sort -rn |
        awk '{n = $1; $1 = ""; printf "%s%s x%d", (NR > 1 ? ", " : ""), substr($0, 2), n}'
}

# The state letters of a process's threads (/proc/PID/task/*/stat),
# counted: "S 3, R 1".
thread_states() {
    cat /proc/"$1"/task/*/stat 2> /dev/null | sed 's/.*) \(.\).*/\1/' | sort | uniq -c | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $1}'
}

# A new v1 cgroup of controller $1, in CG; cg_cleanup removes it.
cg_new() {
    CG=/sys/fs/cgroup/$1/kdiag-scenario-$name-$$
    mkdir -p "$CG"
}

# Runs the shell command $1 in cgroup CG, in the background; PID is its pid.
cg_spawn() {
    sh -c "echo \$\$ > $CG/cgroup.procs; exec $1" &
    PID=$!
}

# Kills what is left in CG and removes it.
cg_cleanup() {
    local p
    for p in $(cat "$CG/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
    sleep 0.2
    rmdir "$CG"
}

# The major:minor of the disk holding $1 (its whole disk, not a partition).
disk_of() {
    local dev
    dev=$(findmnt -n -o SOURCE -T "$1")
    dev=$(lsblk -n -o PKNAME "$dev" 2>/dev/null | head -1)
    [ -z "$dev" ] && dev=$(basename "$(findmnt -n -o SOURCE -T "$1")")
    cat "/sys/class/block/$dev/dev"
}

# A file of $2 MiB on the root disk (not tmpfs), written once, at $1.
disk_file() {
    [ "$(stat -c %s "$1" 2>/dev/null)" = "$(($2 << 20))" ] ||
        dd if=/dev/urandom of="$1" bs=1M count="$2" conv=fsync status=none
}

# A C program of tests/programs built into the run's directory.
c_program() {
    [ -x "$work/$1" ] || cc -O1 -pthread -o "$work/$1" "$root/tests/programs/$1.c"
    echo "$work/$1"
}

# The root disk's reads and writes per second over 5 s and their mean
# latency (/proc/diskstats).
diskstats_truth() {
    local dev a b
    dev=$(basename "$(findmnt -n -o SOURCE -T /var/tmp)")
    a=$(awk -v d="$dev" '$3 == d {print $4, $7, $8, $11}' /proc/diskstats); sleep 5
    b=$(awk -v d="$dev" '$3 == d {print $4, $7, $8, $11}' /proc/diskstats)
    set -- $a $b
    echo "diskstats $dev: $((($5 - $1) / 5)) reads/s ($((($6 - $2) / (($5 - $1) > 0 ? ($5 - $1) : 1))) ms), $((($7 - $3) / 5)) writes/s ($((($8 - $4) / (($7 - $3) > 0 ? ($7 - $3) : 1))) ms)"
}

# A Python program from stdin, started in the background (PID), and its
# first output line once printed (LINE).
python_bg() {
    local fifo=$work/$name.out
    rm -f "$fifo"; mkfifo "$fifo"
    python3 -c "$1" > "$fifo" & PID=$!
    exec 9< "$fifo"; read -r LINE <&9
}

# A PostgreSQL cluster of Debian's newest server, as user postgres, in
# $work/pg, reached by its unix socket only; in cgroup CG when $1 is
# given. PGHOST is set for psql and pgbench; pg_stop stops it.
pg_start() {
    PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
    export PGHOST=$work/pg PGUSER=postgres PGDATABASE=postgres
    rm -rf "$PGHOST"; mkdir -p "$PGHOST"; chown postgres "$PGHOST"
    runuser -u postgres -- "$PGBIN/initdb" -D "$PGHOST/data" -A trust -U postgres --no-sync > /dev/null
    local start="runuser -u postgres -- $PGBIN/pg_ctl -D $PGHOST/data -o '-k $PGHOST -c listen_addresses= -c shared_buffers=16MB' -l $PGHOST/log -w start"
    if [ -n "${1:-}" ]; then sh -c "echo \$\$ > $1/cgroup.procs; $start" > /dev/null; else sh -c "$start" > /dev/null; fi
    POSTMASTER=$(head -1 "$PGHOST/data/postmaster.pid")
}
# A row's lock held by a session asleep in its transaction, two others
# waiting to update the row.
pg_row_lock() {
    psql -qc "CREATE TABLE t (id int PRIMARY KEY, n int); INSERT INTO t VALUES (1, 0);"
    psql -qc "BEGIN; UPDATE t SET n = n + 1 WHERE id = 1; SELECT pg_sleep(600);" > /dev/null 2>&1 &
    sleep 0.5
    for i in 1 2; do psql -qc "UPDATE t SET n = n + 1 WHERE id = 1;" > /dev/null 2>&1 & done
    sleep 0.5
}

# The cgroup's blkio requests of direction $1 (Read, Write) per second over
# 5 s (blkio.throttle.io_serviced).
io_serviced_per_s() {
    local a b; a=$(awk -v d="$1" '$2 == d {s += $3} END {print s}' "$CG/blkio.throttle.io_serviced"); sleep 5
    b=$(awk -v d="$1" '$2 == d {s += $3} END {print s}' "$CG/blkio.throttle.io_serviced")
    echo $(( (b - a) / 5 ))
}

# The quota periods of cgroup CG's cpu.stat, and those throttled, over 5 s.
throttled_truth() {
    local a b; a=$(grep -E '^nr_(periods|throttled)' "$CG/cpu.stat" | awk '{print $2}' | xargs)
    sleep 5
    b=$(grep -E '^nr_(periods|throttled)' "$CG/cpu.stat" | awk '{print $2}' | xargs)
    set -- $a $b
    echo "throttled $(($4 - $2)) of $(($3 - $1)) periods"
}

# A Podman container (runc, cgroupfs: v1 cgroups of its own) of an image
# of static busybox alone, imported from a tar (no registry), running the
# shell command $2 with the podman run options $1: CID its id, PID its
# process, CG its cpu cgroup; CLEANUP removes it and its image.
podman_busybox() {
    local image=localhost/kdiag-scenario-$$ tree=$work/$name.root
    rm -rf "$tree"; mkdir -p "$tree/bin"; cp "$(command -v busybox)" "$tree/bin/busybox"; ln -s busybox "$tree/bin/sh"
    tar -C "$tree" -cf "$tree.tar" . && podman import -q "$tree.tar" "$image" > /dev/null
    CLEANUP="podman rmi -f $image"
    CID=$(podman --runtime runc run -d --rm --cgroup-manager cgroupfs --network none \
        --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 $1 "$image" sh -c "$2")
    CLEANUP="podman rm -f -t 0 $CID; $CLEANUP"
    PID=$(podman inspect -f '{{.State.Pid}}' "$CID")
    CG=/sys/fs/cgroup/cpu$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ {print $3}' /proc/"$PID"/cgroup)
}

pg_stop() { runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGHOST/data" -m immediate stop > /dev/null 2>&1; }
