/* zl EP NCONN SNDBUF BURSTS: every 4 ms a burst of the volume's 8 images
 * (2 x 1.536 MB enface, 2 x 38 KB confocal, 4 x 102 KB xsec), zero-copy from
 * a prefaulted pool, to NCONN SUB sockets (topics dealt in turn); latency =
 * last receipt - the burst's last send.  Prints p50/p99 (ms). */
#include <zmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <stdatomic.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void nofree(void*d,void*h){(void)d;(void)h;}
static const size_t SZ[8]={1536000,1536000,38400,38400,102400,102400,102400,102400};
static const char *TP[8]={"ea","eb","ca","cb","xa","xb","xc","xd"};
static int NC, NB; static char *pool; static _Atomic double last_rx[4096]; static double sent[4096];
static _Atomic int got[4096];
struct rd { void *s; int want; };
static void *rdr(void *a){ struct rd *r=a; char tb[8]; int b;
  for(;;){ if(zmq_recv(r->s,tb,8,0)<0) break; zmq_recv(r->s,&b,4,0); zmq_msg_t m; zmq_msg_init(&m); zmq_msg_recv(&m,r->s,0); zmq_msg_close(&m);
    double t=now(); if(t>last_rx[b]) last_rx[b]=t; got[b]++; if(b==NB-1 && got[b]>=8) break; if(b==NB-1 && r->want==0) break; }
  return 0;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int c,char**v){
  char *EP=v[1]; NC=atoi(v[2]); int sb=atoi(v[3]); NB=atoi(v[4]);
  size_t tot=0; for(int i=0;i<8;i++) tot+=SZ[i]; pool=malloc(tot*8); memset(pool,1,tot*8);
  void *c1=zmq_ctx_new(),*c2=zmq_ctx_new(); zmq_ctx_set(c1,ZMQ_IO_THREADS,NC); zmq_ctx_set(c2,ZMQ_IO_THREADS,NC);
  void *p=zmq_socket(c1,ZMQ_PUB); int hwm=100000; zmq_setsockopt(p,ZMQ_SNDHWM,&hwm,4); if(sb) zmq_setsockopt(p,ZMQ_SNDBUF,&sb,4);
  zmq_bind(p,EP);
  struct rd r[4]; pthread_t th[4];
  for(int k=0;k<NC;k++){ r[k].s=zmq_socket(c2,ZMQ_SUB); zmq_setsockopt(r[k].s,ZMQ_RCVHWM,&hwm,4); int to=2000; zmq_setsockopt(r[k].s,ZMQ_RCVTIMEO,&to,4);
    for(int i=k;i<8;i+=NC) zmq_setsockopt(r[k].s,ZMQ_SUBSCRIBE,TP[i],2); r[k].want=1; zmq_connect(r[k].s,EP); pthread_create(&th[k],0,rdr,&r[k]);}
  struct timespec ts={0,300000000}; nanosleep(&ts,0);
  for(int b=0;b<NB;b++){ double t0=now(); size_t off=(b%8)*tot;
    for(int i=0;i<8;i++){ zmq_msg_t m; zmq_msg_init_data(&m,pool+off,SZ[i],nofree,0); off+=SZ[i];
      zmq_send(p,TP[i],2,ZMQ_SNDMORE); zmq_send(p,&b,4,ZMQ_SNDMORE); zmq_msg_send(&m,p,0);} sent[b]=now();
    while(now()<t0+0.004); }
  for(int k=0;k<NC;k++) pthread_join(th[k],0);
  double *l=malloc(NB*sizeof*l); int n=0; for(int b=10;b<NB;b++) if(got[b]==8) l[n++]=(last_rx[b]-sent[b])*1e3;
  qsort(l,n,sizeof*l,cmp); printf("%s conn %d sndbuf %d: %d bursts p50 %.3f p99 %.3f ms\n",EP,NC,sb,n,l[n/2],l[n*99/100]); return 0;}
