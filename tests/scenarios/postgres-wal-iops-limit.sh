# pgbench (8 clients) against a cluster in a v1 blkio cgroup of 60 write
# IOPS: every commit's WAL flush is a write the limit holds, and backends
# queue behind the throttled writer. Watched: the cgroup. Truth: pgbench's
# tps, pg_stat_activity's wait events, blkio.throttle.io_serviced.
EXPECT=io-limit
EVIDENCE="write IOPS"
NEEDS="psql pgbench"
start() {
    cg_new blkio; echo "$(disk_of "$work") 60" > "$CG/blkio.throttle.write_iops_device"
    pg_start "$CG"
    pgbench -qi -s 1 > /dev/null 2>&1
    pgbench -c 8 -T 30 > "$work/pgbench.out" 2>&1 & BENCH=$!
    ARGS="--cgroup ${CG#/sys/fs/cgroup/}"; CLEANUP="kill $BENCH; pg_stop; cg_cleanup"
}
truth() {
    local a b w; a=$(awk '$2 == "Write" {s += $3} END {print s}' "$CG/blkio.throttle.io_serviced")
    w=$(psql -Atc "SELECT string_agg(wait_event || ' ' || n, ', ') FROM (SELECT wait_event, count(*) n FROM pg_stat_activity WHERE backend_type = 'client backend' AND wait_event IS NOT NULL GROUP BY 1 ORDER BY 2 DESC) x")
    sleep 5; b=$(awk '$2 == "Write" {s += $3} END {print s}' "$CG/blkio.throttle.io_serviced")
    echo "blkio: $(( (b - a) / 5 )) writes/s, limit 60; pg_stat_activity: $w"
}
