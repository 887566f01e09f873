#!/usr/bin/python3
"""Einsum through `consensor run` against numpy.einsum on random f32 inputs: batched and chained
contractions, broadcast `...`, diagonals, implicit outputs, full sums. Prints ok / MISMATCH per
equation (rtol 1e-5: the two sum in different orders). Not a test (it starts a process per case).

usage: /usr/bin/python3 bench/einsum_vs_numpy.py BUILD_DIR   (Debian's python3-onnx)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

BUILD = sys.argv[1] if len(sys.argv) > 1 else 'build'
WORK = tempfile.mkdtemp()
rng=np.random.default_rng(0)
cases=[('ij,jk->ik',[(3,4),(4,5)]),('bij,bjk->bik',[(2,3,4),(2,4,5)]),('...ij,...jk->...ik',[(2,1,3,4),(5,4,2)]),
('iii->i',[(3,3,3)]),('ij,ij->',[(3,4),(3,4)]),('ijk,kj->ik',[(2,3,4),(4,3)]),('i,j,k->ijk',[(2,),(3,),(4,)]),
('ab,bc,cd,de->ae',[(2,3),(3,4),(4,5),(5,2)]),('Ab,ba',[(3,4),(4,5)]),('ij->',[(3,4)]),('...i,...i->...',[(2,3,4),(4,)]),
('bii->bi',[(2,3,3)]),('ijji->ij',[(2,3,3,2)])]
ok=0
for k,(eq,shapes) in enumerate(cases):
    names=[f'x{i}' for i in range(len(shapes))]
    n=helper.make_node('Einsum',names,['y'],equation=eq)
    g=helper.make_graph([n],'g',[helper.make_tensor_value_info(nm,TensorProto.FLOAT,list(s)) for nm,s in zip(names,shapes)],[helper.make_tensor_value_info('y',TensorProto.FLOAT,None)])
    m=helper.make_model(g,opset_imports=[helper.make_opsetid('',12)]); m.ir_version=8
    onnx.save(m,f'{WORK}/m{k}.onnx')
    arrs=[rng.standard_normal(s).astype(np.float32) for s in shapes]
    args=[]
    for nm,a in zip(names,arrs):
        np.save(f'{WORK}/{nm}_{k}.npy',a); args+=['--input',f'{nm}={WORK}/{nm}_{k}.npy']
    r=subprocess.run([os.path.join(BUILD,'node/consensor'),'run',f'{WORK}/m{k}.onnx','--out',f'{WORK}/out{k}']+args,capture_output=True,text=True)
    if r.returncode: print('FAIL',eq,r.stderr.strip()); continue
    got=np.load(f'{WORK}/out{k}/y.npy'); want=np.einsum(eq,*arrs)
    good=got.shape==want.shape and np.allclose(got,want,rtol=1e-5,atol=1e-5)
    ok+=good
    print('ok' if good else 'MISMATCH',eq,got.shape,want.shape)
print(ok,'of',len(cases))
sys.exit(0 if ok == len(cases) else 1)
