/*
 * derived_types.c - non-contiguous datatypes in stream-ordered operations on
 * host streams (issue 20 item 1): the bytes move packed, the pack runs in
 * the stream's order before the send, the unpack before the stream passes
 * the wait. 2-4 ranks, ring neighbours.
 *
 *   1. halo exchange of a 2-D grid (column halos as MPI_Type_vector) on a
 *      stream communicator with plain MPI_Irecv/MPI_Isend/MPI_Waitall, with
 *      MPIX_Acc_* on a communicator with the no-wildcard assertions (the
 *      stream-executed path), and with plain MPI on a plain communicator
 *      (the reference): the grids are bitwise equal. A function on the
 *      stream writes the column before the send (the packed bytes are
 *      those, not the ones at the call) and one after the wait reads the
 *      ghost column (unpacked before the stream went on).
 *   2. MPI_Sendrecv and MPI_Sendrecv_replace with the column type on the
 *      stream communicator (the latter behind a gate: nothing changes
 *      before the stream runs it); 2b: both on a stream communicator that
 *      asserts no wildcards (the stream-executed path), with a short
 *      message (one column into room for two).
 *   3. 3 elements of a struct (resized) and of a 3-D subarray: data and
 *      MPI_Get_count in elements of the type.
 *   4. host waits: MPI_Wait and MPI_Test polling on a derived receive.
 *   5. the type freed right after the calls, before the stream ran them.
 *   6. truncation: 3 elements into a receive of 2: MPI_ERR_TRUNCATE, nothing
 *      written past the two elements.
 *   7. bad input: an uncommitted type, a darray (no layout) and a count
 *      whose packed size passes INT_MAX give MPI errors of their class.
 *   8. persistent send and receive of a column on the stream communicator,
 *      the type freed after MPI_Send_init/MPI_Recv_init, 3 starts.
 *   9. receives unpacked behind their stream wait (the claim the CUDA path
 *      shares): a short message writes only its elements (the length the
 *      progress thread stored), and one whose message landed before the
 *      wait was enqueued is unpacked once, by the progress thread.
 */
#include "common.h"

#include <limits.h>
#include <stddef.h>
#include <string.h>

#define NX 20 /* rows */
#define NY 12 /* columns, two of them ghosts */

static int next, prev;

typedef struct {
    int i;
    double d[2];
    char c;
} rec_t;

static MPI_Datatype column_type(void)
{
    MPI_Datatype t;
    T_MPI(MPI_Type_vector(NX, 1, NY, MPI_DOUBLE, &t));
    T_MPI(MPI_Type_commit(&t));
    return t;
}

static void grid_init(double *g, int rank)
{
    for (int x = 0; x < NX; x++)
        for (int y = 0; y < NY; y++)
            g[x * NY + y] = (y == 0 || y == NY - 1) ? -1.0 : rank * 1000.0 + x * NY + y;
}

/* one halo exchange: interior column 1 to prev (lands in its ghost column
 * NY - 1), interior column NY - 2 to next (its ghost column 0) */
static void exchange_plain(MPI_Comm c, double *g, MPI_Datatype col)
{
    MPI_Request r[4];
    T_MPI(MPI_Irecv(&g[NY - 1], 1, col, next, 1, c, &r[0]));
    T_MPI(MPI_Irecv(&g[0], 1, col, prev, 2, c, &r[1]));
    T_MPI(MPI_Isend(&g[1], 1, col, prev, 1, c, &r[2]));
    T_MPI(MPI_Isend(&g[NY - 2], 1, col, next, 2, c, &r[3]));
    T_MPI(MPI_Waitall(4, r, MPI_STATUSES_IGNORE));
}

typedef struct {
    double *g;
    double v;
} colset_t;

/* on the stream: write interior columns 1 and NY - 2 */
static void colset_fn(void *arg)
{
    colset_t *cs = arg;
    for (int x = 0; x < NX; x++) {
        cs->g[x * NY + 1] = cs->v + x;
        cs->g[x * NY + NY - 2] = -cs->v - x;
    }
}

typedef struct {
    const double *g;
    double ghost[2][NX];
} colget_t;

/* on the stream: copy the ghost columns */
static void colget_fn(void *arg)
{
    colget_t *cg = arg;
    for (int x = 0; x < NX; x++) {
        cg->ghost[0][x] = cg->g[x * NY];
        cg->ghost[1][x] = cg->g[x * NY + NY - 1];
    }
}

static void halo(void)
{
    t_phase("1. halo exchange with column vectors");
    MPI_Datatype col = column_type();
    static double ref[NX * NY], gs[NX * NY], gx[NX * NY];
    grid_init(ref, t_rank);
    grid_init(gs, t_rank);
    grid_init(gx, t_rank);
    MPI_Comm plain;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &plain));
    MPIX_Acc_stream s, sx_stream;
    MPI_Comm sc = t_stream_comm(&s);
    MPI_Comm sxc = t_comm_dup(1); /* mpi_assert_no_any_source / _tag: the SX path */
    T_MPI(MPIX_Acc_Hoststream_create(&sx_stream));
    for (int round = 0; round < 3; round++) {
        double v = 100.0 * (round + 1) + t_rank;
        /* the reference: the same values written by the host, plain MPI */
        colset_t cref = {ref, v};
        colset_fn(&cref);
        exchange_plain(plain, ref, col);
        /* stream communicator: the values are written on the stream, then
         * the unmodified exchange code runs; the ghosts are read there */
        colset_t cs = {gs, v};
        colget_t cg = {gs, {{0}}};
        t_gate_t gate; /* holds the stream until every call was made */
        t_gate_init(&gate);
        T_MPI(MPIX_Acc_Hoststream_launch(s, t_gate_fn, &gate));
        T_MPI(MPIX_Acc_Hoststream_launch(s, colset_fn, &cs));
        exchange_plain(sc, gs, col);
        T_MPI(MPIX_Acc_Hoststream_launch(s, colget_fn, &cg));
        atomic_store(&gate.open, 1);
        T_MPI(MPIX_Acc_Hoststream_synchronize(s));
        /* explicit calls on the no-wildcard communicator */
        colset_t csx = {gx, v};
        colget_t cgx = {gx, {{0}}};
        t_gate_t gx_gate;
        t_gate_init(&gx_gate);
        T_MPI(MPIX_Acc_Hoststream_launch(sx_stream, t_gate_fn, &gx_gate));
        T_MPI(MPIX_Acc_Hoststream_launch(sx_stream, colset_fn, &csx));
        MPI_Request r[4];
        T_MPI(MPIX_Acc_Irecv(sx_stream, &gx[NY - 1], 1, col, next, 1, sxc, &r[0]));
        T_MPI(MPIX_Acc_Irecv(sx_stream, &gx[0], 1, col, prev, 2, sxc, &r[1]));
        T_MPI(MPIX_Acc_Isend(sx_stream, &gx[1], 1, col, prev, 1, sxc, &r[2]));
        T_MPI(MPIX_Acc_Isend(sx_stream, &gx[NY - 2], 1, col, next, 2, sxc, &r[3]));
        T_MPI(MPIX_Acc_Waitall(sx_stream, 4, r, MPI_STATUSES_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_launch(sx_stream, colget_fn, &cgx));
        atomic_store(&gx_gate.open, 1);
        T_MPI(MPIX_Acc_Hoststream_synchronize(sx_stream));
        T_CHECK(memcmp(ref, gs, sizeof(ref)) == 0, "round %d: stream communicator grid differs",
                round);
        T_CHECK(memcmp(ref, gx, sizeof(ref)) == 0, "round %d: MPIX_Acc_* (SX) grid differs", round);
        for (int x = 0; x < NX; x++) {
            T_CHECK(cg.ghost[0][x] == ref[x * NY] && cg.ghost[1][x] == ref[x * NY + NY - 1],
                    "round %d row %d: the stream read ghosts %g/%g after the wait, expected %g/%g",
                    round, x, cg.ghost[0][x], cg.ghost[1][x], ref[x * NY], ref[x * NY + NY - 1]);
            T_CHECK(cgx.ghost[0][x] == ref[x * NY] && cgx.ghost[1][x] == ref[x * NY + NY - 1],
                    "round %d row %d: the SX stream read ghosts %g/%g after the wait, expected "
                    "%g/%g",
                    round, x, cgx.ghost[0][x], cgx.ghost[1][x], ref[x * NY], ref[x * NY + NY - 1]);
            T_CHECK(gs[x * NY + NY - 1] == 100.0 * (round + 1) + next + x,
                    "round %d row %d: ghost %g, expected the value rank %d wrote on its stream",
                    round, x, gs[x * NY + NY - 1], next);
        }
    }

    t_phase("2. MPI_Sendrecv and _replace with column vectors on the stream communicator");
    grid_init(ref, t_rank);
    grid_init(gs, t_rank);
    T_MPI(MPI_Sendrecv(&ref[1], 1, col, prev, 5, &ref[NY - 1], 1, col, next, 5, plain,
                       MPI_STATUS_IGNORE));
    MPI_Status st;
    T_MPI(MPI_Sendrecv(&gs[1], 1, col, prev, 5, &gs[NY - 1], 1, col, next, 5, sc, &st));
    T_MPI(MPIX_Acc_Hoststream_synchronize(s));
    T_CHECK(memcmp(ref, gs, sizeof(ref)) == 0, "MPI_Sendrecv: grid differs from plain MPI's");
    int cnt = -1;
    T_MPI(MPI_Get_count(&st, col, &cnt));
    T_CHECK(cnt == 1 && st.MPI_SOURCE == next, "MPI_Sendrecv status: count %d source %d", cnt,
            st.MPI_SOURCE);
    /* MPI_Sendrecv_replace of a column (its own buffer: packed on the
     * stream before the receive may unpack into it), held by a gate */
    grid_init(ref, t_rank);
    grid_init(gs, t_rank);
    T_MPI(MPI_Sendrecv_replace(&ref[1], 1, col, next, 6, prev, 6, plain, MPI_STATUS_IGNORE));
    t_gate_t gate;
    t_gate_init(&gate);
    T_MPI(MPIX_Acc_Hoststream_launch(s, t_gate_fn, &gate));
    T_MPI(MPI_Sendrecv_replace(&gs[1], 1, col, next, 6, prev, 6, sc, &st));
    for (int x = 0; x < NX; x++)
        T_CHECK(gs[x * NY + 1] == t_rank * 1000.0 + x * NY + 1,
                "MPI_Sendrecv_replace: row %d changed before the stream ran", x);
    atomic_store(&gate.open, 1);
    T_MPI(MPIX_Acc_Hoststream_synchronize(s));
    T_CHECK(memcmp(ref, gs, sizeof(ref)) == 0,
            "MPI_Sendrecv_replace: grid differs from plain MPI's");
    T_MPI(MPI_Get_count(&st, col, &cnt));
    T_CHECK(cnt == 1 && st.MPI_SOURCE == prev, "MPI_Sendrecv_replace status: count %d source %d",
            cnt, st.MPI_SOURCE);

    T_MPI(MPI_Type_free(&col));
    T_MPI(MPI_Comm_free(&plain));
    T_MPI(MPI_Comm_free(&sxc));
    T_MPI(MPIX_Acc_Hoststream_free(&sx_stream));
    t_stream_comm_free(&sc, &s);
}

static MPI_Datatype rec_type(void)
{
    MPI_Datatype a, t;
    int bl[3] = {1, 2, 1};
    MPI_Aint d[3] = {offsetof(rec_t, i), offsetof(rec_t, d), offsetof(rec_t, c)};
    MPI_Datatype ty[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
    T_MPI(MPI_Type_create_struct(3, bl, d, ty, &a));
    T_MPI(MPI_Type_create_resized(a, 0, sizeof(rec_t), &t));
    T_MPI(MPI_Type_free(&a));
    T_MPI(MPI_Type_commit(&t));
    return t;
}

static MPI_Datatype block_type(void)
{
    MPI_Datatype t;
    int sizes[3] = {5, 6, 7}, sub[3] = {2, 3, 4}, starts[3] = {1, 2, 3};
    T_MPI(MPI_Type_create_subarray(3, sizes, sub, starts, MPI_ORDER_C, MPI_INT, &t));
    T_MPI(MPI_Type_commit(&t));
    return t;
}

static void rec_fill(rec_t *r, int n, int base)
{
    memset(r, 0, sizeof(*r) * (size_t)n); /* padding too: compared with memcmp */
    for (int k = 0; k < n; k++) {
        r[k].i = base + k;
        r[k].d[0] = base * 0.5 + k;
        r[k].d[1] = -base - k;
        r[k].c = (char)('a' + (base + k) % 26);
    }
}

static void structs_and_blocks(MPIX_Acc_stream s, MPI_Comm c)
{
    t_phase("3. struct and subarray elements");
    MPI_Datatype rt = rec_type(), bt = block_type();
    rec_t out[3], in[3], want[3];
    rec_fill(out, 3, t_rank * 10);
    rec_fill(want, 3, prev * 10);
    memset(in, 0, sizeof(in));
    static int bout[3][5 * 6 * 7], bin[3][5 * 6 * 7];
    for (int k = 0; k < 3 * 5 * 6 * 7; k++) {
        (&bout[0][0])[k] = t_rank * 100000 + k;
        (&bin[0][0])[k] = -1;
    }
    MPI_Request r[4];
    MPI_Status st[4];
    T_MPI(MPIX_Acc_Irecv(s, in, 3, rt, prev, 7, c, &r[0]));
    T_MPI(MPIX_Acc_Irecv(s, bin, 3, bt, prev, 8, c, &r[1]));
    T_MPI(MPIX_Acc_Isend(s, out, 3, rt, next, 7, c, &r[2]));
    T_MPI(MPIX_Acc_Isend(s, bout, 3, bt, next, 8, c, &r[3]));
    T_MPI(MPIX_Acc_Waitall(s, 4, r, st));
    T_MPI(MPIX_Acc_Hoststream_synchronize(s));
    for (int k = 0; k < 3; k++)
        T_CHECK(in[k].i == want[k].i && in[k].d[0] == want[k].d[0] && in[k].d[1] == want[k].d[1] &&
                    in[k].c == want[k].c,
                "struct %d: got {%d, %g, %g, %c}", k, in[k].i, in[k].d[0], in[k].d[1], in[k].c);
    /* the sub-block of each element came, the rest of the arrays stayed -1 */
    for (int e = 0; e < 3; e++)
        for (int x = 0; x < 5; x++)
            for (int y = 0; y < 6; y++)
                for (int z = 0; z < 7; z++) {
                    int k = (x * 6 + y) * 7 + z;
                    int inside = x >= 1 && x < 3 && y >= 2 && y < 5 && z >= 3 && z < 7;
                    int want_v = inside ? prev * 100000 + e * 210 + k : -1;
                    T_CHECK(bin[e][k] == want_v,
                            "subarray element %d [%d][%d][%d]: %d, expected %d", e, x, y, z,
                            bin[e][k], want_v);
                }
    int cnt = -1;
    T_MPI(MPI_Get_count(&st[0], rt, &cnt));
    T_CHECK(cnt == 3, "struct receive: MPI_Get_count %d, expected 3", cnt);
    T_MPI(MPI_Get_count(&st[1], bt, &cnt));
    T_CHECK(cnt == 3, "subarray receive: MPI_Get_count %d, expected 3", cnt);
    T_MPI(MPI_Type_free(&rt));
    T_MPI(MPI_Type_free(&bt));
}

static void host_waits(MPIX_Acc_stream s, MPI_Comm c)
{
    t_phase("4. host waits on derived receives");
    MPI_Datatype col = column_type();
    for (int mode = 0; mode < 2; mode++) {
        static double g[NX * NY];
        grid_init(g, t_rank);
        MPI_Request r[2];
        MPI_Status st;
        T_MPI(MPIX_Acc_Irecv(s, &g[0], 1, col, prev, 9, c, &r[0]));
        T_MPI(MPIX_Acc_Isend(s, &g[NY - 2], 1, col, next, 9, c, &r[1]));
        t_host_complete(&r[0], &st, mode, 20, "derived receive");
        T_MPI(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
        for (int x = 0; x < NX; x++)
            T_CHECK(g[x * NY] == prev * 1000.0 + x * NY + NY - 2,
                    "%s: ghost row %d = %g, expected %g", mode ? "MPI_Test" : "MPI_Wait", x,
                    g[x * NY], prev * 1000.0 + x * NY + NY - 2);
        int cnt = -1;
        T_MPI(MPI_Get_count(&st, col, &cnt));
        T_CHECK(cnt == 1, "host wait: MPI_Get_count %d", cnt);
    }
    T_MPI(MPI_Type_free(&col));
}

/* 9: a receive unpacked behind its stream wait (host streams take the
 * same claim as the CUDA path): a short message (fewer elements than the
 * receive's count) writes only those, read from the length the progress
 * thread stored; a receive whose message is there before the stream wait
 * is enqueued (unpacked by the progress thread instead); both exactly once */
typedef struct {
    double *g;
    double snap[NX * NY];
} snap_t;

static void snap_fn(void *arg)
{
    snap_t *sn = arg;
    memcpy(sn->snap, sn->g, sizeof(sn->snap));
}

static void behind_wait(MPIX_Acc_stream s, MPI_Comm c)
{
    t_phase("9. unpacks behind the stream wait: short messages, completed before the wait");
    MPI_Datatype half; /* two columns: 1 and NY - 2 */
    int bl[2] = {1, 1}, dis[2] = {1, NY - 2};
    MPI_Datatype row;
    T_MPI(MPI_Type_indexed(2, bl, dis, MPI_DOUBLE, &row));
    T_MPI(MPI_Type_create_resized(row, 0, (MPI_Aint)(NY * sizeof(double)), &half));
    T_MPI(MPI_Type_commit(&half));
    T_MPI(MPI_Type_free(&row));
    for (int late = 0; late < 2; late++) {
        static double g[NX * NY], h[NX * NY];
        static snap_t sn;
        grid_init(g, t_rank);
        for (int i = 0; i < NX * NY; i++)
            h[i] = -7.0;
        MPI_Request r[2];
        MPI_Status st[2];
        /* NX rows posted, NX - 3 sent: the last 3 rows stay -7 */
        T_MPI(MPIX_Acc_Irecv(s, h, NX, half, prev, 11, c, &r[0]));
        T_MPI(MPIX_Acc_Isend(s, g, NX - 3, half, next, 11, c, &r[1]));
        if (late) { /* let the message land before the wait is enqueued (not by a
                     * stream synchronize: a receive on a communicator without
                     * wildcards may complete only once waited for or tested) */
            double t0 = t_now();
            int flag = 0;
            while (!flag && t_now() - t0 < T_SLOW(20.0))
                T_MPI(MPI_Request_get_status(r[0], &flag, MPI_STATUS_IGNORE));
            T_CHECK(flag, "the receive did not complete before its wait");
        }
        T_MPI(MPIX_Acc_Waitall(s, 2, r, late ? MPI_STATUSES_IGNORE : st));
        sn.g = h;
        T_MPI(MPIX_Acc_Hoststream_launch(s, snap_fn, &sn)); /* after the unpack, in order */
        T_MPI(MPIX_Acc_Hoststream_synchronize(s));
        for (int x = 0; x < NX; x++)
            for (int y = 0; y < NY; y++) {
                double want = -7.0;
                if (x < NX - 3 && (y == 1 || y == NY - 2))
                    want = prev * 1000.0 + x * NY + y;
                T_CHECK(sn.snap[x * NY + y] == want, "%s: h[%d][%d] = %g, expected %g",
                        late ? "completed before its wait" : "short message", x, y,
                        sn.snap[x * NY + y], want);
            }
        if (!late) {
            int cnt = -1;
            T_MPI(MPI_Get_count(&st[0], half, &cnt));
            T_CHECK(cnt == NX - 3, "short message: MPI_Get_count %d, expected %d", cnt, NX - 3);
        }
    }
    T_MPI(MPI_Type_free(&half));
}

static void freed_type(MPIX_Acc_stream s, MPI_Comm c)
{
    t_phase("5. the type freed before the stream ran the operations");
    t_gate_t gate;
    t_gate_init(&gate);
    T_MPI(MPIX_Acc_Hoststream_launch(s, t_gate_fn, &gate));
    static double g[NX * NY];
    grid_init(g, t_rank);
    MPI_Datatype col = column_type();
    MPI_Request r[2];
    T_MPI(MPIX_Acc_Irecv(s, &g[NY - 1], 1, col, next, 11, c, &r[0]));
    T_MPI(MPIX_Acc_Isend(s, &g[1], 1, col, prev, 11, c, &r[1]));
    T_MPI(MPIX_Acc_Waitall(s, 2, r, MPI_STATUSES_IGNORE));
    T_MPI(MPI_Type_free(&col));
    atomic_store(&gate.open, 1);
    T_MPI(MPIX_Acc_Hoststream_synchronize(s));
    for (int x = 0; x < NX; x++)
        T_CHECK(g[x * NY + NY - 1] == next * 1000.0 + x * NY + 1, "row %d: ghost %g, expected %g",
                x, g[x * NY + NY - 1], next * 1000.0 + x * NY + 1);
}

static void truncation(MPIX_Acc_stream s, MPI_Comm c)
{
    t_phase("6. truncation");
    MPI_Datatype rt = rec_type();
    rec_t out[3], in[3];
    rec_fill(out, 3, t_rank * 10 + 1);
    memset(in, 0x5a, sizeof(in));
    MPI_Request r[2];
    MPI_Status st;
    T_MPI(MPIX_Acc_Irecv(s, in, 2, rt, prev, 12, c, &r[0]));
    T_MPI(MPIX_Acc_Isend(s, out, 3, rt, next, 12, c, &r[1]));
    int rc = MPI_Wait(&r[0], &st);
    T_MPI(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
    int cls = -1;
    MPI_Error_class(rc == MPI_SUCCESS ? st.MPI_ERROR : rc, &cls);
    T_CHECK(cls == MPI_ERR_TRUNCATE, "3 structs into 2: error class %d, expected %d", cls,
            MPI_ERR_TRUNCATE);
    /* what lands in the two elements is the path's choice (MPI: undefined
     * on truncation); never past them */
    const unsigned char *third = (const unsigned char *)&in[2];
    for (size_t b = 0; b < sizeof(rec_t); b++)
        T_CHECK(third[b] == 0x5a, "truncated receive wrote byte %zu of the third element", b);
    T_MPI(MPI_Type_free(&rt));
}

static void bad_input(MPIX_Acc_stream s, MPI_Comm c)
{
    t_phase("7. bad input");
    int buf[64];
    MPI_Request r;
    MPI_Datatype u;
    T_MPI(MPI_Type_vector(4, 1, 2, MPI_INT, &u)); /* not committed */
    int cls = -1, rc = MPIX_Acc_Isend(s, buf, 1, u, next, 13, c, &r);
    MPI_Error_class(rc, &cls);
    T_CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_TYPE, "uncommitted type: rc %d class %d", rc, cls);
    T_MPI(MPI_Type_free(&u));
    /* the first of two blocks of 64 ints: 32 ints in an extent of 64 */
    int gs[1] = {64}, distrib[1] = {MPI_DISTRIBUTE_BLOCK}, dargs[1] = {MPI_DISTRIBUTE_DFLT_DARG},
        ps[1] = {2};
    MPI_Datatype da;
    T_MPI(MPI_Type_create_darray(2, 0, 1, gs, distrib, dargs, ps, MPI_ORDER_C, MPI_INT, &da));
    T_MPI(MPI_Type_commit(&da));
    rc = MPIX_Acc_Irecv(s, buf, 1, da, prev, 13, c, &r);
    MPI_Error_class(rc, &cls);
    T_CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_TYPE, "darray: rc %d class %d", rc, cls);
    T_MPI(MPI_Type_free(&da));
    MPI_Datatype col = column_type(); /* NX doubles: 160 bytes packed */
    rc = MPIX_Acc_Isend(s, buf, INT_MAX / 100, col, next, 13, c, &r);
    MPI_Error_class(rc, &cls);
    T_CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_COUNT, "packed size past INT_MAX: rc %d class %d",
            rc, cls);
    T_MPI(MPI_Type_free(&col));
}

static void persistent(void)
{
    t_phase("8. persistent requests with a column type (freed after init)");
    MPIX_Acc_stream s;
    MPI_Comm sc = t_stream_comm(&s);
    static double g[NX * NY];
    grid_init(g, t_rank);
    MPI_Datatype col = column_type();
    MPI_Request pr[2];
    T_MPI(MPI_Recv_init(&g[NY - 1], 1, col, next, 14, sc, &pr[0]));
    T_MPI(MPI_Send_init(&g[1], 1, col, prev, 14, sc, &pr[1]));
    T_MPI(MPI_Type_free(&col));
    for (int round = 0; round < 3; round++) {
        colset_t cs = {g, 10.0 * round + t_rank};
        T_MPI(MPIX_Acc_Hoststream_launch(s, colset_fn, &cs));
        T_MPI(MPI_Startall(2, pr));
        T_MPI(MPI_Waitall(2, pr, MPI_STATUSES_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_synchronize(s));
        for (int x = 0; x < NX; x++)
            T_CHECK(g[x * NY + NY - 1] == 10.0 * round + next + x,
                    "persistent round %d row %d: ghost %g, expected %g", round, x,
                    g[x * NY + NY - 1], 10.0 * round + next + x);
    }
    T_MPI(MPI_Request_free(&pr[0]));
    T_MPI(MPI_Request_free(&pr[1]));
    t_stream_comm_free(&sc, &s);
}

/* 2b. MPI_Sendrecv and _replace of column vectors on a stream
 * communicator whose opt-in also asserts no wildcard receives (the
 * stream-executed path between processes of a node): the receive step
 * writes the received length for the unpack behind it and the stream goes
 * on without the host (MPIX_ACC_STATS counts no stream wait for the host
 * then: test/mpi/stats.sh runs this phase alone, MPIXACC_TEST_MODE=sx-packed).
 * A short message (one column into room for two) leaves the second column
 * as it was. */
static void sx_packed(int rounds)
{
    t_phase("2b. MPI_Sendrecv and _replace of column vectors on an SX stream communicator");
    MPI_Datatype col = column_type();
    static double ref[NX * NY], gs[NX * NY];
    MPI_Comm plain, xsc;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &plain));
    MPIX_Acc_stream sx_stream;
    T_MPI(MPIX_Acc_Hoststream_create(&sx_stream));
    xsc = t_stream_comm_dup(sx_stream, 1);
    MPI_Status st;
    int cnt = -1;
    for (int round = 0; round < rounds; round++) {
        /* with a status (the host fills it), then without (the stream
         * alone), both short: one column into room for two */
        for (int with_status = 1; with_status >= 0; with_status--) {
            grid_init(ref, t_rank + round);
            grid_init(gs, t_rank + round);
            T_MPI(MPI_Sendrecv(&ref[1], 1, col, prev, 7, &ref[NY - 2], 2, col, next, 7, plain,
                               MPI_STATUS_IGNORE));
            T_MPI(MPI_Sendrecv(&gs[1], 1, col, prev, 7, &gs[NY - 2], 2, col, next, 7, xsc,
                               with_status ? &st : MPI_STATUS_IGNORE));
            T_MPI(MPIX_Acc_Hoststream_synchronize(sx_stream));
            T_CHECK(memcmp(ref, gs, sizeof(ref)) == 0,
                    "MPI_Sendrecv on the SX stream communicator, round %d%s: grid differs from "
                    "plain MPI's",
                    round, with_status ? "" : " (no status)");
            if (with_status) {
                T_MPI(MPI_Get_count(&st, col, &cnt));
                T_CHECK(cnt == 1 && st.MPI_SOURCE == next,
                        "SX MPI_Sendrecv status: count %d source %d", cnt, st.MPI_SOURCE);
            }
        }
        grid_init(ref, t_rank + round);
        grid_init(gs, t_rank + round);
        T_MPI(MPI_Sendrecv_replace(&ref[1], 1, col, next, 8, prev, 8, plain, MPI_STATUS_IGNORE));
        T_MPI(MPI_Sendrecv_replace(&gs[1], 1, col, next, 8, prev, 8, xsc, MPI_STATUS_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_synchronize(sx_stream));
        T_CHECK(memcmp(ref, gs, sizeof(ref)) == 0,
                "MPI_Sendrecv_replace on the SX stream communicator, round %d: grid differs",
                round);
    }
    T_MPI(MPI_Comm_free(&xsc));
    T_MPI(MPI_Comm_free(&plain));
    T_MPI(MPI_Type_free(&col));
    T_MPI(MPIX_Acc_Hoststream_free(&sx_stream));
}

/* 2d. Columns too long for one LL message on the SX path (issue 20): a
 * 20000-row column is 160000 packed bytes -- a bulk message into the
 * receiver's device ring where MPIX_ACC_SX_DRING=on (its send step reads
 * the buffer packed by the pack step ahead of it, not a fused pack), else
 * UCX; the receive is above the fused unpack's bound (64 KiB). MPI_Send /
 * MPI_Recv and MPI_Sendrecv against plain MPI, and a short message (half
 * the column) with its count. */
static void long_columns(void)
{
    t_phase("2d. long columns on an SX stream communicator");
    enum { ROWS = 20000, W = 3 };
    MPI_Datatype col, half;
    T_MPI(MPI_Type_vector(ROWS, 1, W, MPI_DOUBLE, &col));
    T_MPI(MPI_Type_commit(&col));
    T_MPI(MPI_Type_vector(ROWS / 2, 1, W, MPI_DOUBLE, &half));
    T_MPI(MPI_Type_commit(&half));
    double *ref = malloc(sizeof(double) * ROWS * W), *gs = malloc(sizeof(double) * ROWS * W);
    MPIX_Acc_stream hs;
    T_MPI(MPIX_Acc_Hoststream_create(&hs));
    MPI_Comm plain, xsc;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &plain));
    xsc = t_stream_comm_dup(hs, 1);
    for (int round = 0; round < 3; round++) {
        MPI_Status st;
        for (int which = 0; which < 2; which++) {
            double *g = which ? gs : ref;
            MPI_Comm c = which ? xsc : plain;
            for (int i = 0; i < ROWS * W; i++)
                g[i] = t_rank * 1e6 + round * 1e5 + i;
            /* column 0 to the next rank's column 2 */
            T_MPI(MPI_Sendrecv(&g[0], 1, col, next, 20, &g[2], 1, col, prev, 20, c,
                               MPI_STATUS_IGNORE));
            /* column 1, half of it, to the previous rank's column 1 */
            if (t_rank % 2 == 0) {
                T_MPI(MPI_Send(&g[1], 1, half, prev, 21, c));
                T_MPI(MPI_Recv(&g[1], 1, col, next, 21, c, which ? &st : MPI_STATUS_IGNORE));
            } else {
                T_MPI(MPI_Recv(&g[1], 1, col, next, 21, c, which ? &st : MPI_STATUS_IGNORE));
                T_MPI(MPI_Send(&g[1], 1, half, prev, 21, c));
            }
        }
        T_MPI(MPIX_Acc_Hoststream_synchronize(hs));
        T_CHECK(memcmp(ref, gs, sizeof(double) * ROWS * W) == 0,
                "long columns, round %d: grid differs from plain MPI's", round);
        int cnt = -1;
        T_MPI(MPI_Get_elements(&st, MPI_DOUBLE, &cnt));
        T_CHECK(cnt == ROWS / 2, "long columns: half a column received, %d doubles counted", cnt);
    }
    T_MPI(MPI_Comm_free(&xsc));
    T_MPI(MPI_Comm_free(&plain));
    T_MPI(MPIX_Acc_Hoststream_free(&hs));
    T_MPI(MPI_Type_free(&col));
    T_MPI(MPI_Type_free(&half));
    free(ref);
    free(gs);
}

/* 2c. The textbook step on a non-periodic line (issue 20): the edge ranks'
 * MPI_Sendrecv have an MPI_PROC_NULL side, and a row exchange across a
 * dimension of one process has two. A PROC_NULL side makes nothing (no
 * request, no operation, nothing on the stream), its arguments are still
 * checked, and a PROC_NULL receive's status is MPI's. Results against the
 * plain MPI library's; test/mpi/stats.sh counts what the library made. */
static void proc_null_edges(int rounds)
{
    t_phase("2c. MPI_Sendrecv with MPI_PROC_NULL sides on an SX stream communicator");
    MPI_Datatype col = column_type();
    static double ref[NX * NY], gs[NX * NY];
    int west = t_rank > 0 ? t_rank - 1 : MPI_PROC_NULL;
    int east = t_rank < t_size - 1 ? t_rank + 1 : MPI_PROC_NULL;
    MPI_Comm plain, xsc;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &plain));
    MPIX_Acc_stream hs;
    T_MPI(MPIX_Acc_Hoststream_create(&hs));
    xsc = t_stream_comm_dup(hs, 1);
    for (int round = 0; round < rounds; round++) {
        MPI_Status st_e, st_w, st_row;
        memset(&st_e, 0x5a, sizeof(st_e));
        memset(&st_w, 0x5a, sizeof(st_w));
        memset(&st_row, 0x5a, sizeof(st_row));
        for (int which = 0; which < 2; which++) {
            double *g = which ? gs : ref;
            MPI_Comm c = which ? xsc : plain;
            grid_init(g, t_rank + round);
            /* east ghost column from the east, west ghost from the west */
            T_MPI(MPI_Sendrecv(&g[1], 1, col, west, 7, &g[NY - 1], 1, col, east, 7, c,
                               which && east == MPI_PROC_NULL ? &st_e : MPI_STATUS_IGNORE));
            T_MPI(MPI_Sendrecv(&g[NY - 2], 1, col, east, 9, &g[0], 1, col, west, 9, c,
                               which && west == MPI_PROC_NULL ? &st_w : MPI_STATUS_IGNORE));
            /* rows: one process across that dimension, both sides null */
            T_MPI(MPI_Sendrecv(&g[NY], NY, MPI_DOUBLE, MPI_PROC_NULL, 11, &g[0], NY, MPI_DOUBLE,
                               MPI_PROC_NULL, 11, c, which ? &st_row : MPI_STATUS_IGNORE));
        }
        T_MPI(MPIX_Acc_Hoststream_synchronize(hs));
        T_CHECK(memcmp(ref, gs, sizeof(ref)) == 0,
                "MPI_Sendrecv with MPI_PROC_NULL sides, round %d: grid differs from plain MPI's",
                round);
        MPI_Status *null_st[3] = {east == MPI_PROC_NULL ? &st_e : NULL,
                                  west == MPI_PROC_NULL ? &st_w : NULL, &st_row};
        for (int i = 0; i < 3; i++) {
            if (!null_st[i])
                continue;
            int cnt = -1;
            T_MPI(MPI_Get_count(null_st[i], MPI_DOUBLE, &cnt));
            T_CHECK(null_st[i]->MPI_SOURCE == MPI_PROC_NULL && null_st[i]->MPI_TAG == MPI_ANY_TAG &&
                        cnt == 0,
                    "MPI_Sendrecv's MPI_PROC_NULL receive %d: status source %d tag %d count %d "
                    "(MPI: MPI_PROC_NULL, MPI_ANY_TAG, 0)",
                    i, null_st[i]->MPI_SOURCE, null_st[i]->MPI_TAG, cnt);
        }
    }
    /* a PROC_NULL side's arguments are checked all the same */
    double x[4] = {0};
    int rc = MPI_Sendrecv(x, 1, MPI_DOUBLE, MPI_PROC_NULL, -3, x + 1, 1, MPI_DOUBLE, MPI_PROC_NULL,
                          0, xsc, MPI_STATUS_IGNORE);
    T_CHECK(t_err_class(rc) == MPI_ERR_TAG, "Sendrecv to MPI_PROC_NULL with tag -3: class %d",
            t_err_class(rc));
    rc = MPI_Sendrecv(x, 1, MPI_DOUBLE, MPI_PROC_NULL, 0, x + 1, -1, MPI_DOUBLE, MPI_PROC_NULL, 0,
                      xsc, MPI_STATUS_IGNORE);
    T_CHECK(t_err_class(rc) == MPI_ERR_COUNT, "Sendrecv from MPI_PROC_NULL with count -1: class %d",
            t_err_class(rc));
    rc = MPI_Sendrecv(x, 1, MPI_DOUBLE, MPI_PROC_NULL, 0, NULL, 1, MPI_DOUBLE, MPI_PROC_NULL, 0,
                      xsc, MPI_STATUS_IGNORE);
    T_CHECK(t_err_class(rc) == MPI_ERR_BUFFER, "Sendrecv from MPI_PROC_NULL into NULL: class %d",
            t_err_class(rc));
    T_MPI(MPIX_Acc_Hoststream_synchronize(hs));
    T_MPI(MPI_Comm_free(&xsc));
    T_MPI(MPI_Comm_free(&plain));
    T_MPI(MPI_Type_free(&col));
    T_MPI(MPIX_Acc_Hoststream_free(&hs));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "derived_types", 120);
    next = (t_rank + 1) % t_size;
    prev = (t_rank + t_size - 1) % t_size;
    const char *mode = getenv("MPIXACC_TEST_MODE");
    if (mode && strcmp(mode, "sx-packed") == 0) { /* test/mpi/stats.sh */
        sx_packed(20);
        return t_finish();
    }
    if (mode && strcmp(mode, "proc-null") == 0) { /* test/mpi/stats.sh */
        proc_null_edges(20);
        return t_finish();
    }
    halo();
    sx_packed(4);
    proc_null_edges(4);
    long_columns();
    MPIX_Acc_stream s;
    T_MPI(MPIX_Acc_Hoststream_create(&s));
    MPI_Comm c = t_comm_dup(1);
    T_MPI(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
    structs_and_blocks(s, c);
    host_waits(s, c);
    freed_type(s, c);
    truncation(s, c);
    bad_input(s, c);
    persistent();
    behind_wait(s, c);
    T_MPI(MPIX_Acc_Hoststream_synchronize(s));
    T_MPI(MPI_Comm_free(&c));
    T_MPI(MPIX_Acc_Hoststream_free(&s));
    return t_finish();
}
