# Zombie probe: an intermediate process forks N children that exit at once and are never waited
# for, counts them as zombies, then exits: all N are reparented to the sandbox's init at once.
# The probe then waits (up to 10 s) for init to reap them. Prints
# {"forked": n, "fork_errors": e, "zombies_seen": z, "left_after_reap": l}.
import json
import os
import sys
import time

N = int(sys.argv[1])


def zombies(ppid=None):
    count = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if fields[0] == "Z" and (ppid is None or int(fields[1]) == ppid):
            count += 1
    return count


r, w = os.pipe()
mid = os.fork()
if mid == 0:
    os.close(r)
    forked = errors = 0
    for _ in range(N):
        try:
            pid = os.fork()
        except OSError:
            errors += 1
            continue
        if pid == 0:
            os._exit(0)
        forked += 1
    time.sleep(0.2)
    seen = zombies(os.getpid())
    os.write(w, json.dumps({"forked": forked, "fork_errors": errors,
                            "zombies_seen": seen}).encode())
    os._exit(0)  # the zombies now belong to init
os.close(w)
report = json.loads(os.read(r, 4096).decode())
os.waitpid(mid, 0)
deadline = time.monotonic() + 10
left = zombies()
while left and time.monotonic() < deadline:
    time.sleep(0.1)
    left = zombies()
report["left_after_reap"] = left
print(json.dumps(report))
