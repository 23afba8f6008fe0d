# Signal probe: kill(-1, SIGKILL), then SIGKILL to every pid number given on the command line
# (host pids of the test and its canaries) and to every pid below 65536 except ourselves.
# Prints {"kill_-1": verdict, "<pid>": verdict..., "hits": n, "me": pid}: what an attacker who
# guesses supervisor pids gets.
import errno
import json
import os
import signal
import sys

me = os.getpid()
out = {"me": me}


def verdict(pid):
    try:
        os.kill(pid, signal.SIGKILL)
        return "OK"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


out["kill_-1"] = verdict(-1)
for arg in sys.argv[1:]:
    out[arg] = verdict(int(arg))
hits = 0
for pid in range(1, 65536):
    if pid != me and verdict(pid) == "OK":
        hits += 1
out["hits"] = hits
print(json.dumps(out))
