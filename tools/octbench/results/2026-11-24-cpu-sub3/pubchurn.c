/* pubchurn.c - octd's publisher alone (issue 21, r4; r5: with copy_cache.c and [publish] stats = 1;
 * -DCOPY_STREAM_OFF: memcpy for every copy, as before r5): a frame loop sending
 * 2 x 256 KB B-scan images per frame at RATE frames/s from a pool of 32
 * buffers (then 3 copy-only ones, as daemon/frames.c), one reading
 * subscriber, `octbench --hostile-child` S:C; prints the frame loop's send
 * time, page faults and CPU per frame by thread.  A measurement harness kept
 * with its results, not part of the build.  From the repository root, after
 * `make all`:
 *   gcc -O2 -std=gnu11 -D_GNU_SOURCE -I. -Iconfig -Iipc -Ikernels -Idaemon -Itools/common \
 *     -o /tmp/pubchurn.bin tools/octbench/results/2026-11-24-cpu-sub3/pubchurn.c build/cuda/liboct.a \
 *     -lzmq -lpthread -lm -lyaml -linih -lpng -lfftw3f -lfftw3f_threads -lfftw3 -lfftw3_threads \
 *     -fopenmp -ldl -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcufft -lcublas \
 *     -lcublasLt -lcudart -lstdc++
 *   LD_LIBRARY_PATH=build/cuda /tmp/pubchurn.bin publisher|frame 2000 5 50:100 */
#include "daemon/json.c"
#include "daemon/copy_cache.c"
#include "daemon/publish.c"
#include "daemon/sys.c"
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#define IMG (256 * 1024)
#define POOL 32
typedef struct { oct_products prod; octd_slot slot; } fslot;
static fslot pool[POOL + 3];
static atomic_bool stop;
static atomic_long got;
static void *reader(void *ep)
{
    void *c = zmq_ctx_new(), *s = zmq_socket(c, ZMQ_SUB);
    int to = 100;
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &to, sizeof to);
    zmq_setsockopt(s, ZMQ_SUBSCRIBE, "bscan/", 6);
    zmq_connect(s, ep);
    static char buf[IMG + 16];
    while (!atomic_load(&stop)) {
        int n = zmq_recv(s, buf, sizeof buf, 0);
        if (n == IMG) atomic_fetch_add(&got, 1);
    }
    int l = 0; zmq_setsockopt(s, ZMQ_LINGER, &l, sizeof l);
    zmq_close(s); zmq_ctx_term(c);
    return NULL;
}
typedef struct { double cpu; unsigned long flt; } tc;
static void counts(tc out[3])
{
    memset(out, 0, 3 * sizeof *out);
    DIR *d = opendir("/proc/self/task"); struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
        char p[256], comm[32] = "", b[1024]; FILE *f;
        snprintf(p, sizeof p, "/proc/self/task/%s/comm", de->d_name);
        if ((f = fopen(p, "r"))) { if (!fgets(comm, sizeof comm, f)) comm[0] = 0; fclose(f); }
        int g = atoi(de->d_name) == getpid() ? 0 : !strncmp(comm, "octd-publish", 12) ? 1 : !strncmp(comm, "ZMQbg", 5) ? 2 : -1;
        if (g < 0) continue;
        snprintf(p, sizeof p, "/proc/self/task/%s/stat", de->d_name);
        if (!(f = fopen(p, "r"))) continue;
        size_t n = fread(b, 1, sizeof b - 1, f); fclose(f); b[n] = 0;
        unsigned long mf, ut, st;
        if (sscanf(strrchr(b, ')') + 2, "%*c %*d %*d %*d %*d %*d %*u %lu %*u %*u %*u %lu %lu", &mf, &ut, &st) == 3) {
            out[g].flt += mf; out[g].cpu += (double)(ut + st) / sysconf(_SC_CLK_TCK); }
    }
    closedir(d);
}
int main(int argc, char **argv)
{
    const char *copies = argv[1]; double rate = atof(argv[2]), secs = atof(argv[3]);
    static oct_daemon_config cfg;
    char dir[] = "/tmp/pubchurnXXXXXX"; mkdtemp(dir);
    snprintf(cfg.endpoints[0], sizeof cfg.endpoints[0], "ipc://%s/p", dir);
    cfg.endpoint_count = 1; cfg.sndhwm = 4; cfg.pub_stats_s = 1;
    cfg.pub_copies = strcmp(copies, "frame") ? OCT_PUB_COPIES_PUBLISHER : OCT_PUB_COPIES_FRAME;
    snprintf(cfg.source_path, sizeof cfg.source_path, "x");
    pid_t child = 0; int in[2];
    if (strcmp(argv[4], "0:0")) {
        pipe(in); child = fork();
        if (!child) { dup2(in[0], 0); close(in[1]); int dn = open("/dev/null", O_WRONLY); dup2(dn, 1);
            execl("bin/octbench", "octbench", "--hostile-child", cfg.endpoints[0], "--hostile", argv[4], (char *)0); _exit(1); }
        close(in[0]);
    }
    octd_pub *p; oct_error e;
    if (octd_pub_create(&p, &cfg, &e) != OCT_OK) { fprintf(stderr, "%s\n", e.msg); return 1; }
    for (int i = 0; i < POOL + 3; i++) {
        oct_image *b = &pool[i].prod.img[OCT_METHOD_CFD][OCT_KIND_BSCAN], *m = &pool[i].prod.img[OCT_METHOD_MSI][OCT_KIND_BSCAN];
        for (oct_image *x = b; x; x = x == b ? m : NULL) {
            x->present = true; x->ndim = 2; x->shape[0] = 512; x->shape[1] = IMG / 512; x->count = IMG;
            x->u8 = malloc(IMG); memset(x->u8, i, IMG); }
        pool[i].slot.prod = &pool[i].prod; atomic_init(&pool[i].slot.refs, 0); pool[i].slot.copy_only = i >= POOL;
    }
    pthread_t rt; pthread_create(&rt, NULL, reader, cfg.endpoints[0]);
    sleep(1);
    double t0 = 0, send_ns = 0; long frames = 0, copyonly = 0; uint64_t tdrops = 0; tc c0[3], c1[3];
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); double start = ts.tv_sec + ts.tv_nsec / 1e9;
    long got0 = 0;
    for (long k = 0;; k++) {
        clock_gettime(CLOCK_MONOTONIC, &ts); double now = ts.tv_sec + ts.tv_nsec / 1e9;
        if (now - start >= 1 && !t0) { t0 = now; counts(c0); frames = 0; send_ns = 0; copyonly = 0; tdrops = 0; got0 = atomic_load(&got); }
        if (t0 && now - t0 >= secs) break;
        double due = start + k / rate;
        if (due > now) { struct timespec d = {0, (long)((due - now) * 1e9)}; nanosleep(&d, NULL); }
        octd_slot *s = NULL;
        for (int pass = 0; pass < 2 && !s; pass++)
            for (int i = 0; i < POOL + 3 && !s; i++) { int z = 0;
                if (pool[i].slot.copy_only == pass && atomic_compare_exchange_strong(&pool[i].slot.refs, &z, 1)) s = &pool[i].slot; }
        if (!s) continue;
        copyonly += s->copy_only;
        octd_frame_meta m = {.frame_id = (uint64_t)k}; uint64_t drops = 0, last = 0;
        uint64_t a = mono_ns(); octd_pub_send_products(p, s, &m, &drops, &last); tdrops += drops; send_ns += mono_ns() - a;
        octd_slot_release(s); frames++;
    }
    counts(c1);
    long rcv = atomic_load(&got) - got0;
    printf("%s %s: %ld frames (%ld copy-only), subscriber got %.0f%% of the images, %lu dropped at the inproc hop; send %.1f us/frame; faults/frame: frame loop %.2f, publisher %.2f, ZeroMQ %.2f; CPU ms/frame: %.3f %.3f %.3f\n",
           copies, argv[4], frames, copyonly, 100.0 * rcv / (2.0 * frames), (unsigned long)tdrops, send_ns / 1e3 / frames,
           (double)(c1[0].flt - c0[0].flt) / frames, (double)(c1[1].flt - c0[1].flt) / frames, (double)(c1[2].flt - c0[2].flt) / frames,
           1e3 * (c1[0].cpu - c0[0].cpu) / frames, 1e3 * (c1[1].cpu - c0[1].cpu) / frames, 1e3 * (c1[2].cpu - c0[2].cpu) / frames);
    atomic_store(&stop, true); pthread_join(rt, NULL);
    if (child) { close(in[1]); waitpid(child, NULL, 0); }
    octd_pub_destroy(p);
    return 0;
}
