# A busy loop in a Podman container under --cpus 0.2, watched by `kdiag
# watch --container ID` (its id's first 12 characters, as podman ps shows
# it). Truth: the container's cgroup's cpu.stat, throttled in nearly every
# period.
EXPECT=cpu-quota
MODE=watch
GROUP=sh # --container is the scope: its processes are grouped by name
EVIDENCE="kdiag_verdict{group=\"sh\",verdict=\"cpu-quota\"} 1"
NEEDS="podman runc busybox"
start() { podman_busybox "--cpus 0.2" 'while :; do :; done'; ARGS="--container ${CID:0:12}"; }
truth() { echo "cpu.stat of the container's cgroup: $(throttled_truth)"; }
