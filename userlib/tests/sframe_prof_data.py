#!/usr/bin/env python3
"""An independent reader of sframe-prof's data file, format 2, written from
docs/sframe-prof-format.md alone: prints the file as version 1 text (one
line per record, addresses in hex), so that profile_test can compare it
with what the library wrote.  Usage: sframe_prof_data.py FILE"""
import sys

MAGIC = b"\x89SFPROF\n"


class Bad(Exception):
    pass


def uvarint(b, at):
    v, shift = 0, 0
    while True:
        if at >= len(b):
            raise Bad("varint runs past its record")
        c = b[at]
        at += 1
        v |= (c & 0x7F) << shift
        if not c & 0x80:
            if v >= 1 << 64:
                raise Bad("varint above 64 bits")
            return v, at
        shift += 7


def delta(base, b, at):
    z, at = uvarint(b, at)
    d = (z >> 1) ^ -(z & 1)
    return (base + d) % (1 << 64), at


def string(b, at):
    n, at = uvarint(b, at)
    if at + n > len(b):
        raise Bad("string runs past its record")
    return b[at:at + n], at + n


def main(path):
    data = open(path, "rb").read()
    if data[:8] != MAGIC or int.from_bytes(data[8:12], "little") != 2:
        raise Bad("not format 2")
    out = ["sframe-prof 1"]
    nodes = [(0, 0, False)]  # (address, parent, kernel)
    at, last_time, samples, ended = 12, 0, 0, False
    while at < len(data):
        if ended:
            raise Bad("data after the end record")
        rtype = data[at]
        length, at = uvarint(data, at + 1)
        if length > 1 << 20 or at + length > len(data):
            raise Bad("bad record length")
        p, at = data[at:at + length], at + length
        if rtype == 1:
            k, i = string(p, 0)
            v, i = string(p, i)
            out.append("meta %s %s" % (k.decode(), v.decode()))
        elif rtype == 2:
            pid, i = uvarint(p, 0)
            start, i = uvarint(p, i)
            size, i = uvarint(p, i)
            off, i = uvarint(p, i)
            path_, i = string(p, i)
            bid, i = string(p, i)
            out.append("mmap %d %x %x %x %s build_id=%s" % (pid, start, start + size, off,
                                                            path_.decode(), bid.hex()))
        elif rtype == 3:
            pid, i = uvarint(p, 0)
            name, i = string(p, i)
            out.append("comm %d %s" % (pid, name.decode()))
        elif rtype == 4:
            last_time, i = delta(last_time, p, 0)
            pid, i = uvarint(p, i)
            tid, i = delta(pid, p, i)
            cpu, i = uvarint(p, i)
            flags, i = uvarint(p, i)
            stop, i = uvarint(p, i)
            node, i = uvarint(p, i)
            nu, i = uvarint(p, i)
            nk, i = uvarint(p, i)
            if node >= len(nodes):
                raise Bad("undefined node")
            prev = nodes[node][0]
            for j in range(nu + nk):
                prev, i = delta(prev, p, i)
                nodes.append((prev, node, j >= nu))
                node = len(nodes) - 1
            user, kernel = [], []
            while node:
                addr, parent, is_kernel = nodes[node]
                (kernel if is_kernel else user).append(addr)
                node = parent
            out.append("sample %d %d %d %d %x %d k=%s u=%s" % (
                last_time, pid, tid, cpu, flags, stop,
                ",".join("%x" % a for a in kernel), ",".join("%x" % a for a in user)))
            samples += 1
        elif rtype == 5:
            n, _ = uvarint(p, 0)
            out.append("lost %d" % n)
        elif rtype == 6:
            n, _ = uvarint(p, 0)
            if n != samples:
                raise Bad("end record count")
            ended = True
    if not ended:
        raise Bad("no end record")
    print("\n".join(out))


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except Bad as e:
        print("bad file: %s" % e, file=sys.stderr)
        sys.exit(1)
