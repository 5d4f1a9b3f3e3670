/*
 * partitioned.c - partitioned requests (MPIX_Acc_Psend_init and friends;
 * issue 19) on host streams: the host proxy protocol, which also carries
 * device buffers where the GPUs cannot reach each other.
 *
 *   1. a ring of partitioned exchanges restarted 20 times on a host
 *      stream: partitions made ready in reverse order from the host,
 *      MPIX_Acc_Parrived polled per partition, the data checked as each
 *      arrives; completed by MPI_Waitall (host) and by MPIX_Acc_Waitall
 *      (stream) in turn; the handles stay; the receive's status;
 *   2. partitions made ready in stream order (a host-stream function
 *      calls MPIX_Acc_Pready after it filled them);
 *   3. partitions move one by one: a ping-pong of 64 round trips inside
 *      one epoch (partition i = round trip i), and readiness in reverse
 *      order answered partition by partition -- nothing waits for the
 *      whole message;
 *   4. pairing by init order: two pairs of one tag started in the other
 *      order on the sender; two tags whose inits the receiver makes in
 *      the other order;
 *   5. MPI_Start on a stream communicator (MPI_Wait: a stream wait), and
 *      MPI-4's MPI_Psend_init/Precv_init/Pready_list/Parrived there;
 *   6. MPI_PROC_NULL peers; the device handle of a host buffer;
 *   7. errors: arguments at init, a start of an active request, pready
 *      twice or out of range, parrived on a send, sizes that differ
 *      (MPI_ERR_TRUNCATE at the receive's completion);
 *   8. MPI_Request_free of an active send: its partitions still arrive;
 *   9. MPI_Psend_init & co. on a plain communicator are the MPI library's
 *      (phase 5 uses them on a stream communicator: the library's).
 */
#include "common.h"

#include <mpix_acc_dreq.h>
#include <string.h>

#define NP 8
#define PC 1000 /* uint32 per partition */

static int next, prev;
static MPIX_Acc_stream S;
static MPI_Comm C; /* MPI_COMM_WORLD's dup, MPI_ERRORS_RETURN */

static uint32_t val(int src, int it, int p, int i)
{
    return (uint32_t)src * 1000003u + (uint32_t)it * 7919u + (uint32_t)p * 131u + (uint32_t)i;
}

static void wait_arrived(MPI_Request r, int p, const char *what)
{
    double t0 = t_now();
    for (;;) {
        int flag = 0;
        T_MPI(MPIX_Acc_Parrived(r, p, &flag));
        if (flag)
            return;
        T_CHECK(t_now() - t0 < T_SLOW(30), "%s: partition %d never arrived", what, p);
        t_sleep_ms(0.02);
    }
}

static void ring(void)
{
    t_phase("1. ring restarted, host readiness, per-partition arrival");
    uint32_t *sb = malloc(sizeof(uint32_t) * NP * PC), *rb = malloc(sizeof(uint32_t) * NP * PC);
    T_CHECK(sb && rb, "out of memory");
    MPI_Request r[2], keep[2];
    T_MPI(MPIX_Acc_Precv_init(rb, NP, PC, MPI_UINT32_T, prev, 3, C, MPI_INFO_NULL, &r[0]));
    T_MPI(MPIX_Acc_Psend_init(sb, NP, PC, MPI_UINT32_T, next, 3, C, MPI_INFO_NULL, &r[1]));
    keep[0] = r[0];
    keep[1] = r[1];
    for (int it = 0; it < 20; it++) {
        memset(rb, 0, sizeof(uint32_t) * NP * PC);
        T_MPI(MPIX_Acc_Start(S, &r[0]));
        T_MPI(MPIX_Acc_Start(S, &r[1]));
        /* (no synchronize here: the receive is in flight until its partitions came) */
        for (int p = NP - 1; p >= 0; p--) {
            for (int i = 0; i < PC; i++)
                sb[p * PC + i] = val(t_rank, it, p, i);
            T_MPI(MPIX_Acc_Pready(p, r[1]));
        }
        for (int p = 0; p < NP; p++) {
            wait_arrived(r[0], p, "ring");
            for (int i = 0; i < PC; i++)
                T_CHECK(rb[p * PC + i] == val(prev, it, p, i),
                        "epoch %d partition %d word %d: %u, expected %u", it, p, i, rb[p * PC + i],
                        val(prev, it, p, i));
        }
        MPI_Status st[2];
        if (it % 2 == 0) {
            T_MPI(MPI_Waitall(2, r, st));
            t_expect_status(&st[0], prev, 3, NP * PC, MPI_UINT32_T, "partitioned receive");
        } else {
            T_MPI(MPIX_Acc_Waitall(S, 2, r, st));
            T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        }
        T_CHECK(r[0] == keep[0] && r[1] == keep[1], "epoch %d: a wait changed the handles", it);
    }
    T_MPI(MPI_Request_free(&r[0]));
    T_MPI(MPI_Request_free(&r[1]));
    T_CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL, "freed handles are not null");
    free(sb);
    free(rb);
}

typedef struct {
    uint32_t *buf;
    MPI_Request req;
    int it;
} fill_arg_t;

static void fill_and_ready(void *arg)
{
    fill_arg_t *a = arg;
    for (int p = 0; p < NP; p++) {
        for (int i = 0; i < PC; i++)
            a->buf[p * PC + i] = val(t_rank, a->it, p, i);
        int rc = MPIX_Acc_Pready(p, a->req);
        if (rc != MPI_SUCCESS)
            t_async_fail("MPIX_Acc_Pready(%d) on the stream: %s", p, t_errstr(rc));
    }
}

static void stream_ready(void)
{
    t_phase("2. readiness in stream order");
    uint32_t *sb = calloc(NP * PC, sizeof(uint32_t)), *rb = calloc(NP * PC, sizeof(uint32_t));
    MPI_Request r[2];
    T_MPI(MPIX_Acc_Precv_init(rb, NP, PC, MPI_UINT32_T, prev, 4, C, MPI_INFO_NULL, &r[0]));
    T_MPI(MPIX_Acc_Psend_init(sb, NP, PC, MPI_UINT32_T, next, 4, C, MPI_INFO_NULL, &r[1]));
    fill_arg_t fa;
    for (int it = 0; it < 5; it++) {
        fa = (fill_arg_t){sb, r[1], it};
        T_MPI(MPIX_Acc_Start(S, &r[0]));
        T_MPI(MPIX_Acc_Start(S, &r[1]));
        T_MPI(MPIX_Acc_Hoststream_launch(S, fill_and_ready, &fa));
        T_MPI(MPIX_Acc_Waitall(S, 2, r, MPI_STATUSES_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        t_check_async();
        for (int p = 0; p < NP; p++)
            for (int i = 0; i < PC; i++)
                T_CHECK(rb[p * PC + i] == val(prev, it, p, i), "epoch %d partition %d word %d", it,
                        p, i);
    }
    T_MPI(MPI_Request_free(&r[0]));
    T_MPI(MPI_Request_free(&r[1]));
    free(sb);
    free(rb);
}

static void one_by_one(void)
{
    t_phase("3. ping-pong inside one epoch, reverse readiness");
    if (t_size < 2 || t_rank > 1) {
        return;
    }
    enum { N = 64 };
    int peer = 1 - t_rank;
    uint64_t out[N], in[N];
    memset(in, 0, sizeof(in));
    MPI_Request rs, rr;
    T_MPI(MPIX_Acc_Psend_init(out, N, 1, MPI_UINT64_T, peer, 9, C, MPI_INFO_NULL, &rs));
    T_MPI(MPIX_Acc_Precv_init(in, N, 1, MPI_UINT64_T, peer, 9, C, MPI_INFO_NULL, &rr));
    MPIX_Acc_stream none = NULL;
    (void)none;
    T_MPI(MPIX_Acc_Start(S, &rr));
    T_MPI(MPIX_Acc_Start(S, &rs));
    for (int i = 0; i < N; i++) {
        if (t_rank == 0) {
            out[i] = 2 * (uint64_t)i;
            T_MPI(MPIX_Acc_Pready(i, rs));
            wait_arrived(rr, i, "ping-pong");
            T_CHECK(in[i] == 2 * (uint64_t)i + 1, "round trip %d: %llu", i,
                    (unsigned long long)in[i]);
        } else {
            wait_arrived(rr, i, "ping-pong");
            out[i] = in[i] + 1;
            T_MPI(MPIX_Acc_Pready(i, rs));
        }
    }
    T_MPI(MPI_Wait(&rs, MPI_STATUS_IGNORE));
    T_MPI(MPI_Wait(&rr, MPI_STATUS_IGNORE));
    /* reverse: rank 0 readies N-1 first and waits for the answer to it */
    memset(in, 0, sizeof(in));
    T_MPI(MPIX_Acc_Start(S, &rr));
    T_MPI(MPIX_Acc_Start(S, &rs));
    for (int i = N - 1; i >= 0; i--) {
        if (t_rank == 0) {
            out[i] = 5 * (uint64_t)i;
            T_MPI(MPIX_Acc_Pready(i, rs));
            wait_arrived(rr, i, "reverse");
            T_CHECK(in[i] == 5 * (uint64_t)i + 2, "reverse %d: %llu", i, (unsigned long long)in[i]);
        } else {
            wait_arrived(rr, i, "reverse");
            out[i] = in[i] + 2;
            T_MPI(MPIX_Acc_Pready(i, rs));
        }
    }
    T_MPI(MPI_Wait(&rs, MPI_STATUS_IGNORE));
    T_MPI(MPI_Wait(&rr, MPI_STATUS_IGNORE));
    T_MPI(MPI_Request_free(&rs));
    T_MPI(MPI_Request_free(&rr));
}

static void init_order(void)
{
    t_phase("4. pairing in init order");
    uint32_t a = 0, b = 0, ra = 0, rb = 0, t1 = 0, t2 = 0, r1 = 0, r2 = 0;
    MPI_Request s[4], r[4];
    /* same tag: A then B on both sides; the sender starts B first */
    T_MPI(MPIX_Acc_Psend_init(&a, 1, 1, MPI_UINT32_T, next, 20, C, MPI_INFO_NULL, &s[0]));
    T_MPI(MPIX_Acc_Psend_init(&b, 1, 1, MPI_UINT32_T, next, 20, C, MPI_INFO_NULL, &s[1]));
    T_MPI(MPIX_Acc_Precv_init(&ra, 1, 1, MPI_UINT32_T, prev, 20, C, MPI_INFO_NULL, &r[0]));
    T_MPI(MPIX_Acc_Precv_init(&rb, 1, 1, MPI_UINT32_T, prev, 20, C, MPI_INFO_NULL, &r[1]));
    /* two tags: the receiver inits them in the other order */
    T_MPI(MPIX_Acc_Psend_init(&t1, 1, 1, MPI_UINT32_T, next, 21, C, MPI_INFO_NULL, &s[2]));
    T_MPI(MPIX_Acc_Psend_init(&t2, 1, 1, MPI_UINT32_T, next, 22, C, MPI_INFO_NULL, &s[3]));
    T_MPI(MPIX_Acc_Precv_init(&r2, 1, 1, MPI_UINT32_T, prev, 22, C, MPI_INFO_NULL, &r[3]));
    T_MPI(MPIX_Acc_Precv_init(&r1, 1, 1, MPI_UINT32_T, prev, 21, C, MPI_INFO_NULL, &r[2]));
    a = 100u + (uint32_t)t_rank;
    b = 200u + (uint32_t)t_rank;
    t1 = 300u + (uint32_t)t_rank;
    t2 = 400u + (uint32_t)t_rank;
    T_MPI(MPIX_Acc_Start(S, &r[0]));
    T_MPI(MPIX_Acc_Start(S, &r[1]));
    T_MPI(MPIX_Acc_Start(S, &r[2]));
    T_MPI(MPIX_Acc_Start(S, &r[3]));
    T_MPI(MPIX_Acc_Start(S, &s[1]));
    T_MPI(MPIX_Acc_Start(S, &s[0]));
    T_MPI(MPIX_Acc_Start(S, &s[3]));
    T_MPI(MPIX_Acc_Start(S, &s[2]));
    T_MPI(MPIX_Acc_Pready(0, s[1]));
    T_MPI(MPIX_Acc_Pready(0, s[3]));
    T_MPI(MPIX_Acc_Pready(0, s[0]));
    T_MPI(MPIX_Acc_Pready(0, s[2]));
    T_MPI(MPI_Waitall(4, s, MPI_STATUSES_IGNORE));
    T_MPI(MPI_Waitall(4, r, MPI_STATUSES_IGNORE));
    T_CHECK(ra == 100u + (uint32_t)prev && rb == 200u + (uint32_t)prev,
            "same tag: A got %u, B got %u (want %u, %u)", ra, rb, 100u + (uint32_t)prev,
            200u + (uint32_t)prev);
    T_CHECK(r1 == 300u + (uint32_t)prev && r2 == 400u + (uint32_t)prev,
            "two tags: %u and %u (want %u, %u)", r1, r2, 300u + (uint32_t)prev,
            400u + (uint32_t)prev);
    for (int i = 0; i < 4; i++) {
        T_MPI(MPI_Request_free(&s[i]));
        T_MPI(MPI_Request_free(&r[i]));
    }
}

static void expect_class(int rc, int want, const char *what);

static void mpi_start(void)
{
    t_phase("5. MPI_Start on a stream communicator");
    MPIX_Acc_stream s2;
    MPI_Comm sc = t_stream_comm(&s2);
    double x[4] = {1, 2, 3, 4}, y[4] = {0};
    MPI_Request r[2];
    T_MPI(MPIX_Acc_Precv_init(y, 2, 2, MPI_DOUBLE, prev, 1, sc, MPI_INFO_NULL, &r[0]));
    T_MPI(MPIX_Acc_Psend_init(x, 2, 2, MPI_DOUBLE, next, 1, sc, MPI_INFO_NULL, &r[1]));
    for (int it = 0; it < 3; it++) {
        x[0] = t_rank + it;
        T_MPI(MPI_Startall(2, r));
        T_MPI(MPIX_Acc_Pready_range(0, 1, r[1]));
        T_MPI(MPI_Waitall(2, r, MPI_STATUSES_IGNORE)); /* a stream wait: returns at once */
        T_MPI(MPIX_Acc_Hoststream_synchronize(s2));
        T_CHECK(y[0] == prev + it && y[3] == 4.0, "MPI_Start epoch %d: %g %g", it, y[0], y[3]);
    }
    T_MPI(MPI_Request_free(&r[0]));
    T_MPI(MPI_Request_free(&r[1]));

    /* MPI-4's own calls on the stream communicator are the library's */
    int a[6] = {0}, b[6] = {0}, list[3] = {2, 0, 1};
    T_MPI(MPI_Precv_init(b, 3, 2, MPI_INT, prev, 2, sc, MPI_INFO_NULL, &r[0]));
    T_MPI(MPI_Psend_init(a, 3, 2, MPI_INT, next, 2, sc, MPI_INFO_NULL, &r[1]));
    mpix_acc_dreq_t *d = NULL;
    T_MPI(MPIX_Acc_Prequest_get_device(r[1], &d)); /* (the library's: it has a handle) */
    T_CHECK(d != NULL, "no device handle for MPI_Psend_init on a stream communicator");
    for (int it = 0; it < 3; it++) {
        for (int i = 0; i < 6; i++)
            a[i] = 100 * t_rank + 10 * it + i;
        T_MPI(MPI_Startall(2, r));
        T_MPI(MPI_Pready_list(3, list, r[1]));
        for (int q = 0; q < 3; q++) {
            double t0 = t_now();
            int flag = 0;
            while (!flag) {
                T_MPI(MPI_Parrived(r[0], q, &flag));
                T_CHECK(t_now() - t0 < T_SLOW(30), "MPI_Parrived: partition %d never arrived", q);
            }
        }
        T_MPI(MPI_Waitall(2, r, MPI_STATUSES_IGNORE)); /* a stream wait */
        T_MPI(MPIX_Acc_Hoststream_synchronize(s2));
        for (int i = 0; i < 6; i++)
            T_CHECK(b[i] == 100 * prev + 10 * it + i, "MPI_Psend_init epoch %d: b[%d] = %d", it, i,
                    b[i]);
    }
    T_MPI(MPI_Request_free(&r[0]));
    T_MPI(MPI_Request_free(&r[1]));
    t_stream_comm_free(&sc, &s2);
}

static void mpi_library_partitioned(void)
{
    t_phase("9. MPI_Psend_init on a plain communicator: the MPI library's");
    int a[4], b[4] = {0};
    for (int i = 0; i < 4; i++)
        a[i] = 7 * t_rank + i;
    MPI_Request r[2];
    T_MPI(MPI_Precv_init(b, 2, 2, MPI_INT, prev, 6, C, MPI_INFO_NULL, &r[0]));
    T_MPI(MPI_Psend_init(a, 2, 2, MPI_INT, next, 6, C, MPI_INFO_NULL, &r[1]));
    mpix_acc_dreq_t *d = NULL;
    T_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    expect_class(MPIX_Acc_Prequest_get_device(r[1], &d), MPI_ERR_REQUEST,
                 "the device handle of the MPI library's partitioned request");
    T_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));
    T_MPI(MPI_Startall(2, r));
    T_MPI(MPI_Pready_range(0, 1, r[1]));
    T_MPI(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    for (int i = 0; i < 4; i++)
        T_CHECK(b[i] == 7 * prev + i, "the MPI library's partitioned receive: b[%d] = %d", i, b[i]);
    T_MPI(MPI_Request_free(&r[0]));
    T_MPI(MPI_Request_free(&r[1]));
}

static void proc_null_and_handle(void)
{
    t_phase("6. MPI_PROC_NULL, the device handle of a host buffer");
    int v[3] = {7, 8, 9}, w[3] = {1, 1, 1};
    MPI_Request ps, pr;
    T_MPI(MPIX_Acc_Psend_init(v, 3, 1, MPI_INT, MPI_PROC_NULL, 0, C, MPI_INFO_NULL, &ps));
    T_MPI(MPIX_Acc_Precv_init(w, 3, 1, MPI_INT, MPI_PROC_NULL, 0, C, MPI_INFO_NULL, &pr));
    mpix_acc_dreq_t *d = NULL;
    T_MPI(MPIX_Acc_Prequest_get_device(ps, &d));
    T_CHECK(d && d->magic == MPIX_ACC_DREQ_MAGIC && d->is_send == 1 && d->partitions == 3 &&
                d->part_bytes == sizeof(int) && d->mode == MPIX_ACC_DREQ_PROXY,
            "device handle of a PROC_NULL send");
    T_MPI(MPIX_Acc_Start(S, &ps));
    T_MPI(MPIX_Acc_Start(S, &pr));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_CHECK(d->epoch == 1, "epoch after the first start: %llu", (unsigned long long)d->epoch);
    T_MPI(MPIX_Acc_Pready_range(0, 2, ps));
    int flag = 0;
    T_MPI(MPIX_Acc_Parrived(pr, 2, &flag));
    T_CHECK(flag, "MPI_PROC_NULL partition not arrived");
    MPI_Status st;
    T_MPI(MPI_Wait(&pr, &st));
    T_CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG, "PROC_NULL status %d/%d",
            st.MPI_SOURCE, st.MPI_TAG);
    T_MPI(MPI_Wait(&ps, MPI_STATUS_IGNORE));
    T_CHECK(w[0] == 1 && w[2] == 1, "PROC_NULL receive wrote its buffer");
    T_MPI(MPI_Request_free(&ps));
    T_MPI(MPI_Request_free(&pr));

    /* a host buffer's handle is host memory the stream writes */
    uint64_t x = 0, y = 0;
    MPI_Request s1, r1;
    T_MPI(MPIX_Acc_Precv_init(&y, 1, 1, MPI_UINT64_T, prev, 30, C, MPI_INFO_NULL, &r1));
    T_MPI(MPIX_Acc_Psend_init(&x, 1, 1, MPI_UINT64_T, next, 30, C, MPI_INFO_NULL, &s1));
    T_MPI(MPIX_Acc_Prequest_get_device(r1, &d));
    for (int it = 1; it <= 3; it++) {
        T_MPI(MPIX_Acc_Start(S, &r1));
        T_MPI(MPIX_Acc_Start(S, &s1));
        x = (uint64_t)it;
        T_MPI(MPIX_Acc_Pready(0, s1));
        T_MPI(MPI_Waitall(1, &s1, MPI_STATUSES_IGNORE));
        T_MPI(MPI_Wait(&r1, MPI_STATUS_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        T_CHECK(d->epoch == (uint64_t)it && d->is_send == 0 && d->arrived != NULL,
                "receive handle at epoch %d: epoch %llu", it, (unsigned long long)d->epoch);
        T_CHECK(y == (uint64_t)it && d->arrived[0] == (uint64_t)it, "epoch %d: y %llu", it,
                (unsigned long long)y);
        T_CHECK(d->mode == MPIX_ACC_DREQ_PROXY, "host buffers: mode %u", d->mode);
    }
    T_MPI(MPI_Request_free(&s1));
    T_MPI(MPI_Request_free(&r1));
}

static void expect_class(int rc, int want, const char *what)
{
    int cls = -1;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    T_CHECK(rc != MPI_SUCCESS && cls == want, "%s: rc %d class %d (want %d)", what, rc, cls, want);
}

static void errors(void)
{
    t_phase("7. errors");
    int v[4] = {0}, w[4] = {0};
    MPI_Request r = MPI_REQUEST_NULL, s;
    expect_class(MPIX_Acc_Precv_init(w, 1, 1, MPI_INT, MPI_ANY_SOURCE, 0, C, MPI_INFO_NULL, &r),
                 MPI_ERR_ARG, "ANY_SOURCE partitioned receive");
    expect_class(MPIX_Acc_Psend_init(v, 0, 1, MPI_INT, next, 0, C, MPI_INFO_NULL, &r),
                 MPI_ERR_COUNT, "0 partitions");
    expect_class(MPIX_Acc_Psend_init(v, 1, 1, MPI_INT, t_size + 3, 0, C, MPI_INFO_NULL, &r),
                 MPI_ERR_RANK, "destination out of range");
    MPI_Datatype vec;
    T_MPI(MPI_Type_vector(2, 1, 2, MPI_INT, &vec));
    T_MPI(MPI_Type_commit(&vec));
    expect_class(MPIX_Acc_Psend_init(v, 1, 1, vec, next, 0, C, MPI_INFO_NULL, &r), MPI_ERR_TYPE,
                 "non-contiguous type");
    T_MPI(MPI_Type_free(&vec));
    /* (a handle that names no communicator: raised on MPI_COMM_SELF) */
    T_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    expect_class(MPIX_Acc_Pready(0, MPI_REQUEST_NULL), MPI_ERR_REQUEST, "pready on a null handle");
    T_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));

    T_MPI(MPIX_Acc_Precv_init(w, 4, 1, MPI_INT, prev, 40, C, MPI_INFO_NULL, &r));
    T_MPI(MPIX_Acc_Psend_init(v, 4, 1, MPI_INT, next, 40, C, MPI_INFO_NULL, &s));
    expect_class(MPIX_Acc_Pready(0, s), MPI_ERR_REQUEST, "pready before a start");
    T_MPI(MPIX_Acc_Start(S, &r));
    T_MPI(MPIX_Acc_Start(S, &s));
    expect_class(MPIX_Acc_Start(S, &s), MPI_ERR_REQUEST, "start of an active request");
    expect_class(MPIX_Acc_Pready(4, s), MPI_ERR_ARG, "partition out of range");
    expect_class(MPIX_Acc_Pready_range(2, 1, s), MPI_ERR_ARG, "empty range");
    int flag;
    expect_class(MPIX_Acc_Parrived(s, 0, &flag), MPI_ERR_REQUEST, "parrived on a send");
    expect_class(MPIX_Acc_Pready(0, r), MPI_ERR_REQUEST, "pready on a receive");
    T_MPI(MPIX_Acc_Pready_range(0, 3, s));
    expect_class(MPIX_Acc_Pready(1, s), MPI_ERR_ARG, "pready twice in one epoch");
    T_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
    T_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    T_MPI(MPI_Request_free(&s));
    T_MPI(MPI_Request_free(&r));

    /* sizes that differ: the receive (2 ints) completes with MPI_ERR_TRUNCATE */
    T_MPI(MPIX_Acc_Precv_init(w, 2, 1, MPI_INT, prev, 41, C, MPI_INFO_NULL, &r));
    T_MPI(MPIX_Acc_Psend_init(v, 2, 2, MPI_INT, next, 41, C, MPI_INFO_NULL, &s));
    T_MPI(MPIX_Acc_Start(S, &r));
    T_MPI(MPIX_Acc_Start(S, &s));
    T_MPI(MPIX_Acc_Pready_range(0, 1, s));
    int rs = MPI_Wait(&s, MPI_STATUS_IGNORE), rr = MPI_Wait(&r, MPI_STATUS_IGNORE);
    expect_class(rr, MPI_ERR_TRUNCATE, "a receive smaller than the send");
    T_CHECK(rs != MPI_SUCCESS, "the oversized send completed without an error");
    T_MPI(MPI_Request_free(&s));
    T_MPI(MPI_Request_free(&r));
}

static void free_active(void)
{
    t_phase("8. MPI_Request_free of an active send");
    /* (static: the send goes on after the free, past this function's end) */
    static uint64_t x;
    uint64_t y = 0;
    x = 77 + (uint64_t)t_rank;
    MPI_Request s, r;
    T_MPI(MPIX_Acc_Precv_init(&y, 1, 1, MPI_UINT64_T, prev, 50, C, MPI_INFO_NULL, &r));
    T_MPI(MPIX_Acc_Psend_init(&x, 1, 1, MPI_UINT64_T, next, 50, C, MPI_INFO_NULL, &s));
    T_MPI(MPIX_Acc_Start(S, &r));
    T_MPI(MPIX_Acc_Start(S, &s));
    T_MPI(MPIX_Acc_Pready(0, s));
    T_MPI(MPI_Request_free(&s));
    T_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    T_CHECK(y == 77 + (uint64_t)prev, "freed send: received %llu", (unsigned long long)y);
    T_MPI(MPI_Request_free(&r));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "partitioned", 120);
    next = (t_rank + 1) % t_size;
    prev = (t_rank + t_size - 1) % t_size;
    T_MPI(MPIX_Acc_Hoststream_create(&S));
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &C));
    T_MPI(MPI_Comm_set_errhandler(C, MPI_ERRORS_RETURN));
    ring();
    stream_ready();
    one_by_one();
    init_order();
    mpi_start();
    proc_null_and_handle();
    errors();
    free_active();
    mpi_library_partitioned();
    T_MPI(MPI_Comm_free(&C));
    T_MPI(MPIX_Acc_Hoststream_free(&S));
    return t_finish();
}
