#!/bin/bash
# Under mpirun --enable-recovery a failing rank ends the job through its launcher (SIGTERM,
# run_fail_launcher in trainer/run.c); the launcher must first have read what the rank printed,
# or the error naming the file or rank is lost with it. A stand-in launcher named mpirun-standin
# reads the rank's stderr 0.5 s after each first byte arrives and drops what it had not read
# when SIGTERM comes (a launcher busy elsewhere, as Open MPI's under load); a
# singleton eager-train fails on a missing data file: the error line and the rank's note on
# ending the job must both reach the log, and the launcher must have been signalled.
. "$(dirname "$0")/common.sh"
cat > "$TMP/mpirun-standin" <<'SH'
#!/bin/bash
log=$1; shift
mkfifo "$log.fifo"; : > "$log"
forward() { # each burst of output: its first byte, 0.5 s, then what came meanwhile, as read
  python3 -c '
import os, sys, time
log = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
while (c := os.read(0, 1)):
    time.sleep(0.5)
    os.set_blocking(0, False)
    try: c += os.read(0, 1 << 16)
    except BlockingIOError: pass
    os.set_blocking(0, True)
    os.write(log, c)' "$log"
}
forward < "$log.fifo" & reader=$!
trap 'kill -9 $reader 2>/dev/null; echo "launcher: SIGTERM" >> "$log"; exit 143' TERM
"$@" > /dev/null 2> "$log.fifo" & rank=$!
wait $rank; rc=$?
wait $reader
echo "launcher: rank exited $rc" >> "$log"
SH
chmod +x "$TMP/mpirun-standin"
OMPI_MCA_orte_enable_recovery=1 timeout 60 "$TMP/mpirun-standin" "$TMP/log" \
  "$TRAIN" --experiment fmnist --data-path "$TMP/none" --epochs 1 --out "$TMP/run.json"
sed 's/^/    /' "$TMP/log"
grep -q "launcher: SIGTERM" "$TMP/log" || fail "the rank did not end the job through its launcher"
grep -q "eager-train: training data: $TMP/none/.*cannot open" "$TMP/log" ||
  fail "the rank's error was lost: its launcher was ended before it had read it"
grep -q "ending the job through its launcher" "$TMP/log" || fail "the rank's note on ending the job was lost"
echo "ok: the launcher read the rank's error before the rank ended it"
