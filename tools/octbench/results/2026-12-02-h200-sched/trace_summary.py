import sys, numpy as np
for fn in sys.argv[1:]:
    a=np.loadtxt(fn,delimiter=',',skiprows=1,dtype=np.int64)
    a=a[np.argsort(a[:,0])]
    fid,acq,take,sub,done,pub,rx=a.T
    t0=acq[0]
    lat=(rx-acq)/1e6
    print(fn, len(a), "p99 %.3f"%np.percentile(lat,99), "frames>1ms", (lat>1).sum())
    # gaps in take while backlog
    dtake=np.diff(take)/1e3
    # stages
    for nm,x in [("acq->take",take-acq),("take->sub",sub-take),("sub->done",done-sub),("done->pub",pub-done),("pub->rx",rx-pub)]:
        x=x/1e3; print("  %-10s p50 %7.1f p99 %7.1f max %8.1f us"%(nm,np.median(x),np.percentile(x,99),x.max()))
    # acq gaps (producer)
    da=np.diff(acq)/1e3
    print("  acq gaps: max %.1f us, >200us: %d"%(da.max(),(da>200).sum()))
    print("  take gaps max %.1f us; >300us: %d"%(dtake.max(),(dtake>300).sum()))
    # episodes: frames with lat>1ms, grouped
    bad=np.where(lat>1)[0]
    if len(bad):
        groups=np.split(bad, np.where(np.diff(bad)>50)[0]+1)
        for g in groups[:8]:
            i0=max(g[0]-5,0); i1=g[-1]
            print("  episode frames %d..%d (n=%d) at t=%.3f s, max lat %.2f ms"%(fid[g[0]],fid[g[-1]],len(g),(acq[g[0]]-t0)/1e9,lat[g].max()))
            # find the largest take gap and stage in the episode window
            w=slice(max(g[0]-40,0),g[-1]+1)
            k=np.argmax(np.diff(take[w]))+w.start
            print("    largest take gap %.1f us after frame %d: take->sub %.1f sub->done %.1f done->pub %.1f; pub(k)->take(k+1) %.1f us; acq(k+1)-take(k) %.1f"%(
              (take[k+1]-take[k])/1e3, fid[k], (sub[k]-take[k])/1e3,(done[k]-sub[k])/1e3,(pub[k]-done[k])/1e3,(take[k+1]-pub[k])/1e3,(acq[k+1]-take[k])/1e3))
            # max sub->done in the window
            kk=np.argmax((done-sub)[w])+w.start
            print("    max sub->done %.1f us at frame %d; max take->sub %.1f; max done->pub %.1f"%((done[kk]-sub[kk])/1e3,fid[kk],((sub-take)[w]).max()/1e3,((pub-done)[w]).max()/1e3))
