"""Copies standard input to standard output at about RATE MiB/s (the benchmark's slow reader)."""
import sys
import time

rate = float(sys.argv[1]) * (1 << 20)
start = time.monotonic()
done = 0
while True:
    chunk = sys.stdin.buffer.read(1 << 20)
    if not chunk:
        break
    sys.stdout.buffer.write(chunk)
    done += len(chunk)
    ahead = done / rate - (time.monotonic() - start)
    if ahead > 0:
        time.sleep(ahead)
