# Output probe: writes COUNT bytes of invalid UTF-8 (0xff 0xfe 0xc3 '(' repeated) to stdout in
# 1 MB writes.
import sys

count = int(sys.argv[1])
chunk = b"\xff\xfe\xc3(" * 250000
w = sys.stdout.buffer.write
while count >= len(chunk):
    w(chunk)
    count -= len(chunk)
w(chunk[:count])
sys.stdout.buffer.flush()
