/* octbench - measures the engine (per stage), the IPC ring and the whole
 * path.  See `octbench --help`. */
#include <getopt.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oct_docs.h"
#include "bench.h"
#include "bench_e2e.h"
#include "cli.h"

/* Fallbacks for parts that live in other files (a strong definition there
 * overrides these): seed_gpu.cu is only built with nvcc. */
__attribute__((weak)) double octbench_seed_gpu_msi(const octbench_opts *o, int samples,
                                                   int ascans, int lines, int masks, int lag_lo,
                                                   int lag_hi, const int *depths, int ndepths)
{
    return -1;
}

__attribute__((weak)) int octbench_ipc(const octbench_opts *o)
{
    printf("ipc benchmark: not available in this build\n");
    return -1;
}

__attribute__((weak)) int octbench_e2e(const octbench_opts *o)
{
    printf("end-to-end benchmark: not available in this build\n");
    return -1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: octbench [options]\n"
            "Measures octd's engine on the thesis' workloads (per-stage medians, throughput,\n"
            "speed-up over the sequential seed MSI), and optionally the IPC ring and the\n"
            "whole acquisition -> octd -> subscriber path.\n"
            "  --backend auto|cpu|cuda  engine backend (default auto)\n"
            "  --warmup N               untimed runs first (default 2, --quick 1)\n"
            "  --reps N                 timed runs, the median is reported (default 10, --quick 3)\n"
            "  --threads N              CPU threads (default 0 = all cores; --e2e: octd's)\n"
            "  --precision fp32|tf32    GPU GEMM precision (default fp32)\n"
            "  --only NAME              one workload (bscan-cfd, bscan-msi, volume-cfd,\n"
            "                           volume-msi, volume-cfd+msi, msi-volume-full;\n"
            "                           issue 7: li-sinc11, li-sinc21, li-sinc31, li-cubic,\n"
            "                           li-linear, li-none (Li et al. 2011: 2048-sample\n"
            "                           A-scans, CFD + k-linearisation, beside their GTX 295\n"
            "                           A-lines/s), bscan-cfd-disp, bscan-cfd-klin-disp,\n"
            "                           bscan-cms, volume-cms, volume-cfd-rolling,\n"
            "                           volume-cfd-fpn), a group (li, issue7) or a part\n"
            "                           (engine, ipc, e2e); register, register-512,\n"
            "                           register-live: volume registration on simulated\n"
            "                           motion (issue 17; register-live: the live shape on\n"
            "                           1..4 handles in as many threads); angio\n"
            "                           (issue 18: angio-bscan, angio-align, angio-engine,\n"
            "                           angio-slab, angio-volume, angio-physics)\n"
            "  --quick                  small sizes, few reps (smoke test)\n"
            "  --no-seed                skip the seed baselines\n"
            "  --ipc                    also run the shared-memory ring benchmark\n"
            "  --e2e                    run only the end-to-end benchmark: producer -> octd\n"
            "                           -> subscriber (--only volume|bscan|volume-klin-disp\n"
            "                           (sinc 21 k-lin, dispersion, frame-mean background)\n"
            "                           |angio|angio-align, --seconds S,\n"
            "                           --policy all|latest, --frame-rate FRAMES_PER_S;\n"
            "                           the old spelling --rate works, with a warning)\n"
            "  --version                the version\n"
            "  --producer copy|commit|both  --e2e producer: copy each frame into its slot\n"
            "                           (copy), or fill every slot once and then only stamp\n"
            "                           and commit headers, as a digitizer's DMA (commit:\n"
            "                           octd's own ceiling); both: one after the other;\n"
            "                           default copy\n"
            "  --zero-copy auto|on|off  --e2e: octd.ini [ring] zero_copy (default auto)\n"
            "  --devices LIST           --e2e: per workload, one engine ([engine] device) and\n"
            "                           then octd.ini [engine] devices = LIST (0,1 | 0,0 |\n"
            "                           cpu,cpu | all): total and per-engine rates, speed-up\n"
            "  --runs N                 --e2e with --frame-rate: each workload N times, a\n"
            "                           fresh octd each; p50/p99/max per run, then p99 over\n"
            "                           the runs and the latency distribution of all frames\n"
            "                           (tools/octbench/tails.sh: both volumes, 5 runs)\n"
            "  --engine-keys K=V[,K=V]  --e2e: more octd.ini [engine] keys for octd\n"
            "                           (priority=50,lock_memory=yes,timer_slack_ns=1)\n"
            "  --sndhwm N               --e2e: octd.ini [publish] sndhwm (frames; default 16)\n"
            "  --hostile S:C[,S:C...]   --e2e: per item, an unpaced phase without and one\n"
            "                           with S stalled + C churning subscribers, then (policy\n"
            "                           all) one paced at 90%% of the rate without them\n"
            "                           and one with them; the subscribers run in a child\n"
            "                           process (octbench --hostile-child ENDPOINT); with\n"
            "                           the commit producer the unpaced pair also runs\n"
            "                           with --window octd: the frame loop's rate and\n"
            "                           commit -> published p99 beside the delivery's\n"
            "  --hostile-cpus LIST      --hostile: pin that child to CPUs LIST (0-3,8)\n"
            "  --hostile-nice N         --hostile: that child's nice value (0..19)\n"
            "  --hostile-in-process     --hostile: the subscribers in octbench's own process\n"
            "  --window subscriber|octd --e2e, unpaced commit producer: stay a few frames\n"
            "                           ahead of the last frame the subscriber received\n"
            "                           (default), or of the last octd published (its\n"
            "                           status block: the subscriber's delays show as\n"
            "                           latency, not as octd's rate)\n"
            "  --producer-cpu N         --e2e: pin the producer thread to CPU N (paced, it\n"
            "                           sleeps until ~100 us before each frame is due, then\n"
            "                           spins; its lateness is printed per phase)\n"
            "  --ring-slots N           --e2e: the frame ring's slots (default: 32 per engine\n"
            "                           or more, up to 1024, until they hold 128 MiB; 8 per\n"
            "                           engine for frames of 16 MiB or more)\n"
            "  --topics T[,T...]        --e2e: the subscriber takes only these topic prefixes\n"
            "                           (default all; octd builds no image nobody wants)\n"
            "  --sub-sockets N          --e2e: the --topics dealt to N SUB sockets, each a\n"
            "                           connection read by a thread of its own (default 1)\n"
            "  --sub-shm                --e2e: octd also publishes on a [publish]\n"
            "                           shm_endpoint (header-only messages, the images in\n"
            "                           its image area) and the subscriber takes that one\n"
            "                           instead, copying each image out into a buffer of\n"
            "                           its own before it counts as received (overwritten\n"
            "                           first: lost in shm); --hostile's crowd stays on the\n"
            "                           normal endpoint\n"
            "  --sub-tcp                --e2e: octd's [publish] endpoint (the subscriber's\n"
            "                           and --hostile's) on tcp://127.0.0.1 at a free port\n"
            "                           instead of ipc:// (A/B of the transport)\n"
            "  --trace DIR              --e2e: each run's measured frames as received, a\n"
            "                           CSV line each (acquired, taken, submitted, done,\n"
            "                           published, received ns) in DIR/WORKLOAD-MS.csv\n"
            "  --publish-keys K=V[,K=V] --e2e: more octd.ini [publish] keys for octd\n"
            "                           (sndbuf=65536,cpus=1)\n"
            "  --json FILE              also write results as JSON lines to FILE\n"
            "CUDA tuning of the engine workloads (defaults: the engine's own choice):\n"
            "  --gemm sgemm|3xtf32|3xfp16  fp32 MSI matrix product (default: 3xfp16 for integer\n"
            "                           samples, 3xtf32 for f32 samples and CMS)\n"
            "  --gemm-chunk-mb X        MSI GEMM output chunk in MiB (0 = ~3/4 of L2,\n"
            "                           negative = the whole frame in one chunk)\n"
            "  --cuda-parts N           intra-frame pipeline parts of a volume (1 = off, <= 8)\n"
            "  --cuda-parts-ext[=MODE]  intra-frame pipeline with k-lin, dispersion and the\n"
            "                           frame-mean/rolling/FPN backgrounds (cuda.parts_ext):\n"
            "                           auto (default: deferred background correction),\n"
            "                           ext (no argument: background statistics per part),\n"
            "                           off (not with them), msi (as auto, the MSI's\n"
            "                           background deferred too: its GEMM per part)\n"
            "  --c2r-batch N            FFT-path MSI inverse FFT batch (spectra x masks)\n"
            "  --cuda-disp cufft|fused  dispersion chain: cuFFT steps per chunk (default) or\n"
            "                           one kernel per spectrum with a shared-memory FFT (M a\n"
            "                           power of two <= 2048; slower on an H200: A/B runs)\n"
            "  --cuda-cfd auto|fft|gemm a volume's CFD: a matrix product for the en-face\n"
            "                           depths and cross-sections with k-lin or dispersion\n"
            "                           (auto), the per-spectrum chain (fft), or the product\n"
            "                           also without them (gemm)\n"
            "  --cuda-disp-chunk N      spectra per cuFFT dispersion chunk (0 = auto: ~1/3 of\n"
            "                           L2, tiling an intra-frame part exactly)\n"
            "  --cuda-sink tile|warp|tile-reg  product sink: tiles of spectra x depths, the MSI\n"
            "                           GEMM output copied by cp.async, where every spectrum\n"
            "                           wants every depth and for the cross-sections, else a\n"
            "                           warp per spectrum (default); one warp per spectrum\n"
            "                           (before issue 19); tiles staging the GEMM\n"
            "                           output through registers (before 2026-12-02); A/B\n"
            "  --gemm-algo default|auto MSI GEMM: cublasGemmEx's default algorithm (default),\n"
            "                           or cublasLt's fastest candidate timed once per shape\n"
            "  --cuda-graph on|off      a frame's device work as one CUDA graph per in-flight\n"
            "                           slot (default on) or launch by launch (A/B runs)\n"
            "  --angio-path bands|legacy|fused  angiography's ssada kernels: cuFFT of the\n"
            "                           band spectra (default), the round-5 kernels, or one\n"
            "                           block per position with a shared-memory FFT\n"
            "  --angio-chunk N          angiography chunk in spectra (whole groups; 0 = ~32 k)\n"
            "  --help                   this text\n"
            OCT_DOCS_HINT);
}

int main(int argc, char **argv)
{
    octbench_opts o = {.backend = OCT_BACKEND_AUTO, .warmup = -1, .reps = 0, .threads = 0,
                       .precision = OCT_PRECISION_FP32, .seed = true, .policy = -1};
    enum { O_BACKEND = 256, O_WARMUP, O_REPS, O_THREADS, O_PREC, O_ONLY, O_QUICK, O_NOSEED,
           O_IPC, O_E2E, O_JSON, O_HELP, O_SECONDS, O_POLICY, O_RATE, O_PRODUCER, O_ZEROCOPY,
           O_HOSTILE, O_GEMM, O_CHUNK, O_PARTS, O_C2R, O_DEVICES, O_PARTS_EXT, O_SINK, O_GEMM_ALGO,
           O_RUNS, O_ENGINE_KEYS, O_ANGIO_PATH, O_ANGIO_CHUNK, O_SNDHWM,
           O_HOSTILE_CHILD, O_HOSTILE_CPUS, O_HOSTILE_NICE, O_HOSTILE_INPROC, O_PUBLISH_KEYS,
           O_WINDOW, O_GRAPH, O_PRODUCER_CPU, O_RING_SLOTS, O_TOPICS, O_SUB_SOCKETS, O_DISP_CHUNK,
           O_DISP, O_CFD, O_SUB_SHM, O_TRACE, O_SUB_TCP };
    static const struct option opts[] = {
        {"backend", required_argument, 0, O_BACKEND}, {"warmup", required_argument, 0, O_WARMUP},
        {"reps", required_argument, 0, O_REPS},       {"threads", required_argument, 0, O_THREADS},
        {"precision", required_argument, 0, O_PREC},  {"only", required_argument, 0, O_ONLY},
        {"quick", no_argument, 0, O_QUICK},           {"no-seed", no_argument, 0, O_NOSEED},
        {"ipc", no_argument, 0, O_IPC},               {"e2e", no_argument, 0, O_E2E},
        {"json", required_argument, 0, O_JSON},       {"help", no_argument, 0, O_HELP},
        {"seconds", required_argument, 0, O_SECONDS}, {"policy", required_argument, 0, O_POLICY},
        {"frame-rate", required_argument, 0, O_RATE},
        {"producer", required_argument, 0, O_PRODUCER},
        {"zero-copy", required_argument, 0, O_ZEROCOPY}, {"hostile", required_argument, 0, O_HOSTILE},
        {"gemm", required_argument, 0, O_GEMM},
        {"gemm-chunk-mb", required_argument, 0, O_CHUNK},
        {"cuda-parts", required_argument, 0, O_PARTS},
        {"cuda-parts-ext", optional_argument, 0, O_PARTS_EXT},
        {"c2r-batch", required_argument, 0, O_C2R},
        {"cuda-disp-chunk", required_argument, 0, O_DISP_CHUNK},
        {"cuda-disp", required_argument, 0, O_DISP},
        {"cuda-cfd", required_argument, 0, O_CFD},
        {"cuda-sink", required_argument, 0, O_SINK},
        {"gemm-algo", required_argument, 0, O_GEMM_ALGO},
        {"cuda-graph", required_argument, 0, O_GRAPH},
        {"devices", required_argument, 0, O_DEVICES},
        {"runs", required_argument, 0, O_RUNS},
        {"engine-keys", required_argument, 0, O_ENGINE_KEYS},
        {"sndhwm", required_argument, 0, O_SNDHWM},
        {"hostile-child", required_argument, 0, O_HOSTILE_CHILD},
        {"hostile-cpus", required_argument, 0, O_HOSTILE_CPUS},
        {"hostile-nice", required_argument, 0, O_HOSTILE_NICE},
        {"hostile-in-process", no_argument, 0, O_HOSTILE_INPROC},
        {"publish-keys", required_argument, 0, O_PUBLISH_KEYS},
        {"window", required_argument, 0, O_WINDOW},
        {"producer-cpu", required_argument, 0, O_PRODUCER_CPU},
        {"ring-slots", required_argument, 0, O_RING_SLOTS},
        {"topics", required_argument, 0, O_TOPICS},
        {"sub-sockets", required_argument, 0, O_SUB_SOCKETS},
        {"sub-shm", no_argument, 0, O_SUB_SHM},
        {"sub-tcp", no_argument, 0, O_SUB_TCP},
        {"trace", required_argument, 0, O_TRACE},
        {"angio-path", required_argument, 0, O_ANGIO_PATH},
        {"angio-chunk", required_argument, 0, O_ANGIO_CHUNK},
        {0, 0, 0, 0}};
    static const oct_cli_rename renames[] = {{"rate", "frame-rate"}, {NULL, NULL}};
    int c = oct_cli_start("octbench", argc, argv, renames);
    char *end;
    if (c >= 0)
        return c;
    oct_engine_process_init(); /* before any thread: OpenBLAS kernel choice */
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_GEMM:
            if (!strcmp(optarg, "sgemm"))
                o.cuda.gemm = OCT_CUDA_GEMM_SGEMM;
            else if (!strcmp(optarg, "3xtf32"))
                o.cuda.gemm = OCT_CUDA_GEMM_3XTF32;
            else if (!strcmp(optarg, "3xfp16"))
                o.cuda.gemm = OCT_CUDA_GEMM_3XFP16;
            else {
                fprintf(stderr, "octbench: --gemm %s: must be sgemm, 3xtf32 or 3xfp16\n", optarg);
                return OCT_EX_USAGE;
            }
            break;
        case O_CHUNK: {
            double v = strtod(optarg, &end);
            if (*optarg == '\0' || *end || !(v > -1e6 && v < 1e6)) {
                fprintf(stderr, "octbench: --gemm-chunk-mb %s: not a number of MiB\n", optarg);
                return OCT_EX_USAGE;
            }
            o.cuda.gemm_chunk_mb = v;
            break;
        }
        case O_SINK:
            if (!strcmp(optarg, "tile"))
                o.cuda.sink = OCT_CUDA_SINK_TILE;
            else if (!strcmp(optarg, "warp"))
                o.cuda.sink = OCT_CUDA_SINK_WARP;
            else if (!strcmp(optarg, "tile-reg"))
                o.cuda.sink = OCT_CUDA_SINK_TILE_REG;
            else {
                fprintf(stderr, "octbench: --cuda-sink %s: must be tile, warp or tile-reg\n", optarg);
                return OCT_EX_USAGE;
            }
            break;
        case O_GEMM_ALGO:
            if (!strcmp(optarg, "auto"))
                o.cuda.gemm_algo = OCT_CUDA_GEMM_ALGO_AUTO;
            else if (!strcmp(optarg, "default"))
                o.cuda.gemm_algo = OCT_CUDA_GEMM_ALGO_DEFAULT;
            else {
                fprintf(stderr, "octbench: --gemm-algo %s: must be auto or default\n", optarg);
                return OCT_EX_USAGE;
            }
            break;
        case O_GRAPH:
            if (!strcmp(optarg, "on"))
                o.cuda.graph = OCT_CUDA_GRAPH_ON;
            else if (!strcmp(optarg, "off"))
                o.cuda.graph = OCT_CUDA_GRAPH_OFF;
            else {
                fprintf(stderr, "octbench: --cuda-graph %s: must be on or off\n", optarg);
                return OCT_EX_USAGE;
            }
            break;
        case O_PARTS_EXT:
            if (!optarg || !strcmp(optarg, "ext"))
                o.cuda.parts_ext = 1;
            else if (!strcmp(optarg, "auto"))
                o.cuda.parts_ext = 0;
            else if (!strcmp(optarg, "off"))
                o.cuda.parts_ext = 2;
            else if (!strcmp(optarg, "msi"))
                o.cuda.parts_ext = 3;
            else {
                fprintf(stderr, "octbench: --cuda-parts-ext=%s: must be auto, ext, off or msi\n", optarg);
                return OCT_EX_USAGE;
            }
            break;
        case O_ANGIO_PATH:
            if (!strcmp(optarg, "bands"))
                o.cuda.angio_path = 0;
            else if (!strcmp(optarg, "legacy"))
                o.cuda.angio_path = 1;
            else if (!strcmp(optarg, "fused"))
                o.cuda.angio_path = 2;
            else {
                fprintf(stderr, "octbench: --angio-path %s: must be bands, legacy or fused\n",
                        optarg);
                return OCT_EX_USAGE;
            }
            break;
        case O_ANGIO_CHUNK: {
            long long v = strtoll(optarg, &end, 10);
            if (*optarg == '\0' || *end || v < 0 || v > UINT32_MAX) {
                fprintf(stderr, "octbench: --angio-chunk %s: must be a count of spectra (0 = "
                        "default)\n", optarg);
                return OCT_EX_USAGE;
            }
            o.cuda.angio_chunk = v;
            break;
        }
        case O_DISP:
            if (!strcmp(optarg, "fused"))
                o.cuda.disp = OCT_CUDA_DISP_FUSED;
            else if (!strcmp(optarg, "cufft") || !strcmp(optarg, "auto"))
                o.cuda.disp = OCT_CUDA_DISP_AUTO;
            else {
                fprintf(stderr, "octbench: --cuda-disp %s: must be fused or cufft\n", optarg);
                return OCT_EX_USAGE;
            }
            break;
        case O_CFD:
            if (!strcmp(optarg, "auto"))
                o.cuda.cfd = OCT_CUDA_CFD_AUTO;
            else if (!strcmp(optarg, "fft"))
                o.cuda.cfd = OCT_CUDA_CFD_FFT;
            else if (!strcmp(optarg, "gemm"))
                o.cuda.cfd = OCT_CUDA_CFD_GEMM;
            else {
                fprintf(stderr, "octbench: --cuda-cfd %s: must be auto, fft or gemm\n", optarg);
                return OCT_EX_USAGE;
            }
            break;
        case O_DISP_CHUNK: {
            long long v = strtoll(optarg, &end, 10);
            if (*optarg == '\0' || *end || v < 0 || v > (1ll << 40)) {
                fprintf(stderr, "octbench: --cuda-disp-chunk %s: must be a count of spectra (0 = "
                        "auto)\n", optarg);
                return OCT_EX_USAGE;
            }
            o.cuda.disp_chunk = v;
            break;
        }
        case O_PARTS:
        case O_C2R: {
            long long v = strtoll(optarg, &end, 10);
            if (*optarg == '\0' || *end || v < 1 || (c == O_PARTS && v > 8) || v > (1ll << 40)) {
                fprintf(stderr, "octbench: --%s %s: must be %s\n", c == O_PARTS ? "cuda-parts" : "c2r-batch",
                        optarg, c == O_PARTS ? "in [1, 8]" : "a positive count");
                return OCT_EX_USAGE;
            }
            if (c == O_PARTS)
                o.cuda.parts = (int)v;
            else
                o.cuda.c2r_batch = v;
            break;
        }
        case O_BACKEND:
            if (!strcmp(optarg, "auto"))
                o.backend = OCT_BACKEND_AUTO;
            else if (!strcmp(optarg, "cpu"))
                o.backend = OCT_BACKEND_CPU;
            else if (!strcmp(optarg, "cuda"))
                o.backend = OCT_BACKEND_CUDA;
            else {
                fprintf(stderr, "octbench: --backend %s: must be auto, cpu or cuda\n", optarg);
                return OCT_EX_USAGE;
            }
            break;
        case O_WARMUP:
        case O_REPS:
        case O_THREADS: {
            long v = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end || v < 0 || v > 100000 || (c == O_REPS && v < 1)) {
                fprintf(stderr, "octbench: --%s %s: not a valid count\n",
                        c == O_WARMUP ? "warmup" : c == O_REPS ? "reps" : "threads", optarg);
                return OCT_EX_USAGE;
            }
            if (c == O_WARMUP)
                o.warmup = (int)v;
            else if (c == O_REPS)
                o.reps = (int)v;
            else
                o.threads = (int)v;
            break;
        }
        case O_PREC:
            if (!strcmp(optarg, "fp32"))
                o.precision = OCT_PRECISION_FP32;
            else if (!strcmp(optarg, "tf32"))
                o.precision = OCT_PRECISION_TF32;
            else {
                fprintf(stderr, "octbench: --precision %s: must be fp32 or tf32\n", optarg);
                return OCT_EX_USAGE;
            }
            break;
        case O_ONLY: o.only = optarg; break;
        case O_QUICK: o.quick = true; break;
        case O_NOSEED: o.seed = false; break;
        case O_IPC: o.ipc = true; break;
        case O_E2E: o.e2e = true; break;
        case O_JSON: o.json = optarg; break;
        case O_SECONDS:
        case O_RATE: {
            double v = strtod(optarg, &end);
            if (*optarg == '\0' || *end || !(v > 0 && v < 1e7)) {
                fprintf(stderr, "octbench: --%s %s: must be a positive number\n",
                        c == O_SECONDS ? "seconds" : "frame-rate", optarg);
                return OCT_EX_USAGE;
            }
            if (c == O_SECONDS)
                o.seconds = v;
            else
                o.rate = v;
            break;
        }
        case O_POLICY:
            if (!strcmp(optarg, "all"))
                o.policy = 1;
            else if (!strcmp(optarg, "latest"))
                o.policy = 0;
            else {
                fprintf(stderr, "octbench: --policy %s: must be all or latest\n", optarg);
                return OCT_EX_USAGE;
            }
            break;
        case O_PRODUCER:
            if (strcmp(optarg, "copy") && strcmp(optarg, "commit") && strcmp(optarg, "both")) {
                fprintf(stderr, "octbench: --producer %s: must be copy, commit or both\n", optarg);
                return OCT_EX_USAGE;
            }
            o.producer = optarg;
            break;
        case O_ZEROCOPY:
            if (strcmp(optarg, "auto") && strcmp(optarg, "on") && strcmp(optarg, "off")) {
                fprintf(stderr, "octbench: --zero-copy %s: must be auto, on or off\n", optarg);
                return OCT_EX_USAGE;
            }
            o.zero_copy = optarg;
            break;
        case O_HOSTILE: o.hostile = optarg; break; /* checked by the e2e part */
        case O_HOSTILE_CHILD: o.hostile_child = optarg; break;
        case O_WINDOW:
            if (strcmp(optarg, "subscriber") && strcmp(optarg, "octd")) {
                fprintf(stderr, "octbench: --window %s: must be subscriber or octd\n", optarg);
                return OCT_EX_USAGE;
            }
            o.window_octd = !strcmp(optarg, "octd");
            break;
        case O_HOSTILE_INPROC: o.hostile_in_process = true; break;
        case O_SUB_SHM: o.sub_shm = true; break;
        case O_SUB_TCP: o.sub_tcp = true; break;
        case O_TRACE: o.trace = optarg; break;
        case O_SUB_SOCKETS: {
            long v = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end || v < 1 || v > 8) {
                fprintf(stderr, "octbench: --sub-sockets %s: must be 1 to 8\n", optarg);
                return OCT_EX_USAGE;
            }
            o.sub_sockets = (int)v;
            break;
        }
        case O_TOPICS:
            if (!*optarg || strstr(optarg, ",,") || optarg[strlen(optarg) - 1] == ',') {
                fprintf(stderr, "octbench: --topics %s: must be topic prefixes separated by "
                                "commas (bscan/cfd,bscan/msi)\n", optarg);
                return OCT_EX_USAGE;
            }
            o.topics = optarg;
            break;
        case O_PRODUCER_CPU:
        case O_RING_SLOTS: {
            long v = strtol(optarg, &end, 10);
            bool cpu = c == O_PRODUCER_CPU;
            if (*optarg == '\0' || *end || v < (cpu ? 0 : 4) || v > (cpu ? CPU_SETSIZE - 1 : 65536)) {
                fprintf(stderr, "octbench: --%s %s: must be %s\n", cpu ? "producer-cpu" : "ring-slots",
                        optarg, cpu ? "a CPU number" : "a slot count from 4 to 65536");
                return OCT_EX_USAGE;
            }
            if (cpu)
                o.producer_cpu = (int)v + 1;
            else
                o.ring_slots = (int)v;
            break;
        }
        case O_HOSTILE_CPUS:
            if (!hostile_check_cpus(optarg)) {
                fprintf(stderr, "octbench: --hostile-cpus %s: must be a CPU list (0-3,8)\n", optarg);
                return OCT_EX_USAGE;
            }
            o.hostile_cpus = optarg;
            break;
        case O_HOSTILE_NICE: {
            long v = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end || v < 0 || v > 19) {
                fprintf(stderr, "octbench: --hostile-nice %s: must be an integer from 0 to 19\n", optarg);
                return OCT_EX_USAGE;
            }
            o.hostile_nice = (int)v;
            break;
        }
        case O_PUBLISH_KEYS:
            if (strpbrk(optarg, "\n\r[]") || !strchr(optarg, '=')) {
                fprintf(stderr, "octbench: --publish-keys %s: must be KEY=VALUE[,KEY=VALUE...] "
                                "(octd.ini [publish] keys)\n", optarg);
                return OCT_EX_USAGE;
            }
            o.publish_keys = optarg; /* checked by octd */
            break;
        case O_DEVICES: o.devices = optarg; break; /* checked by octd (octd.ini) */
        case O_ENGINE_KEYS:
            if (strpbrk(optarg, "\n\r[]") || !strchr(optarg, '=')) {
                fprintf(stderr, "octbench: --engine-keys %s: must be KEY=VALUE[,KEY=VALUE...] "
                                "(octd.ini [engine] keys)\n", optarg);
                return OCT_EX_USAGE;
            }
            o.engine_keys = optarg; /* the keys and values are checked by octd */
            break;
        case O_SNDHWM: {
            long v = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end || v < 1 || v > 1000000) {
                fprintf(stderr, "octbench: --sndhwm %s: must be an integer in [1, 1000000]\n", optarg);
                return OCT_EX_USAGE;
            }
            o.sndhwm = (int)v;
            break;
        }
        case O_RUNS: {
            long v = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end || v < 1 || v > 1000) {
                fprintf(stderr, "octbench: --runs %s: must be an integer from 1 to 1000\n", optarg);
                return OCT_EX_USAGE;
            }
            o.runs = (int)v;
            break;
        }
        case O_HELP: usage(stdout); return 0;
        default: usage(stderr); return OCT_EX_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "octbench: unexpected argument '%s'\n", argv[optind]);
        return OCT_EX_USAGE;
    }
    if (o.only && !oct_cli_known("octbench", "--only", o.only, octbench_only_names()))
        return OCT_EX_USAGE;
    if (o.json) { /* parts append JSON lines to it */
        FILE *f = fopen(o.json, "w");
        if (!f) {
            perror(o.json);
            return 1;
        }
        fclose(f);
    }
    if (o.only && !strncmp(o.only, "register", 8)) /* volume registration (bench_register.c) */
        return octbench_register(&o) ? 1 : 0;
    if (o.hostile_child) /* --hostile's subscribers, for a parent octbench */
        return octbench_hostile_child(&o) ? 1 : 0;
    /* Alone, so that octd is forked before this process initialises CUDA. */
    if (o.e2e)
        return octbench_e2e(&o) ? 1 : 0;
    if (o.only && !strncmp(o.only, "angio", 5)) /* issue 18, bench_angio.c */
        return octbench_angio(&o) ? 1 : 0;
    int rc = 0;
    bool only_ipc = o.only && !strcmp(o.only, "ipc"), only_e2e = o.only && !strcmp(o.only, "e2e");
    if (!only_ipc && !only_e2e && octbench_engine(&o))
        rc = 1;
    if ((o.ipc && !o.only) || only_ipc)
        if (octbench_ipc(&o))
            rc = 1;
    if ((o.e2e && !o.only) || only_e2e)
        if (octbench_e2e(&o))
            rc = 1;
    return rc;
}
