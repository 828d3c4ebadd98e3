# Eight goroutines taking turns at one sync.Mutex, computing 2 ms under it
# (tests/programs/contend_mutex.go), GOMAXPROCS=2. Truth: a goroutine dump
# (SIGQUIT), 7 of 8 in sync.(*Mutex).Lock.
EXPECT=lock
EVIDENCE="a sync.Mutex"
NEEDS=go
start() {
    [ -x "$work/contend_mutex" ] || (cd "$work" && cp "$root/tests/programs/contend_mutex.go" . && GOCACHE=$work/gocache go build -o contend_mutex contend_mutex.go)
    GOMAXPROCS=2 "$work/contend_mutex" > /dev/null 2> "$work/go.dump" & PID=$!; CLEANUP="kill $PID"
}
truth() { default_truth; }
