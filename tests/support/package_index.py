#!/usr/bin/env python3
"""Builds a small PyPI "simple" index and npm registry as static files (stdlib only).

    package_index.py OUT_DIR BASE_URL [--big-mb N]

OUT_DIR gets, for any static HTTP server to serve at BASE_URL (e.g. http://10.0.0.2:8080):
  simple/<name>/index.html   PEP 503 pages linking ../../files/<wheel>#sha256=<hex>
  files/*.whl, files/*.tgz   real wheels and npm tarballs, made here
  npm/<name>                 npm packuments whose dist.tarball is BASE_URL/files/<tgz>
  manifest.json              {"<file>": {"sha256": ..., "bytes": ...}}

Python packages: tinypkg 1.0 and 2.0 (module tinypkg, VALUE = "tiny-<version>"), evilpkg 1.0,
tqdm 0.0.1 (a stand-in: VALUE = "stand-in tqdm"),
tinysdist 1.0 (an sdist only), corrupt 1.0 (its link announces a wrong sha256) and, with
--big-mb, bigpkg 1.0 (a wheel of about N MiB of incompressible data).
npm packages: tinynpm 1.0.0 (module.exports.value = "npm-ok"), evilnpm 1.0.0.
"""

import base64
import hashlib
import io
import json
import os
import sys
import tarfile
import zipfile

MANIFEST = {}


def write(out, rel, data):
    path = os.path.join(out, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    MANIFEST[os.path.basename(rel)] = {"sha256": hashlib.sha256(data).hexdigest(),
                                       "bytes": len(data)}
    return data


def record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "sha256=" + digest


def wheel(name, version, files):
    dist = "%s-%s.dist-info" % (name, version)
    files = dict(files)
    files[dist + "/METADATA"] = ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" %
                                 (name, version)).encode()
    files[dist + "/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: airlock-test\n"
                              b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    record = "".join("%s,%s,%d\n" % (p, record_hash(d), len(d)) for p, d in files.items())
    record += dist + "/RECORD,,\n"
    files[dist + "/RECORD"] = record.encode()
    buf = io.BytesIO()
    # Stored, not deflated: a big wheel stays as big as asked for.
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for p, d in files.items():
            info = zipfile.ZipInfo(p, date_time=(2020, 1, 1, 0, 0, 0))
            z.writestr(info, d)
    return buf.getvalue()


def npm_tarball(name, version, index_js):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for rel, data in (("package/package.json",
                           json.dumps({"name": name, "version": version,
                                       "main": "index.js"}).encode()),
                          ("package/index.js", index_js)):
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 1577836800
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def main():
    out, base = sys.argv[1], sys.argv[2].rstrip("/")
    big_mb = int(sys.argv[sys.argv.index("--big-mb") + 1]) if "--big-mb" in sys.argv else 0
    links = {}

    def add_wheel(name, version, files, announced=None):
        fname = "%s-%s-py3-none-any.whl" % (name, version)
        data = write(out, "files/" + fname, wheel(name, version, files))
        links.setdefault(name, []).append(
            (fname, announced or hashlib.sha256(data).hexdigest()))

    for v in ("1.0", "2.0"):
        add_wheel("tinypkg", v, {"tinypkg/__init__.py": ('VALUE = "tiny-%s"\n' % v).encode()})
    add_wheel("evilpkg", "1.0", {"evilpkg/__init__.py": b"VALUE = 'evil'\n"})
    # A stand-in under a name the shipped data-science profile allows.
    add_wheel("tqdm", "0.0.1", {"tqdm/__init__.py": b"VALUE = 'stand-in tqdm'\n"})
    add_wheel("corrupt", "1.0", {"corrupt/__init__.py": b"VALUE = 1\n"}, announced="0" * 64)
    if big_mb:
        blob = os.urandom(big_mb << 20)
        add_wheel("bigpkg", "1.0", {"bigpkg/__init__.py": b"VALUE = 'big'\n",
                                    "bigpkg/blob.bin": blob})
    sdist = io.BytesIO()
    with tarfile.open(fileobj=sdist, mode="w:gz") as t:
        info = tarfile.TarInfo("tinysdist-1.0/setup.py")
        data = b"from setuptools import setup\nsetup(name='tinysdist', version='1.0')\n"
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    data = write(out, "files/tinysdist-1.0.tar.gz", sdist.getvalue())
    links["tinysdist"] = [("tinysdist-1.0.tar.gz", hashlib.sha256(data).hexdigest())]

    for name, files in links.items():
        anchors = "".join('<a href="../../files/%s#sha256=%s">%s</a><br/>\n' % (f, h, f)
                          for f, h in files)
        page = ("<!DOCTYPE html>\n<html><body><h1>Links for %s</h1>\n%s</body></html>\n" %
                (name, anchors))
        write(out, "simple/%s/index.html" % name, page.encode())

    for name, value in (("tinynpm", "npm-ok"), ("evilnpm", "evil")):
        version = "1.0.0"
        tgz = write(out, "files/%s-%s.tgz" % (name, version),
                    npm_tarball(name, version, ("module.exports = {value: '%s'};\n" %
                                                value).encode()))
        integrity = "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()
        packument = {
            "name": name,
            "dist-tags": {"latest": version},
            "versions": {version: {
                "name": name, "version": version,
                "dist": {"tarball": "%s/files/%s-%s.tgz" % (base, name, version),
                         "integrity": integrity,
                         "shasum": hashlib.sha1(tgz).hexdigest()}}},
        }
        write(out, "npm/" + name, json.dumps(packument).encode())

    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(MANIFEST, f, indent=1)


if __name__ == "__main__":
    main()
