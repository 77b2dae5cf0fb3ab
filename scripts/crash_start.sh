#!/bin/bash
# crash_start.sh NEARDUP DIR true|false: the start of `neardup serve` after a kill -9, with
# --quick-repair true or false. Serves DIR (a copy: it is written), puts 64 documents 8 at a
# time, kills the server with SIGKILL, then times a start with the same flags until /healthz
# answers; prints the seconds, its CPU and peak RSS (/usr/bin/time), and what the start said.
bin=$1; dir=$2; qr=$3; port=18199
$bin serve --data "$dir" --listen 127.0.0.1:$port --snapshot-every 0 --quick-repair $qr 2>/tmp/crash1.err &
pid=$!
until curl -sf http://127.0.0.1:$port/healthz >/dev/null; do sleep 0.05; done
for i in $(seq 1 64); do
  curl -s -X PUT -H 'Content-Type: application/json' http://127.0.0.1:$port/v1/documents/crash-$qr-$RANDOM-$i \
    -d "{\"text\": \"document $i of the crash test, $RANDOM $RANDOM $RANDOM, with a few more words in it\"}" >/dev/null &
  if (( i % 8 == 0 )); then wait $(jobs -p | grep -v "^$pid$") 2>/dev/null; fi
done
sleep 0.2
kill -9 $pid; wait $pid 2>/dev/null
/usr/bin/time -f "user_s %U sys_s %S maxrss_kb %M" -o /tmp/crash.time $bin serve --data "$dir" --listen 127.0.0.1:$port --snapshot-every 0 --quick-repair $qr 2>/tmp/crash2.err &
tpid=$!
t0=$(date +%s.%N)
until curl -sf http://127.0.0.1:$port/healthz >/dev/null; do sleep 0.02; done
t1=$(date +%s.%N)
spid=$(pgrep -P $tpid)
kill -TERM $spid; wait $tpid
echo "qr=$qr ready_s $(echo "$t1 - $t0" | bc) $(cat /tmp/crash.time) load $(cut -d' ' -f1-3 /proc/loadavg)"
grep "index" /tmp/crash2.err
