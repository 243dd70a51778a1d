/* A slow disk for one node of the fault harness (tests/cluster/faults/nemesis.py): loaded with
 * LD_PRELOAD, it delays each fsync and fdatasync by the milliseconds written in the file named
 * by WARREN_SLOW_FSYNC_FILE (read at each call, so the harness slows the disk and heals it while
 * the node runs; no file or 0: no delay). The data still reaches the disk: only later. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long delay_ms(void) {
    const char *path = getenv("WARREN_SLOW_FSYNC_FILE");
    long ms = 0;
    FILE *f;
    if (path == NULL || (f = fopen(path, "r")) == NULL)
        return 0;
    if (fscanf(f, "%ld", &ms) != 1)
        ms = 0;
    fclose(f);
    return ms;
}

static void wait_ms(long ms) {
    struct timespec t;
    if (ms <= 0)
        return;
    t.tv_sec = ms / 1000;
    t.tv_nsec = (ms % 1000) * 1000000L;
    while (nanosleep(&t, &t) != 0) {
    }
}

int fsync(int fd) {
    static int (*real)(int);
    if (real == NULL)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    wait_ms(delay_ms());
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (real == NULL)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    wait_ms(delay_ms());
    return real(fd);
}
