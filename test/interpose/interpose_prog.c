/*
 * interpose_prog.c - an UNMODIFIED MPI program (plain MPI only, no mpix-acc
 * header or call) that exercises point-to-point, requests, collectives,
 * communicator management, info, attributes, datatypes and error classes,
 * validates what it can, and prints a deterministic digest per section.
 *
 * test/interpose/compare.sh runs it plain (not linked with libmpixacc),
 * relinked (-lmpixacc before the MPI library) and preloaded
 * (LD_PRELOAD=libmpixacc.so) and requires identical digests: the library
 * must not change the behaviour of a program that does not opt in.
 *
 * stdout (rank 0): "section <name> <hex>" lines and "DIGEST <hex>".
 * stderr: "interpose_prog: mpixacc symbols present: yes|no" (rank 0), used
 * by compare.sh to make sure the relinked/preloaded runs really have the
 * library in the process. Exit status != 0 when a self-check fails.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* GCC >= 11 warns about MPI_STATUSES_IGNORE for an `MPI_Status x[]`
 * parameter of MPICH's own prototypes: a false positive. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

static int rank, size;
static uint64_t h; /* running FNV-1a digest of this rank for the current section */
static int failures;

static void mix(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
}
static void mixi(long v) { mix(&v, sizeof v); }
static void mixs(const char *s) { mix(s, strlen(s) + 1); }

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "interpose_prog rank %d FAIL %s:%d: ", rank, __FILE__, __LINE__);      \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)
#define OK(call)                                                                                   \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        CHECK(rc_ == MPI_SUCCESS, "%s returned %d", #call, rc_);                                   \
    } while (0)

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* Combine every rank's section digest at rank 0 and print it. */
static uint64_t total = 0xcbf29ce484222325ull;
static void section_end(const char *name)
{
    uint64_t *all = rank == 0 ? malloc(sizeof(uint64_t) * (size_t)size) : NULL;
    MPI_Gather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        uint64_t s = 0xcbf29ce484222325ull;
        for (int i = 0; i < size; i++)
            for (int k = 0; k < 8; k++) {
                s ^= (all[i] >> (8 * k)) & 0xff;
                s *= 0x100000001b3ull;
            }
        printf("section %-12s %016llx\n", name, (unsigned long long)s);
        total ^= s;
        total *= 0x100000001b3ull;
        free(all);
    }
    h = 0xcbf29ce484222325ull;
}

static void fill(unsigned char *b, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)((i * 131 + (size_t)seed * 7) ^ (i >> 8));
}

static void p2p(void)
{
    int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
    MPI_Status st;
    const size_t sizes[] = {0, 1, 100, 8192, 8193, 100000, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        unsigned char *s = malloc(n + 1), *r = malloc(n + 1);
        fill(s, n, rank + (int)i);
        memset(r, 0, n + 1);
        if (rank % 2 == 0) {
            OK(MPI_Send(s, (int)n, MPI_BYTE, next, (int)i, MPI_COMM_WORLD));
            OK(MPI_Recv(r, (int)n, MPI_BYTE, prev, (int)i, MPI_COMM_WORLD, &st));
        } else {
            OK(MPI_Recv(r, (int)n, MPI_BYTE, prev, (int)i, MPI_COMM_WORLD, &st));
            OK(MPI_Send(s, (int)n, MPI_BYTE, next, (int)i, MPI_COMM_WORLD));
        }
        unsigned char *e = malloc(n + 1);
        fill(e, n, prev + (int)i);
        CHECK(memcmp(e, r, n) == 0, "ring %zu B: wrong data", n);
        int c;
        MPI_Get_count(&st, MPI_BYTE, &c);
        CHECK(c == (int)n && st.MPI_SOURCE == prev && st.MPI_TAG == (int)i, "ring status");
        mix(r, n);
        mixi(c);
        mixi(st.MPI_SOURCE);
        mixi(st.MPI_TAG);
        /* nonblocking + Sendrecv + Sendrecv_replace */
        MPI_Request rq[2];
        memset(r, 0, n + 1);
        OK(MPI_Irecv(r, (int)n, MPI_BYTE, prev, 100, MPI_COMM_WORLD, &rq[0]));
        OK(MPI_Isend(s, (int)n, MPI_BYTE, next, 100, MPI_COMM_WORLD, &rq[1]));
        OK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        CHECK(memcmp(e, r, n) == 0, "Isend/Irecv %zu B: wrong data", n);
        mix(r, n);
        memset(r, 0, n + 1);
        OK(MPI_Sendrecv(s, (int)n, MPI_BYTE, next, 101, r, (int)n, MPI_BYTE, prev, 101,
                        MPI_COMM_WORLD, &st));
        CHECK(memcmp(e, r, n) == 0, "Sendrecv %zu B", n);
        memcpy(r, s, n);
        OK(MPI_Sendrecv_replace(r, (int)n, MPI_BYTE, next, 102, prev, 102, MPI_COMM_WORLD, &st));
        CHECK(memcmp(e, r, n) == 0, "Sendrecv_replace %zu B", n);
        mix(r, n);
        free(s);
        free(r);
        free(e);
    }
    /* synchronous send, probe, typed data, large tag */
    int tag_ub = 0, flag = 0;
    int *tub;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tub, &flag));
    CHECK(flag, "MPI_TAG_UB missing");
    tag_ub = flag ? *tub : 32767;
    mixi(tag_ub);
    int bigtag = tag_ub > (1 << 24) + 5 ? (1 << 24) + 5 : tag_ub;
    double dv[10], dr[10];
    for (int i = 0; i < 10; i++)
        dv[i] = rank * 10.0 + i * 0.25;
    if (rank % 2 == 0) {
        OK(MPI_Ssend(dv, 10, MPI_DOUBLE, next, bigtag, MPI_COMM_WORLD));
        OK(MPI_Probe(prev, bigtag, MPI_COMM_WORLD, &st));
    } else {
        OK(MPI_Probe(prev, bigtag, MPI_COMM_WORLD, &st));
    }
    int c;
    MPI_Get_count(&st, MPI_DOUBLE, &c);
    CHECK(c == 10 && st.MPI_TAG == bigtag, "Probe count %d tag %d", c, st.MPI_TAG);
    OK(MPI_Recv(dr, 10, MPI_DOUBLE, prev, bigtag, MPI_COMM_WORLD, &st));
    if (rank % 2 == 1)
        OK(MPI_Ssend(dv, 10, MPI_DOUBLE, next, bigtag, MPI_COMM_WORLD));
    for (int i = 0; i < 10; i++)
        CHECK(dr[i] == prev * 10.0 + i * 0.25, "Ssend data");
    mix(dr, sizeof dr);
    mixi(c);
    /* ANY_SOURCE/ANY_TAG gather at rank 0 (order-independent digest) */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        long *got = malloc(sizeof(long) * (size_t)size);
        got[0] = 0;
        for (int i = 1; i < size; i++) {
            long v;
            OK(MPI_Recv(&v, 1, MPI_LONG, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            CHECK(v == st.MPI_SOURCE * 1000L + st.MPI_TAG, "ANY_SOURCE data/status mismatch");
            got[i] = v;
        }
        qsort(got, (size_t)size, sizeof(long), cmp_long);
        mix(got, sizeof(long) * (size_t)size);
        free(got);
    } else {
        long v = rank * 1000L + 7 + rank;
        OK(MPI_Send(&v, 1, MPI_LONG, 0, 7 + rank, MPI_COMM_WORLD));
    }
    /* nothing else may be in flight to rank 0 while it receives with ANY_TAG */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    /* PROC_NULL */
    OK(MPI_Recv(dr, 10, MPI_DOUBLE, MPI_PROC_NULL, 5, MPI_COMM_WORLD, &st));
    MPI_Get_count(&st, MPI_DOUBLE, &c);
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && c == 0,
          "PROC_NULL status");
    mixi(st.MPI_SOURCE);
    mixi(st.MPI_TAG);
    mixi(c);
    /* derived datatypes: vector and struct */
    MPI_Datatype vec;
    OK(MPI_Type_vector(5, 2, 4, MPI_INT, &vec));
    OK(MPI_Type_commit(&vec));
    int vs[20], vr[20];
    for (int i = 0; i < 20; i++) {
        vs[i] = rank * 100 + i;
        vr[i] = -1;
    }
    OK(MPI_Sendrecv(vs, 1, vec, next, 200, vr, 1, vec, prev, 200, MPI_COMM_WORLD, &st));
    for (int i = 0; i < 20; i++) {
        int want = (i % 4 < 2) ? prev * 100 + i : -1;
        CHECK(vr[i] == want, "vector type element %d = %d want %d", i, vr[i], want);
    }
    mix(vr, sizeof vr);
    OK(MPI_Type_free(&vec));
}

static void requests(void)
{
    int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
    MPI_Status st;
    enum { N = 6 };
    int sv[N], rv[N];
    MPI_Request rq[2 * N];
    for (int i = 0; i < N; i++) {
        sv[i] = rank * 10 + i;
        rv[i] = -1;
        OK(MPI_Irecv(&rv[i], 1, MPI_INT, prev, 300 + i, MPI_COMM_WORLD, &rq[i]));
    }
    for (int i = 0; i < N; i++)
        OK(MPI_Isend(&sv[i], 1, MPI_INT, next, 300 + N - 1 - i, MPI_COMM_WORLD, &rq[N + i]));
    /* Waitany over everything; digest the sorted set of indices */
    long seen[2 * N];
    for (int k = 0; k < 2 * N; k++) {
        int idx;
        OK(MPI_Waitany(2 * N, rq, &idx, &st));
        seen[k] = idx;
    }
    int idx;
    OK(MPI_Waitany(2 * N, rq, &idx, &st));
    CHECK(idx == MPI_UNDEFINED, "Waitany on all-null: %d", idx);
    qsort(seen, 2 * N, sizeof(long), cmp_long);
    mix(seen, sizeof seen);
    for (int i = 0; i < N; i++)
        CHECK(rv[i] == prev * 10 + (N - 1 - i), "Waitany data %d", i);
    mix(rv, sizeof rv);
    /* Waitsome / Testall / Testany / Request_get_status */
    for (int i = 0; i < N; i++) {
        rv[i] = -1;
        OK(MPI_Irecv(&rv[i], 1, MPI_INT, prev, 400 + i, MPI_COMM_WORLD, &rq[i]));
        OK(MPI_Isend(&sv[i], 1, MPI_INT, next, 400 + i, MPI_COMM_WORLD, &rq[N + i]));
    }
    int flag = 0;
    OK(MPI_Request_get_status(rq[0], &flag, &st));
    int done = 0, outc, idxs[2 * N];
    MPI_Status sts[2 * N];
    while (done < 2 * N) {
        OK(MPI_Waitsome(2 * N, rq, &outc, idxs, sts));
        CHECK(outc != MPI_UNDEFINED, "Waitsome undefined");
        if (outc == MPI_UNDEFINED)
            break;
        done += outc;
    }
    OK(MPI_Testall(2 * N, rq, &flag, sts));
    CHECK(flag, "Testall on nulls");
    mix(rv, sizeof rv);
    /* persistent requests */
    int ps = rank, pr = -1;
    MPI_Request p[2];
    OK(MPI_Recv_init(&pr, 1, MPI_INT, prev, 500, MPI_COMM_WORLD, &p[0]));
    OK(MPI_Send_init(&ps, 1, MPI_INT, next, 500, MPI_COMM_WORLD, &p[1]));
    for (int it = 0; it < 3; it++) {
        ps = rank * 100 + it;
        OK(MPI_Startall(2, p));
        OK(MPI_Waitall(2, p, MPI_STATUSES_IGNORE));
        CHECK(pr == prev * 100 + it, "persistent round %d got %d", it, pr);
        mixi(pr);
    }
    OK(MPI_Request_free(&p[0]));
    OK(MPI_Request_free(&p[1]));
    /* cancel an unmatched receive */
    int never = 0;
    MPI_Request cr;
    OK(MPI_Irecv(&never, 1, MPI_INT, prev, 999, MPI_COMM_WORLD, &cr));
    OK(MPI_Cancel(&cr));
    OK(MPI_Wait(&cr, &st));
    OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag, "cancel");
    mixi(flag);
    /* Request_free on a send */
    MPI_Request fr;
    int fv = rank + 5, frv = -1;
    OK(MPI_Isend(&fv, 1, MPI_INT, next, 600, MPI_COMM_WORLD, &fr));
    OK(MPI_Request_free(&fr));
    OK(MPI_Recv(&frv, 1, MPI_INT, prev, 600, MPI_COMM_WORLD, &st));
    CHECK(frv == prev + 5, "freed send data");
    mixi(frv);
    /* nonblocking collectives waited with MPI_Wait / MPI_Test */
    int b = rank == 0 ? 1234 : 0, sum = 0, one = rank + 1;
    MPI_Request nb[2];
    OK(MPI_Ibcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD, &nb[0]));
    OK(MPI_Wait(&nb[0], &st));
    OK(MPI_Iallreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &nb[1]));
    flag = 0;
    while (!flag)
        OK(MPI_Test(&nb[1], &flag, &st));
    CHECK(b == 1234 && sum == size * (size + 1) / 2, "nonblocking collectives");
    mixi(b);
    mixi(sum);
}

static void collectives(void)
{
    int v = rank + 1, r = 0;
    OK(MPI_Allreduce(&v, &r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    mixi(r);
    OK(MPI_Reduce(&v, &r, 1, MPI_INT, MPI_MAX, size - 1, MPI_COMM_WORLD));
    if (rank == size - 1)
        mixi(r);
    double d = rank == 0 ? 3.5 : 0;
    OK(MPI_Bcast(&d, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    mix(&d, sizeof d);
    int *all = malloc(sizeof(int) * (size_t)size * 4), *a2 = malloc(sizeof(int) * (size_t)size * 4);
    OK(MPI_Allgather(&v, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD));
    mix(all, sizeof(int) * (size_t)size);
    OK(MPI_Gather(&v, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD));
    if (rank == 0)
        mix(all, sizeof(int) * (size_t)size);
    for (int i = 0; i < size * 2; i++)
        all[i] = rank * 100 + i;
    OK(MPI_Alltoall(all, 2, MPI_INT, a2, 2, MPI_INT, MPI_COMM_WORLD));
    mix(a2, sizeof(int) * (size_t)size * 2);
    int x = 0;
    OK(MPI_Scatter(all, 1, MPI_INT, &x, 1, MPI_INT, 1 % size, MPI_COMM_WORLD));
    mixi(x);
    OK(MPI_Scan(&v, &r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    mixi(r);
    OK(MPI_Exscan(&v, &r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    if (rank > 0)
        mixi(r);
    for (int i = 0; i < size; i++)
        all[i] = rank + i;
    OK(MPI_Reduce_scatter_block(all, &r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    mixi(r);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    free(all);
    free(a2);
}

static void comms(void)
{
    MPI_Comm d, s, di, cg;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    int res;
    OK(MPI_Comm_compare(d, MPI_COMM_WORLD, &res));
    mixi(res);
    OK(MPI_Comm_split(d, rank % 2, size - rank, &s));
    int sr, ss;
    MPI_Comm_rank(s, &sr);
    MPI_Comm_size(s, &ss);
    mixi(sr);
    mixi(ss);
    int v = rank, sum = 0;
    OK(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, s));
    mixi(sum);
    if (ss > 1) {
        int nx = (sr + 1) % ss, pv = (sr - 1 + ss) % ss, got = -1;
        MPI_Status st;
        OK(MPI_Sendrecv(&sr, 1, MPI_INT, nx, 1, &got, 1, MPI_INT, pv, 1, s, &st));
        CHECK(got == pv && st.MPI_SOURCE == pv, "split comm sendrecv");
        mixi(got);
        mixi(st.MPI_SOURCE);
    }
    /* info: set, get, dup_with_info */
    MPI_Info info, out;
    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "mpi_assert_no_any_tag", "false"));
    OK(MPI_Info_set(info, "interpose_test_hint", "42"));
    OK(MPI_Comm_set_info(d, info));
    OK(MPI_Comm_dup_with_info(d, info, &di));
    OK(MPI_Comm_get_info(di, &out));
    int nkeys = 0;
    OK(MPI_Info_get_nkeys(out, &nkeys));
    mixi(nkeys);
    for (int i = 0; i < nkeys; i++) {
        char key[MPI_MAX_INFO_KEY + 1], val[256];
        int len = sizeof val, flag = 0;
        OK(MPI_Info_get_nthkey(out, i, key));
        OK(MPI_Info_get_string(out, key, &len, val, &flag));
        mixs(key);
        mixs(flag ? val : "");
    }
    OK(MPI_Info_free(&out));
    OK(MPI_Info_free(&info));
    /* group-based creation */
    MPI_Group wg, eg;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    int evens[64], ne = 0;
    for (int i = 0; i < size; i += 2)
        evens[ne++] = i;
    OK(MPI_Group_incl(wg, ne, evens, &eg));
    OK(MPI_Comm_create(MPI_COMM_WORLD, eg, &cg));
    mixi(cg == MPI_COMM_NULL);
    if (cg != MPI_COMM_NULL) {
        int cs;
        MPI_Comm_size(cg, &cs);
        mixi(cs);
        OK(MPI_Barrier(cg));
        OK(MPI_Comm_free(&cg));
    }
    OK(MPI_Group_free(&eg));
    OK(MPI_Group_free(&wg));
    /* attributes */
    int kv, flag;
    long val = 77 + rank, *pv;
    OK(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &kv, NULL));
    OK(MPI_Comm_set_attr(d, kv, &val));
    MPI_Comm d2;
    OK(MPI_Comm_dup(d, &d2));
    OK(MPI_Comm_get_attr(d2, kv, &pv, &flag));
    CHECK(flag && *pv == 77 + rank, "attribute copy on dup");
    mixi(flag);
    OK(MPI_Comm_free(&d2));
    OK(MPI_Comm_free_keyval(&kv));
    /* error classes under MPI_ERRORS_RETURN */
    OK(MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN));
    int rc = MPI_Send(&val, 1, MPI_LONG, size + 3, 0, d), cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RANK, "bad rank class %d", cls);
    mixi(cls);
    rc = MPI_Send(&val, -1, MPI_LONG, 0, 0, d);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COUNT, "bad count class %d", cls);
    mixi(cls);
    rc = MPI_Send(&val, 1, MPI_LONG, 0, -5, d);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TAG, "bad tag class %d", cls);
    mixi(cls);
    OK(MPI_Comm_free(&di));
    OK(MPI_Comm_free(&s));
    OK(MPI_Comm_free(&d));
}

int main(int argc, char **argv)
{
    int provided = -1;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return 2;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0)
        fprintf(stderr, "interpose_prog: mpixacc symbols present: %s\n",
                dlsym(RTLD_DEFAULT, "MPIX_Acc_Isend") ? "yes" : "no");
    h = 0xcbf29ce484222325ull;
    mixi(provided >= MPI_THREAD_FUNNELED);
    section_end("init");
    p2p();
    section_end("p2p");
    requests();
    section_end("requests");
    collectives();
    section_end("collectives");
    comms();
    section_end("comms");
    int fsum = 0;
    MPI_Allreduce(&failures, &fsum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("DIGEST %016llx\n", (unsigned long long)total);
        printf("SELFCHECK %s\n", fsum == 0 ? "ok" : "FAILED");
        fflush(stdout);
    }
    MPI_Finalize();
    return fsum != 0;
}
