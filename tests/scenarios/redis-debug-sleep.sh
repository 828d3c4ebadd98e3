# Redis in DEBUG SLEEP 30 while clients connect: its one event loop is
# asleep with connections waiting to be accepted. Truth: ss, the
# listener's Recv-Q.
EXPECT=stall
EVIDENCE="wait in the accept queue"
NEEDS="redis-server redis-cli"
start() {
    redis-server --port 6391 --save '' --daemonize no --enable-debug-command yes > /dev/null & PID=$!; sleep 0.5
    redis-cli -p 6391 debug sleep 30 > /dev/null &
    sleep 0.2; for i in 1 2 3; do redis-cli -p 6391 ping > /dev/null & done
    CLEANUP="kill -9 $PID"
}
truth() { sleep 1; echo "ss: listener Recv-Q $(ss -Hltn "sport = :6391" | awk '{print $2}' | head -1) connections queued"; }
