/*
 * trace.h - NVTX ranges of mpix-acc, behind one small interface so that no
 * other file names NVTX or needs an #ifdef.
 *
 * Built with NVTX v3 (header-only, nvtx3/nvToolsExt.h of the CUDA toolkit)
 * when configure found CUDA; otherwise every call is an empty inline. NVTX
 * itself does nothing until a tool injects itself (Nsight Systems/Compute,
 * or any library named by NVTX_INJECTION64_PATH). Everything goes to one
 * domain, "mpix-acc". MPIX_ACC_NVTX=0 turns it off at run time: then not a
 * single NVTX call is made (the domain is not even created).
 *
 * Names are static mxu_trace_name_t objects, registered with the tool
 * (nvtxDomainRegisterStringA) at their first use:
 *
 *   static mxu_trace_name_t tn_send = MXU_TRACE_NAME("enqueue send");
 *   mxu_trace_push(&tn_send, bytes);  ...  mxu_trace_pop();     same thread, nested
 *   mxu_trace_range_t r = mxu_trace_start(&tn_x, bytes);  ...  mxu_trace_end(&r);
 *                                                        (any threads, overlapping)
 *
 * The payload (an unsigned 64-bit number: bytes, a count) is shown by the
 * tool with the range. A range that was never started ({0}: tracing off, or
 * an operation that never started) is not ended; ending one twice ends it
 * once.
 */
#ifndef MXU_TRACE_H
#define MXU_TRACE_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct {
    const char *text;
    _Atomic(void *) handle; /* registered string, set at first use */
} mxu_trace_name_t;
#define MXU_TRACE_NAME(text)                                                                       \
    {                                                                                              \
        (text), NULL                                                                               \
    }

typedef struct {
    uint64_t id; /* the tool's range id */
    int open;    /* started and not ended */
} mxu_trace_range_t;

/* 1 while ranges are recorded: set by mxu_trace_setup() before the library
 * starts its threads, read without locks. */
extern int mxu_trace_on;

/* 1 when NVTX support is compiled in. */
int mxu_trace_built(void);
/* Turn tracing on (creates the "mpix-acc" domain; NVTX then loads an
 * injected tool) or off. Called once at start-up (MPI_Init), before any
 * range; returns the resulting mxu_trace_on. */
int mxu_trace_setup(int enable);

void mxu_trace_push_(mxu_trace_name_t *name, uint64_t payload);
void mxu_trace_pop_(void);
uint64_t mxu_trace_start_(mxu_trace_name_t *name, uint64_t payload);
void mxu_trace_end_(uint64_t id);
void mxu_trace_mark_(mxu_trace_name_t *name, uint64_t payload);

/* A range on the calling thread's stack (push/pop nest). */
static inline void mxu_trace_push(mxu_trace_name_t *name, uint64_t payload)
{
    if (mxu_trace_on)
        mxu_trace_push_(name, payload);
}
static inline void mxu_trace_pop(void)
{
    if (mxu_trace_on)
        mxu_trace_pop_();
}
/* A range that may end on another thread, overlapping others. */
static inline mxu_trace_range_t mxu_trace_start(mxu_trace_name_t *name, uint64_t payload)
{
    mxu_trace_range_t r = {0, 0};
    if (mxu_trace_on) {
        r.id = mxu_trace_start_(name, payload);
        r.open = 1;
    }
    return r;
}
static inline void mxu_trace_end(mxu_trace_range_t *r)
{
    if (r->open) {
        r->open = 0;
        mxu_trace_end_(r->id);
    }
}
/* An instant. */
static inline void mxu_trace_mark(mxu_trace_name_t *name, uint64_t payload)
{
    if (mxu_trace_on)
        mxu_trace_mark_(name, payload);
}

#endif
