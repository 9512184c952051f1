import sys, numpy as np
fn=sys.argv[1]; f0=int(sys.argv[2]); n=int(sys.argv[3]); step=int(sys.argv[4]) if len(sys.argv)>4 else 1
a=np.loadtxt(fn,delimiter=',',skiprows=1,dtype=np.int64); a=a[np.argsort(a[:,0])]
fid,acq,take,sub,done,pub,rx=a.T
i=np.searchsorted(fid,f0)
print("fid  acq->take take->sub sub->done done->pub  dtake  ddone(us)")
for k in range(i,min(i+n,len(a)),step):
    print(fid[k], "%8.1f %8.1f %8.1f %8.1f %8.1f %8.1f"%((take[k]-acq[k])/1e3,(sub[k]-take[k])/1e3,(done[k]-sub[k])/1e3,(pub[k]-done[k])/1e3,(take[k]-take[k-1])/1e3,(done[k]-done[k-1])/1e3))
