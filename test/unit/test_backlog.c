/*
 * test_backlog.c - mxe_stream_backlog (src/engine/engine.c), the count behind
 * MPIX_ACC_STREAM_DEPTH: stream points enqueued and not yet reached
 * (triggers) or not yet released (waits), read from the sequence words
 * alone; 0 without a stream and while a stream is captured into a graph.
 * A stream record with a stand-in backend: no GPU, no progress thread.
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
#include <string.h>

#include "engine/engine.h"
#include "unit_check.h"

static int capturing_now, capturing_calls;
static int fake_capturing(mxa_stream_t *s)
{
    (void)s;
    capturing_calls++;
    return capturing_now;
}

int main(void)
{
    static const mxa_backend_t plain = {.name = "fake", .kind = MXA_KIND_CUDA};
    static const mxa_backend_t graphs = {
        .name = "fake-graphs", .kind = MXA_KIND_CUDA, .capturing = fake_capturing};
    _Atomic uint64_t trig = 0, rel = 0;
    mxa_stream_t s;
    memset(&s, 0, sizeof(s));
    s.kind = MXA_KIND_CUDA;
    s.backend = &plain;
    s.trigger_word = &trig;
    s.release_word = &rel;

    CHECK_EQ_LL(mxe_stream_backlog(NULL), 0);
    CHECK_EQ_LL(mxe_stream_backlog(&s), 0);

    /* 5 triggers and 3 waits enqueued, none reached */
    atomic_store(&s.next_trigger_seq, 5);
    atomic_store(&s.next_wait_seq, 3);
    CHECK_EQ_LL(mxe_stream_backlog(&s), 8);
    /* the stream reached trigger 4, the progress thread released wait 1 */
    atomic_store(&trig, 4);
    atomic_store(&rel, 1);
    CHECK_EQ_LL(mxe_stream_backlog(&s), 1 + 2);
    /* all reached and released */
    atomic_store(&trig, 5);
    atomic_store(&rel, 3);
    CHECK_EQ_LL(mxe_stream_backlog(&s), 0);
    /* a word read ahead of the allocation count (another thread allocating):
     * never negative */
    atomic_store(&trig, 7);
    CHECK_EQ_LL(mxe_stream_backlog(&s), 0);
    atomic_store(&trig, 5);

    /* host streams count the same way */
    s.kind = MXA_KIND_HOST;
    atomic_store(&s.next_trigger_seq, 9);
    CHECK_EQ_LL(mxe_stream_backlog(&s), 4);
    /* no stream: nothing is ever ahead */
    s.kind = MXA_KIND_NONE;
    CHECK_EQ_LL(mxe_stream_backlog(&s), 0);

    /* captured into a graph: its points run when the graph is launched, the
     * words do not move now, so the backlog is not a queue and counts 0 */
    s.kind = MXA_KIND_CUDA;
    s.backend = &graphs;
    capturing_now = 1;
    CHECK_EQ_LL(mxe_stream_backlog(&s), 0);
    CHECK(capturing_calls == 1, "capturing() called %d times", capturing_calls);
    /* the lock-free count the throttle checks first never asks the backend */
    CHECK_EQ_LL(mxe_stream_points_ahead(&s), 4);
    CHECK(capturing_calls == 1, "mxe_stream_points_ahead asked capturing()");
    capturing_now = 0;
    CHECK_EQ_LL(mxe_stream_backlog(&s), 4);
    /* nothing ahead: no need to ask the driver */
    atomic_store(&trig, 9);
    int before = capturing_calls;
    CHECK_EQ_LL(mxe_stream_backlog(&s), 0);
    CHECK(capturing_calls == before, "capturing() asked with nothing ahead");

    TEST_PASS("test_backlog");
}
