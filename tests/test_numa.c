/* test_numa.c - placement of octd's threads on a GPU's NUMA node (issue
 * 20.1) and the real-time settings of its frame loop (issue 19.2): the
 * kernel's CPU lists (random sets against a list written here), fake sysfs
 * trees (two nodes, numa_node -1, one node, missing and malformed files, bad
 * PCI ids), affinity applied to a thread and restored, timer slack, page
 * pre-faulting, the frame path's use of them (the frame thread placed with
 * its engines' node and restored; a pool made on the node), and the [engine]
 * keys of octd.ini.  The daemon's sources are compiled in (the daemon is not
 * in liboct.a). */
#include "../daemon/frames.c"
#include "../daemon/loop_prof.c"
#include "../daemon/json.c"
#include "../daemon/copy_cache.c"
#include "../daemon/publish.c"
#include "../daemon/register_live.c"
#include "../daemon/reorder.c"
#include "../daemon/sys.c"
#include "../daemon/worker.c"

#include <check.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "oct_config.h"
#include "lib/testutil.h"

/* record.c's (HDF5, not linked here); these tests never record */
void octd_record_take(octd *d, const oct_geometry *geom, const oct_frame_info *info, const void *data)
{
    (void)d, (void)geom, (void)info, (void)data;
}
void octd_record_frame(octd *d, const oct_frame_info *info, const oct_products *prod)
{
    (void)d, (void)info, (void)prod;
}

/* main.c's; the tests plan the engine themselves */
bool octd_ensure_engine(octd *d, const oct_geometry *geom)
{
    return d->eng && geom_same(&d->eng_geom, geom);
}

/* ---- CPU lists ---- */
/* The kernel's form of a set ("0-2,5,7-9"), written independently. */
static void format_list(const cpu_set_t *set, int max, char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    for (int c = 0; c < max; c++) {
        if (!CPU_ISSET(c, set))
            continue;
        int hi = c;
        while (hi + 1 < max && CPU_ISSET(hi + 1, set))
            hi++;
        o += (size_t)snprintf(out + o, len - o, o ? ",%d" : "%d", c);
        if (hi > c)
            o += (size_t)snprintf(out + o, len - o, "-%d", hi);
        c = hi;
    }
}

START_TEST(cpulist_examples)
{
    cpu_set_t set;
    int n;
    oct_error e;
    ck_assert_int_eq(octd_cpulist_parse("0-7,16-23", "x", &set, &n, &e), OCT_OK);
    ck_assert_int_eq(n, 16);
    for (int c = 0; c < 32; c++)
        ck_assert_int_eq(CPU_ISSET(c, &set) != 0, (c < 8) || (c >= 16 && c < 24));
    ck_assert_int_eq(octd_cpulist_parse("3\n", "x", &set, &n, &e), OCT_OK);
    ck_assert_int_eq(n, 1);
    ck_assert(CPU_ISSET(3, &set));
    ck_assert_int_eq(octd_cpulist_parse("1,1,0-1", "x", &set, &n, &e), OCT_OK);
    ck_assert_int_eq(n, 2); /* counted once */
    static const char *const bad[] = {"", "\n", "1-", "-1", "a", "3-1", "0,,1", "1 2", "0-3,",
                                      "1.5", "99999999", "0-99999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        e.msg[0] = '\0';
        ck_assert_msg(octd_cpulist_parse(bad[i], "/sys/x/local_cpulist", &set, &n, &e) ==
                          OCT_EPARSE,
                      "'%s' accepted", bad[i]);
        ck_assert_msg(strstr(e.msg, "/sys/x/local_cpulist"), "'%s': %s", bad[i], e.msg);
    }
    ck_assert_int_eq(octd_cpulist_parse("", "f", &set, &n, &e), OCT_EPARSE);
    ck_assert_msg(strstr(e.msg, "empty"), "%s", e.msg);
    ck_assert_int_eq(octd_cpulist_parse("3-1", "f", &set, &n, &e), OCT_EPARSE);
    ck_assert_msg(strstr(e.msg, "backwards"), "%s", e.msg);
}
END_TEST

START_TEST(cpulist_random)
{
    tu_rng r;
    tu_rng_seed(&r, 20261123);
    for (int t = 0; t < 500; t++) {
        cpu_set_t want, got;
        CPU_ZERO(&want);
        int max = 1 + (int)(tu_rng_next(&r) % 1024), count = 0;
        double p = tu_rng_uniform(&r);
        for (int c = 0; c < max; c++)
            if (tu_rng_uniform(&r) < p) {
                CPU_SET(c, &want);
                count++;
            }
        if (!count) {
            CPU_SET(max - 1, &want);
            count = 1;
        }
        char text[8192];
        format_list(&want, max, text, sizeof text);
        int n;
        oct_error e;
        ck_assert_msg(octd_cpulist_parse(text, "x", &got, &n, &e) == OCT_OK, "%s: %s", text,
                      e.msg);
        ck_assert_int_eq(n, count);
        ck_assert_msg(CPU_EQUAL(&want, &got), "'%s' parsed to another set", text);
    }
}
END_TEST

/* ---- fake sysfs trees ---- */
static void put_file(const char *root, const char *rel, const char *text)
{
    char path[PATH_MAX], dir[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(dir, sizeof dir, "%s", path);
    for (char *s = dir + strlen(root) + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        mkdir(dir, 0755);
        *s = '/';
    }
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void make_tree(char *root, size_t len, const char *online, const char *node,
                      const char *cpulist)
{
    snprintf(root, len, "/tmp/octd-numa.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    if (online)
        put_file(root, "devices/system/node/online", online);
    if (node)
        put_file(root, "bus/pci/devices/0000:41:00.0/numa_node", node);
    if (cpulist)
        put_file(root, "bus/pci/devices/0000:41:00.0/local_cpulist", cpulist);
}

static void rm_tree(const char *root)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(sysfs_two_nodes)
{
    char root[64], text[256];
    make_tree(root, sizeof root, "0-1\n", "1\n", "16-31\n");
    octd_placement p;
    oct_error e;
    /* as CUDA spells it: upper case, 8-digit domain */
    ck_assert_msg(octd_placement_read(root, "00000000:41:00.0", &p, &e) == OCT_OK, "%s", e.msg);
    ck_assert(p.place);
    ck_assert_int_eq(p.node, 1);
    ck_assert_int_eq(p.nodes, 2);
    ck_assert_int_eq(p.ncpus, 16);
    ck_assert(CPU_ISSET(16, &p.cpus) && CPU_ISSET(31, &p.cpus) && !CPU_ISSET(15, &p.cpus));
    ck_assert_str_eq(p.bus, "0000:41:00.0");
    octd_placement_describe(&p, 1, text, sizeof text);
    ck_assert_str_eq(text, "engine 1: GPU 0000:41:00.0, NUMA node 1, CPUs 16-31");
    ck_assert_int_eq(octd_placement_read(root, "0000:41:00.0", &p, &e), OCT_OK);
    ck_assert_str_eq(p.bus, "0000:41:00.0");
    rm_tree(root);
}
END_TEST

START_TEST(sysfs_not_placed)
{
    char root[64], text[256];
    octd_placement p;
    oct_error e;
    /* numa_node -1 (the GPU machines here): affinity left alone, said why */
    make_tree(root, sizeof root, "0-1\n", "-1\n", "0-15\n");
    ck_assert_int_eq(octd_placement_read(root, "0000:41:00.0", &p, &e), OCT_OK);
    ck_assert(!p.place);
    ck_assert_int_eq(p.node, -1);
    octd_placement_describe(&p, 0, text, sizeof text);
    ck_assert_msg(strstr(text, "numa_node -1") && strstr(text, "not placed"), "%s", text);
    ck_assert_int_eq(octd_placement_apply(pthread_self(), &p, &e), OCT_OK); /* a no-op */
    rm_tree(root);
    /* one node online */
    make_tree(root, sizeof root, "0\n", "0\n", "0-15\n");
    ck_assert_int_eq(octd_placement_read(root, "0000:41:00.0", &p, &e), OCT_OK);
    ck_assert(!p.place);
    ck_assert_int_eq(p.node, 0);
    ck_assert_int_eq(p.nodes, 1);
    ck_assert_msg(strstr(p.why, "one NUMA node"), "%s", p.why);
    rm_tree(root);
    /* a kernel without NUMA: no node directory */
    make_tree(root, sizeof root, NULL, "0\n", NULL);
    ck_assert_int_eq(octd_placement_read(root, "0000:41:00.0", &p, &e), OCT_OK);
    ck_assert(!p.place);
    ck_assert_int_eq(p.nodes, 1);
    rm_tree(root);
}
END_TEST

START_TEST(sysfs_errors)
{
    char root[64];
    octd_placement p;
    oct_error e;
    /* no such device */
    make_tree(root, sizeof root, "0-1\n", NULL, NULL);
    ck_assert_int_eq(octd_placement_read(root, "0000:41:00.0", &p, &e), OCT_ENOENT);
    ck_assert_msg(strstr(e.msg, "0000:41:00.0/numa_node"), "%s", e.msg);
    rm_tree(root);
    static const struct { const char *online, *node, *cpulist, *file, *words; } cases[] = {
        {"0-1\n", "x\n", "0-3\n", "numa_node", "not a NUMA node"},
        {"0-1\n", "1 2\n", "0-3\n", "numa_node", "not a NUMA node"},
        {"0-1\n", "-7\n", "0-3\n", "numa_node", "not a NUMA node"},
        {"0-1\n", "1\n", "16-\n", "local_cpulist", "not a CPU list"},
        {"0-1\n", "1\n", "\n", "local_cpulist", "empty CPU list"},
        {"0-1\n", "1\n", "ff,00\n", "local_cpulist", "not a CPU list"},
        {"0-1\n", "1\n", NULL, "local_cpulist", "No such file"},
        {"zero\n", "1\n", "0-3\n", "node/online", "not a CPU list"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        make_tree(root, sizeof root, cases[i].online, cases[i].node, cases[i].cpulist);
        e.msg[0] = '\0';
        oct_err rc = octd_placement_read(root, "0000:41:00.0", &p, &e);
        ck_assert_msg(rc != OCT_OK, "case %zu accepted", i);
        ck_assert_msg(strstr(e.msg, cases[i].file) && strstr(e.msg, cases[i].words),
                      "case %zu: %s", i, e.msg);
        ck_assert(!p.place);
        rm_tree(root);
    }
    /* PCI ids that are not ids (never a path outside the devices) */
    static const char *const bad[] = {"", "../../etc", "0000:41:00", "0000:41:00.0/..",
                                      "0000:41:00.00", "12345678:41:00.0", "0000-41-00.0", "41:00.0"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_msg(octd_placement_read("/sys", bad[i], &p, &e) == OCT_EINVAL, "'%s'", bad[i]);
        ck_assert_msg(strstr(e.msg, "PCI id"), "'%s': %s", bad[i], e.msg);
    }
}
END_TEST

/* ---- affinity ---- */
static void *report_cpus(void *arg)
{
    cpu_set_t *out = arg;
    sched_getaffinity(0, sizeof *out, out);
    return NULL;
}

static void *idle_thread(void *arg)
{
    pthread_barrier_t *b = arg;
    pthread_barrier_wait(b); /* placed */
    pthread_barrier_wait(b); /* checked */
    return NULL;
}

START_TEST(apply_and_restore)
{
    cpu_set_t allowed, now;
    ck_assert_int_eq(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    int last = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed))
            last = c;
    ck_assert_int_ge(last, 0);
    octd_placement p = {.place = true, .node = 1, .nodes = 2, .ncpus = 1};
    CPU_ZERO(&p.cpus);
    CPU_SET(last, &p.cpus);
    snprintf(p.cpulist, sizeof p.cpulist, "%d", last);
    /* another thread (as a worker's), placed from outside */
    pthread_barrier_t b;
    pthread_barrier_init(&b, NULL, 2);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, idle_thread, &b), 0);
    oct_error e;
    ck_assert_msg(octd_placement_apply(th, &p, &e) == OCT_OK, "%s", e.msg);
    pthread_barrier_wait(&b);
    ck_assert_int_eq(pthread_getaffinity_np(th, sizeof now, &now), 0);
    ck_assert(CPU_EQUAL(&now, &p.cpus));
    pthread_barrier_wait(&b);
    pthread_join(th, NULL);
    pthread_barrier_destroy(&b);
    /* the calling thread for a while; a thread it starts then inherits it */
    cpu_set_t saved, child;
    ck_assert(octd_placement_enter(&p, &saved));
    ck_assert(CPU_EQUAL(&saved, &allowed));
    ck_assert_int_eq(pthread_create(&th, NULL, report_cpus, &child), 0);
    pthread_join(th, NULL);
    ck_assert(CPU_EQUAL(&child, &p.cpus));
    octd_placement_leave(true, &saved);
    ck_assert_int_eq(sched_getaffinity(0, sizeof now, &now), 0);
    ck_assert(CPU_EQUAL(&now, &allowed));
    /* only CPUs this process may not use: refused, nothing changed */
    if (last + 1 < CPU_SETSIZE) {
        CPU_ZERO(&p.cpus);
        for (int c = last + 1; c < CPU_SETSIZE; c++)
            CPU_SET(c, &p.cpus);
        snprintf(p.cpulist, sizeof p.cpulist, "%d-%d", last + 1, CPU_SETSIZE - 1);
        ck_assert_int_eq(octd_placement_apply(pthread_self(), &p, &e), OCT_EINVAL);
        ck_assert_msg(strstr(e.msg, "none of CPUs") && strstr(e.msg, p.cpulist), "%s", e.msg);
        ck_assert(!octd_placement_enter(&p, &saved));
        ck_assert_int_eq(sched_getaffinity(0, sizeof now, &now), 0);
        ck_assert(CPU_EQUAL(&now, &allowed));
    }
    /* not placed: enter does nothing */
    p.place = false;
    ck_assert(!octd_placement_enter(&p, &saved));
    ck_assert(!octd_placement_enter(NULL, &saved));
}
END_TEST

/* A placement on one CPU this process may use (the last), as node `node`. */
static octd_placement one_cpu(int node, int nth_from_last)
{
    cpu_set_t allowed;
    ck_assert_int_eq(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    int c = CPU_SETSIZE;
    for (int k = 0; k <= nth_from_last; k++)
        while (--c >= 0 && !CPU_ISSET(c, &allowed))
            ;
    if (c < 0) /* fewer CPUs than asked: the first */
        for (c = 0; !CPU_ISSET(c, &allowed); c++)
            ;
    octd_placement p = {.place = true, .node = node, .nodes = 2, .ncpus = 1};
    CPU_ZERO(&p.cpus);
    CPU_SET(c, &p.cpus);
    snprintf(p.cpulist, sizeof p.cpulist, "%d", c);
    return p;
}

/* Whether every thread of an OpenMP team (the staging copies' threads) runs on `want`. */
static bool omp_team_on(const cpu_set_t *want)
{
    int bad = 0;
#pragma omp parallel num_threads(omp_get_max_threads() > 1 ? omp_get_max_threads() : 2)     \
    reduction(+ : bad)
    {
        cpu_set_t c;
        pthread_getaffinity_np(pthread_self(), sizeof c, &c);
        bad += !CPU_EQUAL(&c, want);
    }
    return bad == 0;
}

START_TEST(frame_thread_follows_engines)
{
    octd_frames *g = calloc(1, sizeof *g);
    ck_assert_ptr_nonnull(g);
    cpu_set_t allowed, now;
    ck_assert_int_eq(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    g->nlanes = 2;
    /* the OpenMP threads exist already (started unplaced, as by earlier work) */
    ck_assert(omp_team_on(&allowed));
    /* two engines on node 1: the frame thread goes there */
    g->lane[0].place = one_cpu(1, 0);
    g->lane[1].place = one_cpu(1, 0);
    place_frame_thread(g);
    ck_assert(g->follow.placed);
    ck_assert_int_eq(g->follow.node, 1);
    ck_assert_int_eq(sched_getaffinity(0, sizeof now, &now), 0);
    ck_assert(CPU_EQUAL(&now, &g->lane[0].place.cpus));
    ck_assert_msg(omp_team_on(&g->lane[0].place.cpus), "OpenMP threads not placed");
    place_frame_thread(g); /* the same again: nothing changes */
    ck_assert(g->follow.placed);
    /* engines on two nodes: back where it was, not placed */
    g->lane[1].place = one_cpu(0, 1);
    place_frame_thread(g);
    ck_assert(!g->follow.placed);
    ck_assert(g->follow.warned_mixed);
    ck_assert_int_eq(sched_getaffinity(0, sizeof now, &now), 0);
    ck_assert(CPU_EQUAL(&now, &allowed));
    ck_assert_msg(omp_team_on(&allowed), "OpenMP threads not restored");
    /* one placed engine and a CPU engine (nothing to place): the GPU's node */
    g->lane[1].place = (octd_placement){.node = -1};
    place_frame_thread(g);
    ck_assert(g->follow.placed && g->follow.node == 1);
    /* nothing placed (numa_node -1): back, untouched */
    g->lane[0].place = (octd_placement){.node = -1};
    place_frame_thread(g);
    ck_assert(!g->follow.placed);
    ck_assert_int_eq(sched_getaffinity(0, sizeof now, &now), 0);
    ck_assert(CPU_EQUAL(&now, &allowed));
    free(g);
}
END_TEST

/* Engines on two nodes: a large frame staged through the CPU is copied on
 * its engine's node (the frame thread and its OpenMP threads), then back;
 * registered input, small frames and one-node set-ups move nothing. */
START_TEST(staging_moves_to_engine_node)
{
    octd_frames *g = calloc(1, sizeof *g);
    ck_assert_ptr_nonnull(g);
    cpu_set_t allowed, now, saved;
    ck_assert_int_eq(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    ck_assert(omp_team_on(&allowed)); /* the OpenMP threads exist, unplaced */
    g->nlanes = 2;
    g->lane[0].place = one_cpu(0, 1);
    g->lane[1].place = one_cpu(1, 0);
    place_frame_thread(g);
    ck_assert(g->follow.mixed && !g->follow.placed);
    path_lane *L = &g->lane[1];
    size_t big = STAGE_MOVE_BYTES;
    bool moved = stage_enter(g, L, big, &saved);
    ck_assert(moved);
    ck_assert_int_eq(sched_getaffinity(0, sizeof now, &now), 0);
    ck_assert(CPU_EQUAL(&now, &L->place.cpus));
    ck_assert_msg(omp_team_on(&L->place.cpus), "staging threads not on the engine's node");
    stage_leave(moved, &saved);
    ck_assert_int_eq(sched_getaffinity(0, sizeof now, &now), 0);
    ck_assert(CPU_EQUAL(&now, &allowed));
    ck_assert_msg(omp_team_on(&allowed), "staging threads not back");
    /* nothing moves: a small frame, registered input, a CPU engine's thread */
    ck_assert(!stage_enter(g, L, big - 1, &saved));
    L->reg_ptr = g;
    ck_assert(!stage_enter(g, L, big, &saved));
    L->reg_ptr = NULL;
    /* one node: the frame thread is placed already, nothing moves per frame */
    g->lane[0].place = one_cpu(1, 0);
    place_frame_thread(g);
    ck_assert(!g->follow.mixed && g->follow.placed);
    ck_assert(!stage_enter(g, L, big, &saved));
    g->lane[0].place = g->lane[1].place = (octd_placement){.node = -1};
    place_frame_thread(g);
    ck_assert_int_eq(sched_getaffinity(0, sizeof now, &now), 0);
    ck_assert(CPU_EQUAL(&now, &allowed));
    free(g);
}
END_TEST

/* A product pool made with its lane's placement: the buffers exist and the
 * frame thread's affinity is back after (CPU products are made on first use;
 * pinned CUDA ones are resident once made). */
START_TEST(pool_made_on_node)
{
    octd d;
    memset(&d, 0, sizeof d);
    oct_setup su;
    oct_setup_default(&su);
    su.geom = (oct_geometry){256, 32, 1, OCT_SAMPLE_U16, 0};
    su.backend = OCT_BACKEND_CPU;
    su.threads = 1;
    oct_params_default(&d.params);
    oct_error e;
    ck_assert_msg(oct_engine_create(&d.eng, &su, &d.params, &e) == OCT_OK, "%s", e.msg);
    d.eng_geom = su.geom;
    d.cfg.prefault = true;
    d.frames = calloc(1, sizeof *d.frames);
    ck_assert_ptr_nonnull(d.frames);
    path_lane *L = &d.frames->lane[0];
    L->eng = d.eng;
    L->place = one_cpu(1, 0);
    cpu_set_t allowed, now;
    ck_assert_int_eq(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    pool_sync(L, &d);
    ck_assert_int_ge(L->nslots, 1);
    ck_assert_int_eq(sched_getaffinity(0, sizeof now, &now), 0);
    ck_assert(CPU_EQUAL(&now, &allowed));
    octd_frames_free(&d);
    oct_engine_destroy(d.eng);
}
END_TEST

static int resident_pages(const void *p, size_t bytes, size_t *npages)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1);
    size_t len = (uintptr_t)p + bytes - a, np = (len + pg - 1) / pg;
    unsigned char *vec = malloc(np);
    ck_assert_int_eq(mincore((void *)a, len, vec), 0);
    int n = 0;
    for (size_t i = 0; i < np; i++)
        n += vec[i] & 1;
    free(vec);
    *npages = np;
    return n;
}

/* Pre-faulting products: every page of the u8 and f32 buffers resident. */
START_TEST(prefault_products_resident)
{
    oct_products *p = oct_products_create();
    ck_assert_ptr_nonnull(p);
    size_t pixels = 3u << 20; /* large: fresh mappings, not yet resident */
    oct_image *a = &p->img[OCT_METHOD_CFD][OCT_KIND_BSCAN];
    oct_image *b = &p->img[OCT_METHOD_MSI][OCT_KIND_ENFACE];
    ck_assert_int_eq(oct_image_reserve(a, pixels, true, 0), OCT_OK);
    ck_assert_int_eq(oct_image_reserve(b, pixels / 3, false, 4), OCT_OK);
    size_t np;
    int before = resident_pages(a->f32, pixels * sizeof(float), &np);
    ck_assert_msg(before < (int)np / 2, "%d of %zu pages resident before", before, np);
    prefault_products(p);
    ck_assert_int_eq(resident_pages(a->u8, a->cap_pixels, &np), (int)np);
    ck_assert_int_eq(resident_pages(a->f32, a->cap_pixels * sizeof(float), &np), (int)np);
    ck_assert_int_eq(resident_pages(b->u8, b->cap_pixels, &np), (int)np);
    oct_products_destroy(p);
}
END_TEST

/* ---- real-time settings ---- */
START_TEST(timer_slack_and_prefault)
{
    octd_rt_timer_slack(1);
    ck_assert_int_eq(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), 1);
    octd_rt_timer_slack(1000);
    ck_assert_int_eq(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), 1000);
    /* a fresh mapping: every page resident after pre-faulting */
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), bytes = 37 * pg + 123;
    uint8_t *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert(m != MAP_FAILED);
    unsigned char vec[40];
    ck_assert_int_eq(mincore(m, bytes, vec), 0);
    int resident = 0;
    for (size_t i = 0; i < (bytes + pg - 1) / pg; i++)
        resident += vec[i] & 1;
    ck_assert_int_eq(resident, 0);
    octd_prefault(m, bytes);
    ck_assert_int_eq(mincore(m, bytes, vec), 0);
    for (size_t i = 0; i < (bytes + pg - 1) / pg; i++)
        ck_assert_msg(vec[i] & 1, "page %zu not resident", i);
    munmap(m, bytes);
    octd_prefault(NULL, 0); /* nothing to touch */
    /* priority 0 is normal scheduling, whatever the limits */
    octd_rt_priority(0);
    ck_assert_int_eq(sched_getscheduler(0), SCHED_OTHER);
}
END_TEST

/* Background threads (publisher, recording writer, registration workers)
 * started from a SCHED_FIFO frame loop run at SCHED_OTHER; a plain
 * pthread_create beside them inherits SCHED_FIFO (the case it guards). */
static void *report_policy(void *arg)
{
    *(int *)arg = sched_getscheduler(0);
    return NULL;
}

START_TEST(background_threads_normal)
{
    struct sched_param sp = {.sched_priority = 1};
    if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) != 0) {
        printf("SKIP background_threads_normal: SCHED_FIFO is not permitted here\n");
        return;
    }
    int inherited = -1, normal = -1;
    pthread_t t;
    int rc1 = pthread_create(&t, NULL, report_policy, &inherited);
    if (rc1 == 0)
        pthread_join(t, NULL);
    int rc2 = octd_thread_start_normal(&t, report_policy, &normal);
    if (rc2 == 0)
        pthread_join(t, NULL);
    sp.sched_priority = 0;
    ck_assert_int_eq(pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp), 0);
    ck_assert_int_eq(rc1, 0);
    ck_assert_int_eq(rc2, 0);
    ck_assert_int_eq(inherited, SCHED_FIFO);
    ck_assert_int_eq(normal, SCHED_OTHER);
}
END_TEST

/* [engine] nice (issue 21): background threads go back to octd's own nice
 * from a frame loop made less nice; a plain pthread_create inherits it. */
static void *report_nice(void *arg)
{
    *(int *)arg = getpriority(PRIO_PROCESS, (id_t)gettid());
    return NULL;
}

START_TEST(background_threads_own_nice)
{
    id_t self = (id_t)gettid();
    int base = getpriority(PRIO_PROCESS, self);
    octd_rt_nice_base();
    ck_assert(octd_rt_nice(base + 2, false)); /* nicer: always permitted */
    ck_assert_int_eq(getpriority(PRIO_PROCESS, self), base + 2);
    if (!octd_rt_nice(base - 3, false)) {
        printf("SKIP background_threads_own_nice: no CAP_SYS_NICE or RLIMIT_NICE here\n");
        ck_assert_int_eq(getpriority(PRIO_PROCESS, self), base); /* refused: octd's own */
        return;
    }
    ck_assert_int_eq(getpriority(PRIO_PROCESS, self), base - 3);
    int inherited = 99, normal = 99;
    pthread_t t;
    int rc1 = pthread_create(&t, NULL, report_nice, &inherited);
    if (rc1 == 0)
        pthread_join(t, NULL);
    int rc2 = octd_thread_start_normal(&t, report_nice, &normal);
    if (rc2 == 0)
        pthread_join(t, NULL);
    /* auto: -20 (or what RLIMIT_NICE allows), never above octd's own */
    ck_assert(octd_rt_nice(OCT_NICE_AUTO, true));
    int automatic = getpriority(PRIO_PROCESS, self);
    ck_assert_int_eq(setpriority(PRIO_PROCESS, self, base), 0);
    ck_assert_int_eq(rc1, 0);
    ck_assert_int_eq(rc2, 0);
    ck_assert_int_eq(inherited, base - 3);
    ck_assert_int_eq(normal, base);
    ck_assert_int_lt(automatic, base);
    ck_assert_int_ge(automatic, -20);
}
END_TEST

START_TEST(ini_keys)
{
    oct_daemon_config c;
    oct_error e;
    oct_daemon_config_default(&c);
    ck_assert(c.numa && c.prefault && !c.lock_memory && c.registration_workers == 0);
    ck_assert_int_eq(c.timer_slack_ns, 1000);
    ck_assert_int_eq(c.priority, 0);
    ck_assert_int_eq(c.nice, OCT_NICE_AUTO);
    const char *ok = "[engine]\nnuma = off\ntimer_slack_ns = 1\nlock_memory = yes\n"
                     "priority = 50\nprefault = no\nregistration_workers = 4\nnice = -5\n";
    ck_assert_msg(oct_daemon_config_parse(&c, ok, strlen(ok), "t.ini", &e) == OCT_OK, "%s",
                  e.msg);
    ck_assert(!c.numa && !c.prefault && c.lock_memory);
    ck_assert_int_eq(c.timer_slack_ns, 1);
    ck_assert_int_eq(c.priority, 50);
    ck_assert_int_eq(c.nice, -5);
    ck_assert_int_eq(c.registration_workers, 4);
    static const struct { const char *text, *words; } bad[] = {
        {"[engine]\npriority = 100\n", "t.ini:2: [engine] priority: '100'"},
        {"[engine]\npriority = -1\n", "[engine] priority: '-1'"},
        {"[engine]\nnice = -21\n", "t.ini:2: [engine] nice: '-21' is not auto or a nice value "
                                     "from -20 to 19"},
        {"[engine]\nnice = high\n", "[engine] nice: 'high'"},
        {"[engine]\nlock_memory = maybe\n", "[engine] lock_memory: 'maybe' is not yes or no"},
        {"[engine]\nprefault = 2\n", "[engine] prefault: '2'"},
        {"[engine]\nnuma = node1\n", "[engine] numa: 'node1' is not auto or off"},
        {"[engine]\ntimer_slack_ns = 1us\n", "[engine] timer_slack_ns: '1us'"},
        {"[engine]\nregistration_workers = 9\n", "[engine] registration_workers: '9' is not 0 "
                                                  "(automatic) or a number of registration "
                                                  "threads from 1 to 8"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_msg(oct_daemon_config_parse(&c, bad[i].text, strlen(bad[i].text), "t.ini",
                                              &e) != OCT_OK, "'%s' accepted", bad[i].text);
        ck_assert_msg(strstr(e.msg, bad[i].words), "'%s': %s", bad[i].text, e.msg);
    }
}
END_TEST

int main(void)
{
    octd_log_set_level(LOG_ERR); /* the refused SCHED_FIFO etc. warn by design */
    Suite *s = suite_create("numa");
    TCase *tc = tcase_create("placement");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, cpulist_examples);
    tcase_add_test(tc, cpulist_random);
    tcase_add_test(tc, sysfs_two_nodes);
    tcase_add_test(tc, sysfs_not_placed);
    tcase_add_test(tc, sysfs_errors);
    tcase_add_test(tc, apply_and_restore);
    tcase_add_test(tc, frame_thread_follows_engines);
    tcase_add_test(tc, staging_moves_to_engine_node);
    tcase_add_test(tc, pool_made_on_node);
    tcase_add_test(tc, prefault_products_resident);
    suite_add_tcase(s, tc);
    TCase *tr = tcase_create("realtime");
    tcase_set_timeout(tr, 60);
    tcase_add_test(tr, timer_slack_and_prefault);
    tcase_add_test(tr, background_threads_normal);
    tcase_add_test(tr, background_threads_own_nice);
    tcase_add_test(tr, ini_keys);
    suite_add_tcase(s, tr);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
