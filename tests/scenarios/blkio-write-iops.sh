# dd writing 4 KiB with O_DIRECT in a v1 blkio cgroup of 60 write IOPS.
# Truth: the cgroup's blkio.throttle.io_serviced, at the limit.
EXPECT=io-limit
EVIDENCE="write IOPS"
start() {
    cg_new blkio; echo "$(disk_of /var/tmp) 60" > "$CG/blkio.throttle.write_iops_device"
    cg_spawn "dd if=/dev/zero of=/var/tmp/kdiag-scenario-write bs=4k count=100000 oflag=direct"
    CLEANUP="cg_cleanup; rm -f /var/tmp/kdiag-scenario-write"
}
truth() { echo "blkio.throttle.io_serviced: $(io_serviced_per_s Write) writes/s, limit 60"; }
