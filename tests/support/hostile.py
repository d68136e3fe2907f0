"""Hostile path strings shared by the path-rule, server and fuzz tests, and a hostile repository."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

HOSTILE = [
    "",
    "   ",
    "/etc/passwd",
    "\\etc\\passwd",
    "C:\\Windows\\win.ini",
    "c:/windows/win.ini",
    "C:secret.txt",
    "\\\\server\\share\\file.txt",
    "//server/share/file.txt",
    "\\\\?\\C:\\Windows\\win.ini",
    "../outside/secret.txt",
    "..\\outside\\secret.txt",
    "src/../../outside/secret.txt",
    "src\\..\\..\\outside\\secret.txt",
    "./../outside/secret.txt",
    "..",
    ".",
    "./",
    "src/../.env",
    ".git/config",
    ".git",
    ".GIT/config",
    "src/.git/HEAD",
    "link_to_git",
    "README.md\x00.txt",
    "src/app.py\n",
    "\tsrc/app.py",
    "src/\x7fapp.py",
    "src/\x85app.py",
    "%2e%2e/outside/secret.txt",
    "%2e%2e%2foutside%2fsecret.txt",
    "..%2foutside/secret.txt",
    "\u2025/outside/secret.txt",
    "\uff0e\uff0e/outside/secret.txt",
    "~/.ssh/id_rsa",
    "file:///etc/passwd",
    ".env",
    "./.env",
    "config/.env.local",
    "keys/id_rsa",
    "server.pem",
    "link_to_env",
    "ignored.log",
    "build/out.js",
    "vendor/lib.py",
    ".bridge-index/manifest.json",
    "big.txt",
    "image.bin",
    "link_out",
    "link_out_dir/secret.txt",
    "loop_a",
    "src",
    "src/",
    "src_link/app.py",
    "missing.py",
    "deleted.py",
]

HOSTILE_PATHS = [
    "../etc/passwd",
    "/etc/passwd",
    "src/../../etc/passwd",
    "src/./../../outside/secret.txt",
    "..\\..\\etc\\passwd",
    "C:\\Windows\\win.ini",
    "C:/Windows/win.ini",
    "\\\\server\\share\\file.txt",
    "//etc/passwd",
    "~/.ssh/id_rsa",
    "",
    "   ",
    ".",
    "./",
    "src/config.py\x00.txt",
    "src/\nconfig.py",
    ".git/config",
    ".GIT/config",
    "src/../.git/HEAD",
    ".git",
    ".env",
    "src/../.env",
    "id_rsa",
    "link_out",
    "outdir/secret.txt",
    "link_env",
    "link_git",
    "link_dir_inside/config.py",
    "link_abs_passwd",
    "build/out.py",
    "debug.log",
    "blob.bin",
    "big.txt",
    "src",
    "pipe",
    "broken_link",
    "loop_a",
    "%2e%2e/etc/passwd",
    "file:///etc/passwd",
]


OUTSIDE = "OUTSIDE-MARK-7c1f"
SECRET = "SECRET-MARK-9d2e"
BIG = 50 * 1024 * 1024


def write_file(root: Path, rel: str, data: bytes | str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def hostile_repo(base: Path, git: bool) -> Path:
    """A repository of every file a crawler can trip on (bad encodings, huge and binary files,
    fifos, symlinks out and in, secrets), and a secret outside it; shared by the reliability
    tests and bench/reliability.py."""
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"def leaked():\n    return '{OUTSIDE}'\n")
    root = base / "repo"
    root.mkdir()
    if git:
        subprocess.run(["git", "init", "-q", str(root)], check=True)
    write_file(root, "src/normal.py", "def parse_config(path):\n    return {}\n")
    write_file(root, "src/latin1.py", b"# caf\xe9 na\xefve\ndef encoded_badly():\n    return '\xff\xfe'\n")
    write_file(root, "src/surrogate.py", b"def lone_surrogate():\n    return '\xed\xa0\x80'\n")
    write_file(root, "src/late_nul.py", "def text_first():\n    pass\n" * 400 + "\x00\x00 binary tail\n")
    write_file(root, "src/bom.py", "\ufeffdef with_bom():\n    return 1\n")
    write_file(root, "src/crlf.py", "def windows_lines():\r\n    return 1\r\n\r\ndef more():\r\n    return 2\r\n")
    write_file(root, "src/old_mac.py", "def lone_cr():\r    return 1\rdef after_cr():\r    return 2\r")
    write_file(root, "src/separators.py", "def form_feed():\n\x0c\n    return 1\n# line\u2028separator\ndef tail():\n    return 2\n")
    write_file(root, "src/control.py", "def controls():\n    return '\x01\x02\x1b[31m\x7f'\n")
    write_file(root, "src/minified.js", "var a=1;" * 100_000)  # one 800 KB line
    write_file(root, "src/many_lines.txt", "x\n" * 200_000)
    write_file(root, "src/emoji.md", "# 🎉 Party\n\n" + "Ünïcödé — ﬁ ligature, 𝔘𝔫𝔦𝔠𝔬𝔡𝔢, عربى, 中文.\n" * 50)
    write_file(root, "src/empty.py", "")
    write_file(root, "src/only_newlines.py", "\n" * 100)
    write_file(root, "img/logo.png", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 20)
    write_file(root, "bin/tool", b"\x7fELF\x02\x01\x01" + b"\x00" * 4000)
    write_file(root, "data/random.bin", os.urandom(20_000))
    write_file(root, "name with spaces.py", "def spaced():\n    pass\n")
    write_file(root, "-rf.py", "def dash():\n    pass\n")
    write_file(root, "a" * 200 + ".py", "def long_name():\n    pass\n")
    write_file(root, "/".join(f"d{i}" for i in range(60)) + "/deep.py", "def deep():\n    pass\n")
    write_file(root, ".env", f"TOKEN={SECRET}\n")
    write_file(root, "keys/id_rsa", SECRET)
    write_file(root, "vanishes.py", "def vanishing():\n    pass\n")
    write_file(root, "locked.py", "def locked():\n    pass\n")
    with open(root / "huge.log.py", "wb") as f:
        f.truncate(BIG)  # 50 MB (sparse: cheap to make, as costly to read as any)
    os.mkfifo(root / "pipe.py")
    (root / "newline\nname.py").write_text("def newline_name():\n    pass\n")
    os.symlink(outside / "secret.txt", root / "link_out.py")
    os.symlink(outside, root / "outdir")
    os.symlink("/etc/passwd", root / "passwd.txt")
    os.symlink("/dev/zero", root / "zero.py")
    os.symlink("loop_b", root / "loop_a")
    os.symlink("loop_a", root / "loop_b")
    os.symlink(".", root / "self")
    os.symlink("missing.py", root / "dangling.py")
    os.symlink("src/normal.py", root / "link_in.py")
    os.symlink(".env", root / "link_env.py")
    (root / os.fsencode("bad\udcffname.py").decode("utf-8", "surrogateescape")).write_text("def bad():\n    pass\n")
    return root
