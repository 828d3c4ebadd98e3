# A process that computes for 3 s, then sleeps: the window's verdict is its
# busy phase, and the trend shows the change. Truth: pidstat per second.
EXPECT=cpu
EVIDENCE="Trend"
start() { sh -c 'end=$(($(date +%s) + 4)); while [ $(date +%s) -lt $end ]; do :; done; exec sleep 600' & PID=$!; CLEANUP="kill $PID"; }
truth() { echo "pidstat -u 1: $(pidstat -u -p $PID 1 5 | awk '$1 != "Average:" && $NF == "sh" || $NF == "sleep" {printf "%s ", $(NF-3)}')"; }
