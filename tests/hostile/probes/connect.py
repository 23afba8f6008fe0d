# Network probe: for each target, connects (2 s timeout) and reads what the server says.
# Targets: tcp:HOST:PORT, tcp6:HOST:PORT, udp:HOST:PORT (one empty datagram, then a 1 s read),
# unix:@NAME (abstract) or unix:/path. Prints {target: "OK:<received>" | "<ERRNO>" | "timeout"}.
import errno
import json
import socket
import sys


def attempt(target):
    kind, rest = target.split(":", 1)
    if kind == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        addr = "\0" + rest[1:] if rest.startswith("@") else rest
    else:
        host, port = rest.rsplit(":", 1)
        family = socket.AF_INET6 if kind == "tcp6" else socket.AF_INET
        stype = socket.SOCK_DGRAM if kind == "udp" else socket.SOCK_STREAM
        s = socket.socket(family, stype)
        addr = (host.strip("[]"), int(port))
    s.settimeout(2)
    try:
        if kind == "udp":
            s.sendto(b"", addr)
            s.settimeout(1)
            data = s.recv(64)
        else:
            s.connect(addr)
            data = s.recv(64)
        return "OK:" + data.decode(errors="replace")
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    finally:
        s.close()


routes = open("/proc/net/route").read().strip().split("\n")[1:]
out = {t: attempt(t) for t in sys.argv[1:]}
out["ipv4_routes"] = len(routes)
print(json.dumps(out))
