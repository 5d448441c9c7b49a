#!/usr/bin/python3
"""Looks for secrets in collected output: every text secret as is, percent-encoded,
hex (either case), base64; every ESP key (hex) in either case, with ':' or ' '
between bytes, as base64 of its bytes, and the first 8 bytes of it alone.

  secrets_scan.py --text NAME=VALUE... --hex NAME=HEX... -- FILE...
Exit 0 = none found; 1 = found (each finding printed: secret, form, file, line)."""
import base64
import sys
import urllib.parse


def forms_of_text(value):
    raw = value.encode()
    yield "plain", raw
    yield "percent-encoded", urllib.parse.quote(value, safe="").encode()
    yield "form-encoded", urllib.parse.quote_plus(value).encode()
    yield "hex", raw.hex().encode()
    yield "HEX", raw.hex().upper().encode()
    yield "base64", base64.b64encode(raw).rstrip(b"=")


def forms_of_key(hex_value):
    key = bytes.fromhex(hex_value.removeprefix("0x"))
    yield "hex", key.hex().encode()
    yield "HEX", key.hex().upper().encode()
    yield "hex:", key.hex(":").encode()
    yield "hex space", key.hex(" ").encode()
    yield "base64", base64.b64encode(key).rstrip(b"=")
    yield "first 8 bytes hex", key[:8].hex().encode()


def main():
    args = sys.argv[1:]
    split = args.index("--")
    secrets = []
    mode = None
    for a in args[:split]:
        if a in ("--text", "--hex"):
            mode = a
            continue
        name, value = a.split("=", 1)
        forms = forms_of_text(value) if mode == "--text" else forms_of_key(value)
        secrets += [(name, form, needle) for form, needle in forms if len(needle) >= 6]
    files = args[split + 1:]
    found = 0
    scanned = 0
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        scanned += len(data)
        low = data.lower()
        for name, form, needle in secrets:
            hay = low if form.startswith("hex") or form == "HEX" else data
            n = needle.lower() if hay is low else needle
            at = hay.find(n)
            if at >= 0:
                line = data[data.rfind(b"\n", 0, at) + 1:data.find(b"\n", at)][:200]
                print(f"FOUND {name} ({form}) in {path}: {line!r}")
                found += 1
    print(f"scanned {len(files)} files, {scanned} bytes, for {len(secrets)} forms of "
          f"{len({s[0] for s in secrets})} secrets: {found} found")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
