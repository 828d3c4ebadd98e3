# A client waiting on a socket read from a server that answers after 60 s:
# the client is idle, waiting on its upstream, with nothing queued to it.
# Truth: ss, the client's connection established with empty queues; the
# server's process asleep.
EXPECT=idle
EVIDENCE="sleeping by design"
start() {
    python_bg 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
c, _ = s.accept(); time.sleep(60); c.send(b"late")'
    SERVER=$PID; PORT=$LINE
    python3 -c "import socket; s=socket.create_connection(('127.0.0.1', $PORT)); s.recv(10)" & PID=$!
    CLEANUP="kill $PID $SERVER"
}
truth() { sleep 1; echo "ss: client $(ss -Htn "dport = :$PORT" | awk '{print $1, "Recv-Q", $2, "Send-Q", $3}')"; }
