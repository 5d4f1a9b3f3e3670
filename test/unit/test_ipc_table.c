/*
 * test_ipc_table.c - the CUDA backend's bookkeeping of peer-buffer mappings
 * (src/accel/ipc_table.c): a handle already open in a context is answered
 * from the table (the driver refuses a second open there:
 * CUDA_ERROR_ALREADY_MAPPED), and the driver is asked to close each mapping
 * exactly as often as it opened it. No GPU needed.
 *
 * CUDA builds also run the redirection itself (src/accel/cuda_ipc.c:
 * mxa_cuda_ipc_open/_close) against a simulated driver: a peer that frees a
 * buffer and allocates a new one over its addresses while the old mapping is
 * still cached makes the driver answer CUDA_ERROR_ALREADY_MAPPED in the
 * library's context; that answer must reach UCX (which unmaps its stale
 * entries and retries) and not become a mapping attempt in the
 * application's context, which the driver refuses (the 1 MiB failures of
 * sx_path-1conn on 2 x H100, 4aa5b6e).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "accel/ipc_table.h"
#include "unit_check.h"

#ifdef MPIXACC_HAVE_CUDA
#include "accel/cuda_priv.h"

/* ------------------------------------------------- a simulated driver */

/* A peer's allocation: its handle names (base, length, generation); the
 * driver maps it at the same address in every importing context (UVA). */
typedef struct {
    uint64_t base, len, gen;
} fake_alloc_t;

enum { FAKE_MAX = 16 };
static int fake_ctx_app, fake_ctx_own; /* their addresses are the contexts */
static CUcontext fake_stack[8];
static int fake_depth = 1; /* the application's context is current */
static struct {
    CUcontext ctx;
    fake_alloc_t a;
    int live;
} fake_map[FAKE_MAX];
static int fake_opens_app, fake_closes_own;

static CUipcMemHandle fake_handle(uint64_t base, uint64_t len, uint64_t gen)
{
    CUipcMemHandle h;
    memset(&h, 0, sizeof(h));
    fake_alloc_t a = {base, len, gen};
    memcpy(h.reserved, &a, sizeof(a));
    return h;
}

static CUresult CUDAAPI fake_get_device(CUdevice *d)
{
    *d = 0;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_push(CUcontext c)
{
    CHECK(fake_depth < 8);
    fake_stack[fake_depth++] = c;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_pop(CUcontext *c)
{
    CHECK(fake_depth > 1, "popped the application's context");
    *c = fake_stack[--fake_depth];
    return CUDA_SUCCESS;
}
static CUresult fake_create(CUcontext *c, void *params, unsigned flags, CUdevice dev)
{
    (void)params, (void)flags, (void)dev;
    *c = (CUcontext)&fake_ctx_own;
    return fake_push(*c);
}
/* One context per device may map a peer's memory; a stale mapping over the
 * same addresses in that context: CUDA_ERROR_ALREADY_MAPPED. */
static CUresult CUDAAPI fake_open(CUdeviceptr *p, CUipcMemHandle h, unsigned flags)
{
    (void)flags;
    fake_alloc_t a;
    memcpy(&a, h.reserved, sizeof(a));
    CUcontext cur = fake_stack[fake_depth - 1];
    if (cur == (CUcontext)&fake_ctx_app)
        fake_opens_app++;
    int free_i = -1;
    for (int i = 0; i < FAKE_MAX; i++) {
        if (!fake_map[i].live) {
            if (free_i < 0)
                free_i = i;
            continue;
        }
        if (fake_map[i].ctx != cur)
            return CUDA_ERROR_INVALID_HANDLE;
        if (fake_map[i].a.base < a.base + a.len && a.base < fake_map[i].a.base + fake_map[i].a.len)
            return CUDA_ERROR_ALREADY_MAPPED;
    }
    CHECK(free_i >= 0);
    fake_map[free_i].ctx = cur;
    fake_map[free_i].a = a;
    fake_map[free_i].live = 1;
    *p = (CUdeviceptr)a.base;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI fake_close(CUdeviceptr p)
{
    CUcontext cur = fake_stack[fake_depth - 1];
    for (int i = 0; i < FAKE_MAX; i++)
        if (fake_map[i].live && fake_map[i].ctx == cur && fake_map[i].a.base == (uint64_t)p) {
            fake_map[i].live = 0;
            if (cur == (CUcontext)&fake_ctx_own)
                fake_closes_own++;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}
static int fake_live(void)
{
    int n = 0;
    for (int i = 0; i < FAKE_MAX; i++)
        n += fake_map[i].live;
    return n;
}

/* What UCX's cuda_ipc cache does with a handle (uct_cuda_ipc_map_memhandle):
 * open; on CUDA_ERROR_ALREADY_MAPPED unmap its entries over the range and
 * open again. `stale` is its cached mapping over that range (0: none).
 * Returns the final result; *first the first open's. */
static CUresult ucx_map(CUipcMemHandle h, CUdeviceptr *p, CUdeviceptr stale, CUresult *first)
{
    CUresult r = mxa_cuda_ipc_open(fake_open, p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    *first = r;
    if (r == CUDA_ERROR_ALREADY_MAPPED && stale) {
        CHECK(mxa_cuda_ipc_close(fake_close, stale) == CUDA_SUCCESS);
        r = mxa_cuda_ipc_open(fake_open, p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    }
    return r;
}

static void redirection_with_stale_mapping(void)
{
    memset(&mxa_cu, 0, sizeof(mxa_cu));
    mxa_cu.f_cuCtxGetDevice = fake_get_device;
    mxa_cu.f_cuCtxPushCurrent = fake_push;
    mxa_cu.f_cuCtxPopCurrent = fake_pop;
    mxa_cu.f_cuIpcOpenMemHandle = fake_open;
    mxa_cu.f_cuIpcCloseMemHandle = fake_close;
    fake_stack[0] = (CUcontext)&fake_ctx_app;
    mxa_cuda_ipc_enable((void *)fake_create);

    /* a 1 MiB buffer of the peer: mapped in the library's context */
    const uint64_t X = 0x7f0000000000ull, MiB = 1u << 20;
    CUdeviceptr a = 0, b = 0, c = 0;
    CUresult first;
    CHECK(ucx_map(fake_handle(X, MiB, 1), &a, 0, &first) == CUDA_SUCCESS);
    CHECK(a == X && fake_live() == 1 && fake_map[0].ctx == (CUcontext)&fake_ctx_own);
    /* the peer frees it and allocates 2 MiB at the same address; UCX still
     * caches the old mapping: the driver refuses, the refusal reaches UCX,
     * which unmaps the old one (in the library's context) and maps anew */
    CHECK(ucx_map(fake_handle(X, 2 * MiB, 2), &b, a, &first) == CUDA_SUCCESS,
          "the new buffer was not mapped (first answer %d)", (int)first);
    CHECK(first == CUDA_ERROR_ALREADY_MAPPED, "first answer %d, expected ALREADY_MAPPED (%d)",
          (int)first, (int)CUDA_ERROR_ALREADY_MAPPED);
    CHECK_EQ_LL(fake_opens_app, 0); /* never tried in the application's context */
    CHECK_EQ_LL(fake_closes_own, 1);
    CHECK(b == X && fake_live() == 1 && fake_map[0].ctx == (CUcontext)&fake_ctx_own);
    /* the same handle again (a second UCX context): answered from the
     * table, one driver mapping, closed once at the last close */
    CHECK(ucx_map(fake_handle(X, 2 * MiB, 2), &c, 0, &first) == CUDA_SUCCESS && c == b);
    CHECK_EQ_LL(fake_live(), 1);
    CHECK(mxa_cuda_ipc_close(fake_close, c) == CUDA_SUCCESS);
    CHECK_EQ_LL(fake_live(), 1);
    CHECK(mxa_cuda_ipc_close(fake_close, b) == CUDA_SUCCESS);
    CHECK_EQ_LL(fake_live(), 0);
    CHECK_EQ_LL(fake_closes_own, 2);
    CHECK_EQ_LL(fake_depth, 1); /* every push popped */
    /* a mapping the library did not make is closed as asked */
    CHECK(mxa_cuda_ipc_close(fake_close, (CUdeviceptr)0x1234) == CUDA_ERROR_INVALID_VALUE);
    printf("ok: a refusal over a stale mapping reaches UCX, which unmaps and maps again\n");
}
#endif

static void mkhandle(unsigned char *h, int seed)
{
    for (int i = 0; i < MXA_IPC_HANDLE_BYTES; i++)
        h[i] = (unsigned char)(i * 7 + 3);
    memcpy(h + 8, &seed, sizeof(seed)); /* distinct for every seed */
}

/* release addr once; returns driver_close, or -1 when the table did not know it */
static int rel(mxa_ipc_table_t *t, uint64_t addr, void *want_ctx)
{
    void *ctx = NULL;
    int dc = -7;
    if (!mxa_ipc_table_release(t, addr, &ctx, &dc))
        return -1;
    CHECK(ctx == want_ctx, "release of 0x%llx returned context %p, expected %p",
          (unsigned long long)addr, ctx, want_ctx);
    CHECK(dc == 0 || dc == 1, "driver_close %d", dc);
    return dc;
}

int main(void)
{
    mxa_ipc_table_t t;
    CHECK(mxa_ipc_table_init(&t) == MXU_OK);
    int ca, cb; /* two stand-in contexts */
    void *A = &ca, *B = &cb;
    unsigned char h1[MXA_IPC_HANDLE_BYTES], h2[MXA_IPC_HANDLE_BYTES], h3[MXA_IPC_HANDLE_BYTES];
    mkhandle(h1, 1);
    mkhandle(h2, 2);
    memcpy(h3, h1, sizeof(h3));
    h3[MXA_IPC_HANDLE_BYTES - 1] ^= 0xff; /* differs in the last byte only */
    uint64_t addr = 0;

    /* nothing open: nothing to reuse, unknown addresses are not ours */
    CHECK(!mxa_ipc_table_reuse(&t, h1, A, &addr));
    CHECK_EQ_LL(rel(&t, 0x1000, A), -1);

    /* one driver open, then the same handle again in the same context (the
     * other UCX context): answered from the table */
    CHECK(mxa_ipc_table_add(&t, h1, A, 0x1000) == MXU_OK);
    CHECK(mxa_ipc_table_reuse(&t, h1, A, &addr));
    CHECK_EQ_LL(addr, 0x1000);
    CHECK_EQ_LL(mxa_ipc_table_refs(&t, 0x1000), 2);
    /* not in another context, not for a handle that differs in one byte */
    CHECK(!mxa_ipc_table_reuse(&t, h1, B, &addr));
    CHECK(!mxa_ipc_table_reuse(&t, h3, A, &addr));
    /* two closes, one driver close, at the last one */
    CHECK_EQ_LL(rel(&t, 0x1000, A), 0);
    CHECK_EQ_LL(mxa_ipc_table_refs(&t, 0x1000), 1);
    CHECK_EQ_LL(rel(&t, 0x1000, A), 1);
    CHECK_EQ_LL(mxa_ipc_table_refs(&t, 0x1000), 0);
    CHECK_EQ_LL(rel(&t, 0x1000, A), -1);
    /* gone: the next open goes to the driver */
    CHECK(!mxa_ipc_table_reuse(&t, h1, A, &addr));

    /* the driver itself returning a mapping it already had (two driver
     * opens at one address): two driver closes */
    CHECK(mxa_ipc_table_add(&t, h2, A, 0x2000) == MXU_OK);
    CHECK(mxa_ipc_table_add(&t, h2, A, 0x2000) == MXU_OK);
    CHECK_EQ_LL(rel(&t, 0x2000, A), 1);
    CHECK_EQ_LL(rel(&t, 0x2000, A), 1);
    CHECK_EQ_LL(rel(&t, 0x2000, A), -1);

    /* mixed: driver open, reuse, driver open again: 3 references, 2 driver
     * opens -> closes: no, yes, yes */
    CHECK(mxa_ipc_table_add(&t, h2, B, 0x3000) == MXU_OK);
    CHECK(mxa_ipc_table_reuse(&t, h2, B, &addr) && addr == 0x3000);
    CHECK(mxa_ipc_table_add(&t, h2, B, 0x3000) == MXU_OK);
    CHECK_EQ_LL(mxa_ipc_table_refs(&t, 0x3000), 3);
    CHECK_EQ_LL(rel(&t, 0x3000, B), 0);
    CHECK_EQ_LL(rel(&t, 0x3000, B), 1);
    CHECK_EQ_LL(rel(&t, 0x3000, B), 1);
    CHECK_EQ_LL(rel(&t, 0x3000, B), -1);

    /* two handles live at once, each found by its own bytes; a peer's new
     * allocation at a recycled address (new handle) is not mistaken for
     * the old one */
    CHECK(mxa_ipc_table_add(&t, h1, A, 0x4000) == MXU_OK);
    CHECK(mxa_ipc_table_add(&t, h3, A, 0x5000) == MXU_OK);
    CHECK(mxa_ipc_table_reuse(&t, h3, A, &addr) && addr == 0x5000);
    CHECK(mxa_ipc_table_reuse(&t, h1, A, &addr) && addr == 0x4000);
    CHECK(!mxa_ipc_table_reuse(&t, h2, A, &addr));

    /* many mappings (table growth), all balanced */
    for (int i = 0; i < 500; i++) {
        unsigned char h[MXA_IPC_HANDLE_BYTES];
        mkhandle(h, 100 + i);
        CHECK(mxa_ipc_table_add(&t, h, B, 0x100000 + (uint64_t)i * 0x1000) == MXU_OK);
    }
    for (int i = 0; i < 500; i++) {
        unsigned char h[MXA_IPC_HANDLE_BYTES];
        mkhandle(h, 100 + i);
        CHECK(mxa_ipc_table_reuse(&t, h, B, &addr) && addr == 0x100000 + (uint64_t)i * 0x1000,
              "mapping %d", i);
        CHECK_EQ_LL(rel(&t, addr, B), 0);
        CHECK_EQ_LL(rel(&t, addr, B), 1);
    }
    mxa_ipc_table_destroy(&t); /* frees the live 0x4000 / 0x5000 entries */
#ifdef MPIXACC_HAVE_CUDA
    redirection_with_stale_mapping();
#endif
    TEST_PASS("test_ipc_table");
}
