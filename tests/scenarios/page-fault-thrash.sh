# Python touching a page in each 4 KiB of 160 MiB of anonymous memory, pass
# after pass, in a v1 memory cgroup of 64 MiB (memory+swap unlimited) with
# a swap file: each pass swaps in what the last pushed out. Truth:
# /proc/vmstat's pswpin (the machine's swap-ins) and the cgroup's failcnt.
EXPECT=memory-limit
EVIDENCE="64 MiB"
SWAP=/var/tmp/kdiag-scenario-swap
start() {
    [ "$(stat -c %s "$SWAP" 2>/dev/null)" = $((512 << 20)) ] || fallocate -l 512M "$SWAP"
    chmod 600 "$SWAP"; mkswap -q "$SWAP" > /dev/null; swapon "$SWAP"
    cg_new memory; echo $((64 << 20)) > "$CG/memory.limit_in_bytes"
    cg_spawn "python3 -c '
b = bytearray(160 << 20)
while True:
    for i in range(0, len(b), 4096):
        b[i] = (b[i] + 1) & 255
'"
    sleep 3 # the first pass fills the limit
    CLEANUP="cg_cleanup; swapoff $SWAP"
}
truth() {
    local a b; a=$(awk '$1 == "pswpin" {print $2}' /proc/vmstat); sleep 5
    b=$(awk '$1 == "pswpin" {print $2}' /proc/vmstat)
    echo "vmstat: $(((b - a) / 5)) pages swapped in/s; failcnt $(cat "$CG/memory.failcnt")"
}
