/*
 * test_accel.c - layer entry points of src/accel/accel.c without a GPU:
 * init/finalize, the "none" backend, stream lookup order and validation,
 * memory type, features, foreach.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/accel.h"
#include "unit_check.h"
#include "util/settings.h"

static int seen_none, seen_host;
static void visit(mxa_stream_t *s, void *arg)
{
    (void)arg;
    if (s->kind == MXA_KIND_NONE)
        seen_none++;
    else if (s->kind == MXA_KIND_HOST)
        seen_host++;
}

int main(void)
{
    mxu_config_load();
    CHECK(mxa_init() == MXU_OK);
    CHECK(mxa_init() == MXU_OK); /* idempotent */

    mxa_features_t f;
    memset(&f, 0x5a, sizeof(f));
    mxa_get_features(&f);
#ifdef MPIXACC_HAVE_CUDA
    CHECK(f.cuda_built == 1);
#else
    CHECK(f.cuda_built == 0);
#endif
    CHECK(f.cuda_active == 0, "CUDA active on a machine without a GPU");
    CHECK(strncmp(f.cuda_mode, "off", 3) == 0, "mode \"%s\"", f.cuda_mode);
    CHECK(memchr(f.cuda_mode, '\0', sizeof(f.cuda_mode)) != NULL);

    /* NULL -> the none stream (no CUDA here) */
    mxa_stream_t *s = NULL;
    CHECK(mxa_stream_lookup(NULL, &s) == MXU_OK);
    CHECK(s == mxa_none_stream() && s->kind == MXA_KIND_NONE && s->handle == NULL);
    CHECK(strcmp(s->backend->name, "none") == 0 && s->backend->needs_polling == 0);
    CHECK(mxa_stream_lookup(NULL, NULL) == MXU_ERR_INVALID_PARAM);

    /* none backend: triggers are reached at once, waits are host waits */
    uint64_t t0 = s->backend->poll_trigger(s);
    CHECK(s->backend->enqueue_trigger(s, t0 + 5) == MXU_OK);
    CHECK_EQ_LL(s->backend->poll_trigger(s), t0 + 5);
    CHECK(s->backend->enqueue_trigger(s, t0 + 3) == MXU_OK); /* words only grow */
    CHECK_EQ_LL(s->backend->poll_trigger(s), t0 + 5);
    CHECK(s->backend->enqueue_wait(s, 1) == MXU_ERR_UNSUPPORTED);
    s->backend->release(s, 9);
    CHECK_EQ_LL(atomic_load(s->release_word), 9);

    /* a host stream is found; garbage is rejected without being touched */
    void *h;
    CHECK(mxa_host_stream_create(&h) == MXU_OK);
    mxa_stream_t *hs = NULL;
    CHECK(mxa_stream_lookup(h, &hs) == MXU_OK && hs != NULL && hs->kind == MXA_KIND_HOST);
    int local;
    mxa_stream_t *bad = (mxa_stream_t *)&local;
    CHECK(mxa_stream_lookup(&local, &bad) == MXU_ERR_INVALID_STREAM && bad == NULL);
    CHECK(mxa_stream_lookup((void *)0x10, &bad) == MXU_ERR_INVALID_STREAM);

    seen_none = seen_host = 0;
    mxa_foreach_stream(visit, NULL);
    CHECK(seen_none == 1 && seen_host == 1, "none %d host %d", seen_none, seen_host);

    CHECK(mxa_memtype(&local, sizeof(local)) == MXA_MEM_HOST);
    CHECK(mxa_memtype(NULL, 0) == MXA_MEM_HOST);

    /* finalize stops host streams the application did not free */
    mxa_finalize();
    CHECK(mxa_stream_lookup(h, &hs) == MXU_ERR_INVALID_STREAM);
    CHECK(mxa_host_stream_free(h) == MXU_ERR_INVALID_STREAM);
    mxa_finalize(); /* harmless twice */

    /* re-initialisable, and host streams work again */
    CHECK(mxa_init() == MXU_OK);
    CHECK(mxa_host_stream_create(&h) == MXU_OK);
    CHECK(mxa_host_stream_free(h) == MXU_OK);
    mxa_finalize();
    TEST_PASS("test_accel");
}
