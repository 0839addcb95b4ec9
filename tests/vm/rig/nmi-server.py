#!/usr/bin/env python3
"""NMI injection on request of a test running inside the VM.

Usage: nmi-server.py MONITOR_SOCKET RESULTS_DIR

qemu's human monitor listens on MONITOR_SOCKET; its `nmi` command raises an
NMI in the guest.  A guest test asks for NMIs through the results export
(in the guest: $SFRAME_VM_RESULTS/nmi/, writable by root and by uid 65534):

  1. write "COUNT [INTERVAL_MS]" into a file named anything not starting with
     "req.", then rename(2) it to  nmi/req.<ID>  (ID: any [A-Za-z0-9_.-]);
  2. wait until  nmi/done.<ID>  exists (it holds "COUNT sent" or "error ...").

This service polls every 50 ms, sends COUNT `nmi` commands INTERVAL_MS apart
(default 0) and renames the request to done.<ID>, appending the outcome.
"""
import os
import re
import socket
import sys
import time


def send_nmis(path, count, interval):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)

    def read_prompt():
        buf = b""
        while not buf.endswith(b"(qemu) "):
            chunk = s.recv(4096)
            if not chunk:
                raise OSError("monitor closed")
            buf += chunk
        return buf

    read_prompt()
    for i in range(count):
        s.sendall(b"nmi\n")
        read_prompt()
        if interval and i + 1 < count:
            time.sleep(interval / 1000.0)
    s.close()


def main():
    mon, res = sys.argv[1], sys.argv[2]
    d = os.path.join(res, "nmi")
    while True:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            names = []
        for n in names:
            m = re.fullmatch(r"req\.([A-Za-z0-9_.-]+)", n)
            if not m:
                continue
            req = os.path.join(d, n)
            try:
                with open(req) as f:
                    parts = f.read().split()
                count = int(parts[0])
                interval = int(parts[1]) if len(parts) > 1 else 0
                if count < 0 or count > 100000 or interval < 0:
                    raise ValueError("bad request")
                send_nmis(mon, count, interval)
                outcome = "%d sent\n" % count
            except Exception as e:  # report it to the guest, keep serving
                outcome = "error %s\n" % e
            try:
                with open(req, "a") as f:
                    f.write(outcome)
                os.rename(req, os.path.join(d, "done." + m.group(1)))
            except OSError:
                pass
            print("nmi-server: %s: %s" % (n, outcome.strip()), flush=True)
        time.sleep(0.05)


if __name__ == "__main__":
    main()
