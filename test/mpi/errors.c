/*
 * errors.c - every bad input of mpix_acc(3) ERRORS under MPI_ERRORS_RETURN gets its MPI
 * error class (checked with MPI_Error_class), MPI_Error_string gives the
 * words of that class and nothing unrelated, errors go through the
 * communicator's error handler exactly once (a garbage datatype handle too),
 * and nothing hangs or stays enqueued afterwards (a full exchange runs at the
 * end).
 *
 *   bad stream handle (random heap object, freed host stream) -> MPI_ERR_ARG
 *   negative count                                             -> MPI_ERR_COUNT
 *   bad rank                                                   -> MPI_ERR_RANK
 *   bad tag (negative, > 2^24-1, MPI_ANY_TAG on a send)        -> MPI_ERR_TAG
 *   NULL request pointer                                       -> MPI_ERR_REQUEST
 *   MPI_COMM_NULL, freed communicator                          -> MPI_ERR_COMM
 *   malformed info value                                       -> MPI_ERR_INFO_VALUE
 *   datatype without a layout (darray) / null / uncommitted   -> MPI_ERR_TYPE
 *   (vector & co. are stream-ordered on host streams: derived_types.c)
 *   garbage datatype handle                                    -> MPI_ERR_TYPE, handler once
 */
#include "common.h"

static int next, prev;
static int nchecks;

/* The words MPI_Error_string must begin with for each class: MPICH's text
 * for the class. A code MPICH decodes as an error-stack entry reads
 * "<class text>, error stack:" and then unrelated text ("unable to allocate
 * shared memory" for a negative count). */
static const char *class_words(int cls)
{
    switch (cls) {
    case MPI_ERR_ARG:
        return "Invalid argument";
    case MPI_ERR_COUNT:
        return "Invalid count";
    case MPI_ERR_RANK:
        return "Invalid rank";
    case MPI_ERR_TAG:
        return "Invalid tag";
    /* MPICH 4.0.2's class table gives 19 the text of MPIX_ERR_PROC_FAILED_PENDING
     * (the same number): "Request pending due to failure" */
    case MPI_ERR_REQUEST:
        return "Request";
    case MPI_ERR_COMM:
        return "Invalid communicator";
    case MPI_ERR_INFO_VALUE:
        return "Invalid MPI_Info value";
    case MPI_ERR_TYPE:
        return "Invalid datatype";
    default:
        return "";
    }
}

/* Check one bad call; failures are printed and counted, the test goes on so
 * that one run lists every wrong error class. */
static int nfailed;
static void expect_words(int rc, int cls, const char *what)
{
    char s[MPI_MAX_ERROR_STRING], cs[MPI_MAX_ERROR_STRING];
    int len = -1, clen = -1;
    s[0] = cs[0] = 0;
    T_MPI(MPI_Error_string(rc, s, &len));
    T_MPI(MPI_Error_string(cls, cs, &clen));
    const char *w = class_words(cls);
    if (strncmp(s, w, strlen(w)) != 0 || strstr(s, "error stack") || strcmp(s, cs) != 0) {
        fprintf(stderr,
                "[errors] rank %d FAIL: %s: MPI_Error_string says \"%s\", expected "
                "\"%s\" (the text of the class, nothing else)\n",
                t_rank, what, s, cs);
        nfailed++;
    }
}

static void expect_err(int rc, int cls, const char *what)
{
    nchecks++;
    int c = -1;
    if (rc == MPI_SUCCESS) {
        fprintf(stderr,
                "[errors] rank %d FAIL: %s: returned MPI_SUCCESS, expected error class %d\n",
                t_rank, what, cls);
        nfailed++;
        return;
    }
    T_MPI(MPI_Error_class(rc, &c));
    if (c != cls) {
        fprintf(stderr, "[errors] rank %d FAIL: %s: error class expected %d got %d (%s)\n", t_rank,
                what, cls, c, t_errstr(rc));
        nfailed++;
    }
    char s[MPI_MAX_ERROR_STRING];
    int len = -1;
    s[0] = 0;
    T_MPI(MPI_Error_string(rc, s, &len));
    if (!(len > 0 && s[0] != 0 && (int)strlen(s) == len)) {
        fprintf(stderr,
                "[errors] rank %d FAIL: %s: MPI_Error_string gave an empty or "
                "inconsistent message (len %d)\n",
                t_rank, what, len);
        nfailed++;
    }
    if (c == cls)
        expect_words(rc, cls, what);
}

static int eh_calls, eh_last;
static void count_eh(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    eh_calls++;
    eh_last = *code;
}

static void noop_fn(void *arg) { (void)arg; }

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "errors", 120);
    next = (t_rank + 1) % t_size;
    prev = (t_rank - 1 + t_size) % t_size;
    T_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    T_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    MPI_Comm W = MPI_COMM_WORLD;
    /* X carries every bad call: should one wrongly succeed, its stray
     * operation stays on X, which is never synchronized; S is used only for
     * the final exchange. */
    MPIX_Acc_stream S, X;
    T_MPI(MPIX_Acc_Hoststream_create(&S));
    T_MPI(MPIX_Acc_Hoststream_create(&X));
    int buf[64] = {0};
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Status st;
    char what[160];

    /* ---- bad stream handles ---- */
    t_phase("bad stream handle");
    void *junk = malloc(256);
    for (int i = 0; i < 256; i++)
        ((unsigned char *)junk)[i] = (unsigned char)(i * 37 + 11);
    MPIX_Acc_stream dead, tmp;
    T_MPI(MPIX_Acc_Hoststream_create(&tmp));
    dead = tmp;
    T_MPI(MPIX_Acc_Hoststream_free(&tmp));
    MPIX_Acc_stream bads[2] = {(MPIX_Acc_stream)junk, dead};
    const char *bname[2] = {"random heap object", "freed host stream"};
    for (int b = 0; b < 2; b++) {
        MPIX_Acc_stream x = bads[b];
        snprintf(what, sizeof what, "MPIX_Acc_Isend on a %s", bname[b]);
        expect_err(MPIX_Acc_Isend(x, buf, 1, MPI_INT, next, 1, W, &r), MPI_ERR_ARG, what);
        snprintf(what, sizeof what, "MPIX_Acc_Irecv on a %s", bname[b]);
        expect_err(MPIX_Acc_Irecv(x, buf, 1, MPI_INT, prev, 1, W, &r), MPI_ERR_ARG, what);
        snprintf(what, sizeof what, "MPIX_Acc_Send on a %s", bname[b]);
        expect_err(MPIX_Acc_Send(x, buf, 1, MPI_INT, next, 1, W), MPI_ERR_ARG, what);
        snprintf(what, sizeof what, "MPIX_Acc_Recv on a %s", bname[b]);
        expect_err(MPIX_Acc_Recv(x, buf, 1, MPI_INT, prev, 1, W, &st), MPI_ERR_ARG, what);
        /* a valid request waited on a bad stream */
        MPI_Request ok;
        T_MPI(MPIX_Acc_Irecv(X, buf, 1, MPI_INT, MPI_PROC_NULL, 1, W, &ok));
        MPI_Request keep = ok;
        snprintf(what, sizeof what, "MPIX_Acc_Wait on a %s", bname[b]);
        expect_err(MPIX_Acc_Wait(x, &ok, &st), MPI_ERR_ARG, what);
        snprintf(what, sizeof what, "MPIX_Acc_Waitall on a %s", bname[b]);
        ok = keep;
        expect_err(MPIX_Acc_Waitall(x, 1, &ok, MPI_STATUSES_IGNORE), MPI_ERR_ARG, what);
        ok = keep;
        T_MPI(MPI_Wait(&ok, &st)); /* the request is still valid and completes */
        snprintf(what, sizeof what, "MPIX_Acc_Hoststream_launch on a %s", bname[b]);
        expect_err(MPIX_Acc_Hoststream_launch(x, noop_fn, NULL), MPI_ERR_ARG, what);
        snprintf(what, sizeof what, "MPIX_Acc_Hoststream_synchronize on a %s", bname[b]);
        expect_err(MPIX_Acc_Hoststream_synchronize(x), MPI_ERR_ARG, what);
        snprintf(what, sizeof what, "MPIX_Acc_Hoststream_free on a %s", bname[b]);
        MPIX_Acc_stream y = x;
        expect_err(MPIX_Acc_Hoststream_free(&y), MPI_ERR_ARG, what);
        snprintf(what, sizeof what, "MPIX_Acc_Comm_set_stream with a %s", bname[b]);
        MPI_Comm c;
        T_MPI(MPI_Comm_dup(W, &c));
        expect_err(MPIX_Acc_Comm_set_stream(c, x), MPI_ERR_ARG, what);
        T_MPI(MPI_Comm_free(&c));
    }
    expect_err(MPIX_Acc_Hoststream_create(NULL), MPI_ERR_ARG, "MPIX_Acc_Hoststream_create(NULL)");
    expect_err(MPIX_Acc_Hoststream_launch(X, NULL, NULL), MPI_ERR_ARG,
               "MPIX_Acc_Hoststream_launch with a NULL function");

    /* ---- count ---- */
    t_phase("negative count");
    expect_err(MPIX_Acc_Isend(X, buf, -1, MPI_INT, next, 1, W, &r), MPI_ERR_COUNT,
               "Isend count -1");
    expect_err(MPIX_Acc_Irecv(X, buf, -3, MPI_INT, prev, 1, W, &r), MPI_ERR_COUNT,
               "Irecv count -3");
    expect_err(MPIX_Acc_Send(X, buf, -1, MPI_INT, next, 1, W), MPI_ERR_COUNT, "Send count -1");
    expect_err(MPIX_Acc_Recv(X, buf, -1, MPI_INT, prev, 1, W, &st), MPI_ERR_COUNT, "Recv count -1");
    {
        MPI_Request one = MPI_REQUEST_NULL;
        expect_err(MPIX_Acc_Waitall(X, -1, &one, MPI_STATUSES_IGNORE), MPI_ERR_COUNT,
                   "Waitall count -1");
    }

    /* ---- rank ---- */
    t_phase("bad rank");
    expect_err(MPIX_Acc_Isend(X, buf, 1, MPI_INT, t_size, 1, W, &r), MPI_ERR_RANK,
               "Isend dest = size");
    expect_err(MPIX_Acc_Isend(X, buf, 1, MPI_INT, -5, 1, W, &r), MPI_ERR_RANK, "Isend dest = -5");
    expect_err(MPIX_Acc_Isend(X, buf, 1, MPI_INT, MPI_ANY_SOURCE, 1, W, &r), MPI_ERR_RANK,
               "Isend dest = MPI_ANY_SOURCE");
    expect_err(MPIX_Acc_Irecv(X, buf, 1, MPI_INT, t_size + 3, 1, W, &r), MPI_ERR_RANK,
               "Irecv source = size+3");
    expect_err(MPIX_Acc_Irecv(X, buf, 1, MPI_INT, -7, 1, W, &r), MPI_ERR_RANK, "Irecv source = -7");
    expect_err(MPIX_Acc_Send(X, buf, 1, MPI_INT, t_size, 1, W), MPI_ERR_RANK, "Send dest = size");
    expect_err(MPIX_Acc_Recv(X, buf, 1, MPI_INT, t_size, 1, W, &st), MPI_ERR_RANK,
               "Recv source = size");

    /* ---- tag ---- */
    t_phase("bad tag");
    const int big = 1 << 24;
    expect_err(MPIX_Acc_Isend(X, buf, 1, MPI_INT, next, -7, W, &r), MPI_ERR_TAG, "Isend tag -7");
    expect_err(MPIX_Acc_Isend(X, buf, 1, MPI_INT, next, big, W, &r), MPI_ERR_TAG, "Isend tag 2^24");
    expect_err(MPIX_Acc_Isend(X, buf, 1, MPI_INT, next, 0x7fffffff, W, &r), MPI_ERR_TAG,
               "Isend tag INT_MAX");
    expect_err(MPIX_Acc_Isend(X, buf, 1, MPI_INT, next, MPI_ANY_TAG, W, &r), MPI_ERR_TAG,
               "Isend tag MPI_ANY_TAG");
    expect_err(MPIX_Acc_Irecv(X, buf, 1, MPI_INT, prev, -7, W, &r), MPI_ERR_TAG, "Irecv tag -7");
    expect_err(MPIX_Acc_Irecv(X, buf, 1, MPI_INT, prev, big, W, &r), MPI_ERR_TAG, "Irecv tag 2^24");
    expect_err(MPIX_Acc_Send(X, buf, 1, MPI_INT, next, big + 5, W), MPI_ERR_TAG, "Send tag 2^24+5");
    expect_err(MPIX_Acc_Recv(X, buf, 1, MPI_INT, prev, -2, W, &st), MPI_ERR_TAG, "Recv tag -2");

    /* ---- request ---- */
    t_phase("NULL request pointer");
    expect_err(MPIX_Acc_Isend(X, buf, 1, MPI_INT, next, 1, W, NULL), MPI_ERR_REQUEST,
               "Isend request NULL");
    expect_err(MPIX_Acc_Irecv(X, buf, 1, MPI_INT, prev, 1, W, NULL), MPI_ERR_REQUEST,
               "Irecv request NULL");
    expect_err(MPIX_Acc_Wait(X, NULL, &st), MPI_ERR_REQUEST, "Wait request NULL");

    /* ---- comm ---- */
    t_phase("bad communicator");
    expect_err(MPIX_Acc_Isend(X, buf, 1, MPI_INT, next, 1, MPI_COMM_NULL, &r), MPI_ERR_COMM,
               "Isend MPI_COMM_NULL");
    expect_err(MPIX_Acc_Irecv(X, buf, 1, MPI_INT, prev, 1, MPI_COMM_NULL, &r), MPI_ERR_COMM,
               "Irecv MPI_COMM_NULL");
    expect_err(MPIX_Acc_Send(X, buf, 1, MPI_INT, next, 1, MPI_COMM_NULL), MPI_ERR_COMM,
               "Send MPI_COMM_NULL");
    expect_err(MPIX_Acc_Recv(X, buf, 1, MPI_INT, prev, 1, MPI_COMM_NULL, &st), MPI_ERR_COMM,
               "Recv MPI_COMM_NULL");
    expect_err(MPIX_Acc_Comm_set_stream(MPI_COMM_NULL, X), MPI_ERR_COMM,
               "Comm_set_stream MPI_COMM_NULL");
    {
        MPI_Comm c, freed;
        T_MPI(MPI_Comm_dup(W, &c));
        freed = c;
        T_MPI(MPI_Comm_free(&c));
        expect_err(MPIX_Acc_Isend(X, buf, 1, MPI_INT, next, 1, freed, &r), MPI_ERR_COMM,
                   "Isend on a freed communicator");
        expect_err(MPIX_Acc_Irecv(X, buf, 1, MPI_INT, prev, 1, freed, &r), MPI_ERR_COMM,
                   "Irecv on a freed communicator");
    }

    /* ---- info values ---- */
    t_phase("malformed info values");
    MPI_Comm ic;
    T_MPI(MPI_Comm_dup(W, &ic));
    struct {
        const char *key, *val;
    } badinfo[] = {
        {MPIX_ACC_INFO_STREAM, "0xzz"},       {MPIX_ACC_INFO_STREAM, "stream please"},
        {MPIX_ACC_INFO_STREAM_ALIAS, "0xzz"}, {MPIX_ACC_INFO_RECV_POST, "sideways"},
        {MPIX_ACC_INFO_EAGER_LIMIT, "-5"},    {MPIX_ACC_INFO_EAGER_LIMIT, "lots"},
    };
    for (size_t i = 0; i < sizeof badinfo / sizeof badinfo[0]; i++) {
        MPI_Info info;
        T_MPI(MPI_Info_create(&info));
        T_MPI(MPI_Info_set(info, badinfo[i].key, badinfo[i].val));
        snprintf(what, sizeof what, "MPI_Comm_set_info %s=\"%s\"", badinfo[i].key, badinfo[i].val);
        expect_err(MPI_Comm_set_info(ic, info), MPI_ERR_INFO_VALUE, what);
        MPI_Comm nc = MPI_COMM_NULL;
        snprintf(what, sizeof what, "MPI_Comm_dup_with_info %s=\"%s\"", badinfo[i].key,
                 badinfo[i].val);
        int rc = MPI_Comm_dup_with_info(W, info, &nc);
        expect_err(rc, MPI_ERR_INFO_VALUE, what);
        if (nc != MPI_COMM_NULL)
            MPI_Comm_free(&nc);
        T_MPI(MPI_Info_free(&info));
    }
    /* a well-formed hex value that names no stream: ARG or INFO_VALUE, but an error */
    {
        MPI_Info info;
        T_MPI(MPI_Info_create(&info));
        char v[64];
        t_stream_str(junk, v, sizeof v);
        T_MPI(MPI_Info_set(info, MPIX_ACC_INFO_STREAM, v));
        int rc = MPI_Comm_set_info(ic, info), c = -1;
        MPI_Error_class(rc, &c);
        nchecks++;
        if (!(c == MPI_ERR_ARG || c == MPI_ERR_INFO_VALUE)) {
            fprintf(stderr,
                    "[errors] rank %d FAIL: MPI_Comm_set_info mpix_acc_stream=<address of "
                    "a heap object>: expected class MPI_ERR_ARG or MPI_ERR_INFO_VALUE, got %s\n",
                    t_rank, t_errstr(rc));
            nfailed++;
        } else {
            expect_words(rc, c, "MPI_Comm_set_info mpix_acc_stream=<address of a heap object>");
        }
        T_MPI(MPI_Info_free(&info));
    }
    /* the communicator is still a working plain communicator */
    {
        int sv = t_rank, rv = -1;
        T_MPI(MPI_Sendrecv(&sv, 1, MPI_INT, next, 3, &rv, 1, MPI_INT, prev, 3, ic, &st));
        T_CHECK(rv == prev,
                "plain Sendrecv on the communicator after bad set_info: got %d "
                "expected %d",
                rv, prev);
    }

    /* ---- datatypes ---- */
    t_phase("bad datatypes");
    MPI_Datatype vec, uncommitted;
    /* a darray (the first of two blocks of 8 ints): non-contiguous, and no
     * stream-ordered layout exists for its constructor */
    {
        int gs[1] = {8}, distrib[1] = {MPI_DISTRIBUTE_BLOCK}, dargs[1] = {MPI_DISTRIBUTE_DFLT_DARG},
            ps[1] = {2};
        T_MPI(MPI_Type_create_darray(2, 0, 1, gs, distrib, dargs, ps, MPI_ORDER_C, MPI_INT, &vec));
    }
    T_MPI(MPI_Type_commit(&vec));
    T_MPI(MPI_Type_contiguous(4, MPI_INT, &uncommitted));
    expect_err(MPIX_Acc_Isend(X, buf, 1, vec, next, 1, W, &r), MPI_ERR_TYPE, "Isend darray");
    expect_err(MPIX_Acc_Irecv(X, buf, 1, vec, prev, 1, W, &r), MPI_ERR_TYPE, "Irecv darray");
    expect_err(MPIX_Acc_Send(X, buf, 2, vec, next, 1, W), MPI_ERR_TYPE, "Send darray");
    expect_err(MPIX_Acc_Recv(X, buf, 2, vec, prev, 1, W, &st), MPI_ERR_TYPE, "Recv darray");
    expect_err(MPIX_Acc_Isend(X, buf, 1, MPI_DATATYPE_NULL, next, 1, W, &r), MPI_ERR_TYPE,
               "Isend MPI_DATATYPE_NULL");
    expect_err(MPIX_Acc_Isend(X, buf, 1, uncommitted, next, 1, W, &r), MPI_ERR_TYPE,
               "Isend uncommitted datatype");

    /* ---- the same checks through a stream communicator and a datatype attribute ---- */
    t_phase("errors on a stream communicator");
    MPI_Comm sc;
    T_MPI(MPI_Comm_dup(W, &sc));
    T_MPI(MPIX_Acc_Comm_set_stream(sc, X));
    expect_err(MPI_Isend(buf, 1, MPI_INT, next, big, sc, &r), MPI_ERR_TAG,
               "stream comm MPI_Isend tag 2^24");
    expect_err(MPI_Irecv(buf, 1, MPI_INT, prev, -9, sc, &r), MPI_ERR_TAG,
               "stream comm MPI_Irecv tag -9");
    expect_err(MPI_Isend(buf, -1, MPI_INT, next, 1, sc, &r), MPI_ERR_COUNT,
               "stream comm MPI_Isend count -1");
    expect_err(MPI_Send(buf, 1, MPI_INT, t_size, 1, sc), MPI_ERR_RANK,
               "stream comm MPI_Send dest = size");
    expect_err(MPI_Isend(buf, 1, vec, next, 1, sc, &r), MPI_ERR_TYPE,
               "stream comm MPI_Isend darray type");
    t_phase("errors with a datatype attribute");
    MPI_Datatype at;
    T_MPI(MPI_Type_dup(MPI_BYTE, &at));
    T_MPI(MPI_Type_set_attr(at, MPIX_ACC_STREAM_KEYVAL, (void *)X));
    expect_err(MPI_Isend(buf, 4, at, next, big, W, &r), MPI_ERR_TAG,
               "attribute type MPI_Isend tag 2^24");
    expect_err(MPI_Irecv(buf, 4, at, t_size, 1, W, &r), MPI_ERR_RANK,
               "attribute type MPI_Irecv source = size");

    /* ---- the error goes through the communicator's error handler ---- */
    t_phase("user error handler");
    MPI_Comm ec;
    MPI_Errhandler eh;
    T_MPI(MPI_Comm_dup(W, &ec));
    T_MPI(MPI_Comm_create_errhandler(count_eh, &eh));
    T_MPI(MPI_Comm_set_errhandler(ec, eh));
    eh_calls = 0;
    int rc = MPIX_Acc_Isend(X, buf, 1, MPI_INT, next, -7, ec, &r);
    T_CHECK(eh_calls == 1,
            "MPIX_Acc_Isend with a bad tag called the communicator's error handler "
            "%d times, expected once",
            eh_calls);
    int c1 = -1, c2 = -1;
    MPI_Error_class(eh_last, &c1);
    MPI_Error_class(rc, &c2);
    T_CHECK(c1 == MPI_ERR_TAG, "error handler got class %d expected MPI_ERR_TAG", c1);
    T_CHECK(c2 == MPI_ERR_TAG, "return code class %d expected MPI_ERR_TAG", c2);
    eh_calls = 0;
    rc = MPIX_Acc_Irecv(X, buf, -1, MPI_INT, prev, 1, ec, &r);
    T_CHECK(eh_calls == 1, "MPIX_Acc_Irecv with count -1 called the error handler %d times",
            eh_calls);
    MPI_Error_class(eh_last, &c1);
    T_CHECK(c1 == MPI_ERR_COUNT, "error handler got class %d expected MPI_ERR_COUNT", c1);
    /* A garbage datatype handle: the handler runs once, not once for the
     * MPI library's check (MPI_COMM_WORLD's handler) and again for the
     * library's error. Every communicator counts into eh_calls here. */
    {
        MPI_Datatype garbage = (MPI_Datatype)0x12345678;
        T_MPI(MPI_Comm_set_errhandler(W, eh));
        T_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, eh));
        T_MPI(MPI_Comm_set_errhandler(sc, eh));
        struct {
            const char *what;
            int rc, calls;
        } g[4];
        eh_calls = 0;
        g[0].what = "MPIX_Acc_Isend with a garbage datatype";
        g[0].rc = MPIX_Acc_Isend(X, buf, 1, garbage, next, 1, ec, &r);
        g[0].calls = eh_calls;
        eh_calls = 0;
        g[1].what = "MPIX_Acc_Irecv with a garbage datatype";
        g[1].rc = MPIX_Acc_Irecv(X, buf, 1, garbage, prev, 1, ec, &r);
        g[1].calls = eh_calls;
        eh_calls = 0;
        g[2].what = "stream comm MPI_Isend with a garbage datatype";
        g[2].rc = MPI_Isend(buf, 1, garbage, next, 1, sc, &r);
        g[2].calls = eh_calls;
        eh_calls = 0; /* a datatype with a stream exists: plain calls look for its attribute */
        g[3].what = "plain MPI_Irecv with a garbage datatype";
        g[3].rc = MPI_Irecv(buf, 1, garbage, prev, 1, ec, &r);
        g[3].calls = eh_calls;
        T_MPI(MPI_Comm_set_errhandler(W, MPI_ERRORS_RETURN));
        T_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
        T_MPI(MPI_Comm_set_errhandler(sc, MPI_ERRORS_RETURN));
        for (int i = 0; i < 4; i++) {
            nchecks++;
            if (g[i].calls != 1) {
                fprintf(stderr,
                        "[errors] rank %d FAIL: %s ran the error handler %d times, "
                        "expected once\n",
                        t_rank, g[i].what, g[i].calls);
                nfailed++;
            }
            if (i < 3) {
                expect_err(g[i].rc, MPI_ERR_TYPE, g[i].what);
            } else { /* the MPI library's own error: its own error stack */
                int c = -1;
                MPI_Error_class(g[i].rc, &c);
                T_CHECK(c == MPI_ERR_TYPE, "%s: %s, expected class MPI_ERR_TYPE", g[i].what,
                        t_errstr(g[i].rc));
            }
        }
    }
    (void)rc;

    /* ---- nothing hangs, nothing stray was enqueued: a full exchange ---- */
    t_phase("exchange after all errors");
    {
        int hi = (1 << 24) - 1; /* the largest valid tag */
        int sv[2] = {t_rank, t_rank + 1000}, rv[2] = {-1, -1};
        MPI_Request rq[4];
        MPI_Status sts[4];
        T_MPI(MPIX_Acc_Irecv(S, &rv[0], 1, MPI_INT, prev, hi, W, &rq[0]));
        T_MPI(MPIX_Acc_Irecv(S, &rv[1], 1, MPI_INT, prev, 0, W, &rq[1]));
        T_MPI(MPIX_Acc_Isend(S, &sv[0], 1, MPI_INT, next, hi, W, &rq[2]));
        T_MPI(MPIX_Acc_Isend(S, &sv[1], 1, MPI_INT, next, 0, W, &rq[3]));
        T_MPI(MPIX_Acc_Waitall(S, 4, rq, sts));
        double t0 = t_now();
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        T_CHECK(t_now() - t0 < T_SLOW(20), "synchronize took %.1f s", t_now() - t0);
        T_CHECK(rv[0] == prev && rv[1] == prev + 1000,
                "exchange after errors got %d/%d expected "
                "%d/%d (a stray operation matched?)",
                rv[0], rv[1], prev, prev + 1000);
        t_expect_status(&sts[0], prev, hi, 1, MPI_INT, "tag 2^24-1");
        /* a new stream comm works too */
        MPI_Comm sc2;
        T_MPI(MPI_Comm_dup(W, &sc2));
        T_MPI(MPIX_Acc_Comm_set_stream(sc2, S));
        int a = -1, b = t_rank + 5;
        T_MPI(MPI_Sendrecv(&b, 1, MPI_INT, next, 4, &a, 1, MPI_INT, prev, 4, sc2, &st));
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        T_CHECK(a == prev + 5, "stream comm Sendrecv after errors got %d expected %d", a, prev + 5);
        T_MPI(MPI_Comm_free(&sc2));
    }
    T_CHECK(nfailed == 0, "%d of %d error checks failed (listed above)", nfailed, nchecks);
    if (t_rank == 0)
        printf("[errors] %d error checks passed\n", nchecks);
    T_MPI(MPI_Type_free(&at));
    T_MPI(MPI_Type_free(&vec));
    T_MPI(MPI_Type_free(&uncommitted));
    T_MPI(MPI_Comm_free(&sc));
    T_MPI(MPI_Comm_free(&ic));
    T_MPI(MPI_Comm_free(&ec));
    T_MPI(MPI_Errhandler_free(&eh));
    T_MPI(MPIX_Acc_Hoststream_free(&S));
    T_MPI(MPIX_Acc_Hoststream_free(&X));
    free(junk);
    return t_finish();
}
