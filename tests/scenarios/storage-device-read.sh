# fio reading 1 MiB at random with O_DIRECT, one at a time, no limit: each
# read waits for the device's transfer. Truth: fio's own latency
# (clat ~0.8 ms, most of each read's time), ps, the job in D.
EXPECT=io
EVIDENCE="read"
QUICK=1
NEEDS=fio
start() {
    disk_file /var/tmp/kdiag-scenario-big 512
    fio --name=r --filename=/var/tmp/kdiag-scenario-big --rw=randread --bs=1M --direct=1 --ioengine=psync --time_based --runtime=20 --output="$work/fio.out" &
    FIO=$!; sleep 1; PID=$(pgrep -n -P $FIO fio || echo $FIO); CLEANUP="kill $PID $FIO; wait $FIO"
}
truth() {
    local s=; for i in $(seq 20); do s="$s$(ps -o stat= -p $PID | cut -c1)"; sleep 0.25; done
    echo "ps: D in $(echo "$s" | tr -cd D | wc -c) of 20 looks; $(diskstats_truth)"
}
