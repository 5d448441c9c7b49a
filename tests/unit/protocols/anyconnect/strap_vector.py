#!/usr/bin/env python3
# Writes the STRAP test vector of test_ac_auth.cpp with pyca/cryptography (independent of espvpn).
import base64, struct
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
cd = int("1f2e3d4c5b6a79880102030405060708090a0b0c0d0e0f101112131415161718", 16)
sd = int("0a1b2c3d4e5f60718293a4b5c6d7e8f90102030405060708090a0b0c0d0e0f10", 16)
client = ec.derive_private_key(cd, ec.SECP256R1())
server = ec.derive_private_key(sd, ec.SECP256R1())
cspki = client.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
sspki = server.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
shared = server.exchange(ec.ECDH(), client.public_key())
key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"AC_ECIES").derive(shared)
iv = bytes(range(12))
enc = Cipher(algorithms.AES(key), modes.GCM(iv)).encryptor()
ct = enc.update(b"A1b2C3d4E5f6TOKEN") + enc.finalize()
tag = enc.tag[:12]
blob = b"\x00\x01" + b"".join(struct.pack(">HH", t, len(v)) + v for t, v in ((1, sspki), (2, tag), (3, ct), (4, iv)))
print("client_pub", base64.b64encode(cspki).decode())
print("blob", base64.b64encode(blob).decode())
