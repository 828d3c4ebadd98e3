# The postgres-row-lock fault watched as the whole server (--tree from the
# postmaster): two of its processes wait for the row, the rest sleep.
# Truth: pg_stat_activity, the backends waiting on Lock.
EXPECT=lock
EVIDENCE="a heavyweight lock (row or table)"
NEEDS=psql
start() {
    pg_start
    pg_row_lock
    PID=$POSTMASTER; ARGS="-p $PID --tree"; CLEANUP="pg_stop"
}
truth() { sleep 1; echo "pg_stat_activity: $(psql -Atc "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") backends waiting on Lock"; }
