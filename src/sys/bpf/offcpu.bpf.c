// SPDX-License-Identifier: GPL-2.0
// kdiag offcpu, BPF tier: where threads block, and for how long, aggregated
// in the kernel (like libbpf-tools offcputime and DTrace's
// @[stack()] = sum(...)).
//
// sched_switch, prev leaving the CPU: if prev is watched, keep its kernel
//   and user stack ids, its state and the time, keyed by thread id.
// sched_switch, next coming back: if next has such a record, add the time
//   it was off the CPU to `blocked`, keyed by (tgid, tid, stacks, state).
// sched_process_fork (when following children): a child of a watched
//   process is watched too.
// sched_waking (only when wakers_on: `kdiag profile --wall`): a watched
//   thread is being woken; keep the waker's (current's) stack ids and name,
//   keyed by the wakee's tid. When the wakee comes back from a sleep (S or
//   D), its blocked time goes to `offwake`, keyed by its own stacks and the
//   waker's, instead of `blocked` (Gregg's off-wake time, like bcc's
//   offwaketime). sched_waking, not sched_wakeup: it runs in the waker's
//   context, where sched_wakeup may run on the wakee's CPU (the wake list).
//
// times_on (per thread: `kdiag profile --wall`): each block added to a
//   table is also written to the `ends` ring buffer, (its key, waker, when
//   it ended, its length), so user space learns exactly when each thread's
//   time was blocked by draining the ring now and then, without walking
//   the tables.
//
// Processes outside the filter cost two loads and two bitmap tests per
// switch: the bitmap is an array map, whose lookups the verifier inlines
// (no hashing, no call). User space reads `blocked` once, at the end.
//
// Two copies of each program: tp_btf (task fields are plain loads through
// BTF pointers; sched_switch's prev_state argument, Linux >= 5.18) and
// raw_tp (the same through bpf_probe_read_kernel, prev's state read from
// its task_struct: any kernel with BTF); user space attaches whichever loads.
// build: -mcpu=v3 (32-bit jumps and ALU: Linux >= 5.1)
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define EFAULT 14
// ustack of a kernel thread, which has no user stack (not an errno).
#define NO_USER_STACK (-1)

// Set by the loader (sys::bpf::load_with writes them into the object).
const volatile __u64 min_block_ns = 0;    // shorter blocks are counted, not kept
const volatile __u32 state_mask = 0xff;   // which state classes to record (1 << class)
const volatile __u8 wakers_on = 0;        // 1: pair sleeps with their wakers (offwake)
const volatile __u8 times_on = 0;         // 1: write each block's end to `ends`

// State classes, from the state a thread left the CPU in (prev_state: what
// the scheduler decided, not a re-read of p->__state). Mirrored in offcpu/bpf.rs.
enum state_class {
	ST_RUNNING = 0,  // preempted (or yielded): runnable, waiting for a CPU
	ST_SLEEP = 1,    // S: TASK_INTERRUPTIBLE
	ST_DISK = 2,     // D: TASK_UNINTERRUPTIBLE, not TASK_IDLE
	ST_IDLE = 3,     // I: TASK_IDLE (idle kernel workers)
	ST_STOPPED = 4,  // T or t: stopped, traced
	ST_OTHER = 5,
};

// Linux task state bits (include/linux/sched.h; stable ABI of the
// sched_switch tracepoint's prev_state and of task_struct's state).
#define TASK_INTERRUPTIBLE 0x1
#define TASK_UNINTERRUPTIBLE 0x2
#define TASK_STOPPED_BITS 0x0c  // __TASK_STOPPED | __TASK_TRACED
#define TASK_DEAD 0x80
#define TASK_NOLOAD 0x400

// Where a watched thread left the CPU (mirrored by `Start` in offcpu/bpf.rs).
struct block_start {
	__u64 ts;
	__u32 tgid;
	__s32 kstack;  // stack id, or a negative errno
	__s32 ustack;  // stack id, NO_USER_STACK (kernel thread), or a negative errno
	__u32 state;   // enum state_class
};

// Aggregation key and value (mirrored by `Key` and `Value` in offcpu/bpf.rs).
struct block_key {
	__u32 tgid;
	__u32 pid;
	__s32 kstack;
	__s32 ustack;
	__u32 state;
};

struct block_value {
	__u64 total_ns;
	__u64 count;
};

#define COMM_LEN 16

// Who woke a watched thread (mirrored by `WakerRec` in offcpu/bpf.rs).
struct waker {
	__u32 tgid;
	__u32 pid;
	__s32 kstack;
	__s32 ustack;  // as block_start's
	char comm[COMM_LEN];
};

// A sleep with its waker (mirrored by `WakeKey` in offcpu/bpf.rs).
struct wake_key {
	struct block_key block;
	struct waker waker;
};

// A block as it ended (mirrored by `End` in offcpu/bpf.rs): the table key
// it was added to (`woken`: in `offwake`, with its waker; else in
// `blocked`, waker zeroed), when it ended and how long it lasted.
struct block_end {
	__u64 end_ns;
	__u64 ns;
	struct wake_key key;
	__u32 woken;
};

// Counters (per CPU; user space sums them), by index.
enum counter {
	C_KSTACK_LOST = 0,   // kernel stack not stored: map full or hash collision
	C_USTACK_LOST = 1,   // user stack not stored: map full or hash collision
	C_USTACK_FAULT = 2,  // a user thread's user stack could not be read
	C_START_FULL = 3,    // too many watched threads off the CPU at once
	C_BLOCKED_FULL = 4,  // the aggregation table was full: a block was dropped
	C_SHORT = 5,         // blocks under min_block_ns, counted only
	C_BLOCKS = 6,        // blocks added to `blocked` or `offwake`
	C_WAKES = 7,         // of those, sleeps paired with their waker (`offwake`)
	C_ENDS_LOST = 8,     // blocks whose end the `ends` ring had no room for
	C_COUNTERS = 9,
};

#include "watch.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, 127 * sizeof(__u64));  // perf_event_max_stack's default
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);
	__type(value, struct block_start);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, struct block_key);
	__type(value, struct block_value);
} blocked SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);
	__type(value, struct waker);
} wakes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, struct wake_key);
	__type(value, struct block_value);
} offwake SEC(".maps");

// Block ends (with times_on); the loader sizes it (a page when off).
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} ends SEC(".maps");

static __always_inline __u32 classify(__u32 s)
{
	if (s == 0)
		return ST_RUNNING;
	if ((s & TASK_UNINTERRUPTIBLE) && (s & TASK_NOLOAD))
		return ST_IDLE;
	if (s & TASK_UNINTERRUPTIBLE)
		return ST_DISK;
	if (s & TASK_INTERRUPTIBLE)
		return ST_SLEEP;
	if (s & TASK_STOPPED_BITS)
		return ST_STOPPED;
	return ST_OTHER;
}

// The kernel stack from here starts with frames of BPF machinery: the
// program itself and bpf_trace_run4, then on some kernels (and with BPF
// subprograms) more, such as __traceiter_sched_switch; on this 6.18 just
// the two. Skip the two that are always there; user space drops any
// others (everything inside __schedule), so stacks start at __schedule.
#define SKIP_FRAMES 2

// prev (watched, not the idle task) leaves the CPU in `prev_state`.
static __always_inline void switch_out(void *ctx, __u32 pid, __u32 tgid, bool user,
				       __u32 prev_state)
{
	if (prev_state & TASK_DEAD)
		return;
	__u32 state = classify(prev_state);
	if (!(state_mask & (1u << state)))
		return;
	struct block_start s = {
		.tgid = tgid,
		.state = state,
	};
	s.kstack = bpf_get_stackid(ctx, &stacks, SKIP_FRAMES);
	if (s.kstack < 0)
		count(C_KSTACK_LOST);
	if (user) {
		s.ustack = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
		if (s.ustack == -EFAULT)
			count(C_USTACK_FAULT);
		else if (s.ustack < 0)
			count(C_USTACK_LOST);
	} else {
		s.ustack = NO_USER_STACK;
	}
	// After the stack walks: they are on-CPU time.
	s.ts = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&starts, &pid, &s, BPF_ANY))
		count(C_START_FULL);
}

// Add `delta` to `key`'s total in `map` (`blocked` or `offwake`): false
// when the table was full and the block dropped.
static __always_inline bool add_to(void *map, void *key, __u64 delta)
{
	struct block_value *v = bpf_map_lookup_elem(map, key);
	if (!v) {
		struct block_value first = { .total_ns = delta, .count = 1 };
		if (!bpf_map_update_elem(map, key, &first, BPF_NOEXIST)) {
			count(C_BLOCKS);
			return true;
		}
		// Another CPU added the key meanwhile, or the table is full.
		v = bpf_map_lookup_elem(map, key);
		if (!v) {
			count(C_BLOCKED_FULL);
			return false;
		}
	}
	__sync_fetch_and_add(&v->total_ns, delta);
	__sync_fetch_and_add(&v->count, 1);
	count(C_BLOCKS);
	return true;
}

// Tell user space that a block of `delta` on `k` ended at `now`.
static __always_inline void send_end(struct wake_key *k, bool woken, __u64 now, __u64 delta)
{
	struct block_end *e = bpf_ringbuf_reserve(&ends, sizeof(*e), 0);
	if (!e) {
		count(C_ENDS_LOST);
		return;
	}
	e->end_ns = now;
	e->ns = delta;
	e->key = *k;
	e->woken = woken;
	bpf_ringbuf_submit(e, 0);
}

// next (watched, not the idle task) comes back to a CPU.
static __always_inline void switch_in(__u32 pid)
{
	struct block_start *s = bpf_map_lookup_elem(&starts, &pid);
	if (!s)
		return;
	__u64 now = bpf_ktime_get_ns();
	__u64 delta = now - s->ts;
	struct wake_key k = {
		.block = {
			.tgid = s->tgid,
			.pid = pid,
			.kstack = s->kstack,
			.ustack = s->ustack,
			.state = s->state,
		},
	};
	bpf_map_delete_elem(&starts, &pid);
	struct waker *w = NULL;
	if (wakers_on) {
		w = bpf_map_lookup_elem(&wakes, &pid);
		// Only a sleep ends in a wake-up; a preempted thread's record
		// (none, normally) is stale.
		if (w && (k.block.state == ST_SLEEP || k.block.state == ST_DISK))
			k.waker = *w;
		else
			w = NULL;
		bpf_map_delete_elem(&wakes, &pid);
	}
	if (delta < min_block_ns) {
		count(C_SHORT);
		return;
	}
	bool added;
	if (w) {
		count(C_WAKES);
		added = add_to(&offwake, &k, delta);
	} else {
		added = add_to(&blocked, &k.block, delta);
	}
	if (times_on && added)
		send_end(&k, w != NULL, now, delta);
}

// The current task wakes `pid` of `tgid`: keep who it is, if `pid` is watched.
static __always_inline void waking(void *ctx, __u32 pid, __u32 tgid, bool user)
{
	if (!pid || !is_watched(tgid))
		return;
	struct waker w = {};
	__u64 id = bpf_get_current_pid_tgid();
	w.tgid = id >> 32;
	w.pid = (__u32)id;
	bpf_get_current_comm(&w.comm, sizeof(w.comm));
	w.kstack = bpf_get_stackid(ctx, &stacks, SKIP_FRAMES);
	if (w.kstack < 0)
		count(C_KSTACK_LOST);
	w.ustack = NO_USER_STACK;
	if (user) {
		w.ustack = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
		if (w.ustack < 0 && w.ustack != -EFAULT)
			count(C_USTACK_LOST);
	}
	bpf_map_update_elem(&wakes, &pid, &w, BPF_ANY);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(offcpu_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u32 pid = prev->pid, tgid = prev->tgid;
	if (pid && is_watched(tgid))
		switch_out(ctx, pid, tgid, prev->mm != NULL, prev_state);
	pid = next->pid;
	tgid = next->tgid;
	if (pid && is_watched(tgid))
		switch_in(pid);
	return 0;
}

// task_struct's state field before Linux 5.14 (a long; `__state` since).
struct task_struct___state_long {
	long state;
} __attribute__((preserve_access_index));

// The state prev leaves the CPU in, where sched_switch has no prev_state
// argument (before 5.18): its task_struct's, read in the tracepoint, as
// the tracepoint's own record does; a preempted task is runnable whatever
// state it had set on its way to sleep.
static __always_inline __u32 switch_state(bool preempt, struct task_struct *prev)
{
	if (preempt)
		return 0;
	if (bpf_core_field_exists(prev->__state))
		return BPF_CORE_READ(prev, __state);
	return BPF_CORE_READ((struct task_struct___state_long *)prev, state);
}

// Three arguments: sched_switch has had them all along (5.18 added the fourth).
SEC("raw_tp/sched_switch")
int BPF_PROG(offcpu_sw_raw, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u32 pid = BPF_CORE_READ(prev, pid), tgid = BPF_CORE_READ(prev, tgid);
	if (pid && is_watched(tgid))
		switch_out(ctx, pid, tgid, BPF_CORE_READ(prev, mm) != NULL,
			   switch_state(preempt, prev));
	pid = BPF_CORE_READ(next, pid);
	tgid = BPF_CORE_READ(next, tgid);
	if (pid && is_watched(tgid))
		switch_in(pid);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(offcpu_fork, struct task_struct *parent, struct task_struct *child)
{
	if (is_watched(parent->tgid))
		watch(child->tgid);
	return 0;
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(offcpu_fork_raw, struct task_struct *parent, struct task_struct *child)
{
	if (is_watched(BPF_CORE_READ(parent, tgid)))
		watch(BPF_CORE_READ(child, tgid));
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(offcpu_waking, struct task_struct *p)
{
	waking(ctx, p->pid, p->tgid, bpf_get_current_task_btf()->mm != NULL);
	return 0;
}

SEC("raw_tp/sched_waking")
int BPF_PROG(offcpu_waking_raw, struct task_struct *p)
{
	struct task_struct *cur = (struct task_struct *)bpf_get_current_task();
	waking(ctx, BPF_CORE_READ(p, pid), BPF_CORE_READ(p, tgid), BPF_CORE_READ(cur, mm) != NULL);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
