#!/usr/bin/env python3
"""Write debian/libsframe-client0.symbols from a built libsframe-client.so.0.

Usage: scripts/deb-symbols.py LIBRARY [VERSION] > debian/libsframe-client0.symbols

dpkg-gensymbols lists the library's exported symbols (mangled); each C++
symbol is written demangled with the (c++) tag, so the file reads as the
API and survives a change of the mangling.  Instantiations of the standard
library's templates (std::, __gnu_cxx::) that the library happens to
export depend on the compiler's inlining, not on the API: they are marked
optional, so a rebuild that no longer emits one does not fail.  Rerun
after adding to the library's API, with VERSION the first version that has
the new symbols (new ones only: keep the older lines' versions).
"""
import re
import subprocess
import sys
import tempfile

PACKAGE = "libsframe-client0"
STD = re.compile(
    r"^(?:(?:typeinfo|typeinfo name|vtable|VTT|guard variable|construction vtable)"
    r" for |[^(<]*? )?(?:std|__gnu_cxx)::")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    lib = sys.argv[1]
    version = sys.argv[2] if len(sys.argv) == 3 else "0.1.0"
    with tempfile.NamedTemporaryFile("r") as raw:
        subprocess.run(["dpkg-gensymbols", "-q", "-c0", "-p" + PACKAGE, "-v" + version,
                        "-e" + lib, "-O" + raw.name], check=True)
        lines = raw.read().splitlines()
    header = [l for l in lines if not l.startswith(" ")]
    entries = [l.split() for l in lines if l.startswith(" ")]
    mangled = [e[0].rsplit("@", 1)[0] for e in entries]
    demangled = subprocess.run(["c++filt"], input="\n".join(mangled) + "\n", text=True,
                               capture_output=True, check=True).stdout.splitlines()
    out = []
    for (sym, ver, *_), name, plain in zip(entries, mangled, demangled):
        base = sym.rsplit("@", 1)[1]
        if plain == name:  # a C symbol
            out.append((plain, f" {sym} {ver}"))
            continue
        tags = "c++|optional" if STD.match(plain) else "c++"
        out.append((plain, f' ({tags})"{plain}@{base}" {ver}'))
    sys.stdout.write("\n".join(header) + "\n")
    # The package whose version a build dependency on the library names.
    sys.stdout.write("* Build-Depends-Package: libsframe-client-dev\n")
    # A constructor's or destructor's variants (C1/C2, D0/D1/D2) demangle
    # alike: one (c++) line matches them all.
    for line in sorted(set(line for _, line in out)):
        sys.stdout.write(line + "\n")


if __name__ == "__main__":
    main()
