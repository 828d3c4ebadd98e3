// SPDX-License-Identifier: GPL-2.0
// kdiag faults, BPF tier: page faults of watched processes by user stack,
// counted in the kernel (like bpftrace's
// tracepoint:exceptions:page_fault_user { @[ustack] = count(); }).
//
// page_fault_user (x86's exceptions tracepoint, run in the faulting
//   thread): if its process is watched, add one to `faults`, keyed by
//   (tgid, tid, the user stack's addresses). The kernel half (the fault
//   entry) is the same for every fault, so it is not walked.
//
// sched_process_fork (when following children): a child of a watched
//   process is watched too.
//
// The key holds the addresses themselves, not a stack map's id: a stack
// map keeps one stack per hash bucket and refuses another that lands in a
// taken bucket (-EEXIST), which would lose every later fault of that code
// path; a hash map compares whole keys, so no path is ever lost to a
// collision. A key is at most 512 bytes (the verifier's stack), so the
// walk keeps the innermost MAX_DEPTH frames.
//
// Processes outside the filter cost two loads and a bitmap test per
// fault (the same bitmap as offcpu.bpf.c). User space reads `faults`
// once, at the end.
// build: -mcpu=v3 (32-bit jumps and ALU: Linux >= 5.1)
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define MAX_DEPTH 63

// Aggregation key (mirrored by `Key` in instruments/faults/bpf.rs): 512
// bytes, the most a hash map's key may be.
struct fault_key {
	__u32 tgid;
	__u32 pid;
	__u64 ips[MAX_DEPTH];  // innermost first; zero after the last frame
};

// Counters (per CPU; user space sums them), by index.
enum counter {
	C_USTACK_FAULT = 0,  // the user stack could not be read (its key has no frames)
	C_TABLE_FULL = 1,    // the aggregation table was full: a fault was dropped
	C_FAULTS = 2,        // faults counted in `faults`
	C_COUNTERS = 3,
};

#include "watch.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct fault_key);
	__type(value, __u64);
} faults SEC(".maps");

// Where each CPU builds its key: too big for the program's stack.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fault_key);
} scratch SEC(".maps");

SEC("tp_btf/page_fault_user")
int BPF_PROG(faults_user, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	if (!is_watched(tgid))
		return 0;
	__u32 zero = 0;
	struct fault_key *k = bpf_map_lookup_elem(&scratch, &zero);
	if (!k)
		return 0;
	k->tgid = tgid;
	k->pid = (__u32)id;
	__builtin_memset(k->ips, 0, sizeof(k->ips));
	if (bpf_get_stack(ctx, k->ips, sizeof(k->ips), BPF_F_USER_STACK) < 0)
		count(C_USTACK_FAULT);
	__u64 *n = bpf_map_lookup_elem(&faults, k);
	if (!n) {
		__u64 one = 1;
		if (!bpf_map_update_elem(&faults, k, &one, BPF_NOEXIST)) {
			count(C_FAULTS);
			return 0;
		}
		// Another CPU added the key meanwhile, or the table is full.
		n = bpf_map_lookup_elem(&faults, k);
		if (!n) {
			count(C_TABLE_FULL);
			return 0;
		}
	}
	__sync_fetch_and_add(n, 1);
	count(C_FAULTS);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(faults_fork, struct task_struct *parent, struct task_struct *child)
{
	if (is_watched(parent->tgid))
		watch(child->tgid);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
