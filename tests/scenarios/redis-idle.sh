# An idle Redis server (its background threads wait for work). Truth:
# redis-cli INFO, no clients but ours; pidstat ~0% CPU.
EXPECT=idle
EVIDENCE="sleeping by design"
QUICK=1
NEEDS="redis-server redis-cli"
start() { redis-server --port 6390 --save '' --daemonize no > /dev/null & PID=$!; CLEANUP="kill $PID"; sleep 0.5; }
truth() { echo "redis: $(redis-cli -p 6390 info clients | grep connected_clients | tr -d '\r'); $(default_truth)"; }
