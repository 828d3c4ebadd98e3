# The postgres-row-lock fault watched as the whole server (--tree from the
# postmaster): two of its processes wait for the row, the rest sleep.
# Truth: pg_stat_activity, the backends waiting on Lock.
EXPECT=lock
EVIDENCE="a heavyweight lock (row or table)"
NEEDS=psql
start() {
    pg_start
    psql -qc "CREATE TABLE t (id int PRIMARY KEY, n int); INSERT INTO t VALUES (1, 0);"
    psql -qc "BEGIN; UPDATE t SET n = n + 1 WHERE id = 1; SELECT pg_sleep(600);" > /dev/null 2>&1 &
    sleep 0.5
    for i in 1 2; do psql -qc "UPDATE t SET n = n + 1 WHERE id = 1;" > /dev/null 2>&1 & done
    sleep 0.5
    PID=$POSTMASTER; ARGS="-p $PID --tree"; CLEANUP="pg_stop"
}
truth() { sleep 1; echo "pg_stat_activity: $(psql -Atc "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") backends waiting on Lock"; }
