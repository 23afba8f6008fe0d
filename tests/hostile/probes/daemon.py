# Daemon probe: double-forks a session leader that ignores SIGTERM and SIGHUP, closes its stdio
# and becomes `sleep 1000.<TOKEN>`, so the host can find it by its command line. Prints "spawned".
import os
import signal
import sys

token = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        fd = os.open("/dev/null", os.O_RDWR)
        for i in (0, 1, 2):
            os.dup2(fd, i)
        os.execvp("sleep", ["sleep", "1000." + token])
    os._exit(0)
os.wait()
print("spawned", flush=True)
