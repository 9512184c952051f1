// h2d2: pinned host->device bandwidth per GPU alone and on all GPUs at once
// (separate host buffers, and one shared host buffer), 64 MiB copies.
#include <cstdio>
#include <thread>
#include <vector>
#include <chrono>
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>
#include <cstring>
#define CK(x) do{cudaError_t e=(x); if(e){printf("%s: %s\n",#x,cudaGetErrorString(e)); return;}}while(0)
static const size_t SZ = 64u << 20; static const int REPS = 60;
static void run(int dev, void *host, double *gbs) {
    cudaSetDevice(dev); void *d; CK(cudaMalloc(&d, SZ)); cudaStream_t s; cudaStreamCreate(&s);
    for (int i = 0; i < 5; i++) cudaMemcpyAsync(d, host, SZ, cudaMemcpyHostToDevice, s);
    cudaStreamSynchronize(s);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < REPS; i++) cudaMemcpyAsync(d, host, SZ, cudaMemcpyHostToDevice, s);
    cudaStreamSynchronize(s);
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    *gbs = (double)SZ * REPS / t / 1e9; cudaFree(d); cudaStreamDestroy(s);
}
int main() {
    int n = 0; cudaGetDeviceCount(&n); printf("%d GPUs\n", n);
    std::vector<void*> h(n);
    for (int i = 0; i < n; i++) cudaHostAlloc(&h[i], SZ, cudaHostAllocPortable);
    std::vector<double> g(n);
    for (int i = 0; i < n; i++) { run(i, h[i], &g[i]); printf("GPU %d alone: %.1f GB/s\n", i, g[i]); }
    // shm-backed like octd's ring: shm_open + mmap, registered read-only + portable
    std::vector<void*> hs(n);
    for (int i = 0; i < n; i++) {
        char name[64]; snprintf(name, sizeof name, "/h2d2-%d-%d", (int)getpid(), i);
        int fd = shm_open(name, O_CREAT | O_RDWR, 0600); ftruncate(fd, SZ);
        hs[i] = mmap(nullptr, SZ, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
        memset(hs[i], 1, SZ); close(fd); shm_unlink(name);
        cudaSetDevice(0);
        cudaError_t r = cudaHostRegister(hs[i], SZ, cudaHostRegisterReadOnly | cudaHostRegisterPortable);
        printf("register shm %d: %s\n", i, cudaGetErrorString(r));
    }
    for (int i = 0; i < n; i++) { run(i, hs[i], &g[i]); printf("GPU %d alone (shm): %.1f GB/s\n", i, g[i]); }
    for (int shared = 0; shared < 2; shared++) {
        std::vector<std::thread> th;
        for (int i = 0; i < n; i++) th.emplace_back(run, i, shared ? hs[0] : hs[i], &g[i]);
        for (auto &t : th) t.join();
        double sum = 0; for (int i = 0; i < n; i++) { printf("  GPU %d: %.1f GB/s\n", i, g[i]); sum += g[i]; }
        printf("all at once (shm, %s): %.1f GB/s total\n", shared ? "one shared" : "separate", sum);
    }
    for (int shared = 0; shared < 2; shared++) {
        std::vector<std::thread> th;
        for (int i = 0; i < n; i++) th.emplace_back(run, i, shared ? h[0] : h[i], &g[i]);
        for (auto &t : th) t.join();
        double sum = 0; for (int i = 0; i < n; i++) { printf("  GPU %d: %.1f GB/s\n", i, g[i]); sum += g[i]; }
        printf("all at once (%s host buffers): %.1f GB/s total\n", shared ? "one shared" : "separate", sum);
    }
    return 0;
}
