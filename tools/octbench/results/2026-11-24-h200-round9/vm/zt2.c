/* zt2 SIZE N MALLOPT SNDBUF ENDPOINT NCONN: PUB sends N msgs alternating 2 topics a/b
 * (zero-copy from a prefaulted pool), NCONN SUB sockets (each own thread) split topics. */
#include <zmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <malloc.h>
#include <sys/resource.h>
static size_t SZ; static int N, NC; static char *EP;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void nofree(void*d,void*h){(void)d;(void)h;}
static char *pool;
static void *pub(void *a){ void *s=a;
  for(int i=0;i<N;i++){ zmq_msg_t m; zmq_msg_init_data(&m,pool+(i%64)*SZ,SZ,nofree,0);
    zmq_send(s,i&1?"b":"a",1,ZMQ_SNDMORE); zmq_msg_send(&m,s,0);} return 0;}
struct rd { void *s; int n; };
static void *rdr(void *a){ struct rd *r=a; char tb[8]; zmq_msg_t m; zmq_msg_init(&m);
  for(int i=0;i<r->n;i++){ zmq_recv(r->s,tb,8,0); zmq_msg_recv(&m,r->s,0);} return 0;}
int main(int c,char**v){
  SZ=atol(v[1]);N=atoi(v[2]); int mo=atoi(v[3]), sb=atoi(v[4]); EP=v[5]; NC=atoi(v[6]);
  if(mo){mallopt(M_MMAP_THRESHOLD,256<<20);mallopt(M_TRIM_THRESHOLD,1<<30);}
  pool=malloc(SZ*64); memset(pool,1,SZ*64);
  void *c1=zmq_ctx_new(),*c2=zmq_ctx_new(); zmq_ctx_set(c1,ZMQ_IO_THREADS,NC); zmq_ctx_set(c2,ZMQ_IO_THREADS,NC);
  void *p=zmq_socket(c1,ZMQ_PUB); int hwm=100000; zmq_setsockopt(p,ZMQ_SNDHWM,&hwm,4);
  if(sb){zmq_setsockopt(p,ZMQ_SNDBUF,&sb,4);}
  zmq_bind(p,EP);
  struct rd r[4]; pthread_t th[4];
  for(int k=0;k<NC;k++){ r[k].s=zmq_socket(c2,ZMQ_SUB); zmq_setsockopt(r[k].s,ZMQ_RCVHWM,&hwm,4);
    if(sb) zmq_setsockopt(r[k].s,ZMQ_RCVBUF,&sb,4);
    if(NC==1) zmq_setsockopt(r[k].s,ZMQ_SUBSCRIBE,"",0); else zmq_setsockopt(r[k].s,ZMQ_SUBSCRIBE,k?"b":"a",1);
    r[k].n = NC==1?N:N/2; zmq_connect(r[k].s,EP);}
  struct timespec ts={0,300000000}; nanosleep(&ts,0);
  struct rusage r0,r1; getrusage(RUSAGE_SELF,&r0); double t0=now();
  pthread_t pt; pthread_create(&pt,0,pub,p);
  for(int k=0;k<NC;k++) pthread_create(&th[k],0,rdr,&r[k]);
  for(int k=0;k<NC;k++) pthread_join(th[k],0);
  double t=now()-t0; getrusage(RUSAGE_SELF,&r1);
  printf("%s size %zu mallopt %d sndbuf %d conn %d: %.0f msg/s %.2f GB/s, minflt/msg %.1f, cpu %.2f cores\n",EP,SZ,mo,sb,NC,N/t,N*SZ/t/1e9,(double)(r1.ru_minflt-r0.ru_minflt)/N,
   ((r1.ru_utime.tv_sec-r0.ru_utime.tv_sec)+(r1.ru_stime.tv_sec-r0.ru_stime.tv_sec)+1e-6*((r1.ru_utime.tv_usec-r0.ru_utime.tv_usec)+(r1.ru_stime.tv_usec-r0.ru_stime.tv_usec)))/t);
  pthread_join(pt,0); return 0;}
