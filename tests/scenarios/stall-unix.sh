# A unix-socket server asleep while connections wait in its accept queue.
# Truth: ss -x, the listener's Recv-Q.
EXPECT=stall
EVIDENCE="wait in the accept queue"
start() {
    SOCK=$work/stall.sock
    python_bg "import socket, time
s = socket.socket(socket.AF_UNIX); s.bind('$SOCK'); s.listen(64)
print('up', flush=True); time.sleep(600)"
    for i in 1 2 3; do python3 -c "import socket,time; s=socket.socket(socket.AF_UNIX); s.connect('$SOCK'); time.sleep(60)" & done
    CLEANUP="kill $PID; pkill -f \"s.connect..$SOCK\""
}
truth() { sleep 1; echo "ss -x: listener Recv-Q $(ss -Hlx src "$SOCK" | awk '{print $3}') connections queued"; }
