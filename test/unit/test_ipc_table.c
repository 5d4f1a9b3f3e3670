/*
 * test_ipc_table.c - the CUDA backend's bookkeeping of peer-buffer mappings
 * (src/accel/ipc_table.c): a handle already open in a context is answered
 * from the table (the driver refuses a second open there:
 * CUDA_ERROR_ALREADY_MAPPED), and the driver is asked to close each mapping
 * exactly as often as it opened it. No GPU needed.
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
    TEST_PASS("test_ipc_table");
}
