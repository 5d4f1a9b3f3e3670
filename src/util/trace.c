/*
 * trace.c - NVTX backend of util/trace.h (see there).
 *
 * NVTX v3 is header-only: nvToolsExt.h defines, in this file, the function
 * pointers that start at an initialiser; the first NVTX call loads the tool
 * named by NVTX_INJECTION64_PATH (dlopen) and hands it the export table, or,
 * without a tool, points every function at a no-op. Built when configure
 * found CUDA (MPIXACC_HAVE_CUDA: the toolkit's include directory is on the
 * include path) and the toolkit has nvtx3.
 */
#include "util/trace.h"

#include <stddef.h>

#if defined(MPIXACC_HAVE_CUDA) && defined(__has_include)
#if __has_include(<nvtx3/nvToolsExt.h>)
#define MXU_HAVE_NVTX 1
#endif
#endif

int mxu_trace_on;

#ifdef MXU_HAVE_NVTX
#define NVTX_AS_SYSTEM_HEADER /* its own warnings are not ours */
#include <nvtx3/nvToolsExt.h>

static nvtxDomainHandle_t trace_domain;

int mxu_trace_built(void) { return 1; }

int mxu_trace_setup(int enable)
{
    if (enable && trace_domain == NULL)
        trace_domain = nvtxDomainCreateA("mpix-acc");
    mxu_trace_on = enable != 0;
    return mxu_trace_on;
}

static void trace_attributes(nvtxEventAttributes_t *a, mxu_trace_name_t *name, uint64_t payload)
{
    void *h = atomic_load_explicit(&name->handle, memory_order_relaxed);
    if (h == NULL) {
        /* two threads may both register it: the tool returns one handle per
         * string, and either is right */
        h = nvtxDomainRegisterStringA(trace_domain, name->text);
        atomic_store_explicit(&name->handle, h, memory_order_relaxed);
    }
    *a = (nvtxEventAttributes_t){0};
    a->version = NVTX_VERSION;
    a->size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    if (h != NULL) {
        a->messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        a->message.registered = (nvtxStringHandle_t)h;
    } else {
        a->messageType = NVTX_MESSAGE_TYPE_ASCII;
        a->message.ascii = name->text;
    }
    a->payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a->payload.ullValue = payload;
}

void mxu_trace_push_(mxu_trace_name_t *name, uint64_t payload)
{
    nvtxEventAttributes_t a;
    trace_attributes(&a, name, payload);
    nvtxDomainRangePushEx(trace_domain, &a);
}

void mxu_trace_pop_(void) { nvtxDomainRangePop(trace_domain); }

uint64_t mxu_trace_start_(mxu_trace_name_t *name, uint64_t payload)
{
    nvtxEventAttributes_t a;
    trace_attributes(&a, name, payload);
    return nvtxDomainRangeStartEx(trace_domain, &a);
}

void mxu_trace_end_(uint64_t id) { nvtxDomainRangeEnd(trace_domain, id); }

void mxu_trace_mark_(mxu_trace_name_t *name, uint64_t payload)
{
    nvtxEventAttributes_t a;
    trace_attributes(&a, name, payload);
    nvtxDomainMarkEx(trace_domain, &a);
}

#else /* no NVTX: tracing can never be turned on */

int mxu_trace_built(void) { return 0; }

int mxu_trace_setup(int enable)
{
    (void)enable;
    mxu_trace_on = 0;
    return 0;
}

void mxu_trace_push_(mxu_trace_name_t *name, uint64_t payload)
{
    (void)name;
    (void)payload;
}
void mxu_trace_pop_(void) {}
uint64_t mxu_trace_start_(mxu_trace_name_t *name, uint64_t payload)
{
    (void)name;
    (void)payload;
    return 0;
}
void mxu_trace_end_(uint64_t id) { (void)id; }
void mxu_trace_mark_(mxu_trace_name_t *name, uint64_t payload)
{
    (void)name;
    (void)payload;
}
#endif
