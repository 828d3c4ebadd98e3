// Every task's counters for `kdiag watch`, read in the kernel by a task
// iterator: one fixed binary record per task (thread), where /proc makes
// the kernel format three text files per process per scan. User space
// (sys::bpf::tasks) reads the iterator once per scan and sums the threads
// of each process. Fields that a kernel's configuration or version lacks
// are checked with CO-RE and read as 0, their bit in `has` clear: the
// object loads from Linux 5.8 (task iterators) with BTF, 5.10 being the
// floor kdiag supports.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

// The record: `Task` in sys/bpf/tasks.rs, field for field.
struct task_rec {
	__u32 tid;
	__u32 tgid;
	__u32 uid;            // real uid
	__u32 state;          // __state (state before 5.14) | exit_state
	__u64 sum_exec_runtime;  // ns on CPU (se.sum_exec_runtime)
	__u64 run_delay;      // ns waited on a run queue (sched_info)
	__u64 pcount;         // times run on a CPU (sched_info)
	__u64 read_bytes;     // storage bytes (ioac, CONFIG_TASK_IO_ACCOUNTING)
	__u64 write_bytes;
	__u64 maj_flt;
	__u64 start_boottime; // ns since boot, as /proc/PID/stat's start time
	__u64 cgroup_id;      // its cgroup v2 id (kernfs node id)
	__u64 rss_pages;      // the leader's only: file + anon + shmem pages
	__u32 has;            // HAS_* bits: what this kernel let it read
	char comm[16];
	__u32 pad;
};

#define HAS_IO 1
#define HAS_SCHED_INFO 2
#define HAS_RSS 4

// Older layouts, matched by CO-RE by their names without the ___ suffix.
struct task_struct___state_long {
	long state;
} __attribute__((preserve_access_index));

// Before 6.2 the mm's counters were atomics in a struct; since, an array of
// per-CPU counters whose `count` is what /proc's get_mm_counter reads (less
// what the CPUs still hold in their batches, as there).
struct mm_rss_stat___atomics {
	atomic_long_t count[4];
} __attribute__((preserve_access_index));
struct mm_struct___atomics {
	struct mm_rss_stat___atomics rss_stat;
} __attribute__((preserve_access_index));

// The kernel's MM_FILEPAGES, MM_ANONPAGES, MM_SHMEMPAGES (an anonymous
// enum, unchanged since 4.5: CO-RE cannot look it up).
#define MM_FILEPAGES 0
#define MM_ANONPAGES 1
#define MM_SHMEMPAGES 3

// Fields are read with plain loads, not bpf_probe_read_kernel: the
// iterator's task is a BTF pointer, so the verifier checks each load
// against the kernel's types and the JIT makes it a load that cannot
// fault. The helper's calls were most of the walk's cost (a profile of
// watch over 10,000 processes: 43% of its samples).
static __always_inline __u64 rss_pages(struct mm_struct *mm)
{
	if (bpf_core_field_exists(((struct mm_struct___atomics *)mm)->rss_stat)) {
		struct mm_rss_stat___atomics *c = &((struct mm_struct___atomics *)mm)->rss_stat;
		return c->count[MM_FILEPAGES].counter + c->count[MM_ANONPAGES].counter +
		       c->count[MM_SHMEMPAGES].counter;
	}
	__s64 n = mm->rss_stat[MM_FILEPAGES].count + mm->rss_stat[MM_ANONPAGES].count +
		  mm->rss_stat[MM_SHMEMPAGES].count;
	return n > 0 ? n : 0;
}

SEC("iter/task")
int each_task(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct task_rec r = {};

	if (!task)
		return 0;
	r.tid = task->pid;
	r.tgid = task->tgid;
	r.uid = task->real_cred->uid.val;
	if (bpf_core_field_exists(task->__state))
		r.state = task->__state;
	else
		r.state = ((struct task_struct___state_long *)task)->state;
	r.state |= task->exit_state;
	r.sum_exec_runtime = task->se.sum_exec_runtime;
	if (bpf_core_field_exists(task->sched_info.run_delay)) {
		r.run_delay = task->sched_info.run_delay;
		r.pcount = task->sched_info.pcount;
		r.has |= HAS_SCHED_INFO;
	}
	if (bpf_core_field_exists(task->ioac.read_bytes)) {
		r.read_bytes = task->ioac.read_bytes;
		r.write_bytes = task->ioac.write_bytes;
		r.has |= HAS_IO;
	}
	r.maj_flt = task->maj_flt;
	r.start_boottime = task->start_boottime;
	r.cgroup_id = task->cgroups->dfl_cgrp->kn->id;
	// A char array: copied by the helper (the verifier on older kernels
	// takes loads of a member's own size only).
	bpf_probe_read_kernel(&r.comm, sizeof(r.comm), &task->comm);
	if (r.tid == r.tgid) {
		// The leader carries what the threads that ended left in the
		// process (signal_struct), as /proc/PID/stat and io count it.
		struct signal_struct *sig = task->signal;
		struct mm_struct *mm = task->mm;

		r.sum_exec_runtime += sig->sum_sched_runtime;
		r.maj_flt += sig->maj_flt;
		if (bpf_core_field_exists(sig->ioac.read_bytes)) {
			r.read_bytes += sig->ioac.read_bytes;
			r.write_bytes += sig->ioac.write_bytes;
		}
		if (mm) {
			r.rss_pages = rss_pages(mm);
			r.has |= HAS_RSS;
		}
	}
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}
