// SPDX-License-Identifier: MIT OR Apache-2.0
// kdiag iosnoop, BPF tier: block requests followed by their `struct request *`
// from submission to completion, so latencies stay exact with merges and
// requeues, and the submitting process is known even when a kworker issues.
//
// block_io_start  (>= 6.5, at request allocation): when it was queued, by whom
// block_rq_insert (-Q only):                     when it entered the queue
// block_rq_issue:                                when it went to the device, by whom
// block_rq_complete:                             one event (or a histogram count)
//   of a request charged to filter_uid's task, when set: the submitter
//   (else the issuer) is the task a request is charged to
//
// Who caused a request is remembered per (disk, sector) where the bio is
// submitted, for block_rq_issue to find: blk-throttle (io.max,
// blkio.throttle.*) holds a bio back before the kernel traces it, and its
// kworker then queues (block_bio_queue), splits, allocates a request for
// and issues it. Measured on 6.18: a throttled buffered read shows nothing
// in its reader's context but the page-cache folios the reader added.
// block_bio_queue (not in a workqueue worker):  the submitter of a bio
//   (in a worker: the reader that added the first page of a read bio)
// block_split:                                  the submitter of the rest
// iomap_iter_dstmap (direct I/O, >= 5.15):      the submitter of a direct
//   I/O, in its own context before blk-throttle can hold its bio back
// mm_filemap_add_to_page_cache:                 who added a folio (a read
//   bio's pages are added by the reader whose readahead submits it)
//
// From Linux 5.10 on: where the kernels differ, CO-RE picks the field
// (request's disk, bio's disk, a partition's start) and the programs whose
// tracepoint arguments or instructions differ come in two copies, user
// space attaching the one that loads: block_bio_queue_q and block_split_q
// (their request_queue argument, before 5.11: tried first, as a program
// reading an argument the tracepoint lacks does not load, where one reading
// fewer does), and *_h for kernels without BPF compare-and-swap
// (before 5.12), which keep requests in flight in a hash map instead.
// build: -mcpu=v3 (compare-and-swap on map values: Linux >= 5.12)
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define TASK_COMM_LEN 16
#define RWBS_LEN 8
#define REQ_OP_MASK 0xff
#define MAX_SLOTS 32
#define PF_WQ_WORKER 0x00000020  // include/linux/sched.h, unchanged since 2.6.36
#define IOMAP_DIRECT (1 << 4)    // include/linux/iomap.h, since 5.2
#define IOMAP_MAPPED 2
#define IOMAP_UNWRITTEN 3

// Set by the loader (sys::bpf::load_with writes them into the object).
const volatile __u32 filter_dev = 0;   // kernel dev_t (major << 20 | minor), 0 = all
const volatile __u8 queued = 0;        // -Q: latency from insert (else issue)
const volatile __u8 hist_only = 0;     // --hist: count in `hist`, emit no events
// Only requests charged to a task of this real uid (a learner's, on a
// course server), -1 = all: nothing of another user's leaves the kernel.
const volatile __u32 filter_uid = (__u32)-1;

struct task_id {
	__u32 pid;  // tgid
	__u32 tid;
	__u32 uid;  // real
	char comm[TASK_COMM_LEN];
};

// What we know about a request in flight.
struct inflight {
	__u64 io_start_ns;
	__u64 insert_ns;
	__u64 issue_ns;
	__u64 sector;  // at issue: partial completions advance the request's own
	__u32 bytes;   // at issue
	__u32 _pad;
	struct task_id submitter;  // pid 0: not seen
	struct task_id issuer;
};

// One completed request, as user space reads it from the ring buffer
// (mirrored by `Event` in block.rs).
struct event {
	__u64 io_start_ns;
	__u64 insert_ns;
	__u64 issue_ns;
	__u64 complete_ns;
	__u64 sector;
	__u32 dev;
	__u32 bytes;
	__s32 error;
	__u32 _pad;
	struct task_id submitter;
	struct task_id issuer;
	char rwbs[RWBS_LEN];
};

// Histogram bucket key: latency slot per device, type and process, so user
// space can group and filter (-i, -p, -n) without a second pass in the kernel.
struct hist_key {
	__u32 dev;
	__u32 slot;  // log2 of the latency in microseconds
	__u32 pid;
	char rwbs[RWBS_LEN];
	char comm[TASK_COMM_LEN];
};

// Requests in flight, in a set-associative table keyed by the request
// pointer: an array lookup is a plain memory access, where a hash map insert
// and delete per request cost ~0.5 us of locking on the I/O path. Requests
// come from a fixed, reused pool, so a slot left behind (a request merged
// away, a completion never seen) is taken back when its request returns.
#define WAYS 4
#define SETS 8192  // power of two
struct set {
	__u64 rq[WAYS];  // request pointers, 0 = free: one cache line to search
	struct inflight f[WAYS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SETS);
	__type(key, __u32);
	__type(value, struct set);
} inflight SEC(".maps");

// Requests in flight before 5.12, by request pointer: a hash map's insert
// is atomic where compare-and-swap is missing. The loader sizes to 1
// whichever of the two tables the programs it attached do not use.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SETS * WAYS);
	__type(key, __u64);
	__type(value, struct inflight);
} inflight_h SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);  // 4 MiB: ~35k events before loss
} events SEC(".maps");

// Wake the reader only once this much is waiting: it polls every 100 ms
// anyway, and a wakeup per event costs more than the event.
#define WAKEUP_BYTES (1 << 20)

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct hist_key);
	__type(value, __u64);
} hist SEC(".maps");

// Events lost: the ring buffer had no room (index 0), or every way of a
// request's set was taken (index 1).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

// Who submitted the bio starting at a sector, until a request issued from
// that sector takes it. LRU: entries whose bio merged into another request
// (so no request starts there) age out.
struct sector_key {
	__u32 dev;  // the whole disk's, as rq_dev()
	__u32 _pad;
	__u64 sector;  // on the whole disk
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct sector_key);
	__type(value, struct task_id);
} submitters SEC(".maps");

// Who added a page-cache folio (a page before 5.16), by its address, and
// the file it was added to: a folio freed and reused elsewhere no longer
// has that mapping. LRU: the folios of reads nobody throttled age out.
struct reader {
	__u64 mapping;
	struct task_id who;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct reader);
} readers SEC(".maps");

// Zeroed template for new map entries: avoids a large stack memset, which
// aya cannot relocate (aya#831).
static const struct inflight zero_inflight;

// Fields of older kernels (CO-RE flavours): a request's disk (before 6.0;
// its queue's since 5.15), a bio's (before 5.12; its block_device's
// since), a partition's start (before 5.11; the block_device's since).
struct request___rq_disk {
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));
struct bio___bi_disk {
	struct gendisk *bi_disk;
} __attribute__((preserve_access_index));
struct block_device___bd_part {
	struct hd_struct *bd_part;
} __attribute__((preserve_access_index));
struct hd_struct {
	sector_t start_sect;
} __attribute__((preserve_access_index));
// The request ops' enum was req_opf before 6.0: same names and values.
enum req_opf {
	REQ_OP_READ___opf, REQ_OP_WRITE___opf, REQ_OP_FLUSH___opf, REQ_OP_DISCARD___opf,
	REQ_OP_SECURE_ERASE___opf,
};
#define REQ_OP(name) (bpf_core_enum_value_exists(enum req_op, name) ?			\
		      bpf_core_enum_value(enum req_op, name) :			\
		      bpf_core_enum_value(enum req_opf, name##___opf))

// tp_btf arguments are trusted kernel pointers: plain loads (relocated by
// CO-RE through vmlinux.h's preserve_access_index) are cheaper than
// bpf_probe_read_kernel calls.
static __always_inline __u32 rq_dev(struct request *rq)
{
	struct gendisk *disk;
	if (bpf_core_field_exists(rq->q->disk))
		disk = rq->q->disk;
	else
		disk = ((struct request___rq_disk *)rq)->rq_disk;
	if (!disk)
		return 0;
	return ((__u32)disk->major << 20) | disk->first_minor;
}

static __always_inline bool wanted(struct request *rq)
{
	return !filter_dev || rq_dev(rq) == filter_dev;
}

static __always_inline __u32 disk_dev(struct gendisk *disk)
{
	return ((__u32)BPF_CORE_READ(disk, major) << 20) | BPF_CORE_READ(disk, first_minor);
}

static __always_inline struct gendisk *bio_disk(struct bio *bio)
{
	if (bpf_core_field_exists(bio->bi_bdev))
		return BPF_CORE_READ(bio, bi_bdev, bd_disk);
	return BPF_CORE_READ((struct bio___bi_disk *)bio, bi_disk);
}

// Where a partition starts on its disk, in sectors.
static __always_inline __u64 start_sect(struct block_device *bdev)
{
	if (bpf_core_field_exists(bdev->bd_start_sect))
		return BPF_CORE_READ(bdev, bd_start_sect);
	return BPF_CORE_READ((struct block_device___bd_part *)bdev, bd_part, start_sect);
}

static __always_inline void current_task(struct task_id *t)
{
	__u64 id = bpf_get_current_pid_tgid();
	t->pid = id >> 32;
	t->tid = (__u32)id;
	t->uid = (__u32)bpf_get_current_uid_gid();
	bpf_get_current_comm(t->comm, sizeof(t->comm));
}

// One word per CPU and per program for ptr_bits(). A program in process
// context (issue, io_start) can be interrupted between its store and its
// load by the completion interrupt running block_rq_complete on the same
// CPU: with one shared word the interrupted program read the completing
// request's pointer and tracked the wrong request, whose own completion was
// then dropped unseen. The kernel never nests a program in itself (it counts
// recursion_misses instead), so a word of its own cannot be overwritten.
enum { SLOT_IO_START, SLOT_INSERT, SLOT_ISSUE, SLOT_COMPLETE, SLOT_IOMAP, SLOT_FOLIO, SLOTS };
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} scratch SEC(".maps");

// A trusted pointer's value as a plain number, to hash it: the verifier
// allows no arithmetic on the pointer itself, but a word read back from a
// map is a scalar. (Storing a pointer in a map needs root, as do we.)
static __always_inline __u64 ptr_bits(void *p, __u32 slot)
{
	__u64 *w = bpf_map_lookup_elem(&scratch, &slot);
	if (!w)
		return 0;
	*w = (__u64)p;
	return *(volatile __u64 *)w;
}

static __always_inline void count_lost(__u32 why)
{
	__u64 *n = bpf_map_lookup_elem(&lost, &why);
	if (n)
		*n += 1;
}

// A slot of the in-flight table: a set and a way (`cas`), or the hash
// map's entry; `f` is the request's entry, NULL when it is not tracked.
struct slot {
	struct set *set;
	__u32 way;
	struct inflight *f;
};

// The request's set (Fibonacci hashing of its address) and the way holding
// it, else way WAYS. `cas` (a compile-time constant in each program): the
// set-associative table, else (before 5.12) the hash map.
static __always_inline struct slot find(__u64 key, bool cas)
{
	struct slot s = { NULL, WAYS, NULL };
	if (!cas) {
		s.f = bpf_map_lookup_elem(&inflight_h, &key);
		return s;
	}
	__u32 i = (__u32)((key * 0x9E3779B97F4A7C15ull) >> 51) & (SETS - 1);
	s.set = bpf_map_lookup_elem(&inflight, &i);
	if (!s.set)
		return s;
	for (__u32 w = 0; w < WAYS; w++)
		if (s.set->rq[w] == key) {
			s.way = w;
			s.f = &s.set->f[w];
			break;
		}
	return s;
}

// The request's entry, else a free way claimed for it (NULL, and counted as
// lost, when all ways are taken). A claimed entry starts zeroed; `fresh`
// zeroes a found one too (a new request reusing a stale entry's pointer).
static __always_inline struct inflight *track(__u64 key, bool fresh, bool cas)
{
	if (!cas) {
		struct inflight *f = bpf_map_lookup_elem(&inflight_h, &key);
		if (f && !fresh)
			return f;
		if (bpf_map_update_elem(&inflight_h, &key, &zero_inflight, BPF_ANY)) {
			count_lost(1);
			return NULL;
		}
		return bpf_map_lookup_elem(&inflight_h, &key);
	}
	struct slot s = find(key, cas);
	if (!s.set)
		return NULL;
	if (s.way < WAYS) {
		if (fresh)
			__builtin_memset(&s.set->f[s.way], 0, sizeof(struct inflight));
		return &s.set->f[s.way];
	}
	for (__u32 w = 0; w < WAYS; w++)
		if (__sync_val_compare_and_swap(&s.set->rq[w], 0, key) == 0) {
			__builtin_memset(&s.set->f[w], 0, sizeof(struct inflight));
			return &s.set->f[w];
		}
	count_lost(1);
	return NULL;
}

// Free the request's entry (after its fields were read).
static __always_inline void untrack(struct slot s, __u64 key, bool cas)
{
	if (!cas)
		bpf_map_delete_elem(&inflight_h, &key);
	else if (s.way < WAYS)
		__sync_val_compare_and_swap(&s.set->rq[s.way], key, 0);
}

// The kernel's blk_fill_rwbs(), on the request's cmd_flags. Flag bit numbers
// come from this kernel's BTF (CO-RE enum relocations). Characters are
// shifted into one word (no variable-index stores: the verifier rejects the
// pointer arithmetic clang emits for them on the stack).
static __always_inline void fill_rwbs(char *rwbs, __u32 opf)
{
	__u64 v = 0;
	int n = 0;
	__u32 op = opf & REQ_OP_MASK;

#define PUT(c) do { v |= (__u64)(c) << (8 * n); n++; } while (0)
	if (opf & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_PREFLUSH)))
		PUT('F');
	if (op == REQ_OP(REQ_OP_WRITE))
		PUT('W');
	else if (op == REQ_OP(REQ_OP_DISCARD))
		PUT('D');
	else if (op == REQ_OP(REQ_OP_SECURE_ERASE)) {
		PUT('D');
		PUT('E');
	} else if (op == REQ_OP(REQ_OP_FLUSH))
		PUT('F');
	else if (op == REQ_OP(REQ_OP_READ))
		PUT('R');
	else
		PUT('N');
	if (opf & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_FUA)))
		PUT('F');
	if (opf & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_RAHEAD)))
		PUT('A');
	if (opf & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_SYNC)))
		PUT('S');
	if (opf & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_META)))
		PUT('M');
#undef PUT
	// At most 7 characters: the last byte stays NUL.
	__builtin_memcpy(rwbs, &v, RWBS_LEN);
}

static __always_inline __u32 log2_slot(__u64 v)
{
	__u32 slot = 0;
	for (int i = 0; i < MAX_SLOTS - 1 && v > 1; i++) {
		v >>= 1;
		slot++;
	}
	return slot;
}

// Remember the current task as the submitter of what starts at `sector`.
static __always_inline void remember(__u32 dev, __u64 sector)
{
	if (filter_dev && dev != filter_dev)
		return;
	struct sector_key k = { .dev = dev, .sector = sector };
	struct task_id t;
	current_task(&t);
	bpf_map_update_elem(&submitters, &k, &t, BPF_ANY);
}

static __always_inline bool in_worker(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	return BPF_CORE_READ(task, flags) & PF_WQ_WORKER;
}

// The reader that added the folio holding a read bio's first page, if the
// folio still belongs to the file it was added to.
static __always_inline struct task_id *reader_of(struct bio *bio)
{
	if ((BPF_CORE_READ(bio, bi_opf) & REQ_OP_MASK) != REQ_OP(REQ_OP_READ))
		return NULL;
	struct page *page = BPF_CORE_READ(bio, bi_io_vec, bv_page);
	if (!page)
		return NULL;
	// A tail page of a large folio points to its head, bit 0 set.
	__u64 head = BPF_CORE_READ(page, compound_head);
	if (head & 1)
		page = (struct page *)(head - 1);
	__u64 key = (__u64)page;
	struct reader *r = bpf_map_lookup_elem(&readers, &key);
	if (!r || r->mapping != (__u64)BPF_CORE_READ(page, mapping))
		return NULL;
	return &r->who;
}

// Runs where the bio enters the block layer, or, for a bio blk-throttle
// held back, in the kworker that sends it on: that one is not its submitter.
static __always_inline void bio_queue(struct bio *bio)
{
	// After a partition's remap the sector is the whole disk's.
	__u32 dev = disk_dev(bio_disk(bio));
	__u64 sector = BPF_CORE_READ(bio, bi_iter.bi_sector);
	if (!in_worker()) {
		remember(dev, sector);
		return;
	}
	if (filter_dev && dev != filter_dev)
		return;
	struct task_id *who = reader_of(bio);
	struct sector_key k = { .dev = dev, .sector = sector };
	// A direct I/O's submitter, remembered at its mapping, stands.
	if (who)
		bpf_map_update_elem(&submitters, &k, who, BPF_NOEXIST);
}

SEC("tp_btf/block_bio_queue")
int BPF_PROG(block_bio_queue, struct bio *bio)
{
	bio_queue(bio);
	return 0;
}

SEC("tp_btf/block_bio_queue")
int BPF_PROG(block_bio_queue_q, struct request_queue *q, struct bio *bio)
{
	bio_queue(bio);
	return 0;
}

// A bio split at `new_sector` (the device's limits): the rest is submitted
// again, traced by no block_bio_queue, and blk-throttle may hold it back,
// so its submitter is the split bio's.
static __always_inline void split(struct bio *bio, __u32 new_sector)
{
	struct sector_key k = { .dev = disk_dev(bio_disk(bio)),
				.sector = BPF_CORE_READ(bio, bi_iter.bi_sector) };
	if (filter_dev && k.dev != filter_dev)
		return;
	if (!in_worker()) {
		remember(k.dev, new_sector);
		return;
	}
	struct task_id *who = bpf_map_lookup_elem(&submitters, &k);
	if (!who)
		return;
	struct task_id t = *who;
	k.sector = new_sector;
	bpf_map_update_elem(&submitters, &k, &t, BPF_NOEXIST);
}

SEC("tp_btf/block_split")
int BPF_PROG(block_split, struct bio *bio, unsigned int new_sector)
{
	split(bio, new_sector);
	return 0;
}

SEC("tp_btf/block_split")
int BPF_PROG(block_split_q, struct request_queue *q, struct bio *bio, unsigned int new_sector)
{
	split(bio, new_sector);
	return 0;
}

// A folio added to the page cache, in the context of whoever added it: a
// read's readahead adds its folios, then submits their bio.
SEC("tp_btf/mm_filemap_add_to_page_cache")
int filemap_add(__u64 *ctx)
{
	if (in_worker())
		return 0;
	struct page *page = (struct page *)ctx[0];  // the folio's head page
	__u64 key = ptr_bits(page, SLOT_FOLIO);
	if (!key)
		return 0;
	struct reader r = { .mapping = (__u64)BPF_CORE_READ(page, mapping) };
	current_task(&r.who);
	bpf_map_update_elem(&readers, &key, &r, BPF_ANY);
	return 0;
}

// A direct I/O's mapping, in its submitter's context: its bio will start at
// the mapped address of the iteration's position (iomap_sector()). The iomap
// is always an iomap_iter's own (fs/iomap/iter.c), whose pos and flags
// tell where and what kind of I/O.
SEC("tp_btf/iomap_iter_dstmap")
int BPF_PROG(iomap_iter_dstmap, struct inode *inode, struct iomap *iomap)
{
	__u64 at = ptr_bits(iomap, SLOT_IOMAP);
	if (!at)
		return 0;
	struct iomap_iter *iter = (void *)(at - bpf_core_field_offset(struct iomap_iter, iomap));
	if (!(BPF_CORE_READ(iter, flags) & IOMAP_DIRECT))
		return 0;
	__u16 type = BPF_CORE_READ(iomap, type);
	if (type != IOMAP_MAPPED && type != IOMAP_UNWRITTEN)
		return 0;
	struct block_device *bdev = BPF_CORE_READ(iomap, bdev);
	if (!bdev)
		return 0;
	__u64 addr = BPF_CORE_READ(iomap, addr) + BPF_CORE_READ(iter, pos) - BPF_CORE_READ(iomap, offset);
	remember(disk_dev(BPF_CORE_READ(bdev, bd_disk)), start_sect(bdev) + (addr >> 9));
	return 0;
}

// Since 6.5, so never without compare-and-swap.
SEC("tp_btf/block_io_start")
int BPF_PROG(block_io_start, struct request *rq)
{
	__u64 key = ptr_bits(rq, SLOT_IO_START);
	if (!key || !wanted(rq))
		return 0;
	struct inflight *f = track(key, true, true);
	if (!f)
		return 0;
	f->io_start_ns = bpf_ktime_get_ns();
	current_task(&f->submitter);
	return 0;
}

static __always_inline void rq_insert(struct request *rq, bool cas)
{
	__u64 key = ptr_bits(rq, SLOT_INSERT);
	if (!key || !wanted(rq))
		return;
	struct inflight *f = track(key, false, cas);
	if (f)
		f->insert_ns = bpf_ktime_get_ns();
}

static __always_inline void rq_issue(struct request *rq, bool cas)
{
	__u64 key = ptr_bits(rq, SLOT_ISSUE);
	if (!key || !wanted(rq))
		return;
	struct inflight *f = track(key, false, cas);
	if (!f)
		return;
	// A requeued request is issued again: its latency counts from the last issue.
	f->issue_ns = bpf_ktime_get_ns();
	f->sector = rq->__sector;
	f->bytes = rq->__data_len;
	// The submitter of the request's first bio, where it was submitted.
	struct sector_key k = { .dev = rq_dev(rq), .sector = f->sector };
	struct task_id *sub = bpf_map_lookup_elem(&submitters, &k);
	if (sub) {
		f->submitter = *sub;
		bpf_map_delete_elem(&submitters, &k);
	}
	// Mostly the submitter issues its own request: copy rather than ask
	// the kernel for its name again.
	if ((__u32)bpf_get_current_pid_tgid() == f->submitter.tid && f->submitter.pid)
		f->issuer = f->submitter;
	else
		current_task(&f->issuer);
}

static __always_inline void rq_complete(struct request *rq, int error, unsigned int nr_bytes,
					bool cas)
{
	__u64 key = ptr_bits(rq, SLOT_COMPLETE);
	if (!key)
		return;
	struct slot s = find(key, cas);
	struct inflight *f = s.f;
	if (!f)
		return;
	// A partial completion: the request stays in flight until its last bytes.
	if (nr_bytes < rq->__data_len)
		return;
	__u64 now = bpf_ktime_get_ns();
	if (!f->issue_ns) {
		untrack(s, key, cas);
		return;
	}
	struct task_id *who = f->submitter.pid ? &f->submitter : &f->issuer;
	if (filter_uid != (__u32)-1) {
		if (who->uid != filter_uid) {
			untrack(s, key, cas);
			return;
		}
		// Issued by another user's task (it ran the queue): not named.
		if (f->issuer.uid != filter_uid)
			f->issuer = *who;
	}
	__u32 opf = rq->cmd_flags;

	if (hist_only) {
		__u64 from = f->issue_ns;
		if (queued && f->insert_ns && f->insert_ns < from)
			from = f->insert_ns;
		struct hist_key hk = {};
		hk.dev = rq_dev(rq);
		hk.slot = log2_slot((now - from) / 1000);
		hk.pid = who->pid;
		fill_rwbs(hk.rwbs, opf);
		__builtin_memcpy(hk.comm, who->comm, TASK_COMM_LEN);
		__u64 one = 1, *count = bpf_map_lookup_elem(&hist, &hk);
		if (count)
			__sync_fetch_and_add(count, 1);
		else
			bpf_map_update_elem(&hist, &hk, &one, BPF_NOEXIST);
		untrack(s, key, cas);
		return;
	}

	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(0);
		untrack(s, key, cas);
		return;
	}
	e->io_start_ns = f->io_start_ns;
	e->insert_ns = f->insert_ns;
	e->issue_ns = f->issue_ns;
	e->complete_ns = now;
	e->sector = f->sector;
	e->dev = rq_dev(rq);
	e->bytes = f->bytes;
	e->error = error;
	e->_pad = 0;
	e->submitter = f->submitter;
	e->issuer = f->issuer;
	fill_rwbs(e->rwbs, opf);
	long flags = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= WAKEUP_BYTES ?
		BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
	bpf_ringbuf_submit(e, flags);
	untrack(s, key, cas);
}

SEC("tp_btf/block_rq_insert")
int BPF_PROG(block_rq_insert, struct request *rq)
{
	rq_insert(rq, true);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(block_rq_issue, struct request *rq)
{
	rq_issue(rq, true);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(block_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	rq_complete(rq, error, nr_bytes, true);
	return 0;
}

SEC("tp_btf/block_rq_insert")
int BPF_PROG(block_rq_insert_h, struct request *rq)
{
	rq_insert(rq, false);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(block_rq_issue_h, struct request *rq)
{
	rq_issue(rq, false);
	return 0;
}

// The error: an errno (int) on 5.10, a blk_status_t on later kernels.
SEC("tp_btf/block_rq_complete")
int BPF_PROG(block_rq_complete_h, struct request *rq, int error, unsigned int nr_bytes)
{
	rq_complete(rq, error, nr_bytes, false);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
