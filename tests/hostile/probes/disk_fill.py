# Disk probe: fills each directory given with 1 MiB writes until a write fails with anything
# but EFBIG (the per-file size limit: then the next file), then deletes the files; with
# --inodes, creates empty files in DIR/inodes until that fails or 20 s pass.
# Prints {dir: {"bytes": n, "err": "ENOSPC"...}, "inodes:<dir>": {"files": n, "err": ...}}.
import errno
import json
import os
import sys
import time

CHUNK = b"\xaa" * (1 << 20)
out = {}
args = sys.argv[1:]
inode_dirs = []
if "--inodes" in args:
    i = args.index("--inodes")
    inode_dirs = [args[i + 1]]
    del args[i:i + 2]
for d in args:
    # One file after another: a file that reaches RLIMIT_FSIZE (EFBIG) is not the fill's end.
    n, err, files = 0, "none", []
    while err in ("none", "EFBIG"):
        path = os.path.join(d, "airlock-fill-%d" % len(files))
        files.append(path)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        except OSError as e:
            err = errno.errorcode.get(e.errno, str(e.errno))
            files.pop()
            break
        try:
            while True:
                n += os.write(fd, CHUNK)
        except OSError as e:
            err = errno.errorcode.get(e.errno, str(e.errno))
        os.close(fd)
    for path in files:
        os.unlink(path)
    out[d] = {"bytes": n, "err": err}
for d in inode_dirs:
    base = os.path.join(d, "inodes")
    os.makedirs(base, exist_ok=True)
    n, err = 0, "time limit"
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            for _ in range(1000):
                os.close(os.open(os.path.join(base, str(n)), os.O_WRONLY | os.O_CREAT, 0o600))
                n += 1
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno))
    out["inodes:" + d] = {"files": n, "err": err}
print(json.dumps(out))
