#!/usr/bin/python3
"""Independent reference for consensus/committee.h: prints the committee order of the
golden test in tests/consensus/committee_test.cc. Hashes with Foundry's `cast keccak`
(installed by scripts/setup.sh). Run from the repository root."""
import subprocess, struct
CAST="contracts/node_modules/@foundry-rs/cast-linux-amd64/bin/cast"
def keccak(b): return bytes.fromhex(subprocess.check_output([CAST,"keccak","0x"+b.hex()]).decode().strip()[2:])
task=keccak(struct.pack("<I",42))
SEED_HASH=bytes(range(32))  # the seed block hash of the golden test: bytes 0..31
ops=[(bytes(19)+bytes([i]), s) for i,s in [(1,1000),(2,2000),(3,3000),(4,4000)]]
ops.sort()
total=sum(s for _,s in ops); order=[]; draw=0
while ops:
    k=0
    while True:
        seed=keccak(b"consensor.committee.v2"+task+struct.pack(">Q",7)+SEED_HASH+struct.pack(">I",draw)+struct.pack(">I",k))
        x=int.from_bytes(seed[:16],"big"); limit=((2**128-1)//total)*total
        if x<limit: r=x%total; break
        k+=1
    c=0
    for i,(a,s) in enumerate(ops):
        c+=s
        if r<c: order.append(a[19]); total-=s; ops.pop(i); break
    draw+=1
print(order)
