# The container-cpu-quota container diagnosed by its process (-p PID):
# the quota, and who runs it read from its cgroup's path. Truth: its
# cgroup's cpu.stat.
EXPECT=cpu-quota
EVIDENCE="Runs as: Podman container"
NEEDS="podman runc busybox"
start() { podman_busybox "--cpus 0.2" 'while :; do :; done'; }
truth() { echo "cpu.stat of the container's cgroup: $(throttled_truth)"; }
