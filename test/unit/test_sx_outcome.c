/*
 * test_sx_outcome.c - mxe_sx_send_outcome (src/engine/path.c): a CUDA send
 * step stores its record and then its stream's trigger word as two relaxed
 * stores (no system fence between them, ad889af), so the progress thread
 * may see the trigger before the record. The engine must wait for the
 * record (bounded) instead of reading "no record" as "bounced" - which
 * would send the bounce buffer by UCX: a second, garbage copy of a
 * message that is already in the ring. No GPU, no progress thread: a
 * writer thread stores the record late.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "accel/sx.h"
#include "accel/sx_proto.h"
#include "engine/engine_priv.h"
#include "unit_check.h"

typedef struct {
    mxa_sx_record_t *rec;
    int error;
    long delay_ms;
} late_t;

static void *late_record(void *arg)
{
    late_t *l = arg;
    struct timespec ts = {l->delay_ms / 1000, (l->delay_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    __atomic_store_n(&l->rec->done, mxa_sx_done_word(8, l->error, -1), __ATOMIC_RELEASE);
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One send whose record lands delay_ms after the trigger was seen. */
static int outcome_with_late_record(int error, long delay_ms, void **bounce_out, double *waited)
{
    static char bounce_buf[64];
    mxe_op_t op;
    memset(&op, 0, sizeof(op));
    op.bytes = 8;
    op.peer = 1;
    op.sx_rec = mxa_sx_record_alloc();
    CHECK(op.sx_rec != NULL, "no record");
    op.sx_bounce = error == MXA_SX_BOUNCED ? bounce_buf : NULL;
    late_t l = {op.sx_rec, error, delay_ms};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, late_record, &l) == 0, "thread");
    double t0 = now_s();
    int sent = mxe_sx_send_outcome(&op, bounce_out);
    *waited = now_s() - t0;
    pthread_join(t, NULL);
    CHECK(op.sx_rec == NULL, "the record is given back");
    return sent;
}

int main(void)
{
    void *bounce = (void *)1;
    double waited;

    /* the message is in the ring; its record comes 50 ms after the trigger */
    int sent = outcome_with_late_record(MXA_SX_SENT, 50, &bounce, &waited);
    CHECK_EQ_LL(sent, 1);
    CHECK(bounce == NULL, "a message in the ring leaves no bounce buffer to send");
    CHECK(waited >= 0.04, "the engine waited for the record (%.3f s)", waited);

    /* bounced: the record says so, late; the bounce buffer is handed out */
    bounce = NULL;
    sent = outcome_with_late_record(MXA_SX_BOUNCED, 20, &bounce, &waited);
    CHECK_EQ_LL(sent, 0);
    CHECK(bounce != NULL, "a bounced message's buffer goes to UCX");
    CHECK(waited >= 0.01, "waited %.3f s", waited);

    /* the record already there: no wait */
    bounce = (void *)1;
    sent = outcome_with_late_record(MXA_SX_SENT, 0, &bounce, &waited);
    CHECK_EQ_LL(sent, 1);

    printf("test_sx_outcome: OK\n");
    return 0;
}
