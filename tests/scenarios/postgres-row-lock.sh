# One PostgreSQL session holds a row's lock (an open transaction asleep);
# two others wait to update that row. Watched: a waiting backend.
# Truth: pg_stat_activity, the backends waiting on wait_event_type Lock;
# pg_locks, the transaction lock not granted.
EXPECT=lock
EVIDENCE="a heavyweight lock (row or table)"
QUICK=1
NEEDS=psql
start() {
    pg_start
    pg_row_lock
    PID=$(psql -Atc "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' ORDER BY pid LIMIT 1")
    CLEANUP="pg_stop"
}
truth() {
    sleep 1; echo "pg_stat_activity: $(psql -Atc "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") backends waiting on Lock; pg_locks: $(psql -Atc "SELECT count(*) FROM pg_locks WHERE NOT granted") not granted"
}
