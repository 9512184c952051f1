/* ring.h - `octctl ring [--ring NAME] [--dump FILE.npy]` (ring.c). */
#ifndef OCTCTL_RING_H
#define OCTCTL_RING_H

/* argv[0] is "ring"; returns the process exit code (0 ok, 1 error, 2 usage). */
int octctl_ring_main(int argc, char **argv);

#endif
