#!/usr/bin/env python3
"""ntlm_verify.py: checks the NTLMv2 responses a client sent through squid, from the lines
squid exchanged with its NTLM helper (ntlm_fake_auth accepts any response, so the check is
here): each "TT <challenge>" the helper sent and the "KK <authenticate>" that answered it.
Written from [MS-NLMP] (NTOWFv2, NTProofStr over the server challenge and the client blob),
with its own MD4 (RFC 1320; OpenSSL 3 may lack it); shares no code with espvpn.

  ntlm_verify.py HELPER_IN HELPER_OUT USER DOMAIN PASSWORD
Prints one line per authenticate message; exit 0 when there is at least one and every one
proves PASSWORD for DOMAIN\\USER, 1 otherwise (a wrong password shows as "mismatch").
"""
import base64
import hashlib
import hmac
import struct
import sys


def md4(data):
    """RFC 1320 MD4."""
    def f(x, y, z): return (x & y) | (~x & z)
    def g(x, y, z): return (x & y) | (x & z) | (y & z)
    def h(x, y, z): return x ^ y ^ z
    def rol(v, s): v &= 0xFFFFFFFF; return ((v << s) | (v >> (32 - s))) & 0xFFFFFFFF
    msg = data + b"\x80" + b"\x00" * ((55 - len(data)) % 64) + struct.pack("<Q", len(data) * 8)
    a, b, c, d = 0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476
    for off in range(0, len(msg), 64):
        x = struct.unpack("<16I", msg[off:off + 64])
        aa, bb, cc, dd = a, b, c, d
        for i in range(16):
            k, s = i, (3, 7, 11, 19)[i % 4]
            if i % 4 == 0: a = rol(a + f(b, c, d) + x[k], s)
            elif i % 4 == 1: d = rol(d + f(a, b, c) + x[k], s)
            elif i % 4 == 2: c = rol(c + f(d, a, b) + x[k], s)
            else: b = rol(b + f(c, d, a) + x[k], s)
        for i in range(16):
            k, s = (i % 4) * 4 + i // 4, (3, 5, 9, 13)[i % 4]
            if i % 4 == 0: a = rol(a + g(b, c, d) + x[k] + 0x5A827999, s)
            elif i % 4 == 1: d = rol(d + g(a, b, c) + x[k] + 0x5A827999, s)
            elif i % 4 == 2: c = rol(c + g(d, a, b) + x[k] + 0x5A827999, s)
            else: b = rol(b + g(c, d, a) + x[k] + 0x5A827999, s)
        order = (0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15)
        for i in range(16):
            k, s = order[i], (3, 9, 11, 15)[i % 4]
            if i % 4 == 0: a = rol(a + h(b, c, d) + x[k] + 0x6ED9EBA1, s)
            elif i % 4 == 1: d = rol(d + h(a, b, c) + x[k] + 0x6ED9EBA1, s)
            elif i % 4 == 2: c = rol(c + h(d, a, b) + x[k] + 0x6ED9EBA1, s)
            else: b = rol(b + h(c, d, a) + x[k] + 0x6ED9EBA1, s)
        a, b, c, d = (a + aa) & 0xFFFFFFFF, (b + bb) & 0xFFFFFFFF, (c + cc) & 0xFFFFFFFF, (d + dd) & 0xFFFFFFFF
    return struct.pack("<4I", a, b, c, d)


assert md4(b"").hex() == "31d6cfe0d16ae931b73c59d7e0c089c0"
assert md4(b"abc").hex() == "a448017aaf21d8525fc10ae87aa6729d"
# [MS-NLMP] 4.2.2.1.2: NTOWFv1("Password").
assert md4("Password".encode("utf-16-le")).hex() == "a4f49c406510bdcab6824ee7c30fd852"


def ntowfv2(password, user, domain):
    return hmac.new(md4(password.encode("utf-16-le")), (user.upper() + domain).encode("utf-16-le"), hashlib.md5).digest()


# [MS-NLMP] 4.2.4.1.1.
assert ntowfv2("Password", "User", "Domain").hex() == "0c868a403bfd7a93a3001ef22ef02e3f"


def field(msg, at):
    length, _, offset = struct.unpack("<HHI", msg[at:at + 8])
    return msg[offset:offset + length]


def check(challenge, auth, user, domain, password):
    if challenge[:8] != b"NTLMSSP\0" or struct.unpack("<I", challenge[8:12])[0] != 2:
        return "the helper's TT is not a challenge"
    if auth[:8] != b"NTLMSSP\0" or struct.unpack("<I", auth[8:12])[0] != 3:
        return "KK is not an authenticate message"
    server_challenge = challenge[24:32]
    nt = field(auth, 20)
    # Names in UTF-16LE when the message's flags say Unicode, else in the OEM code page.
    codec = "utf-16-le" if struct.unpack("<I", auth[60:64])[0] & 1 else "latin-1"
    got_user = field(auth, 36).decode(codec, "replace")
    got_domain = field(auth, 28).decode(codec, "replace")
    if (got_user, got_domain) != (user, domain):
        return f"user {got_domain}\\{got_user}, expected {domain}\\{user}"
    if len(nt) <= 24:
        return f"NT response of {len(nt)} bytes: NTLMv1, not NTLMv2"
    proof, blob = nt[:16], nt[16:]
    if blob[:2] != b"\x01\x01":
        return "the NTLMv2 blob does not start with 0x0101"
    want = hmac.new(ntowfv2(password, user, domain), server_challenge + blob, hashlib.md5).digest()
    return "ok" if hmac.compare_digest(proof, want) else "mismatch (NTProofStr is not of this password)"


def main():
    helper_in, helper_out, user, domain, password = sys.argv[1:6]
    with open(helper_in) as f:
        ins = [line.split() for line in f if line.strip()]
    with open(helper_out) as f:
        outs = [line.split() for line in f if line.strip()]
    # One helper, one request at a time: the n-th TT answers the n-th YR, and the KK that
    # follows that YR answers that TT.
    challenges = [base64.b64decode(o[1]) for o in outs if o[0] == "TT"]
    n_yr, results = 0, []
    for words in ins:
        if words[0] == "YR":
            n_yr += 1
        elif words[0] == "KK":
            if n_yr == 0 or n_yr > len(challenges):
                results.append("a KK without its challenge")
                continue
            results.append(check(challenges[n_yr - 1], base64.b64decode(words[1]), user, domain, password))
    for i, r in enumerate(results):
        print(f"authenticate message {i + 1}: {r}")
    return 0 if results and all(r == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
