/* LD_PRELOAD shim for the full-disk test (tests/e2e/test_stop_and_faults.py): once more than
 * RCSWEEP_ENOSPC_AFTER bytes have been written to files whose path ends with RCSWEEP_ENOSPC_SUFFIX,
 * every further write to such a file fails with ENOSPC, as on a full file system. No root and no
 * mount needed, and the budget makes the failure land mid-run deterministically. A store is
 * created as OUT.partial-XXXXXX and linked or renamed to OUT when complete, and its descriptor may
 * keep the name it was opened by ("OUT.partial-XXXXXX (deleted)" once the temporary name is gone):
 * that counts as OUT too. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static long long written = 0;

static int watched(int fd) {
  const char* suffix = getenv("RCSWEEP_ENOSPC_SUFFIX");
  if (!suffix || !*suffix) return 0;
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  const size_t ls = strlen(suffix), lp = (size_t)n;
  static const char partial[] = ".partial-XXXXXX", deleted[] = " (deleted)";
  const size_t lpart = sizeof partial - 1, ldel = sizeof deleted - 1;
  size_t end = lp; /* the name without " (deleted)" and a temporary's ".partial-XXXXXX" */
  if (end >= ldel && strcmp(path + end - ldel, deleted) == 0) end -= ldel;
  if (end >= ls + lpart && strncmp(path + end - lpart, partial, 9) == 0) end -= lpart;
  return end >= ls && strncmp(path + end - ls, suffix, ls) == 0;
}

/* 1 when this write must fail; counts the bytes of the writes let through */
static int full(int fd, size_t count) {
  if (!watched(fd)) return 0;
  const char* budget = getenv("RCSWEEP_ENOSPC_AFTER");
  const long long limit = budget ? atoll(budget) : 0;
  if (written + (long long)count > limit) return 1;
  written += (long long)count;
  return 0;
}

ssize_t pwrite(int fd, const void* buf, size_t count, off_t offset) {
  static ssize_t (*real)(int, const void*, size_t, off_t) = NULL;
  if (!real) real = (ssize_t(*)(int, const void*, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
  if (full(fd, count)) {
    errno = ENOSPC;
    return -1;
  }
  return real(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void* buf, size_t count, off_t offset) { return pwrite(fd, buf, count, offset); }

ssize_t write(int fd, const void* buf, size_t count) {
  static ssize_t (*real)(int, const void*, size_t) = NULL;
  if (!real) real = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  if (full(fd, count)) {
    errno = ENOSPC;
    return -1;
  }
  return real(fd, buf, count);
}
