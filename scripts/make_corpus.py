#!/usr/bin/env python3
"""Regenerate data/corpus.txt: two Jane Austen novels (public domain) taken
from the Debian package r-cran-janeaustenr (bookworm, 1.0.0-1).

The package stores the novels as R character vectors in an R lazy-load
database (data/Rdata.rdx + data/Rdata.rdb). This script reads that database
with a small stdlib-only reader for R's XDR serialization format, so neither R
nor any PyPI package is needed, and the package is never installed: its .deb
is fetched with `apt-get download` and unpacked with `dpkg -x` into a
temporary directory.

Usage:
    python3 scripts/make_corpus.py                 # apt-get download, write data/corpus.txt
    python3 scripts/make_corpus.py --deb FILE.deb  # use an already downloaded .deb
    python3 scripts/make_corpus.py --check         # rebuild and compare with data/corpus.txt

The output is deterministic; data/README.md records its SHA-256.
"""
import argparse
import gzip
import hashlib
import os
import re
import struct
import subprocess
import sys
import tempfile
import zlib

PACKAGE = "r-cran-janeaustenr"
VERSION = "1.0.0-1"
DEB_SHA256 = "df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95"
DATA_DIR = "usr/lib/R/site-library/janeaustenr/data"
# Objects (in this order) that make up the corpus.
BOOKS = ["prideprejudice", "persuasion"]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO, "data", "corpus.txt")


# --- minimal reader for R's XDR serialization (formats 2 and 3) -------------

class RVec(list):
    """An R vector; `attrs` holds its attributes (e.g. names)."""
    attrs = {}


class RReader:
    def __init__(self, buf):
        self.b = buf
        self.p = 0
        self.refs = []

    def int(self):
        v = struct.unpack_from(">i", self.b, self.p)[0]
        self.p += 4
        return v

    def raw(self, n):
        v = self.b[self.p:self.p + n]
        self.p += n
        return v

    def length(self):
        n = self.int()
        if n == -1:  # long vector
            hi, lo = self.int(), self.int()
            n = (hi << 32) + lo
        return n

    def header(self):
        if self.raw(2) != b"X\n":
            raise ValueError("not an XDR R serialization stream")
        version = self.int()
        self.int()  # writer R version
        self.int()  # minimal reader R version
        if version == 3:
            self.raw(self.int())  # native encoding name

    def item(self):
        flags = self.int()
        t = flags & 0xFF
        has_attr = flags & (1 << 9)
        has_tag = flags & (1 << 10)
        if t == 255:  # REFSXP
            k = flags >> 8
            if k == 0:
                k = self.int()
            return self.refs[k - 1]
        if t in (254, 253, 252, 251, 250, 242, 241):  # NULL, envs, markers
            return None
        if t in (249, 248):  # NAMESPACESXP, PACKAGESXP
            if self.int() != 0:
                raise ValueError("unexpected namespace info")
            v = ("ns", [self.item() for _ in range(self.int())])
            self.refs.append(v)
            return v
        if t == 1:  # SYMSXP
            v = ("sym", self.item())
            self.refs.append(v)
            return v
        if t in (2, 3, 5, 6, 17, 239, 240):  # pairlist-like
            attr = self.item() if has_attr else None
            tag = self.item() if has_tag else None
            car = self.item()
            cdr = self.item()
            return ("pair", tag, car, cdr, attr)
        if t == 4:  # ENVSXP
            env = {}
            self.refs.append(env)
            self.int()  # locked
            for _ in range(4):  # enclos, frame, hashtab, attrib
                self.item()
            return env
        if t == 238:  # ALTREP
            info, state = self.item(), self.item()
            self.item()  # attributes
            return ("altrep", info, state)
        if t == 9:  # CHARSXP
            n = self.int()
            return None if n == -1 else self.raw(n).decode("utf-8")
        if t in (10, 13):  # LGLSXP, INTSXP
            n = self.length()
            v = list(struct.unpack_from(">%di" % n, self.b, self.p))
            self.p += 4 * n
        elif t == 14:  # REALSXP
            n = self.length()
            v = list(struct.unpack_from(">%dd" % n, self.b, self.p))
            self.p += 8 * n
        elif t in (16, 19, 20):  # STRSXP, VECSXP, EXPRSXP
            v = [self.item() for _ in range(self.length())]
        else:
            raise ValueError("unsupported R SEXP type %d" % t)
        v = RVec(v)
        if has_attr:
            v.attrs = pairlist_to_dict(self.item())
        return v


def unserialize(buf):
    r = RReader(buf)
    r.header()
    return r.item()


def pairlist_to_dict(p):
    out = {}
    while p is not None and p[0] == "pair":
        out[p[1][1]] = p[2]
        p = p[3]
    return out


def load_lazydb(data_dir):
    """Return {name: object} for every object in data/Rdata.{rdx,rdb}."""
    with gzip.open(os.path.join(data_dir, "Rdata.rdx")) as f:
        index = unserialize(f.read())
    variables = index[index.attrs["names"].index("variables")]
    with open(os.path.join(data_dir, "Rdata.rdb"), "rb") as f:
        rdb = f.read()
    out = {}
    for name, (off, ln) in zip(variables.attrs["names"], variables):
        chunk = rdb[off:off + ln]
        ulen = struct.unpack(">i", chunk[:4])[0]
        raw = zlib.decompress(chunk[4:])  # compressed = TRUE -> zlib
        if len(raw) != ulen:
            raise ValueError("bad chunk for %s" % name)
        out[name] = raw
    return out


# --- corpus assembly ---------------------------------------------------------

def clean(lines):
    text = "\n".join(line.rstrip() for line in lines)
    text = text.replace("_", "")          # Gutenberg-style _italics_ markers
    text = re.sub(r"\n{3,}", "\n\n", text)  # at most one blank line in a row
    return text.strip() + "\n"


def build(deb):
    h = hashlib.sha256(open(deb, "rb").read()).hexdigest()
    if h != DEB_SHA256:
        print("warning: %s has sha256 %s, expected %s" % (deb, h, DEB_SHA256),
              file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["dpkg", "-x", deb, tmp], check=True)
        raw = load_lazydb(os.path.join(tmp, DATA_DIR))
    parts = [clean(unserialize(raw[b])) for b in BOOKS]
    text = "\n\n".join(parts)
    text.encode("ascii")  # the selected novels are pure ASCII
    return text


def download(dest):
    subprocess.run(["apt-get", "download", "%s=%s" % (PACKAGE, VERSION)],
                   cwd=dest, check=True)
    return os.path.join(dest, "%s_%s_all.deb" % (PACKAGE, VERSION))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deb", help="path to %s_%s_all.deb" % (PACKAGE, VERSION))
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--check", action="store_true",
                    help="compare with --out instead of writing it")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        deb = args.deb or download(tmp)
        text = build(deb)
    data = text.encode("ascii")
    digest = hashlib.sha256(data).hexdigest()
    if args.check:
        same = open(args.out, "rb").read() == data
        print("%s: %s (sha256 %s)" % (args.out, "up to date" if same else "DIFFERS", digest))
        return 0 if same else 1
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "wb") as f:
        f.write(data)
    print("wrote %s: %d bytes, sha256 %s" % (args.out, len(data), digest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
