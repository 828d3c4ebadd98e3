// Names kernel addresses without reading /proc/kallsyms: the kernel
// formats 100,000+ lines at each read of that file, which cost kdiag more
// than anything else it did to name an off-CPU profile's few hundred
// kernel frames. Each read of this iterator prints, a line each, the
// symbol that holds each address in `addrs` (up to the first 0), with the
// kernel's own "%ps" lookup: "name" or "name [module]", or the address in
// hex where no symbol holds it (name_addresses_b: with an offset). User
// space fills `addrs` a chunk at a time.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

// A chunk: 128 lines of at most ~250 bytes fit the iterator's 32 KiB
// buffer, which one element's output may not exceed.
#define CHUNK 128

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CHUNK);
	__type(key, u32);
	__type(value, u64);
} addrs SEC(".maps");

// Any iterator would do: the work is done once, at its first element. The
// list of BPF maps is short and never empty (it holds `addrs`).
// `backtrace`: print with "%pB" (Linux 5.9+), where "%ps" is refused
// (before 5.13): the form for return addresses, which names the symbol
// holding the address before the one given, with an offset ("name+0x1a/0x40").
static __always_inline int name_all(struct bpf_iter__bpf_map *ctx, bool backtrace)
{
	struct seq_file *seq = ctx->meta->seq;

	if (ctx->meta->seq_num != 0 || !ctx->map)
		return 0;
	for (u32 i = 0; i < CHUNK; i++) {
		// A copy for the map's key: the counter itself stays in a
		// register, where the verifier can see that the loop ends.
		u32 key = i;
		u64 *addr = bpf_map_lookup_elem(&addrs, &key);

		if (!addr || !*addr)
			break;
		if (backtrace)
			BPF_SEQ_PRINTF(seq, "%pB\n", *addr + 1);
		else
			BPF_SEQ_PRINTF(seq, "%ps\n", *addr);
	}
	return 0;
}

SEC("iter/bpf_map")
int name_addresses(struct bpf_iter__bpf_map *ctx)
{
	return name_all(ctx, false);
}

SEC("iter/bpf_map")
int name_addresses_b(struct bpf_iter__bpf_map *ctx)
{
	return name_all(ctx, true);
}
