# dd reading 4 KiB with O_DIRECT in a v1 blkio cgroup of 100 read IOPS.
# Truth: the cgroup's blkio.throttle.io_serviced, at the limit.
EXPECT=io-limit
EVIDENCE="against the limit of 100 read IOPS"
QUICK=1
start() {
    disk_file /var/tmp/kdiag-scenario-read 64
    cg_new blkio; echo "$(disk_of /var/tmp) 100" > "$CG/blkio.throttle.read_iops_device"
    cg_spawn "dd if=/var/tmp/kdiag-scenario-read of=/dev/null bs=4k iflag=direct"
    CLEANUP="cg_cleanup"
}
truth() { echo "blkio.throttle.io_serviced: $(io_serviced_per_s Read) reads/s, limit 100"; }
