/*
 * hostgraph.c - host graphs (MPIX_Acc_Hoststream_begin_capture(3)): a ring
 * exchange captured once and launched many times, with the data checked at
 * every launch (issue 21, host streams).
 *
 *   A: ring: a captured step = fill(send buffer, launch k) -> Irecv from
 *      prev -> Isend to next -> Waitall (statuses) -> check(receive buffer,
 *      launch k, statuses). Launched N times (10 000; fewer with
 *      MPIXACC_TEST_MODE=tsan), the stream synchronized every 1000
 *      launches; every launch's data and statuses checked on the stream;
 *      the last count and the graph's error count 0.
 *   B: ranks replay different graphs: even ranks capture send-then-receive
 *      with blocking calls (MPIX_Acc_Send/Recv), odd ranks receive-then-send
 *      with Isend/Irecv/Wait in another order; 200 launches.
 *   C: a graph mixed with plain enqueues on the same stream and
 *      communicator (another tag), and a second graph launched on a second
 *      stream (a third tag): interleaved launches, all data checked.
 *   M: a graph and plain operations on one channel (communicator, peer,
 *      tag) and stream: on a communicator with mpix_acc_match=dynamic (on
 *      a call-order one, plain calls are matched at the call and a launch's
 *      operations when it runs: they cannot share a channel); 300 launches
 *      (60 with tsan), each followed by a plain exchange, all data checked.
 *   S: the first capture on a communicator on the stream-executed path
 *      (MPI-4 no-wildcard assertions) turns it to start order while a
 *      receive called before it waits behind a gate for its message in the
 *      SX ring; the launch's message sent after the turn goes to the
 *      launch's receive, not to the waiting one (both data checked).
 *   P: a plain send and, right after it on the same stream, a launch's
 *      send on the same channel (nothing waited between them): the
 *      receiver's two receives get them in that order, 400 times (the
 *      launch's operation starts from the engine's command queue, the plain
 *      one at its trigger: the engine orders them as the stream did). Not
 *      with MPIX_ACC_GRAPH_PROTOCOL=counter (design.md 6d).
 *   O: two messages of one launch on one (peer, tag): two receives
 *      recorded back to back, two sends with a 200 us pause between them;
 *      400 launches (40 with tsan), each message's data checked (with the
 *      counter protocol the progress thread sees fires of several nodes
 *      and launches at once: it must start their operations in the order
 *      the nodes ran).
 *   D: a request freed inside the capture: its sends go unwaited and still
 *      arrive (checked by plain receives).
 *   F: a stream communicator's ordinary MPI_Irecv/MPI_Isend/MPI_Waitall
 *      (statuses) captured; 100 launches, statuses checked.
 *   V: a non-contiguous datatype captured (2 elements of an MPI_Type_vector
 *      of doubles, a stream communicator's MPI_Irecv/MPI_Isend/MPI_Waitall
 *      too): the graph packs the send before its fire and unpacks the
 *      receive after its wait; the type is freed after the capture; 500
 *      launches (50 with tsan), every launch's data checked and the gaps
 *      between the blocks untouched, the last status's count in elements
 *      of the type; the same by one MPI_Sendrecv (a textbook halo step);
 *      persistent requests (MPI_Recv_init/MPI_Send_init of the type,
 *      MPI_Startall and MPI_Waitall in the capture: each launch starts
 *      them anew);
 *      then a line (MPI_PROC_NULL ends) and a capture whose
 *      non-contiguous request is freed unwaited (end_capture fails
 *      MPI_ERR_REQUEST: the graph unpacks after the wait).
 *   L: A's step along a line (the ring without its wrap-around): rank 0
 *      receives from MPI_PROC_NULL and the last rank sends to it (one
 *      rank: both); 1000 launches (30 with tsan), the data, the PROC_NULL
 *      statuses (source MPI_PROC_NULL, tag MPI_ANY_TAG, count 0) and the
 *      untouched receive buffer checked.
 *   G: the blocking stream-ordered collectives captured: fill -> Allreduce
 *      (MPI_LONG sum) -> Bcast (root 1 % size) -> Allgather -> Reduce (root
 *      0; its scratch is the graph's) -> Alltoall -> Barrier ->
 *      check, launched 1000 times (60 with tsan), every launch's results
 *      checked exactly on the stream; every 10th launch a plain Allreduce
 *      on the same stream and communicator between the launches (checked
 *      too); then a stream communicator's MPI_Allreduce captured (100
 *      launches).
 *      Then the nonblocking forms captured: a stream communicator's
 *      MPI_Iallreduce, MPI_Ibcast and MPI_Iallgather completed by one
 *      MPI_Waitall, and MPIX_Acc_Iallreduce with MPIX_Acc_Wait (100
 *      launches, checked).
 *   E: errors: a host wait on a captured request (MPI_ERR_REQUEST, no
 *      hang; a captured Iallreduce's too -- the graph still runs it), a
 *      stream communicator's
 *      collective that runs as the MPI library's (MPI_BAND) on a capturing
 *      stream breaks the capture (its end fails with
 *      MPI_ERR_UNSUPPORTED_OPERATION), a request left active
 *      (end fails MPI_ERR_REQUEST), freeing a graph with launches in flight
 *      (error; the graph stays and is freed after the synchronize),
 *      synchronize of a capturing stream, bad handles.
 */
#include "common.h"

#define MSG 257 /* doubles per message */

typedef struct {
    double *buf;
    int n;
    int rank; /* the producer whose data it is */
    int tag;
    _Atomic long launch; /* launches this function has seen (fill: made; check: checked) */
    MPI_Status *st;      /* check: the captured wait's statuses (NULL: none) */
    int st_src, st_tag;
} step_arg_t;

static double val(int rank, int tag, long k, int i)
{
    return rank * 1e6 + tag * 1e3 + k + i * 1e-3;
}

static void fill_fn(void *p)
{
    step_arg_t *a = p;
    long k = atomic_fetch_add(&a->launch, 1);
    for (int i = 0; i < a->n; i++)
        a->buf[i] = val(a->rank, a->tag, k, i);
}

static void check_fn(void *p)
{
    step_arg_t *a = p;
    long k = atomic_fetch_add(&a->launch, 1);
    for (int i = 0; i < a->n; i++) {
        /* a receive from MPI_PROC_NULL leaves the buffer as it was (-1) */
        double want = a->rank == MPI_PROC_NULL ? -1.0 : val(a->rank, a->tag, k, i);
        if (a->buf[i] != want) {
            t_async_fail("launch %ld: element %d from rank %d tag %d: expected %.17g got %.17g", k,
                         i, a->rank, a->tag, want, a->buf[i]);
            return;
        }
    }
    if (a->st && (a->st->MPI_SOURCE != a->st_src || a->st->MPI_TAG != a->st_tag ||
                  a->st->MPI_ERROR != MPI_SUCCESS)) {
        t_async_fail("launch %ld: status source %d tag %d error %d, expected %d %d 0", k,
                     a->st->MPI_SOURCE, a->st->MPI_TAG, a->st->MPI_ERROR, a->st_src, a->st_tag);
        return;
    }
    if (a->st)
        a->st->MPI_SOURCE = -77; /* the next launch's wait must write it again */
}

/* a pause of 200 us on the stream (phase O) */
static void pause_fn(void *p)
{
    (void)p;
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
}

static void expect_class(int rc, int cls, const char *what)
{
    T_CHECK(rc != MPI_SUCCESS, "%s: returned MPI_SUCCESS, expected error class %d", what, cls);
    int c = -1;
    T_MPI(MPI_Error_class(rc, &c));
    T_CHECK(c == cls, "%s: error class %d, expected %d", what, c, cls);
}

static void no_graph_errors(MPIX_Acc_hostgraph g, const char *what)
{
    unsigned long e = 99;
    T_MPI(MPIX_Acc_Hostgraph_errors(g, &e));
    T_CHECK(e == 0, "%s: the graph counted %lu failed operations", what, e);
}

/* launch g n times on s, synchronizing s and collecting the checks every
 * `every` launches and at the end */
static void launch_every(MPIX_Acc_hostgraph g, MPIX_Acc_stream s, long n, long every)
{
    for (long k = 0; k < n; k++) {
        T_MPI(MPIX_Acc_Hostgraph_launch(g, s));
        if (k % every == every - 1) {
            T_MPI(MPIX_Acc_Hoststream_synchronize(s));
            t_check_async();
        }
    }
    T_MPI(MPIX_Acc_Hoststream_synchronize(s));
    t_check_async();
}

/* launch g n times on s, then synchronize s and collect the checks */
static void launch_n(MPIX_Acc_hostgraph g, MPIX_Acc_stream s, int n) { launch_every(g, s, n, n); }

/* a duplicate of comm with info keys k1 (and k2, unless NULL) set */
static MPI_Comm dup_with_info(MPI_Comm comm, const char *k1, const char *v1, const char *k2,
                              const char *v2)
{
    MPI_Comm d;
    MPI_Info inf;
    T_MPI(MPI_Info_create(&inf));
    T_MPI(MPI_Info_set(inf, k1, v1));
    if (k2)
        T_MPI(MPI_Info_set(inf, k2, v2));
    T_MPI(MPI_Comm_dup_with_info(comm, inf, &d));
    T_MPI(MPI_Info_free(&inf));
    return d;
}

/* fill -> Irecv from `from` -> Isend to `to` -> Waitall (no statuses) ->
 * check on stream s (communicator comm, tag): enqueued plainly, or, with
 * g, captured into *g */
static void ring_step(MPIX_Acc_stream s, MPI_Comm comm, int tag, double *sb, double *rb, int from,
                      int to, step_arg_t *f, step_arg_t *c, MPIX_Acc_hostgraph *g)
{
    MPI_Request r[2];
    if (g)
        T_MPI(MPIX_Acc_Hoststream_begin_capture(s));
    T_MPI(MPIX_Acc_Hoststream_launch(s, fill_fn, f));
    T_MPI(MPIX_Acc_Irecv(s, rb, MSG, MPI_DOUBLE, from, tag, comm, &r[0]));
    T_MPI(MPIX_Acc_Isend(s, sb, MSG, MPI_DOUBLE, to, tag, comm, &r[1]));
    T_MPI(MPIX_Acc_Waitall(s, 2, r, MPI_STATUSES_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_launch(s, check_fn, c));
    if (g)
        T_MPI(MPIX_Acc_Hoststream_end_capture(s, g));
}

/* A and L: fill -> Irecv from `from` -> Isend to `to` -> Waitall with
 * statuses -> check, captured once (tag) and launched n times, the stream
 * synchronized and the checks collected every `every` launches and at the
 * end. Either peer may be MPI_PROC_NULL: the receive buffer then stays -1,
 * and the statuses are MPI's (a PROC_NULL send's is checked too). The last
 * receive's count and the graph's error count are checked at the end. */
static void exchange_phase(MPIX_Acc_stream s, double *sb, double *rb, int from, int to, int tag,
                           long n, long every, const char *capture_phase, const char *launch_phase)
{
    t_phase(capture_phase);
    for (int i = 0; i < MSG; i++)
        rb[i] = -1.0;
    MPI_Status st[2];
    step_arg_t fa = {.buf = sb, .n = MSG, .rank = t_rank, .tag = tag};
    step_arg_t ca = {.buf = rb,
                     .n = MSG,
                     .rank = from,
                     .tag = tag,
                     .st = &st[0],
                     .st_src = from,
                     .st_tag = from == MPI_PROC_NULL ? MPI_ANY_TAG : tag};
    /* the send's status where it names MPI_PROC_NULL (else MPI says little) */
    step_arg_t cn = {.rank = MPI_PROC_NULL,
                     .st = to == MPI_PROC_NULL ? &st[1] : NULL,
                     .st_src = MPI_PROC_NULL,
                     .st_tag = MPI_ANY_TAG};
    MPIX_Acc_hostgraph g = NULL;
    MPI_Request rq[2];
    T_MPI(MPIX_Acc_Hoststream_begin_capture(s));
    T_MPI(MPIX_Acc_Hoststream_launch(s, fill_fn, &fa));
    T_MPI(MPIX_Acc_Irecv(s, rb, MSG, MPI_DOUBLE, from, tag, MPI_COMM_WORLD, &rq[0]));
    T_MPI(MPIX_Acc_Isend(s, sb, MSG, MPI_DOUBLE, to, tag, MPI_COMM_WORLD, &rq[1]));
    T_MPI(MPIX_Acc_Waitall(s, 2, rq, st));
    T_CHECK(rq[0] == MPI_REQUEST_NULL && rq[1] == MPI_REQUEST_NULL,
            "a captured Waitall left its handles");
    T_MPI(MPIX_Acc_Hoststream_launch(s, check_fn, &ca));
    T_MPI(MPIX_Acc_Hoststream_launch(s, check_fn, &cn));
    T_MPI(MPIX_Acc_Hoststream_end_capture(s, &g));
    T_CHECK(g != NULL, "end_capture gave no graph");
    T_CHECK(atomic_load(&fa.launch) == 0 && atomic_load(&ca.launch) == 0,
            "the capture ran its launches");
    t_phase(launch_phase);
    launch_every(g, s, n, every);
    T_CHECK(atomic_load(&ca.launch) == n && atomic_load(&cn.launch) == n,
            "the checks ran %ld / %ld times, expected %ld", atomic_load(&ca.launch),
            atomic_load(&cn.launch), n);
    int cnt = -1;
    T_MPI(MPI_Get_count(&st[0], MPI_DOUBLE, &cnt));
    T_CHECK(cnt == (from == MPI_PROC_NULL ? 0 : MSG), "the last receive's count %d", cnt);
    no_graph_errors(g, launch_phase);
    T_MPI(MPIX_Acc_Hostgraph_free(&g));
    T_CHECK(g == NULL, "Hostgraph_free did not clear the handle");
}

/* V: 2 elements of a vector of VB blocks of 2 doubles, stride 5 */
#define VB 40
#define VSTRIDE 5
#define VEXT ((VB - 1) * VSTRIDE + 2) /* doubles of one element's extent */
#define VCOUNT 2
#define VDATA (VCOUNT * VB * 2) /* doubles of data */
#define VGAP (-7.0)             /* what a receive buffer holds between blocks */

/* the buffer index of data double i (MPI_Pack's order) */
static int vidx(int i)
{
    int e = i / (VB * 2), b = (i / 2) % VB, j = i % 2;
    return e * VEXT + b * VSTRIDE + j;
}

typedef struct {
    double *buf;
    int rank, tag; /* the producer (check: MPI_PROC_NULL: nothing arrives) */
    _Atomic long launch;
} vstep_arg_t;

static void vfill_fn(void *p)
{
    vstep_arg_t *a = p;
    long k = atomic_fetch_add(&a->launch, 1);
    for (int i = 0; i < VDATA; i++)
        a->buf[vidx(i)] = val(a->rank, a->tag, k, i);
}

static void vcheck_fn(void *p)
{
    vstep_arg_t *a = p;
    long k = atomic_fetch_add(&a->launch, 1);
    for (int i = 0, d = 0; i < VCOUNT * VEXT; i++) {
        int data = d < VDATA && vidx(d) == i;
        double want = !data || a->rank == MPI_PROC_NULL ? VGAP : val(a->rank, a->tag, k, d);
        d += data;
        if (a->buf[i] != want) {
            t_async_fail("V: launch %ld: buffer element %d (%s): expected %.17g got %.17g", k, i,
                         data ? "data" : "gap", want, a->buf[i]);
            return;
        }
    }
}

/* capture fill -> Irecv(from) -> Isend(to) -> Waitall(st) -> check with
 * 2 elements of type vt on comm (stream cs), launch it n times; ct: the
 * same type map (alive at the end), to count the last status in;
 * how: 1 one MPI_Sendrecv instead of the Irecv, Isend and Waitall; 2
 * persistent requests made before the capture, MPI_Startall and MPI_Waitall
 * in it (freed at the end) */
static void vector_run(MPIX_Acc_stream cs, MPI_Comm comm, MPI_Datatype vt, MPI_Datatype ct,
                       int from, int to, int tag, long n, MPI_Datatype *free_after, int how)
{
    double *vs = malloc(sizeof(double) * VCOUNT * VEXT),
           *vr = malloc(sizeof(double) * VCOUNT * VEXT);
    T_CHECK(vs && vr, "malloc");
    for (int i = 0; i < VCOUNT * VEXT; i++)
        vs[i] = vr[i] = VGAP;
    vstep_arg_t fa = {.buf = vs, .rank = t_rank, .tag = tag};
    vstep_arg_t ca = {.buf = vr, .rank = from, .tag = tag};
    MPI_Status st[2];
    MPI_Request rq[2];
    MPIX_Acc_hostgraph g = NULL;
    MPI_Request pr[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    if (how == 2) {
        T_MPI(MPI_Recv_init(vr, VCOUNT, vt, from, tag, comm, &pr[0]));
        T_MPI(MPI_Send_init(vs, VCOUNT, vt, to, tag, comm, &pr[1]));
    }
    T_MPI(MPIX_Acc_Hoststream_begin_capture(cs));
    T_MPI(MPIX_Acc_Hoststream_launch(cs, vfill_fn, &fa));
    if (how == 2) {
        T_MPI(MPI_Startall(2, pr));
        T_MPI(MPI_Waitall(2, pr, st));
        T_CHECK(pr[0] != MPI_REQUEST_NULL && pr[1] != MPI_REQUEST_NULL,
                "V: a captured wait freed a persistent request");
    } else if (how == 1) {
        T_MPI(MPI_Sendrecv(vs, VCOUNT, vt, to, tag, vr, VCOUNT, vt, from, tag, comm, &st[0]));
    } else {
        T_MPI(MPI_Irecv(vr, VCOUNT, vt, from, tag, comm, &rq[0]));
        T_MPI(MPI_Isend(vs, VCOUNT, vt, to, tag, comm, &rq[1]));
        T_MPI(MPI_Waitall(2, rq, st));
    }
    T_MPI(MPIX_Acc_Hoststream_launch(cs, vcheck_fn, &ca));
    T_MPI(MPIX_Acc_Hoststream_end_capture(cs, &g));
    T_CHECK(g != NULL && atomic_load(&ca.launch) == 0, "V: the capture gave no graph, or ran");
    if (free_after) /* the layout is the graph's: the type may go */
        T_MPI(MPI_Type_free(free_after));
    launch_every(g, cs, n, 100);
    T_CHECK(atomic_load(&ca.launch) == n, "V: the check ran %ld times, expected %ld",
            atomic_load(&ca.launch), n);
    /* the last receive's count, in bytes then in elements of the type */
    int cnt = -1;
    T_MPI(MPI_Get_count(&st[0], MPI_BYTE, &cnt));
    T_CHECK(cnt == (from == MPI_PROC_NULL ? 0 : (int)(VDATA * sizeof(double))),
            "V: the last receive's count %d bytes", cnt);
    T_MPI(MPI_Get_count(&st[0], ct, &cnt));
    T_CHECK(cnt == (from == MPI_PROC_NULL ? 0 : VCOUNT),
            "V: the last receive's count %d elements of the type, expected %d", cnt,
            from == MPI_PROC_NULL ? 0 : VCOUNT);
    no_graph_errors(g, "V");
    T_MPI(MPIX_Acc_Hostgraph_free(&g));
    for (int i = 0; i < 2; i++)
        if (pr[i] != MPI_REQUEST_NULL)
            T_MPI(MPI_Request_free(&pr[i]));
    free(vs);
    free(vr);
}

/* G: collectives. Launch k's send data of rank r: cval(r, k, i). */
#define CN 33 /* longs per rank */
typedef struct {
    long sb[CN], ar[CN], bc[CN], rd[CN], *ag, *as, *ar2; /* ar2: alltoall's result */
    int root;
    _Atomic long fill_k, check_k;
} coll_arg_t;

static long cval(int rank, long k, int i) { return rank * 1000003L + 7 * k + i; }

static void coll_fill(void *p)
{
    coll_arg_t *a = p;
    long k = atomic_fetch_add(&a->fill_k, 1);
    for (int i = 0; i < CN; i++) {
        a->sb[i] = cval(t_rank, k, i);
        a->ar[i] = -1;
        a->bc[i] = t_rank == a->root ? cval(t_rank, k, i) : -1;
        a->rd[i] = -1;
        for (int j = 0; j < t_size; j++) {
            a->ag[j * CN + i] = -1;
            if (a->as) {
                a->as[j * CN + i] = cval(t_rank, k, i) + 100 * j; /* to rank j */
                a->ar2[j * CN + i] = -1;
            }
        }
    }
}

static void coll_check(void *p)
{
    coll_arg_t *a = p;
    long k = atomic_fetch_add(&a->check_k, 1);
    for (int i = 0; i < CN; i++) {
        long sum = 0;
        for (int j = 0; j < t_size; j++) {
            sum += cval(j, k, i);
            if (a->ag[j * CN + i] != cval(j, k, i)) {
                t_async_fail("launch %ld: allgather block %d element %d: %ld, expected %ld", k, j,
                             i, a->ag[j * CN + i], cval(j, k, i));
                return;
            }
        }
        for (int j = 0; a->as && j < t_size; j++)
            if (a->ar2[j * CN + i] != cval(j, k, i) + 100 * t_rank) {
                t_async_fail("launch %ld: alltoall block %d element %d: %ld, expected %ld", k, j, i,
                             a->ar2[j * CN + i], cval(j, k, i) + 100 * t_rank);
                return;
            }
        if (a->as && a->rd[i] != (t_rank == 0 ? sum : -1)) {
            t_async_fail("launch %ld: reduce element %d: %ld, expected %ld", k, i, a->rd[i],
                         t_rank == 0 ? sum : -1);
            return;
        }
        if (a->ar[i] != sum || a->bc[i] != cval(a->root, k, i)) {
            t_async_fail("launch %ld: element %d: allreduce %ld (expected %ld), bcast %ld "
                         "(expected %ld)",
                         k, i, a->ar[i], sum, a->bc[i], cval(a->root, k, i));
            return;
        }
    }
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "hostgraph", 240);
    const char *mode = getenv("MPIXACC_TEST_MODE");
    const int tsan = mode && strcmp(mode, "tsan") == 0;
    const long nlaunch = tsan ? 300 : 10000;
    const int next = (t_rank + 1) % t_size, prev = (t_rank - 1 + t_size) % t_size;
    const MPI_Comm W = MPI_COMM_WORLD;
    T_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    T_MPI(MPI_Comm_set_errhandler(W, MPI_ERRORS_RETURN));
    MPIX_Acc_stream s, s2;
    T_MPI(MPIX_Acc_Hoststream_create(&s));
    T_MPI(MPIX_Acc_Hoststream_create(&s2));
    double *sb = calloc(MSG, sizeof(double)), *rb = calloc(MSG, sizeof(double));
    T_CHECK(sb && rb, "malloc");

    /* ---- A: the ring, launched nlaunch times ---- */
    exchange_phase(s, sb, rb, prev, next, 5, nlaunch, 1000, "A: capture the ring",
                   "A: launch the ring");
    MPIX_Acc_hostgraph g = NULL;

    /* ---- B: different graphs on even and odd ranks ---- */
    t_phase("B: different graphs per rank");
    {
        step_arg_t fb = {.buf = sb, .n = MSG, .rank = t_rank, .tag = 6};
        step_arg_t cb = {.buf = rb, .n = MSG, .rank = prev, .tag = 6};
        MPI_Status bst;
        T_MPI(MPIX_Acc_Hoststream_begin_capture(s));
        T_MPI(MPIX_Acc_Hoststream_launch(s, fill_fn, &fb));
        if (t_rank % 2 == 0) {
            T_MPI(MPIX_Acc_Send(s, sb, MSG, MPI_DOUBLE, next, 6, W));
            T_MPI(MPIX_Acc_Recv(s, rb, MSG, MPI_DOUBLE, prev, 6, W, &bst));
        } else {
            MPI_Request r2[2];
            T_MPI(MPIX_Acc_Isend(s, sb, MSG, MPI_DOUBLE, next, 6, W, &r2[1]));
            T_MPI(MPIX_Acc_Irecv(s, rb, MSG, MPI_DOUBLE, prev, 6, W, &r2[0]));
            T_MPI(MPIX_Acc_Wait(s, &r2[0], &bst));
            T_MPI(MPIX_Acc_Wait(s, &r2[1], MPI_STATUS_IGNORE));
        }
        cb.st = &bst;
        cb.st_src = prev;
        cb.st_tag = 6;
        T_MPI(MPIX_Acc_Hoststream_launch(s, check_fn, &cb));
        T_MPI(MPIX_Acc_Hoststream_end_capture(s, &g));
        launch_n(g, s, 200);
        T_CHECK(atomic_load(&cb.launch) == 200, "B: checked %ld launches", atomic_load(&cb.launch));
        no_graph_errors(g, "B");
        T_MPI(MPIX_Acc_Hostgraph_free(&g));
    }

    /* ---- C: a graph mixed with plain enqueues, a second graph on s2 ---- */
    t_phase("C: graphs mixed with plain enqueues");
    {
        double *sb2 = calloc(MSG, sizeof(double)), *rb2 = calloc(MSG, sizeof(double));
        double *sp = calloc(MSG, sizeof(double)), *rp = calloc(MSG, sizeof(double));
        T_CHECK(sb2 && rb2 && sp && rp, "malloc");
        step_arg_t f1 = {.buf = sb, .n = MSG, .rank = t_rank, .tag = 7};
        step_arg_t c1 = {.buf = rb, .n = MSG, .rank = prev, .tag = 7};
        step_arg_t f2 = {.buf = sb2, .n = MSG, .rank = t_rank, .tag = 8};
        step_arg_t c2 = {.buf = rb2, .n = MSG, .rank = prev, .tag = 8};
        step_arg_t fp = {.buf = sp, .n = MSG, .rank = t_rank, .tag = 9};
        step_arg_t cp = {.buf = rp, .n = MSG, .rank = prev, .tag = 9};
        MPIX_Acc_hostgraph g1, g2;
        ring_step(s, W, 7, sb, rb, prev, next, &f1, &c1, &g1);
        ring_step(s2, W, 8, sb2, rb2, prev, next, &f2, &c2, &g2);
        for (int k = 0; k < 300; k++) {
            T_MPI(MPIX_Acc_Hostgraph_launch(g1, s));
            /* plain enqueues on the same stream and communicator, tag 9 */
            ring_step(s, W, 9, sp, rp, prev, next, &fp, &cp, NULL);
            T_MPI(MPIX_Acc_Hostgraph_launch(g2, s2));
            if (k % 100 == 99) {
                T_MPI(MPIX_Acc_Hoststream_synchronize(s));
                T_MPI(MPIX_Acc_Hoststream_synchronize(s2));
                t_check_async();
            }
        }
        T_MPI(MPIX_Acc_Hoststream_synchronize(s));
        T_MPI(MPIX_Acc_Hoststream_synchronize(s2));
        t_check_async();
        T_CHECK(atomic_load(&c1.launch) == 300 && atomic_load(&c2.launch) == 300 &&
                    atomic_load(&cp.launch) == 300,
                "C: checked %ld / %ld / %ld of 300", atomic_load(&c1.launch),
                atomic_load(&c2.launch), atomic_load(&cp.launch));
        no_graph_errors(g1, "C g1");
        no_graph_errors(g2, "C g2");
        T_MPI(MPIX_Acc_Hostgraph_free(&g1));
        T_MPI(MPIX_Acc_Hostgraph_free(&g2));
        free(sb2);
        free(rb2);
        free(sp);
        free(rp);
    }

    /* ---- M: a graph and plain operations on one channel ---- */
    t_phase("M: one channel, captured and plain (mpix_acc_match=dynamic)");
    {
        const int nm = tsan ? 60 : 300;
        double *sp = calloc(MSG, sizeof(double)), *rp = calloc(MSG, sizeof(double));
        T_CHECK(sp && rp, "malloc");
        MPI_Comm DW = dup_with_info(W, "mpix_acc_match", "dynamic", NULL, NULL);
        /* the data says whose it is: tag 15 (graph) and 16 (plain), both on tag 15 */
        step_arg_t fg = {.buf = sb, .n = MSG, .rank = t_rank, .tag = 15};
        step_arg_t cg = {.buf = rb, .n = MSG, .rank = prev, .tag = 15};
        step_arg_t fp = {.buf = sp, .n = MSG, .rank = t_rank, .tag = 16};
        step_arg_t cp = {.buf = rp, .n = MSG, .rank = prev, .tag = 16};
        ring_step(s, DW, 15, sb, rb, prev, next, &fg, &cg, &g);
        for (int k = 0; k < nm; k++) {
            T_MPI(MPIX_Acc_Hostgraph_launch(g, s));
            ring_step(s, DW, 15, sp, rp, prev, next, &fp, &cp, NULL);
        }
        T_MPI(MPIX_Acc_Hoststream_synchronize(s));
        t_check_async();
        T_CHECK(atomic_load(&cg.launch) == nm && atomic_load(&cp.launch) == nm,
                "M: checked %ld launches and %ld plain exchanges of %d", atomic_load(&cg.launch),
                atomic_load(&cp.launch), nm);
        no_graph_errors(g, "M");
        T_MPI(MPIX_Acc_Hostgraph_free(&g));
        T_MPI(MPI_Comm_free(&DW));
        free(sp);
        free(rp);
    }

    /* ---- N: the same on a call-order communicator (the contract, api.md 3:
     * captured and plain operations on one channel are defined on one
     * stream); plain exchanges before the capture too. The capture turns the
     * communicator to start order, which MPI_Comm_get_info then says. ---- */
    t_phase("N: one channel, captured and plain, call-order communicator");
    {
        const int nm = tsan ? 60 : 300;
        double *sp = calloc(MSG, sizeof(double)), *rp = calloc(MSG, sizeof(double));
        T_CHECK(sp && rp, "malloc");
        MPI_Comm CW;
        T_MPI(MPI_Comm_dup(W, &CW));
        step_arg_t fg = {.buf = sb, .n = MSG, .rank = t_rank, .tag = 17};
        step_arg_t cg = {.buf = rb, .n = MSG, .rank = prev, .tag = 17};
        step_arg_t fp = {.buf = sp, .n = MSG, .rank = t_rank, .tag = 18};
        step_arg_t cp = {.buf = rp, .n = MSG, .rank = prev, .tag = 18};
        for (int k = 0; k < 20; k++) /* call order, before any capture */
            ring_step(s, CW, 17, sp, rp, prev, next, &fp, &cp, NULL);
        ring_step(s, CW, 17, sb, rb, prev, next, &fg, &cg, &g);
        MPI_Info got;
        char val[64] = "";
        int flag = 0;
        T_MPI(MPI_Comm_get_info(CW, &got));
        T_MPI(MPI_Info_get(got, "mpix_acc_match", (int)sizeof(val) - 1, val, &flag));
        T_MPI(MPI_Info_free(&got));
        T_CHECK(flag && strcmp(val, "dynamic") == 0,
                "N: after the capture mpix_acc_match is \"%s\" (flag %d), not dynamic", val, flag);
        for (int k = 0; k < nm; k++) {
            T_MPI(MPIX_Acc_Hostgraph_launch(g, s));
            ring_step(s, CW, 17, sp, rp, prev, next, &fp, &cp, NULL);
        }
        T_MPI(MPIX_Acc_Hoststream_synchronize(s));
        t_check_async();
        T_CHECK(atomic_load(&cg.launch) == nm && atomic_load(&cp.launch) == nm + 20,
                "N: checked %ld launches and %ld plain exchanges of %d / %d",
                atomic_load(&cg.launch), atomic_load(&cp.launch), nm, nm + 20);
        no_graph_errors(g, "N");
        T_MPI(MPIX_Acc_Hostgraph_free(&g));
        T_MPI(MPI_Comm_free(&CW));
        free(sp);
        free(rp);
    }

    /* ---- S: the turn to start order on a stream-executed communicator. A
     * receive called before the first capture is bound to its channel's
     * ordinal and waits, its stream held at a gate, for a message that went
     * into the SX ring -- whose envelope is not matched. The first message
     * sent after the turn (a launch's) must not be taken by it: it is the
     * launch's receive's (hpgmg-fv --graph with acc-sx hung 1 run in 50). ---- */
    t_phase("S: a capture turns an SX communicator while a receive waits behind a gate");
    {
        double *sp = calloc(MSG, sizeof(double)), *rp = calloc(MSG, sizeof(double));
        T_CHECK(sp && rp, "malloc");
        MPI_Comm XW =
            dup_with_info(W, "mpi_assert_no_any_source", "true", "mpi_assert_no_any_tag", "true");
        /* plain exchanges first: the links are open (the data says 30) */
        step_arg_t fw = {.buf = sp, .n = MSG, .rank = t_rank, .tag = 30};
        step_arg_t cw = {.buf = rp, .n = MSG, .rank = prev, .tag = 30};
        for (int k = 0; k < 5; k++)
            ring_step(s, XW, 31, sp, rp, prev, next, &fw, &cw, NULL);
        T_MPI(MPIX_Acc_Hoststream_synchronize(s));
        t_check_async();
        /* all on tag 31; the data says which: 32 the plain message, 33 the launch's */
        step_arg_t fs = {.buf = sp, .n = MSG, .rank = t_rank, .tag = 32};
        step_arg_t cs = {.buf = rp, .n = MSG, .rank = prev, .tag = 32};
        step_arg_t fd = {.buf = sb, .n = MSG, .rank = t_rank, .tag = 33};
        step_arg_t cd = {.buf = rb, .n = MSG, .rank = prev, .tag = 33};
        t_gate_t gate;
        t_gate_init(&gate);
        MPI_Request r[2];
        /* the plain receive, behind the gate on s; the plain send on s2 */
        T_MPI(MPIX_Acc_Hoststream_launch(s, t_gate_fn, &gate));
        T_MPI(MPIX_Acc_Irecv(s, rp, MSG, MPI_DOUBLE, prev, 31, XW, &r[0]));
        T_MPI(MPIX_Acc_Wait(s, &r[0], MPI_STATUS_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_launch(s, check_fn, &cs));
        T_MPI(MPIX_Acc_Hoststream_launch(s2, fill_fn, &fs));
        T_MPI(MPIX_Acc_Isend(s2, sp, MSG, MPI_DOUBLE, next, 31, XW, &r[1]));
        T_MPI(MPIX_Acc_Wait(s2, &r[1], MPI_STATUS_IGNORE));
        /* the captures (the first turns XW to start order): a send on s2,
         * a receive on s */
        MPIX_Acc_hostgraph gs = NULL, gr = NULL;
        T_MPI(MPIX_Acc_Hoststream_begin_capture(s2));
        T_MPI(MPIX_Acc_Hoststream_launch(s2, fill_fn, &fd));
        T_MPI(MPIX_Acc_Isend(s2, sb, MSG, MPI_DOUBLE, next, 31, XW, &r[1]));
        T_MPI(MPIX_Acc_Wait(s2, &r[1], MPI_STATUS_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_end_capture(s2, &gs));
        T_MPI(MPIX_Acc_Hoststream_begin_capture(s));
        T_MPI(MPIX_Acc_Irecv(s, rb, MSG, MPI_DOUBLE, prev, 31, XW, &r[0]));
        T_MPI(MPIX_Acc_Wait(s, &r[0], MPI_STATUS_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_launch(s, check_fn, &cd));
        T_MPI(MPIX_Acc_Hoststream_end_capture(s, &gr));
        /* the launch's send goes (eager: it completes alone); its envelope
         * reaches the receiver while the plain receive is still held */
        T_MPI(MPIX_Acc_Hostgraph_launch(gs, s2));
        T_MPI(MPIX_Acc_Hoststream_synchronize(s2));
        T_MPI(MPI_Barrier(W));
        t_sleep_ms(T_SLOW(20.0));
        atomic_store(&gate.open, 1);
        T_MPI(MPIX_Acc_Hostgraph_launch(gr, s));
        T_MPI(MPIX_Acc_Hoststream_synchronize(s));
        t_check_async();
        T_CHECK(atomic_load(&cs.launch) == 1 && atomic_load(&cd.launch) == 1,
                "S: checked %ld plain and %ld launched receives of 1 and 1",
                atomic_load(&cs.launch), atomic_load(&cd.launch));
        no_graph_errors(gs, "S (send)");
        no_graph_errors(gr, "S (receive)");
        T_MPI(MPIX_Acc_Hostgraph_free(&gs));
        T_MPI(MPIX_Acc_Hostgraph_free(&gr));
        T_MPI(MPI_Comm_free(&XW));
        free(sp);
        free(rp);
    }

    /* ---- P: a plain send and a launch's on one channel, nothing between
     * them: they start in the order of their stream (api.md 3), also when
     * the progress thread sees the launch's operation before the plain
     * one's trigger ---- */
    t_phase("P: a plain send, then a launch's, unwaited, on one channel");
    /* Not with the counter protocol (CUDA graphs' mechanism): its poller
     * makes a launch's operations after their fire nodes ran, without
     * knowing how far the stream's own triggers were by then (design.md
     * 6d, "Start order") -- a known limit, not checked here */
    const char *proto = getenv("MPIX_ACC_GRAPH_PROTOCOL");
    if (proto && strcmp(proto, "counter") == 0) {
        if (t_rank == 0)
            printf("[hostgraph] P: not run with MPIX_ACC_GRAPH_PROTOCOL=counter (known limit)\n");
    } else {
        const int np = tsan ? 40 : 400;
        double *sp = calloc(MSG, sizeof(double)), *rp = calloc(MSG, sizeof(double));
        double *rq = calloc(MSG, sizeof(double));
        T_CHECK(sp && rp && rq, "malloc");
        MPI_Comm DW = dup_with_info(W, "mpix_acc_match", "dynamic", NULL, NULL);
        /* all on tag 41; the data says which: 41 the plain send, 42 the launch's */
        step_arg_t fp = {.buf = sp, .n = MSG, .rank = t_rank, .tag = 41};
        step_arg_t cp = {.buf = rp, .n = MSG, .rank = prev, .tag = 41};
        step_arg_t fl = {.buf = sb, .n = MSG, .rank = t_rank, .tag = 42};
        step_arg_t cl = {.buf = rq, .n = MSG, .rank = prev, .tag = 42};
        MPI_Request r[3];
        T_MPI(MPIX_Acc_Hoststream_begin_capture(s));
        T_MPI(MPIX_Acc_Hoststream_launch(s, fill_fn, &fl));
        T_MPI(MPIX_Acc_Isend(s, sb, MSG, MPI_DOUBLE, next, 41, DW, &r[0]));
        T_MPI(MPIX_Acc_Wait(s, &r[0], MPI_STATUS_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_end_capture(s, &g));
        for (int k = 0; k < np; k++) {
            /* the receives first, on s2: plain, in call order */
            T_MPI(MPIX_Acc_Irecv(s2, rp, MSG, MPI_DOUBLE, prev, 41, DW, &r[1]));
            T_MPI(MPIX_Acc_Irecv(s2, rq, MSG, MPI_DOUBLE, prev, 41, DW, &r[2]));
            T_MPI(MPIX_Acc_Waitall(s2, 2, &r[1], MPI_STATUSES_IGNORE));
            T_MPI(MPIX_Acc_Hoststream_launch(s2, check_fn, &cp));
            T_MPI(MPIX_Acc_Hoststream_launch(s2, check_fn, &cl));
            /* the plain send, then at once the launch's, on s */
            T_MPI(MPIX_Acc_Hoststream_launch(s, fill_fn, &fp));
            T_MPI(MPIX_Acc_Isend(s, sp, MSG, MPI_DOUBLE, next, 41, DW, &r[0]));
            T_MPI(MPIX_Acc_Hostgraph_launch(g, s));
            T_MPI(MPIX_Acc_Wait(s, &r[0], MPI_STATUS_IGNORE));
            if (k % 50 == 49) {
                T_MPI(MPIX_Acc_Hoststream_synchronize(s));
                T_MPI(MPIX_Acc_Hoststream_synchronize(s2));
                t_check_async();
            }
        }
        T_MPI(MPIX_Acc_Hoststream_synchronize(s));
        T_MPI(MPIX_Acc_Hoststream_synchronize(s2));
        t_check_async();
        T_CHECK(atomic_load(&cp.launch) == np && atomic_load(&cl.launch) == np,
                "P: checked %ld plain and %ld launched messages of %d", atomic_load(&cp.launch),
                atomic_load(&cl.launch), np);
        no_graph_errors(g, "P");
        T_MPI(MPIX_Acc_Hostgraph_free(&g));
        T_MPI(MPI_Comm_free(&DW));
        free(sp);
        free(rp);
        free(rq);
    }

    /* ---- O: two messages of a launch on one channel keep their order ---- */
    t_phase("O: two messages on one (peer, tag) in a launch");
    {
        const int no = tsan ? 40 : 400;
        double *sa = calloc(MSG, sizeof(double)), *sb2 = calloc(MSG, sizeof(double));
        double *ra = calloc(MSG, sizeof(double)), *rb2 = calloc(MSG, sizeof(double));
        T_CHECK(sa && sb2 && ra && rb2, "malloc");
        /* the data says which message it is (21: first, 22: second); both go
         * with tag 21. The receives are recorded back to back and the sends
         * with a pause between them, so that (counter protocol) a poller
         * sees the receives' fires together and the sends' apart: the
         * operations must still start in the order the nodes ran. */
        step_arg_t f1 = {.buf = sa, .n = MSG, .rank = t_rank, .tag = 21};
        step_arg_t f2 = {.buf = sb2, .n = MSG, .rank = t_rank, .tag = 22};
        step_arg_t c1 = {.buf = ra, .n = MSG, .rank = prev, .tag = 21};
        step_arg_t c2 = {.buf = rb2, .n = MSG, .rank = prev, .tag = 22};
        MPI_Request r[4];
        T_MPI(MPIX_Acc_Hoststream_begin_capture(s));
        T_MPI(MPIX_Acc_Hoststream_launch(s, fill_fn, &f1));
        T_MPI(MPIX_Acc_Hoststream_launch(s, fill_fn, &f2));
        T_MPI(MPIX_Acc_Irecv(s, ra, MSG, MPI_DOUBLE, prev, 21, W, &r[0]));
        T_MPI(MPIX_Acc_Irecv(s, rb2, MSG, MPI_DOUBLE, prev, 21, W, &r[1]));
        T_MPI(MPIX_Acc_Isend(s, sa, MSG, MPI_DOUBLE, next, 21, W, &r[2]));
        T_MPI(MPIX_Acc_Hoststream_launch(s, pause_fn, NULL));
        T_MPI(MPIX_Acc_Isend(s, sb2, MSG, MPI_DOUBLE, next, 21, W, &r[3]));
        T_MPI(MPIX_Acc_Waitall(s, 4, r, MPI_STATUSES_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_launch(s, check_fn, &c1));
        T_MPI(MPIX_Acc_Hoststream_launch(s, check_fn, &c2));
        T_MPI(MPIX_Acc_Hoststream_end_capture(s, &g));
        launch_every(g, s, no, 100);
        T_CHECK(atomic_load(&c1.launch) == no && atomic_load(&c2.launch) == no,
                "O: checked %ld and %ld launches of %d", atomic_load(&c1.launch),
                atomic_load(&c2.launch), no);
        no_graph_errors(g, "O");
        T_MPI(MPIX_Acc_Hostgraph_free(&g));
        free(sa);
        free(sb2);
        free(ra);
        free(rb2);
    }

    /* ---- D: a request freed in the capture: its sends go unwaited ---- */
    t_phase("D: a freed captured request");
    {
        /* an unwaited send's buffer must stay valid until it is known
         * complete (synchronize does not wait for it): static, and the
         * barrier below (every rank received every message) */
        static int one;
        int got[20];
        one = t_rank + 100;
        MPI_Request r;
        T_MPI(MPIX_Acc_Hoststream_begin_capture(s));
        T_MPI(MPIX_Acc_Isend(s, &one, 1, MPI_INT, next, 10, W, &r));
        T_MPI(MPI_Request_free(&r));
        T_MPI(MPIX_Acc_Hoststream_end_capture(s, &g));
        for (int k = 0; k < 20; k++)
            T_MPI(MPIX_Acc_Hostgraph_launch(g, s));
        MPI_Request rr[20];
        for (int k = 0; k < 20; k++)
            T_MPI(MPIX_Acc_Irecv(s2, &got[k], 1, MPI_INT, prev, 10, W, &rr[k]));
        T_MPI(MPIX_Acc_Waitall(s2, 20, rr, MPI_STATUSES_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_synchronize(s2));
        T_MPI(MPIX_Acc_Hoststream_synchronize(s));
        for (int k = 0; k < 20; k++)
            T_CHECK(got[k] == prev + 100, "D: message %d: %d expected %d", k, got[k], prev + 100);
        T_MPI(MPI_Barrier(W));
        T_MPI(MPIX_Acc_Hostgraph_free(&g));
    }

    /* ---- F: a stream communicator's ordinary calls, captured ---- */
    t_phase("F: a stream communicator captured");
    {
        MPIX_Acc_stream cs;
        MPI_Comm sc = t_stream_comm(&cs);
        step_arg_t ff = {.buf = sb, .n = MSG, .rank = t_rank, .tag = 13};
        MPI_Status fst[2];
        step_arg_t cf = {.buf = rb,
                         .n = MSG,
                         .rank = prev,
                         .tag = 13,
                         .st = &fst[0],
                         .st_src = prev,
                         .st_tag = 13};
        MPI_Request r[2];
        T_MPI(MPIX_Acc_Hoststream_begin_capture(cs));
        T_MPI(MPIX_Acc_Hoststream_launch(cs, fill_fn, &ff));
        T_MPI(MPI_Irecv(rb, MSG, MPI_DOUBLE, prev, 13, sc, &r[0]));
        T_MPI(MPI_Isend(sb, MSG, MPI_DOUBLE, next, 13, sc, &r[1]));
        T_MPI(MPI_Waitall(2, r, fst));
        T_MPI(MPIX_Acc_Hoststream_launch(cs, check_fn, &cf));
        T_MPI(MPIX_Acc_Hoststream_end_capture(cs, &g));
        launch_n(g, cs, 100);
        T_CHECK(atomic_load(&cf.launch) == 100, "F: checked %ld launches", atomic_load(&cf.launch));
        no_graph_errors(g, "F");
        T_MPI(MPIX_Acc_Hostgraph_free(&g));
        t_stream_comm_free(&sc, &cs);
    }

    /* ---- G: the collectives captured ---- */
    t_phase("G: collectives captured");
    {
        const long ng = tsan ? 60 : 1000;
        coll_arg_t ca = {.root = 1 % t_size}, pa = {.root = 0};
        ca.ag = calloc((size_t)t_size * CN, sizeof(long));
        ca.as = calloc((size_t)t_size * CN, sizeof(long));
        ca.ar2 = calloc((size_t)t_size * CN, sizeof(long));
        pa.ag = calloc((size_t)t_size * CN, sizeof(long));
        T_CHECK(ca.ag && ca.as && ca.ar2 && pa.ag, "malloc");
        T_MPI(MPIX_Acc_Hoststream_begin_capture(s));
        T_MPI(MPIX_Acc_Hoststream_launch(s, coll_fill, &ca));
        T_MPI(MPIX_Acc_Allreduce(s, ca.sb, ca.ar, CN, MPI_LONG, MPI_SUM, W));
        T_MPI(MPIX_Acc_Bcast(s, ca.bc, CN, MPI_LONG, ca.root, W));
        T_MPI(MPIX_Acc_Allgather(s, ca.sb, CN, MPI_LONG, ca.ag, CN, MPI_LONG, W));
        T_MPI(MPIX_Acc_Reduce(s, ca.sb, ca.rd, CN, MPI_LONG, MPI_SUM, 0, W));
        T_MPI(MPIX_Acc_Alltoall(s, ca.as, CN, MPI_LONG, ca.ar2, CN, MPI_LONG, W));
        T_MPI(MPIX_Acc_Barrier(s, W));
        T_MPI(MPIX_Acc_Hoststream_launch(s, coll_check, &ca));
        T_MPI(MPIX_Acc_Hoststream_end_capture(s, &g));
        for (long k = 0; k < ng; k++) {
            T_MPI(MPIX_Acc_Hostgraph_launch(g, s));
            if (k % 10 == 9) { /* plain collectives between the launches */
                T_MPI(MPIX_Acc_Hoststream_launch(s, coll_fill, &pa));
                T_MPI(MPIX_Acc_Allreduce(s, pa.sb, pa.ar, CN, MPI_LONG, MPI_SUM, W));
                T_MPI(MPIX_Acc_Bcast(s, pa.bc, CN, MPI_LONG, pa.root, W));
                T_MPI(MPIX_Acc_Allgather(s, pa.sb, CN, MPI_LONG, pa.ag, CN, MPI_LONG, W));
                T_MPI(MPIX_Acc_Hoststream_launch(s, coll_check, &pa));
            }
            if (k % 100 == 99) {
                T_MPI(MPIX_Acc_Hoststream_synchronize(s));
                t_check_async();
            }
        }
        T_MPI(MPIX_Acc_Hoststream_synchronize(s));
        t_check_async();
        T_CHECK(atomic_load(&ca.check_k) == ng && atomic_load(&pa.check_k) == ng / 10,
                "G: checked %ld launches and %ld plain collectives", atomic_load(&ca.check_k),
                atomic_load(&pa.check_k));
        no_graph_errors(g, "G");
        T_MPI(MPIX_Acc_Hostgraph_free(&g));

        /* a stream communicator's MPI_Allreduce, captured */
        MPIX_Acc_stream cs;
        MPI_Comm sc = t_stream_comm(&cs);
        coll_arg_t sa = {.root = 0};
        sa.ag = ca.ag;
        T_MPI(MPIX_Acc_Hoststream_begin_capture(cs));
        T_MPI(MPIX_Acc_Hoststream_launch(cs, coll_fill, &sa));
        T_MPI(MPI_Allreduce(sa.sb, sa.ar, CN, MPI_LONG, MPI_SUM, sc));
        T_MPI(MPI_Bcast(sa.bc, CN, MPI_LONG, sa.root, sc));
        T_MPI(MPI_Allgather(sa.sb, CN, MPI_LONG, sa.ag, CN, MPI_LONG, sc));
        T_MPI(MPIX_Acc_Hoststream_launch(cs, coll_check, &sa));
        T_MPI(MPIX_Acc_Hoststream_end_capture(cs, &g));
        launch_n(g, cs, 100);
        T_CHECK(atomic_load(&sa.check_k) == 100, "G: stream communicator: checked %ld launches",
                atomic_load(&sa.check_k));
        no_graph_errors(g, "G (stream communicator)");
        T_MPI(MPIX_Acc_Hostgraph_free(&g));

        /* the nonblocking forms captured: the stream communicator's
         * MPI_Iallreduce, MPI_Ibcast and MPI_Iallgather completed by one
         * MPI_Waitall (a stream wait), and MPIX_Acc_Iallreduce completed by
         * MPIX_Acc_Wait -- their requests complete in the capture stream's
         * order */
        t_phase("G: nonblocking collectives captured");
        coll_arg_t na = {.root = 1 % t_size};
        na.ag = ca.ag;
        long nsum[CN], nin[CN];
        MPI_Request nr[3], r;
        MPI_Status nst[3];
        T_MPI(MPIX_Acc_Hoststream_begin_capture(cs));
        T_MPI(MPIX_Acc_Hoststream_launch(cs, coll_fill, &na));
        T_MPI(MPI_Iallreduce(na.sb, na.ar, CN, MPI_LONG, MPI_SUM, sc, &nr[0]));
        T_MPI(MPI_Ibcast(na.bc, CN, MPI_LONG, na.root, sc, &nr[1]));
        T_MPI(MPI_Iallgather(na.sb, CN, MPI_LONG, na.ag, CN, MPI_LONG, sc, &nr[2]));
        T_MPI(MPI_Waitall(3, nr, nst));
        T_CHECK(nr[0] == MPI_REQUEST_NULL && nr[1] == MPI_REQUEST_NULL && nr[2] == MPI_REQUEST_NULL,
                "G: a captured MPI_Waitall left requests of nonblocking collectives");
        T_MPI(MPIX_Acc_Hoststream_launch(cs, coll_check, &na));
        for (int i = 0; i < CN; i++)
            nin[i] = t_rank + i;
        T_MPI(MPIX_Acc_Iallreduce(cs, nin, nsum, CN, MPI_LONG, MPI_SUM, W, &r));
        T_MPI(MPIX_Acc_Wait(cs, &r, MPI_STATUS_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_end_capture(cs, &g));
        launch_n(g, cs, 100);
        T_CHECK(atomic_load(&na.check_k) == 100, "G: nonblocking: checked %ld launches",
                atomic_load(&na.check_k));
        for (int i = 0; i < CN; i++)
            T_CHECK(nsum[i] == (long)t_size * (t_size - 1) / 2 + (long)t_size * i,
                    "G: MPIX_Acc_Iallreduce element %d: %ld", i, nsum[i]);
        no_graph_errors(g, "G (nonblocking collectives)");
        T_MPI(MPIX_Acc_Hostgraph_free(&g));
        t_stream_comm_free(&sc, &cs);
        free(ca.ag);
        free(ca.as);
        free(ca.ar2);
        free(pa.ag);
    }

    /* ---- V: a non-contiguous datatype captured ---- */
    t_phase("V: a vector datatype captured (stream communicator)");
    {
        MPIX_Acc_stream cs;
        MPI_Comm sc = t_stream_comm(&cs);
        MPI_Datatype vt, v2;
        T_MPI(MPI_Type_vector(VB, 2, VSTRIDE, MPI_DOUBLE, &vt));
        T_MPI(MPI_Type_commit(&vt));
        T_MPI(MPI_Type_dup(vt, &v2));
        vector_run(cs, sc, v2, vt, prev, next, 20, tsan ? 50 : 500, &v2, 0);
        t_phase("V: MPI_Sendrecv of the vector type captured");
        vector_run(cs, sc, vt, vt, prev, next, 23, tsan ? 20 : 200, NULL, 1);
        t_phase("V: persistent requests of the vector type started in a capture");
        vector_run(cs, sc, vt, vt, prev, next, 24, tsan ? 20 : 200, NULL, 2);
        t_phase("V: the line (MPI_PROC_NULL ends)");
        vector_run(cs, sc, vt, vt, t_rank == 0 ? MPI_PROC_NULL : prev,
                   t_rank == t_size - 1 ? MPI_PROC_NULL : next, 21, tsan ? 20 : 100, NULL, 0);
        t_phase("V: an unwaited non-contiguous request");
        double x[VCOUNT * VEXT];
        MPI_Request r;
        MPIX_Acc_hostgraph g2 = NULL;
        T_MPI(MPIX_Acc_Hoststream_begin_capture(cs));
        T_MPI(MPI_Isend(x, VCOUNT, vt, next, 22, sc, &r));
        T_MPI(MPI_Request_free(&r));
        expect_class(MPIX_Acc_Hoststream_end_capture(cs, &g2), MPI_ERR_REQUEST,
                     "end_capture with an unwaited non-contiguous send");
        T_CHECK(g2 == NULL, "a failed end_capture left a graph");
        T_MPI(MPI_Type_free(&vt));
        t_stream_comm_free(&sc, &cs);
    }

    /* ---- L: a line (the ring cut open): MPI_PROC_NULL at its ends ---- */
    exchange_phase(s, sb, rb, t_rank == 0 ? MPI_PROC_NULL : prev,
                   t_rank == t_size - 1 ? MPI_PROC_NULL : next, 14, tsan ? 30 : 1000, 100,
                   "L: capture a line with MPI_PROC_NULL ends", "L: launch the line");

    /* ---- E: errors ---- */
    t_phase("E: errors");
    {
        int x = 0;
        MPI_Request r;
        /* a host wait on a captured request: an error at once, not a hang */
        T_MPI(MPIX_Acc_Hoststream_begin_capture(s));
        T_MPI(MPIX_Acc_Irecv(s, &x, 1, MPI_INT, prev, 11, W, &r));
        expect_class(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_ERR_REQUEST,
                     "MPI_Wait on a captured request");
        T_CHECK(r == MPI_REQUEST_NULL, "MPI_Wait on a captured request left the handle");
        int flag = 0;
        T_MPI(MPIX_Acc_Irecv(s, &x, 1, MPI_INT, prev, 11, W, &r));
        expect_class(MPI_Test(&r, &flag, MPI_STATUS_IGNORE), MPI_ERR_REQUEST,
                     "MPI_Test on a captured request");
        T_CHECK(r == MPI_REQUEST_NULL, "MPI_Test on a captured request left the handle");
        T_MPI(MPIX_Acc_Irecv(s, &x, 1, MPI_INT, prev, 11, W, &r));
        expect_class(MPI_Waitall(1, &r, MPI_STATUSES_IGNORE), MPI_ERR_UNSUPPORTED_OPERATION,
                     "MPI_Waitall on a captured request");
        T_CHECK(r == MPI_REQUEST_NULL, "MPI_Waitall on a captured request left the handle");
        expect_class(MPIX_Acc_Hoststream_synchronize(s), MPI_ERR_ARG,
                     "synchronize of a capturing stream");
        expect_class(MPIX_Acc_Hoststream_begin_capture(s), MPI_ERR_ARG, "a second begin_capture");
        T_MPI(MPIX_Acc_Hoststream_end_capture(s, &g)); /* the receive goes unwaited */
        T_MPI(MPIX_Acc_Hostgraph_free(&g));            /* never launched */

        /* a request left active at the end: no graph */
        T_MPI(MPIX_Acc_Hoststream_begin_capture(s));
        T_MPI(MPIX_Acc_Isend(s, &x, 1, MPI_INT, next, 12, W, &r));
        g = (MPIX_Acc_hostgraph)&x;
        expect_class(MPIX_Acc_Hoststream_end_capture(s, &g), MPI_ERR_REQUEST,
                     "end_capture with an active captured request");
        T_CHECK(g == NULL, "a failed end_capture left a graph");
        T_MPI(MPI_Request_free(&r));

        /* a captured nonblocking collective's request waited for on the
         * host: MPI_ERR_REQUEST, the request freed, the collective stays
         * in the graph (each launch runs it) */
        MPI_Comm sc;
        T_MPI(MPI_Comm_dup(W, &sc));
        T_MPI(MPI_Comm_set_errhandler(sc, MPI_ERRORS_RETURN));
        T_MPI(MPIX_Acc_Hoststream_begin_capture(s));
        int in = 1, out = 0;
        T_MPI(MPIX_Acc_Iallreduce(s, &in, &out, 1, MPI_INT, MPI_SUM, sc, &r));
        expect_class(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_ERR_REQUEST,
                     "a host wait on a captured Iallreduce");
        T_CHECK(r == MPI_REQUEST_NULL, "a host wait on a captured Iallreduce left its request");
        T_MPI(MPIX_Acc_Hoststream_end_capture(s, &g));
        T_CHECK(out == 0, "a captured Iallreduce ran at the call (out %d)", out);
        T_MPI(MPIX_Acc_Hostgraph_launch(g, s));
        T_MPI(MPIX_Acc_Hoststream_synchronize(s));
        T_CHECK(out == t_size, "the graph's Iallreduce: %d, expected %d", out, t_size);
        no_graph_errors(g, "E (Iallreduce)");
        T_MPI(MPIX_Acc_Hostgraph_free(&g));
        out = 0;
        T_MPI(MPI_Comm_free(&sc));
        /* ... and so does a stream communicator's collective that would run
         * as the MPI library's call (MPI_BAND: not a stream-ordered op) */
        MPIX_Acc_stream cs;
        sc = t_stream_comm(&cs);
        T_MPI(MPI_Comm_set_errhandler(sc, MPI_ERRORS_RETURN));
        T_MPI(MPIX_Acc_Hoststream_begin_capture(cs));
        expect_class(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_BAND, sc),
                     MPI_ERR_UNSUPPORTED_OPERATION, "an MPI_BAND Allreduce on a capturing stream");
        expect_class(MPIX_Acc_Hoststream_end_capture(cs, &g), MPI_ERR_UNSUPPORTED_OPERATION,
                     "end_capture of a broken capture (MPI_BAND)");
        T_CHECK(out == 0, "the MPI_BAND Allreduce ran while capturing (out %d)", out);
        t_stream_comm_free(&sc, &cs);

        /* freeing a graph with launches in flight: refused, the graph stays */
        t_gate_t gate;
        t_gate_init(&gate);
        T_MPI(MPIX_Acc_Hoststream_begin_capture(s));
        T_MPI(MPIX_Acc_Hoststream_launch(s, t_gate_fn, &gate));
        T_MPI(MPIX_Acc_Hoststream_end_capture(s, &g));
        T_MPI(MPIX_Acc_Hostgraph_launch(g, s));
        MPIX_Acc_hostgraph g0 = g;
        int rc = MPIX_Acc_Hostgraph_free(&g);
        T_CHECK(rc != MPI_SUCCESS && g == g0, "freeing a graph in flight: rc %d, handle %p", rc,
                (void *)g);
        atomic_store(&gate.open, 1);
        T_MPI(MPIX_Acc_Hoststream_synchronize(s));
        T_MPI(MPIX_Acc_Hostgraph_free(&g));

        /* bad handles */
        expect_class(MPIX_Acc_Hostgraph_launch((MPIX_Acc_hostgraph)&x, s), MPI_ERR_ARG,
                     "launch of a pointer that is no graph");
        expect_class(MPIX_Acc_Hoststream_end_capture(s, &g), MPI_ERR_ARG,
                     "end_capture of a stream not capturing");
        expect_class(MPIX_Acc_Hoststream_begin_capture((MPIX_Acc_stream)&x), MPI_ERR_ARG,
                     "begin_capture of a pointer that is no host stream");
    }
    /* the unwaited receive of E's first capture was never launched: nothing
     * to drain; every rank is done */
    T_MPI(MPI_Barrier(W));
    T_MPI(MPIX_Acc_Hoststream_free(&s));
    T_MPI(MPIX_Acc_Hoststream_free(&s2));
    free(sb);
    free(rb);
    return t_finish();
}
