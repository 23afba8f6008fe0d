"""B6 workload: syscall-heavy Python with execs, connects and bytes (docs/performance.md).

Usage: b6_workload.py ITERATIONS EXECS CONNECTS
  ITERATIONS  rounds of stat + open + read + close on one file (4 syscalls each)
  EXECS       /bin/true subprocesses (exec audit)
  CONNECTS    TCP connections to a loopback listener in this process, 10 kB each way (connect
              audit, cgroup_skb byte counters)
"""
import os
import socket
import subprocess
import sys
import threading


def file_loop(iterations):
    path = "/tmp/airlock-b6-%d" % os.getpid()
    with open(path, "w") as f:
        f.write("x")
    try:
        for _ in range(iterations):
            os.stat(path)
            fd = os.open(path, os.O_RDONLY)
            os.read(fd, 1)
            os.close(fd)
    finally:
        os.unlink(path)


def exec_loop(execs):
    for _ in range(execs):
        subprocess.run(["/bin/true"], check=True)


def connect_loop(connects):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    port = server.getsockname()[1]

    def serve():
        for _ in range(connects):
            conn, _ = server.accept()
            with conn:
                while conn.recv(65536):
                    pass
                conn.sendall(b"y" * 10000)

    t = threading.Thread(target=serve)
    t.start()
    payload = b"x" * 10000
    for _ in range(connects):
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(payload)
        c.shutdown(socket.SHUT_WR)
        while c.recv(65536):
            pass
        c.close()
    t.join()
    server.close()


def main():
    iterations, execs, connects = (int(a) for a in sys.argv[1:4])
    file_loop(iterations)
    exec_loop(execs)
    connect_loop(connects)


if __name__ == "__main__":
    main()
