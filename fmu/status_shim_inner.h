/*
 * The status shims' (status_shim.c, FMI 2.0; status_shim3.c, FMI 3.0) way to the pythonfmu library they stand in
 * front of: loaded once from beside the shim, named as the shim with INNER_SUFFIX for its ".so" (the build puts it
 * there), and unloaded with the shim; and the log categories both filter by. Define INNER_SUFFIX before including this. Our own code (MPL-2.0).
 */
#ifndef LIDAR_FMU_STATUS_SHIM_INNER_H
#define LIDAR_FMU_STATUS_SHIM_INNER_H

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static void *inner;
static pthread_once_t loaded = PTHREAD_ONCE_INIT;

static void load_inner(void) {
    Dl_info info;
    char path[4096];
    if (!dladdr((void *)&load_inner, &info) || !info.dli_fname) return;
    size_t n = strlen(info.dli_fname);
    if (n < 3 || n + sizeof INNER_SUFFIX >= sizeof path || strcmp(info.dli_fname + n - 3, ".so") != 0) return;
    memcpy(path, info.dli_fname, n - 3);
    strcpy(path + n - 3, INNER_SUFFIX);
    inner = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!inner) fprintf(stderr, "lidar-fmu status shim: cannot load %s: %s\n", path, dlerror());
}

/* The pythonfmu library's function ``name`` (NULL: none, or the library did not load). */
static void *real(const char *name) {
    pthread_once(&loaded, load_inner);
    return inner ? dlsym(inner, name) : NULL;
}

/* The log categories of both model descriptions (pythonfmu's and pythonfmu3's). */
static const char *const CATEGORIES[] = {"logStatusWarning", "logStatusDiscard", "logStatusError", "logStatusFatal",
                                         "logAll"};
#define N_CATEGORIES (sizeof CATEGORIES / sizeof CATEGORIES[0])

static int category_index(const char *name) {
    for (size_t k = 0; name && k < N_CATEGORIES; k++)
        if (strcmp(name, CATEGORIES[k]) == 0) return (int)k;
    return -1;
}

/* Whether a message reaches the master: an error always, the rest while its debug logging is on, for the
 * categories it asked for (``categories`` bit k: CATEGORIES[k]; 0: all). */
static int passed_on(int is_error, const char *category, int debug_logging, unsigned categories) {
    int k = category_index(category);
    return is_error || (debug_logging && (categories == 0 || (k >= 0 && (categories >> k) & 1u)));
}

__attribute__((destructor)) static void unload_inner(void) {
    if (inner) dlclose(inner); /* as the master unloading pythonfmu's library itself would */
}

#endif
