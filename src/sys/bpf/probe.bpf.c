// Trivial programs for `kdiag doctor`: loading and attaching each proves
// that this kernel and our privileges allow that program type. They do
// nothing when they run.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

// Tier B tracepoint programs (execsnoop, exec-trace).
// Returns 1: a classic tracepoint program returning 0 makes the kernel drop
// that tracepoint's records for every perf user while it is attached.
SEC("tracepoint/sched/sched_process_exec")
int probe_tracepoint(void *ctx)
{
	return 1;
}

// BTF-typed tracepoints (iosnoop's request matching, off-CPU).
SEC("tp_btf/sched_process_exec")
int BPF_PROG(probe_tp_btf)
{
	return 0;
}

// fentry: kdiag does not need it, but users ask why bcc/bpftrace tools
// that use it fail here.
SEC("fentry/vfs_read")
int BPF_PROG(probe_fentry)
{
	return 0;
}

// perf_event programs: profile's in-kernel stack counting.
SEC("perf_event")
int probe_perf_event(void *ctx)
{
	return 0;
}
