# Read probe: tries to read each path given and prints one JSON object
# {path: "OK:<first line>" | "<ERRNO>"} (first line cut to 200 characters).
import errno
import json
import sys

out = {}
for path in sys.argv[1:]:
    try:
        with open(path, "rb") as f:
            data = f.read(4096)
        out[path] = "OK:" + data.split(b"\n")[0][:200].decode("utf-8", "replace")
    except OSError as e:
        out[path] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(out, sort_keys=True))
