// The watch set of kdiag's BPF programs that follow processes (offcpu.bpf.c,
// faults.bpf.c): one bit per tgid, set by the loader (sys::bpf::watch_all)
// and at fork in the kernel, and their per-CPU counters, indexed by the
// including program's `enum counter` (define C_COUNTERS before this).
#ifndef KDIAG_WATCH_BPF_H
#define KDIAG_WATCH_BPF_H

// Set by the loader (sys::bpf::load_with writes it into the object).
const volatile __u8 filter_on = 0;  // 1: only tgids set in `watched`

// One bit per tgid; max_entries is set by the loader to cover pid_max.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 512);
	__type(key, __u32);
	__type(value, __u64);
} watched SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&counters, &which);
	if (n)
		*n += 1;
}

static __always_inline bool is_watched(__u32 tgid)
{
	if (!filter_on)
		return true;
	__u32 word = tgid >> 6;
	__u64 *bits = bpf_map_lookup_elem(&watched, &word);
	return bits && (*bits & (1ull << (tgid & 63)));
}

// An atomic add, not OR (BPF has atomic OR only from Linux 5.12): adding a
// bit that is clear sets it and leaves the others, and a tgid's bit is set
// by one fork at a time (the one creating that tgid).
static __always_inline void watch(__u32 tgid)
{
	__u32 word = tgid >> 6;
	__u64 bit = 1ull << (tgid & 63);
	__u64 *bits = bpf_map_lookup_elem(&watched, &word);
	if (bits && !(*bits & bit))
		__sync_fetch_and_add(bits, bit);
}

#endif
