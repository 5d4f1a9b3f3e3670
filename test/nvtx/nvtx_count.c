/*
 * nvtx_count.c - a minimal NVTX tool for the tests: a shared library that
 * NVTX loads from NVTX_INJECTION64_PATH (NVIDIA's documented injection
 * interface: it exports InitializeInjectionNvtx2, receives the export table
 * and fills in the function table of the CORE2 module, i.e. the domain
 * calls). It counts, per domain, range pushes and pops, range starts and
 * ends, marks, and every registered string used as a range name, and at
 * exit writes one line per domain to $NVTX_COUNT_DIR/nvtx-<pid>.txt (stderr
 * when unset):
 *
 *   nvtx-count pid=P injected=1 domain=mpix-acc push=N pop=N start=N end=N
 *       mark=N unbalanced=N names=enqueue send:N,send:N,...
 *
 * and "nvtx-count pid=P injected=0" when the library was loaded (for
 * instance with LD_PRELOAD) but NVTX never initialised it: the program made
 * no NVTX call.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NVTX_AS_SYSTEM_HEADER
#include <nvtx3/nvToolsExt.h>

#define MAX_DOMAINS 8
#define MAX_NAMES 32

typedef struct {
    char name[64];
    _Atomic long push, pop, start, end, mark, unbalanced;
    struct {
        const char *text;
        _Atomic long n;
    } names[MAX_NAMES];
    int nnames;
} domain_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static domain_t domains[MAX_DOMAINS];
static int ndomains;
static _Atomic int injected;
static _Atomic uint64_t next_range = 1;
static _Thread_local int depth[MAX_DOMAINS];

static int domain_index(nvtxDomainHandle_t d)
{
    domain_t *p = (domain_t *)(void *)d;
    if (p < domains || p >= domains + MAX_DOMAINS)
        return -1;
    return (int)(p - domains);
}

static void count_name(domain_t *d, const nvtxEventAttributes_t *a)
{
    if (a == NULL || a->messageType != NVTX_MESSAGE_TYPE_REGISTERED)
        return;
    const char *text = (const char *)(void *)a->message.registered; /* see register_string */
    pthread_mutex_lock(&lock);
    int i;
    for (i = 0; i < d->nnames; i++)
        if (strcmp(d->names[i].text, text) == 0)
            break;
    if (i == d->nnames && i < MAX_NAMES)
        d->names[d->nnames++].text = text;
    if (i < MAX_NAMES)
        d->names[i].n++;
    pthread_mutex_unlock(&lock);
}

static nvtxDomainHandle_t NVTX_API domain_create(const char *name)
{
    pthread_mutex_lock(&lock);
    domain_t *d = NULL;
    for (int i = 0; i < ndomains; i++)
        if (strcmp(domains[i].name, name) == 0)
            d = &domains[i];
    if (d == NULL && ndomains < MAX_DOMAINS) {
        d = &domains[ndomains++];
        snprintf(d->name, sizeof(d->name), "%s", name);
    }
    pthread_mutex_unlock(&lock);
    return (nvtxDomainHandle_t)(void *)d;
}

static void NVTX_API domain_destroy(nvtxDomainHandle_t d) { (void)d; }

/* the handle of a registered string is a copy of the string */
static nvtxStringHandle_t NVTX_API register_string(nvtxDomainHandle_t d, const char *s)
{
    (void)d;
    return (nvtxStringHandle_t)(void *)strdup(s);
}

static int NVTX_API range_push(nvtxDomainHandle_t h, const nvtxEventAttributes_t *a)
{
    int i = domain_index(h);
    if (i < 0)
        return -1;
    domains[i].push++;
    count_name(&domains[i], a);
    return depth[i]++;
}

static int NVTX_API range_pop(nvtxDomainHandle_t h)
{
    int i = domain_index(h);
    if (i < 0)
        return -1;
    domains[i].pop++;
    if (depth[i] == 0) {
        domains[i].unbalanced++;
        return -1;
    }
    return --depth[i];
}

static nvtxRangeId_t NVTX_API range_start(nvtxDomainHandle_t h, const nvtxEventAttributes_t *a)
{
    int i = domain_index(h);
    if (i >= 0) {
        domains[i].start++;
        count_name(&domains[i], a);
    }
    return atomic_fetch_add(&next_range, 1);
}

static void NVTX_API range_end(nvtxDomainHandle_t h, nvtxRangeId_t id)
{
    (void)id;
    int i = domain_index(h);
    if (i >= 0)
        domains[i].end++;
}

static void NVTX_API mark(nvtxDomainHandle_t h, const nvtxEventAttributes_t *a)
{
    int i = domain_index(h);
    if (i >= 0) {
        domains[i].mark++;
        count_name(&domains[i], a);
    }
}

__attribute__((visibility("default"))) int NVTX_API
InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table)
{
    const NvtxExportTableCallbacks *etbl =
        (const NvtxExportTableCallbacks *)get_export_table(NVTX_ETID_CALLBACKS);
    if (etbl == NULL || etbl->struct_size < sizeof(*etbl))
        return 0;
    NvtxFunctionTable t = NULL;
    unsigned int size = 0;
    if (!etbl->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &size) || t == NULL ||
        size < NVTX_CBID_CORE2_DomainCreateA + 1)
        return 0;
    *t[NVTX_CBID_CORE2_DomainMarkEx] = (NvtxFunctionPointer)mark;
    *t[NVTX_CBID_CORE2_DomainRangeStartEx] = (NvtxFunctionPointer)range_start;
    *t[NVTX_CBID_CORE2_DomainRangeEnd] = (NvtxFunctionPointer)range_end;
    *t[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)range_push;
    *t[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)range_pop;
    *t[NVTX_CBID_CORE2_DomainRegisterStringA] = (NvtxFunctionPointer)register_string;
    *t[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)domain_create;
    *t[NVTX_CBID_CORE2_DomainDestroy] = (NvtxFunctionPointer)domain_destroy;
    injected = 1;
    return 1;
}

__attribute__((destructor)) static void report(void)
{
    FILE *out = stderr;
    const char *dir = getenv("NVTX_COUNT_DIR");
    char path[4096];
    if (dir != NULL && dir[0] != '\0') {
        snprintf(path, sizeof(path), "%s/nvtx-%ld.txt", dir, (long)getpid());
        FILE *f = fopen(path, "w");
        if (f != NULL)
            out = f;
    }
    if (ndomains == 0)
        fprintf(out, "nvtx-count pid=%ld injected=%d\n", (long)getpid(), (int)injected);
    for (int i = 0; i < ndomains; i++) {
        domain_t *d = &domains[i];
        fprintf(out,
                "nvtx-count pid=%ld injected=%d domain=%s push=%ld pop=%ld start=%ld end=%ld "
                "mark=%ld unbalanced=%ld names=",
                (long)getpid(), (int)injected, d->name, (long)d->push, (long)d->pop, (long)d->start,
                (long)d->end, (long)d->mark, (long)d->unbalanced);
        for (int k = 0; k < d->nnames; k++)
            fprintf(out, "%s%s:%ld", k ? "," : "", d->names[k].text, (long)d->names[k].n);
        fprintf(out, "\n");
    }
    if (out != stderr)
        fclose(out);
}
