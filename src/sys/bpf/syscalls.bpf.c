// SPDX-License-Identifier: GPL-2.0
// kdiag syscalls, BPF tier: system calls of watched processes by number,
// counted and timed in the kernel (like `strace -c`, without stopping the
// traced threads).
//
// sys_enter (raw_syscalls, run in the calling thread): if its process is
//   watched, count the call under its number and note when it began in
//   `inflight`, by thread.
// sys_exit: add the call's time to its number's total and maximum, and an
//   error if it returned one (-4095..-1).
// sched_process_exit: a thread that ends inside a call (exit, exit_group)
//   never reaches sys_exit: forget its call.
// sched_process_fork (when following children): a child of a watched
//   process is watched too.
//
// Calls begun before tracing have no entry in `inflight` and are not
// counted. User space reads `stats` at the end, and `inflight` for the
// calls still in progress.
// build: -mcpu=v3 (32-bit jumps and ALU: Linux >= 5.1)
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

// Numbers counted (x86_64's reach 470); a higher one counts in C_OTHER.
#define MAX_NR 512

// Counters (per CPU; user space sums them), by index.
enum counter {
	C_OTHER = 0,    // calls numbered MAX_NR or more: not in `stats`
	C_INFLIGHT_FULL = 1,  // `inflight` had no room: a call counted without its time
	C_COUNTERS = 2,
};

#include "watch.bpf.h"

// One number's calls (mirrored by `Stat` in instruments/syscalls/bpf.rs).
struct nr_stat {
	__u64 calls;
	__u64 returned;  // calls timed: exit and exit_group never return
	__u64 errors;
	__u64 total_ns;
	__u64 max_ns;
};

// A call in progress (mirrored by `Call`).
struct call {
	__u64 nr;
	__u64 since_ns;
};

// Per CPU, so that each slot is only written by its CPU (no lost adds, an
// exact maximum); user space sums the counts and takes the largest maximum.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_NR);
	__type(key, __u32);
	__type(value, struct nr_stat);
} stats SEC(".maps");

// By thread id.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct call);
} inflight SEC(".maps");

SEC("tp_btf/sys_enter")
int BPF_PROG(syscalls_enter, struct pt_regs *regs, long id)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!is_watched(pid_tgid >> 32))
		return 0;
	if (id < 0 || id >= MAX_NR) {
		count(C_OTHER);
		return 0;
	}
	__u32 nr = id;
	struct nr_stat *s = bpf_map_lookup_elem(&stats, &nr);
	if (!s)
		return 0;
	s->calls += 1;
	__u32 tid = pid_tgid;
	struct call in = { .nr = nr, .since_ns = bpf_ktime_get_ns() };
	if (bpf_map_update_elem(&inflight, &tid, &in, BPF_ANY))
		count(C_INFLIGHT_FULL);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(syscalls_exit, struct pt_regs *regs, long ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	// The bitmap first: cheaper than the hash for everyone else's calls.
	if (!is_watched(pid_tgid >> 32))
		return 0;
	__u32 tid = pid_tgid;
	struct call *in = bpf_map_lookup_elem(&inflight, &tid);
	if (!in)
		return 0;
	__u64 ns = bpf_ktime_get_ns() - in->since_ns;
	__u32 nr = in->nr;
	bpf_map_delete_elem(&inflight, &tid);
	struct nr_stat *s = bpf_map_lookup_elem(&stats, &nr);
	if (!s)
		return 0;
	s->returned += 1;
	s->total_ns += ns;
	if (ns > s->max_ns)
		s->max_ns = ns;
	if (ret < 0 && ret >= -4095)
		s->errors += 1;
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(syscalls_thread_exit, struct task_struct *task)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!is_watched(pid_tgid >> 32))
		return 0;
	__u32 tid = pid_tgid;
	bpf_map_delete_elem(&inflight, &tid);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(syscalls_fork, struct task_struct *parent, struct task_struct *child)
{
	if (is_watched(parent->tgid))
		watch(child->tgid);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
