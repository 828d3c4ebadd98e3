// SPDX-License-Identifier: GPL-2.0
// exec-trace and execsnoop: exec attempts with their user strings, the point
// of no return, signals generated (with the kernel stack of the sender) and
// process ends. One ring buffer; every record starts with `kind`.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#define TASK_COMM_LEN 16
#define FILENAME_LEN 256
#define MAX_ARGS 8
#define ARG_LEN 96
#define INTERP_LEN 128

// Classic tracepoint programs return 1: a BPF program returning 0 makes the
// kernel drop the record for every perf_event user of that tracepoint
// (perf_trace_run_bpf_submit, perf_syscall_exit), including kdiag's own
// perf tier running alongside.
#define KEEP 1

enum kind { EXEC = 1, PREPARE = 2, SIGNAL = 3, EXIT = 4, FORK = 5 };

// The layouts below are mirrored by #[repr(C)] structs in exec.rs.
struct exec_event {
	u32 kind;
	u32 pid;
	u32 tid;
	u32 ppid;
	u32 uid;
	u32 argc;      // arguments read (at most MAX_ARGS)
	u32 truncated; // more arguments than MAX_ARGS
	u32 at;        // 1 for execveat
	s64 ret;
	u64 ts;
	char comm[TASK_COMM_LEN];
	char filename[FILENAME_LEN];
	char args[MAX_ARGS][ARG_LEN];
};

struct prepare_event {
	u32 kind;
	u32 pid;
	u64 ts;
	char filename[FILENAME_LEN];
	char interp[INTERP_LEN];
};

struct signal_event {
	u32 kind;
	s32 sig;
	s32 code;
	s32 err;
	u32 pid;        // target process
	u32 tid;        // target thread
	u32 sender_pid;
	s32 group;
	s32 result;
	s32 stack_id;   // kernel stack, or negative errno
	u64 addr;       // si_addr for fault signals
	u64 ts;
	char comm[TASK_COMM_LEN];        // target
	char sender_comm[TASK_COMM_LEN];
};

struct exit_event {
	u32 kind;
	u32 pid;
	u32 ppid;
	s32 exit_code;  // task->exit_code: (status << 8) | signal | 0x80 core
	u64 ts;
	char comm[TASK_COMM_LEN];
};

struct fork_event {
	u32 kind;
	u32 parent;
	u32 child;
	u32 pad;
	u64 ts;
};

// Filled by user space before load: 0 means every process.
const volatile u32 targ_pid = 0;
// Only processes whose real uid is this one (a learner's, on a course
// server): checked before anything is read or copied. -1: every user.
const volatile u32 targ_uid = (u32)-1;
const volatile u8 follow_children = 0;
const volatile u8 want_signals = 1;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

// Exec attempts between syscall entry and exit, by tgid.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, u32);
	__type(value, struct exec_event);
} pending SEC(".maps");

// Descendants of the target (follow-children mode).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, u32);
	__type(value, u8);
} watched SEC(".maps");

// Records lost because the ring was full, per CPU.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} drops SEC(".maps");

static __always_inline void *reserve(u64 size)
{
	void *e = bpf_ringbuf_reserve(&events, size, 0);
	u32 zero = 0;
	u64 *n;

	if (!e) {
		n = bpf_map_lookup_elem(&drops, &zero);
		if (n)
			(*n)++;
	}
	return e;
}

// Per-CPU scratch: the event is too big for the BPF stack, and zero-filling
// a stack struct makes clang emit a memset call aya cannot relocate (aya#831).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct exec_event);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 1024);
	__uint(key_size, sizeof(u32));
	__uint(value_size, 127 * sizeof(u64));
} stacks SEC(".maps");

// `uid`: the real uid of the process `tgid` (the current task's, except
// for signals, whose target is another).
static __always_inline bool wanted(u32 tgid, u32 uid)
{
	if (targ_uid != (u32)-1 && uid != targ_uid)
		return false;
	if (!targ_pid)
		return true;
	if (tgid == targ_pid)
		return true;
	return follow_children && bpf_map_lookup_elem(&watched, &tgid);
}

static __always_inline int enter(const char *filename, const char *const *argv, u32 at)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, zero = 0;
	struct task_struct *task;
	struct exec_event *e;
	const char *arg;

	if (!wanted(tgid, (u32)bpf_get_current_uid_gid()))
		return 0;
	e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e)
		return 0;
	task = (struct task_struct *)bpf_get_current_task();
	e->kind = EXEC;
	e->pid = tgid;
	e->tid = (u32)id;
	e->ppid = BPF_CORE_READ(task, real_parent, tgid);
	e->uid = (u32)bpf_get_current_uid_gid();
	e->at = at;
	e->ret = 0;
	e->ts = bpf_ktime_get_ns();
	e->argc = 0;
	e->truncated = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	if (bpf_probe_read_user_str(e->filename, sizeof(e->filename), filename) < 0)
		e->filename[0] = 0;
#pragma unroll
	for (int i = 0; i < MAX_ARGS; i++) {
		e->args[i][0] = 0;
		if (e->argc < i)
			continue;
		if (bpf_probe_read_user(&arg, sizeof(arg), &argv[i]) || !arg)
			continue;
		if (bpf_probe_read_user_str(e->args[i], ARG_LEN, arg) > 0)
			e->argc = i + 1;
	}
	if (e->argc == MAX_ARGS &&
	    !bpf_probe_read_user(&arg, sizeof(arg), &argv[MAX_ARGS]) && arg)
		e->truncated = 1;
	bpf_map_update_elem(&pending, &tgid, e, BPF_ANY);
	return 0;
}

static __always_inline int leave(long ret)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct exec_event *e, *out;

	e = bpf_map_lookup_elem(&pending, &tgid);
	if (!e)
		return 0;
	out = reserve(sizeof(*out));
	if (out) {
		bpf_probe_read_kernel(out, sizeof(*out), e);
		out->ret = ret;
		// Stamped at the return, as the perf tier does: sorted by time,
		// the line with the result follows what happened during the call
		// (the point of no return, the signal).
		out->ts = bpf_ktime_get_ns();
		// After a successful exec, comm is the new program's.
		bpf_get_current_comm(out->comm, sizeof(out->comm));
		bpf_ringbuf_submit(out, 0);
	}
	bpf_map_delete_elem(&pending, &tgid);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_execve")
int enter_execve(struct trace_event_raw_sys_enter *ctx)
{
	enter((const char *)ctx->args[0], (const char *const *)ctx->args[1], 0);
	return KEEP;
}

SEC("tracepoint/syscalls/sys_enter_execveat")
int enter_execveat(struct trace_event_raw_sys_enter *ctx)
{
	enter((const char *)ctx->args[1], (const char *const *)ctx->args[2], 1);
	return KEEP;
}

SEC("tracepoint/syscalls/sys_exit_execve")
int exit_execve(struct trace_event_raw_sys_exit *ctx)
{
	leave(ctx->ret);
	return KEEP;
}

SEC("tracepoint/syscalls/sys_exit_execveat")
int exit_execveat(struct trace_event_raw_sys_exit *ctx)
{
	leave(ctx->ret);
	return KEEP;
}

// The point of no return (6.10+): loaded only where the kernel has it.
SEC("tp_btf/sched_prepare_exec")
int BPF_PROG(prepare_exec, struct task_struct *task, struct linux_binprm *bprm)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct prepare_event *e;

	if (!wanted(tgid, (u32)bpf_get_current_uid_gid()))
		return 0;
	e = reserve(sizeof(*e));
	if (!e)
		return 0;
	e->kind = PREPARE;
	e->pid = tgid;
	e->ts = bpf_ktime_get_ns();
	bpf_probe_read_kernel_str(e->filename, sizeof(e->filename), BPF_CORE_READ(bprm, filename));
	bpf_probe_read_kernel_str(e->interp, sizeof(e->interp), BPF_CORE_READ(bprm, interp));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

// SEND_SIG_NOINFO and SEND_SIG_PRIV are the pointers 0 and 1.
#define SI_USER 0
#define SI_KERNEL 0x80

SEC("tp_btf/signal_generate")
int BPF_PROG(signal_generate, int sig, struct kernel_siginfo *info,
	     struct task_struct *task, int group, int result)
{
	u32 tgid = BPF_CORE_READ(task, tgid);
	u64 sender = bpf_get_current_pid_tgid();
	struct signal_event *e;

	if (!want_signals || !wanted(tgid, BPF_CORE_READ(task, real_cred, uid.val)))
		return 0;
	e = reserve(sizeof(*e));
	if (!e)
		return 0;
	e->kind = SIGNAL;
	e->sig = sig;
	e->err = 0;
	e->addr = 0;
	if ((unsigned long)info == 0) {
		e->code = SI_USER;
	} else if ((unsigned long)info == 1) {
		e->code = SI_KERNEL;
	} else {
		e->code = BPF_CORE_READ(info, si_code);
		e->err = BPF_CORE_READ(info, si_errno);
		if (sig == 11 || sig == 7 || sig == 4 || sig == 8 || sig == 5)
			e->addr = (u64)BPF_CORE_READ(info, _sifields._sigfault._addr);
	}
	e->pid = tgid;
	e->tid = BPF_CORE_READ(task, pid);
	e->sender_pid = sender >> 32;
	e->group = group;
	e->result = result;
	e->stack_id = bpf_get_stackid(ctx, &stacks, 0);
	e->ts = bpf_ktime_get_ns();
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), task->comm);
	// The sender may be another user's process: not the learner's to see.
	if (targ_uid == (u32)-1 || (u32)bpf_get_current_uid_gid() == targ_uid) {
		bpf_get_current_comm(e->sender_comm, sizeof(e->sender_comm));
	} else {
		e->sender_pid = 0;
		__builtin_memcpy(e->sender_comm, "(another user)", 15);
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(process_fork, struct task_struct *parent, struct task_struct *child)
{
	u32 ptgid = BPF_CORE_READ(parent, tgid), ctgid = BPF_CORE_READ(child, tgid);
	struct fork_event *e;
	u8 one = 1;

	// Threads share their parent's tgid: only new processes matter.
	if (!targ_pid || !follow_children || ptgid == ctgid ||
	    !wanted(ptgid, (u32)bpf_get_current_uid_gid()))
		return 0;
	bpf_map_update_elem(&watched, &ctgid, &one, BPF_ANY);
	e = reserve(sizeof(*e));
	if (!e)
		return 0;
	e->kind = FORK;
	e->parent = ptgid;
	e->child = ctgid;
	e->pad = 0;
	e->ts = bpf_ktime_get_ns();
	bpf_ringbuf_submit(e, 0);
	return 0;
}

static __always_inline void report_exit(void)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct exit_event *e;

	// One record per process: when its last thread goes.
	if (!targ_pid || !wanted(tgid, (u32)bpf_get_current_uid_gid()) || BPF_CORE_READ(task, signal, live.counter) != 0)
		return;
	e = reserve(sizeof(*e));
	if (!e)
		return;
	e->kind = EXIT;
	e->pid = tgid;
	e->ppid = BPF_CORE_READ(task, real_parent, tgid);
	e->exit_code = BPF_CORE_READ(task, exit_code);
	e->ts = bpf_ktime_get_ns();
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
	bpf_map_delete_elem(&watched, &tgid);
}

SEC("tracepoint/sched/sched_process_exit")
int process_exit(void *ctx)
{
	report_exit();
	return KEEP;
}

char LICENSE[] SEC("license") = "GPL";
