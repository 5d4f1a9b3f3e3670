/*
 * test_hoststream.c - host streams (src/accel/host.c) without the engine:
 * launch order, triggers (word + notify callback, in order), waits blocked
 * until released, synchronize (queue + ops_in_flight), free, invalid
 * handles, idle/blocked streams do not burn CPU, many streams, several
 * producer threads, free hook, foreach, shutdown; capture into host
 * graphs (recorded, not run; replayed in order on any stream; refused
 * points break the capture; in-flight count; free while capturing).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "accel/accel.h"
#include "unit_check.h"
#include "util/waiter.h"

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- launch order ---- */

#define NLAUNCH 20000
static int order[NLAUNCH];
static _Atomic int order_pos;
static pthread_t stream_thread_seen;

static void record(void *arg)
{
    int pos = atomic_fetch_add(&order_pos, 1);
    if (pos < NLAUNCH)
        order[pos] = (int)(intptr_t)arg;
    stream_thread_seen = pthread_self();
}

static void test_launch_order(void)
{
    void *h = NULL;
    CHECK(mxa_host_stream_create(&h) == MXU_OK && h != NULL);
    mxa_stream_t *s = mxa_host_stream_find(h);
    CHECK(s != NULL && s->kind == MXA_KIND_HOST && s->handle == h);
    CHECK(s->backend != NULL && strcmp(s->backend->name, "host") == 0);
    CHECK(s->backend->needs_polling == 0);
    mxa_stream_t *via_lookup = NULL;
    CHECK(mxa_stream_lookup(h, &via_lookup) == MXU_OK && via_lookup == s);

    atomic_store(&order_pos, 0);
    for (int i = 0; i < NLAUNCH; i++)
        CHECK(mxa_host_stream_launch(h, record, (void *)(intptr_t)i) == MXU_OK);
    CHECK(mxa_host_stream_synchronize(h) == MXU_OK);
    CHECK_EQ_LL(atomic_load(&order_pos), NLAUNCH);
    for (int i = 0; i < NLAUNCH; i++)
        CHECK(order[i] == i, "launch %d ran at position %d", order[i], i);
    CHECK(!pthread_equal(stream_thread_seen, pthread_self()), "work ran on the caller's thread");
    CHECK(mxa_host_stream_launch(h, NULL, NULL) == MXU_ERR_INVALID_PARAM);
    CHECK(mxa_host_stream_free(h) == MXU_OK);
}

/* ---- triggers ---- */

static _Atomic int notified;
static mxa_stream_t *trig_stream;
static _Atomic int launches_done;
static _Atomic int notify_order_ok = 1;

static void count_launch(void *arg)
{
    (void)arg;
    atomic_fetch_add(&launches_done, 1);
}

static void on_trigger(void)
{
    int n = atomic_fetch_add(&notified, 1) + 1;
    /* trigger k (seq k) follows launch k: both visible when notified */
    uint64_t word = trig_stream->backend->poll_trigger(trig_stream);
    if (word != (uint64_t)n || atomic_load(&launches_done) != n)
        atomic_store(&notify_order_ok, 0);
}

static void test_triggers(void)
{
    void *h;
    CHECK(mxa_host_stream_create(&h) == MXU_OK);
    mxa_stream_t *s = mxa_host_stream_find(h);
    trig_stream = s;
    CHECK_EQ_LL(s->backend->poll_trigger(s), 0);
    mxa_set_trigger_notify(on_trigger);
    enum { N = 2000 };
    for (int k = 1; k <= N; k++) {
        CHECK(mxa_host_stream_launch(h, count_launch, NULL) == MXU_OK);
        CHECK(s->backend->enqueue_trigger(s, (uint64_t)k) == MXU_OK);
    }
    CHECK(mxa_host_stream_synchronize(h) == MXU_OK);
    CHECK_EQ_LL(atomic_load(&notified), N);
    CHECK(atomic_load(&notify_order_ok), "a trigger was notified out of order");
    CHECK_EQ_LL(s->backend->poll_trigger(s), N);
    CHECK_EQ_LL(atomic_load(s->trigger_word), N);
    mxa_set_trigger_notify(NULL);
    CHECK(s->backend->enqueue_trigger(s, N + 1) == MXU_OK); /* no callback: no crash */
    CHECK(mxa_host_stream_synchronize(h) == MXU_OK);
    CHECK_EQ_LL(atomic_load(&notified), N);
    CHECK_EQ_LL(s->backend->poll_trigger(s), N + 1);
    CHECK(mxa_host_stream_free(h) == MXU_OK);
}

/* ---- waits and release ---- */

static _Atomic int flag_a, flag_b, flag_c;
static void set_flag(void *arg) { atomic_store((_Atomic int *)arg, 1); }

typedef struct {
    mxa_stream_t *s;
    uint64_t seq;
    int delay_ms;
    _Atomic uint64_t *ops; /* decremented after the delay when non-NULL */
} releaser_arg_t;

static void *releaser(void *p)
{
    releaser_arg_t *a = p;
    sleep_ms(a->delay_ms);
    if (a->ops != NULL)
        atomic_fetch_sub(a->ops, 1);
    else
        a->s->backend->release(a->s, a->seq);
    return NULL;
}

static void test_wait_release(void)
{
    void *h;
    CHECK(mxa_host_stream_create(&h) == MXU_OK);
    mxa_stream_t *s = mxa_host_stream_find(h);
    atomic_store(&flag_a, 0);
    atomic_store(&flag_b, 0);
    atomic_store(&flag_c, 0);

    CHECK(mxa_host_stream_launch(h, set_flag, &flag_a) == MXU_OK);
    CHECK(s->backend->enqueue_wait(s, 1) == MXU_OK);
    CHECK(mxa_host_stream_launch(h, set_flag, &flag_b) == MXU_OK);
    CHECK(s->backend->enqueue_wait(s, 2) == MXU_OK);
    CHECK(mxa_host_stream_launch(h, set_flag, &flag_c) == MXU_OK);

    /* blocked at wait(1): A ran, B not; and the blocked stream sleeps */
    sleep_ms(20);
    double c0 = cpu_seconds();
    uint64_t t0 = mxu_now_ns();
    sleep_ms(300);
    double used = cpu_seconds() - c0;
    double wall = (double)(mxu_now_ns() - t0) / 1e9;
    CHECK(atomic_load(&flag_a) == 1 && atomic_load(&flag_b) == 0, "a=%d b=%d", atomic_load(&flag_a),
          atomic_load(&flag_b));
    CHECK(used < 0.3 * wall, "blocked stream used %.3f s CPU in %.3f s", used, wall);

    s->backend->release(s, 1);
    for (int i = 0; i < 2000 && !atomic_load(&flag_b); i++)
        sleep_ms(1);
    CHECK(atomic_load(&flag_b) == 1, "release(1) did not resume the stream");
    sleep_ms(20);
    CHECK(atomic_load(&flag_c) == 0, "wait(2) did not hold the stream");

    /* synchronize returns only once wait(2) is released by another thread */
    releaser_arg_t ra = {s, 2, 100, NULL};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, releaser, &ra) == 0);
    uint64_t t1 = mxu_now_ns();
    CHECK(mxa_host_stream_synchronize(h) == MXU_OK);
    CHECK(mxu_now_ns() - t1 >= 80000000ull, "synchronize returned before the release");
    CHECK(atomic_load(&flag_c) == 1);
    pthread_join(th, NULL);

    /* releasing past several waits at once (release words only grow) */
    CHECK(s->backend->enqueue_wait(s, 3) == MXU_OK);
    CHECK(s->backend->enqueue_wait(s, 4) == MXU_OK);
    CHECK(mxa_host_stream_launch(h, set_flag, &flag_a) == MXU_OK);
    s->backend->release(s, 4);
    s->backend->release(s, 3); /* late, smaller: ignored */
    CHECK(mxa_host_stream_synchronize(h) == MXU_OK);
    CHECK_EQ_LL(atomic_load(s->release_word), 4);
    CHECK(mxa_host_stream_free(h) == MXU_OK);
}

/* ---- synchronize waits for ops in flight; idle streams sleep ---- */

static void test_ops_in_flight(void)
{
    void *h;
    CHECK(mxa_host_stream_create(&h) == MXU_OK);
    mxa_stream_t *s = mxa_host_stream_find(h);

    /* idle stream: no CPU burnt */
    sleep_ms(10);
    double c0 = cpu_seconds();
    uint64_t t0 = mxu_now_ns();
    sleep_ms(200);
    double used = cpu_seconds() - c0;
    double wall = (double)(mxu_now_ns() - t0) / 1e9;
    CHECK(used < 0.3 * wall, "idle stream used %.3f s CPU in %.3f s", used, wall);

    atomic_store(&s->ops_in_flight, 2);
    releaser_arg_t r1 = {s, 0, 60, &s->ops_in_flight};
    releaser_arg_t r2 = {s, 0, 120, &s->ops_in_flight};
    pthread_t t1, t2;
    CHECK(pthread_create(&t1, NULL, releaser, &r1) == 0);
    CHECK(pthread_create(&t2, NULL, releaser, &r2) == 0);
    uint64_t start = mxu_now_ns();
    CHECK(mxa_host_stream_synchronize(h) == MXU_OK);
    uint64_t dt = mxu_now_ns() - start;
    CHECK_EQ_LL(atomic_load(&s->ops_in_flight), 0);
    CHECK(dt >= 100000000ull, "synchronize returned after %llu ns with ops in flight",
          (unsigned long long)dt);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);

    /* free also waits for ops in flight */
    atomic_store(&s->ops_in_flight, 1);
    releaser_arg_t r3 = {s, 0, 80, &s->ops_in_flight};
    CHECK(pthread_create(&t1, NULL, releaser, &r3) == 0);
    start = mxu_now_ns();
    CHECK(mxa_host_stream_free(h) == MXU_OK);
    CHECK(mxu_now_ns() - start >= 60000000ull, "free did not wait for ops in flight");
    pthread_join(t1, NULL);
}

/* ---- free, invalid handles, self-deadlock guards ---- */

static _Atomic int inner_status = 1;
static void sync_from_inside(void *h)
{
    atomic_store(&inner_status, (int)mxa_host_stream_synchronize(h));
}
static _Atomic int inner_free_status = 1;
static void free_from_inside(void *h)
{
    atomic_store(&inner_free_status, (int)mxa_host_stream_free(h));
}

static _Atomic int hook_calls;
static mxa_stream_t *hook_expected;
static void free_hook(mxa_stream_t *s)
{
    if (s == hook_expected)
        atomic_fetch_add(&hook_calls, 1);
}

static void test_free_and_invalid(void)
{
    void *h;
    CHECK(mxa_host_stream_create(&h) == MXU_OK);
    mxa_stream_t *s = mxa_host_stream_find(h);

    /* a blocked wait makes free wait until the release (MPI-like) */
    CHECK(s->backend->enqueue_wait(s, 1) == MXU_OK);
    CHECK(mxa_host_stream_launch(h, set_flag, &flag_a) == MXU_OK);
    atomic_store(&flag_a, 0);
    CHECK(mxa_host_stream_launch(h, sync_from_inside, h) == MXU_OK);
    CHECK(mxa_host_stream_launch(h, free_from_inside, h) == MXU_OK);
    releaser_arg_t ra = {s, 1, 50, NULL};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, releaser, &ra) == 0);
    hook_expected = s;
    atomic_store(&hook_calls, 0);
    mxa_set_stream_free_hook(free_hook);
    capture_begin();
    CHECK(mxa_host_stream_free(h) == MXU_OK);
    char *log = capture_end();
    mxa_set_stream_free_hook(NULL);
    CHECK(strstr(log, "synchronize called from work running on the same stream") != NULL &&
              strstr(log, "free called from work running on the same stream") != NULL,
          "expected errors not logged:\n%s", log);
    free(log);
    pthread_join(th, NULL);
    CHECK(atomic_load(&flag_a) == 1, "work before free did not run");
    CHECK_EQ_LL(atomic_load(&inner_status), MXU_ERR_INVALID_PARAM);
    CHECK_EQ_LL(atomic_load(&inner_free_status), MXU_ERR_INVALID_PARAM);
    CHECK_EQ_LL(atomic_load(&hook_calls), 1);

    /* the freed handle is invalid everywhere */
    CHECK(mxa_host_stream_find(h) == NULL);
    mxa_stream_t *out = (mxa_stream_t *)0x1;
    CHECK(mxa_stream_lookup(h, &out) == MXU_ERR_INVALID_STREAM && out == NULL);
    CHECK(mxa_host_stream_launch(h, set_flag, &flag_a) == MXU_ERR_INVALID_STREAM);
    CHECK(mxa_host_stream_synchronize(h) == MXU_ERR_INVALID_STREAM);
    CHECK(mxa_host_stream_free(h) == MXU_ERR_INVALID_STREAM);

    /* pointers that were never streams: never dereferenced (ASan/valgrind
     * would report it) */
    char *heap = malloc(16);
    int local;
    void *bogus[] = {(void *)0x1, (void *)-1, (void *)0xdeadbeef,
                     heap,        &local,     (void *)test_free_and_invalid};
    free(heap); /* a freed block too */
    for (size_t i = 0; i < sizeof(bogus) / sizeof(bogus[0]); i++) {
        CHECK(mxa_host_stream_find(bogus[i]) == NULL);
        CHECK(mxa_host_stream_launch(bogus[i], set_flag, &flag_a) == MXU_ERR_INVALID_STREAM);
        CHECK(mxa_host_stream_synchronize(bogus[i]) == MXU_ERR_INVALID_STREAM);
        CHECK(mxa_host_stream_free(bogus[i]) == MXU_ERR_INVALID_STREAM);
        CHECK(mxa_stream_lookup(bogus[i], &out) == MXU_ERR_INVALID_STREAM);
    }
    CHECK(mxa_host_stream_find(NULL) == NULL);
    CHECK(mxa_host_stream_launch(NULL, set_flag, &flag_a) == MXU_ERR_INVALID_STREAM);
    CHECK(mxa_host_stream_synchronize(NULL) == MXU_ERR_INVALID_STREAM);
    CHECK(mxa_host_stream_free(NULL) == MXU_ERR_INVALID_STREAM);
    capture_begin();
    CHECK(mxa_host_stream_create(NULL) == MXU_ERR_INVALID_PARAM);
    free(capture_end());
}

/* ---- many streams, several producers ---- */

#define NSTREAMS 48
static _Atomic int per_stream[NSTREAMS];
static void bump(void *arg) { atomic_fetch_add((_Atomic int *)arg, 1); }

static int visit_count;
static void visit(mxa_stream_t *s, void *arg)
{
    (void)arg;
    if (s->kind == MXA_KIND_HOST)
        visit_count++;
}

static void test_many_streams(void)
{
    void *h[NSTREAMS];
    for (int i = 0; i < NSTREAMS; i++) {
        CHECK(mxa_host_stream_create(&h[i]) == MXU_OK);
        atomic_store(&per_stream[i], 0);
    }
    for (int k = 0; k < 100; k++)
        for (int i = 0; i < NSTREAMS; i++)
            CHECK(mxa_host_stream_launch(h[i], bump, &per_stream[i]) == MXU_OK);
    visit_count = 0;
    mxa_foreach_stream(visit, NULL);
    CHECK_EQ_LL(visit_count, NSTREAMS);
    for (int i = 0; i < NSTREAMS; i++)
        CHECK(mxa_host_stream_synchronize(h[i]) == MXU_OK);
    for (int i = 0; i < NSTREAMS; i++)
        CHECK_EQ_LL(atomic_load(&per_stream[i]), 100);
    for (int i = 0; i < NSTREAMS; i += 2) /* free half, in a mixed order */
        CHECK(mxa_host_stream_free(h[i]) == MXU_OK);
    visit_count = 0;
    mxa_foreach_stream(visit, NULL);
    CHECK_EQ_LL(visit_count, NSTREAMS / 2);
    for (int i = 1; i < NSTREAMS; i += 2)
        CHECK(mxa_host_stream_free(h[i]) == MXU_OK);
    visit_count = 0;
    mxa_foreach_stream(visit, NULL);
    CHECK_EQ_LL(visit_count, 0);
}

#define NPROD 4
#define PER_PROD 5000
static void *shared_handle;
static int last_seen[NPROD];
static _Atomic int prod_order_ok = 1;

typedef struct {
    int producer, seq;
} tag_t;
static tag_t tags[NPROD][PER_PROD];

static void check_tag(void *arg)
{
    tag_t *t = arg; /* runs on the one stream thread: no race on last_seen */
    if (t->seq != last_seen[t->producer] + 1)
        atomic_store(&prod_order_ok, 0);
    last_seen[t->producer] = t->seq;
}

static void *producer(void *arg)
{
    int p = (int)(intptr_t)arg;
    for (int i = 0; i < PER_PROD; i++) {
        tags[p][i].producer = p;
        tags[p][i].seq = i;
        CHECK(mxa_host_stream_launch(shared_handle, check_tag, &tags[p][i]) == MXU_OK);
        if (i % 1000 == 999)
            CHECK(mxa_host_stream_synchronize(shared_handle) == MXU_OK);
    }
    return NULL;
}

static void test_producers(void)
{
    CHECK(mxa_host_stream_create(&shared_handle) == MXU_OK);
    for (int p = 0; p < NPROD; p++)
        last_seen[p] = -1;
    pthread_t th[NPROD];
    for (intptr_t p = 0; p < NPROD; p++)
        CHECK(pthread_create(&th[p], NULL, producer, (void *)p) == 0);
    for (int p = 0; p < NPROD; p++)
        pthread_join(th[p], NULL);
    CHECK(mxa_host_stream_synchronize(shared_handle) == MXU_OK);
    CHECK(atomic_load(&prod_order_ok), "per-producer order broken");
    for (int p = 0; p < NPROD; p++)
        CHECK_EQ_LL(last_seen[p], PER_PROD - 1);
    CHECK(mxa_host_stream_free(shared_handle) == MXU_OK);
}

/* ---- shutdown stops what the application did not free ---- */

static void test_shutdown(void)
{
    void *h[3];
    for (int i = 0; i < 3; i++)
        CHECK(mxa_host_stream_create(&h[i]) == MXU_OK);
    mxa_stream_t *s0 = mxa_host_stream_find(h[0]);
    CHECK(s0->backend->enqueue_wait(s0, 1) == MXU_OK); /* never released */
    atomic_store(&flag_b, 0);
    CHECK(mxa_host_stream_launch(h[1], set_flag, &flag_b) == MXU_OK);
    capture_begin();
    mxa_host_shutdown();
    char *out = capture_end();
    CHECK(strstr(out, "abandoned") != NULL, "no warning about the abandoned wait:\n%s", out);
    free(out);
    CHECK(atomic_load(&flag_b) == 1, "queued work was not run before shutdown");
    for (int i = 0; i < 3; i++) {
        CHECK(mxa_host_stream_find(h[i]) == NULL);
        CHECK(mxa_host_stream_free(h[i]) == MXU_ERR_INVALID_STREAM);
    }
    mxa_host_shutdown(); /* idempotent */
}

/* ---- capture into host graphs ---- */

typedef struct {
    _Atomic int open;
} gate_t;

static void gate_fn(void *arg)
{
    gate_t *g = arg;
    for (int i = 0; i < 30000 && !atomic_load(&g->open); i++)
        sleep_ms(1);
}

static void test_capture(void)
{
    void *h = NULL, *h2 = NULL;
    CHECK(mxa_host_stream_create(&h) == MXU_OK && mxa_host_stream_create(&h2) == MXU_OK);
    mxa_stream_t *s = mxa_host_stream_find(h);
    CHECK(s->backend->capturing && !s->backend->capturing(s));
    atomic_store(&order_pos, 0);
    CHECK(mxa_host_capture_begin(h) == MXU_OK);
    CHECK(s->backend->capturing(s));
    CHECK(mxa_host_capture_begin(h) == MXU_ERR_INVALID_PARAM, "a second begin");
    for (int i = 0; i < 5; i++)
        CHECK(mxa_host_stream_launch(h, record, (void *)(intptr_t)i) == MXU_OK);
    CHECK(mxa_host_capture_add(s, record, (void *)(intptr_t)5) == MXU_OK);
    CHECK(mxa_host_stream_synchronize(h) == MXU_ERR_INVALID_PARAM, "synchronize while capturing");
    sleep_ms(20);
    CHECK_EQ_LL(atomic_load(&order_pos), 0); /* recorded, not run */
    mxa_host_graph_t *g = NULL;
    char why[64] = "x";
    CHECK(mxa_host_capture_end(h, &g, why, sizeof why) == MXU_OK && g != NULL && why[0] == 0);
    CHECK(!s->backend->capturing(s));
    CHECK(mxa_stream_refuse_capture(s, "a point") == MXU_OK, "not capturing: nothing refused");
    CHECK(mxa_host_capture_end(h, &g, why, sizeof why) == MXU_ERR_INVALID_PARAM, "end twice");
    /* three launches on two streams: each runs the six entries in order */
    CHECK(mxa_host_graph_launch(g, h) == MXU_OK);
    CHECK(mxa_host_stream_synchronize(h) == MXU_OK);
    CHECK_EQ_LL(atomic_load(&order_pos), 6);
    for (int i = 0; i < 6; i++)
        CHECK(order[i] == i, "entry %d ran at position %d", order[i], i);
    CHECK(mxa_host_graph_launch(g, h2) == MXU_OK && mxa_host_graph_launch(g, h2) == MXU_OK);
    CHECK(mxa_host_stream_synchronize(h2) == MXU_OK);
    CHECK_EQ_LL(atomic_load(&order_pos), 18);
    for (int i = 6; i < 18; i++)
        CHECK(order[i] == i % 6, "second stream: position %d has entry %d", i, order[i]);
    CHECK_EQ_LL(mxa_host_graph_inflight(g), 0);
    /* in flight while its stream is held */
    gate_t gate = {0};
    CHECK(mxa_host_stream_launch(h, gate_fn, &gate) == MXU_OK);
    CHECK(mxa_host_graph_launch(g, h) == MXU_OK);
    CHECK_EQ_LL(mxa_host_graph_inflight(g), 1);
    atomic_store(&gate.open, 1);
    CHECK(mxa_host_stream_synchronize(h) == MXU_OK);
    CHECK_EQ_LL(mxa_host_graph_inflight(g), 0);
    /* a graph is not launched on a capturing stream */
    CHECK(mxa_host_capture_begin(h2) == MXU_OK);
    CHECK(mxa_host_graph_launch(g, h2) == MXU_ERR_INVALID_PARAM);
    /* a refused point breaks the capture: its end fails and says why */
    CHECK(mxa_stream_refuse_capture(mxa_host_stream_find(h2), "a test point") == MXU_ERR_CAPTURED);
    mxa_host_graph_t *g2 = (mxa_host_graph_t *)&gate;
    CHECK(mxa_host_capture_end(h2, &g2, why, sizeof why) == MXU_ERR_CAPTURED);
    CHECK(strstr(why, "a test point") != NULL, "why: %s", why);
    CHECK(g2 == (mxa_host_graph_t *)&gate, "a failed end wrote the graph");
    mxa_host_graph_free(g);
    /* freed while capturing: the capture goes with the stream */
    CHECK(mxa_host_capture_begin(h2) == MXU_OK);
    CHECK(mxa_host_stream_launch(h2, record, NULL) == MXU_OK);
    CHECK(mxa_host_stream_free(h2) == MXU_OK);
    CHECK(mxa_host_capture_begin(h2) == MXU_ERR_INVALID_STREAM);
    CHECK(mxa_host_stream_free(h) == MXU_OK);
}

int main(void)
{
    alarm(60); /* a hang fails the test instead of blocking the suite */
    test_launch_order();
    test_triggers();
    test_wait_release();
    test_ops_in_flight();
    test_free_and_invalid();
    test_many_streams();
    test_producers();
    test_capture();
    test_shutdown();
    TEST_PASS("test_hoststream");
}
