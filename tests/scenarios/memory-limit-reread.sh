# A 128 MiB file read again and again through mmap in a 48 MiB v1 memory
# cgroup: each pass evicts what the next reads. Truth: the cgroup's
# memory.failcnt and workingset refaults.
EXPECT=memory-limit
EVIDENCE="48 MiB"
QUICK=1
start() {
    disk_file /var/tmp/kdiag-scenario-mmap 128
    cg_new memory; echo $((48 << 20)) > "$CG/memory.limit_in_bytes"
    cg_spawn "$(c_program mmap_read) /var/tmp/kdiag-scenario-mmap keep"
    CLEANUP="cg_cleanup"
}
truth() {
    local a b; a=$(awk '$1 == "workingset_refault_file" || $1 == "workingset_refault" {print $2}' "$CG/memory.stat"); sleep 5
    b=$(awk '$1 == "workingset_refault_file" || $1 == "workingset_refault" {print $2}' "$CG/memory.stat")
    echo "memory.stat: $((b - a)) refaults in 5 s; failcnt $(cat "$CG/memory.failcnt")"
}
