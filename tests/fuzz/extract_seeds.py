#!/usr/bin/python3
"""Seeds a fuzz corpus from unit tests: every string literal of the given C++
files (raw strings, and adjacent "..." "..." joined as the compiler does)
of at least 8 bytes becomes one seed file, optionally with a prefix (a target's
control bytes). Usage: extract_seeds.py OUT_DIR PREFIX_HEX FILE..."""
import hashlib
import os
import re
import sys

ESCAPES = {'n': b'\n', 'r': b'\r', 't': b'\t', '0': b'\0', '\\': b'\\', '"': b'"', "'": b"'"}
TOKEN = re.compile(r'R"([^(\s]*)\((.*?)\)\1"|"((?:[^"\\\n]|\\.)*)"|(//[^\n]*)|(\s+)|(.)', re.S)


def unescape(body):
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c != '\\':
            out += c.encode()
            i += 1
            continue
        n = body[i + 1]
        if n == 'x':
            m = re.match(r'[0-9a-fA-F]{1,2}', body[i + 2:])
            out.append(int(m.group(0), 16))
            i += 2 + len(m.group(0))
        else:
            out += ESCAPES.get(n, n.encode())
            i += 2
    return bytes(out)


def literals(text):
    current = None
    for m in TOKEN.finditer(text):
        raw, normal, comment, space = m.group(2), m.group(3), m.group(4), m.group(5)
        if raw is not None or normal is not None:
            piece = raw.encode() if raw is not None else unescape(normal)
            current = piece if current is None else current + piece
        elif comment is None and space is None:
            if current is not None:
                yield current
            current = None
    if current is not None:
        yield current


def main():
    out_dir, prefix = sys.argv[1], bytes.fromhex(sys.argv[2])
    os.makedirs(out_dir, exist_ok=True)
    count = 0
    for path in sys.argv[3:]:
        with open(path, encoding='utf-8') as f:
            for lit in literals(f.read()):
                if len(lit) < 8:
                    continue
                seed = prefix + lit
                name = hashlib.sha1(seed).hexdigest()
                with open(os.path.join(out_dir, name), 'wb') as f:
                    f.write(seed)
                count += 1
    print(f'{out_dir}: {count} seeds from unit tests')


if __name__ == '__main__':
    main()
