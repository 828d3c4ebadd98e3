# A TCP server asleep in one call (as Redis in DEBUG SLEEP) while clients'
# connections wait in its accept queue. Truth: ss, the listener's Recv-Q.
EXPECT=stall
EVIDENCE="wait in the accept queue"
QUICK=1
start() {
    python_bg 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64)
print(s.getsockname()[1], flush=True); time.sleep(600)'
    PORT=$LINE
    for i in 1 2 3; do python3 -c "import socket,time; s=socket.create_connection(('127.0.0.1', $PORT)); time.sleep(60)" & done
    CLEANUP="kill $PID; pkill -f 'create_connection..127.0.0.1., $PORT'"
}
truth() { sleep 1; echo "ss: listener Recv-Q $(ss -Hltn "sport = :$PORT" | awk '{print $2}') connections queued"; }
