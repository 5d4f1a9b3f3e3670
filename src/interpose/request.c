/*
 * request.c - stream-ordered requests as ordinary MPI_Request handles.
 *
 * Each stream-ordered operation is backed by an MPI generalized request, so
 * its handle is a genuine MPI_Request that every MPI function accepts. The
 * library maps the handle to its engine operation. When the application
 * thread sees the operation complete, the generalized request is completed
 * (PMPI_Grequest_complete) and the MPI library takes over: statuses come
 * from the query callback, freeing from the free callback. The progress
 * thread never calls MPI.
 *
 * Handles given to the library (stream waits, MPI_Request_free on an
 * incomplete operation) go to the reap list and are completed and freed by
 * later calls from the application.
 */
#include "interpose/interpose.h"
#include "util/calltime.h"

#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------------- status */

void mxi_fill_status(mxe_op_t *op, MPI_Status *status)
{
    if (status == MPI_STATUS_IGNORE)
        return;
    const mxe_result_t *r = &op->result;
    if (op->type == MXE_OP_RECV) {
        status->MPI_SOURCE = r->source == MXE_PROC_NULL    ? MPI_PROC_NULL
                             : r->source == MXE_ANY_SOURCE ? MPI_ANY_SOURCE
                                                           : r->source;
        status->MPI_TAG = r->tag == MXE_ANY_TAG ? MPI_ANY_TAG : r->tag;
    } else {
        status->MPI_SOURCE = op->peer == MXE_PROC_NULL ? MPI_PROC_NULL : op->comm_rank;
        status->MPI_TAG = op->peer == MXE_PROC_NULL ? MPI_ANY_TAG : op->tag;
    }
    status->MPI_ERROR = mxi_status_to_mpi(r->error);
    /* Local calls that only write the status object (safe from the
     * progress thread in MPICH and Open MPI). */
    PMPI_Status_set_elements_x(status, MPI_BYTE, (MPI_Count)r->bytes);
    PMPI_Status_set_cancelled(status, r->cancelled);
}

void mxi_result_writer(mxe_op_t *op, void *target) { mxi_fill_status(op, target); }

/* The query callback fills the status but always succeeds: the MPI library
 * would turn a query error into a generic class. Errors of our operations
 * are reported by our wrappers (mxi_finish_* below) with their own class. */
int mxi_greq_query(void *extra_state, MPI_Status *status)
{
    mxi_fill_status(extra_state, status);
    if (status != MPI_STATUS_IGNORE)
        status->MPI_ERROR = MPI_SUCCESS;
    return MPI_SUCCESS;
}

int mxi_greq_free(void *extra_state)
{
    atomic_fetch_sub_explicit(&mxi.greqs_alive, 1, memory_order_relaxed);
    mxe_op_release(extra_state);
    return MPI_SUCCESS;
}

int mxi_greq_cancel(void *extra_state, int complete)
{
    if (!complete)
        mxe_op_cancel(extra_state);
    return MPI_SUCCESS;
}

/* ---------------------------------------------------------------- mapping */

/* A handle the application gave to the library (a stream wait took it, or
 * MPI_Request_free of an incomplete operation) stays in the table, marked,
 * until the library frees it: a stale copy of it waited on the host is then
 * an error instead of a wait on a request nobody completes. */
#define MXI_TAKEN_BIT ((uintptr_t)1)

static void *mxi_request_lookup(MPI_Request req)
{
    if (req == MPI_REQUEST_NULL || !mxi_on())
        return NULL;
    return mxu_locked_map_get(&mxi.requests, MXI_REQ_KEY(req));
}

static int mxi_is_taken(const void *v) { return ((uintptr_t)v & MXI_TAKEN_BIT) != 0; }

mxe_op_t *mxi_request_op(MPI_Request req)
{
    void *v = mxi_request_lookup(req);
    return mxi_is_taken(v) ? NULL : v;
}

/* MPI_ERR_REQUEST, raised, for a stale copy of a handle the library took. */
static int mxi_stale_handle(MPI_Comm comm, const char *call)
{
    return mxi_raise(comm, MXI_E_REQUEST,
                     "%s: the request was already handed to a stream wait or freed; this "
                     "handle is a stale copy",
                     call);
}

void mxi_request_track(MPI_Request req, mxe_op_t *op)
{
    if (mxu_locked_map_put(&mxi.requests, MXI_REQ_KEY(req), op) != MXU_OK)
        MXU_LOG(MXU_LOG_ERROR, "request table full: host calls will not see this request");
}

static MPI_Request mxi_op_handle(mxe_op_t *op)
{
    MPI_Request r;
    memcpy(&r, &op->user_handle, sizeof(r));
    return r;
}

/* The op completed: complete its generalized request (once). */
static void mxi_greq_sync(mxe_op_t *op)
{
    if (!(op->user_flags & MXI_OPF_GREQ_COMPLETED) && mxe_op_is_complete(op)) {
        op->user_flags |= MXI_OPF_GREQ_COMPLETED;
        PMPI_Grequest_complete(mxi_op_handle(op));
    }
}

/* ----------------------------------------------------------------- reaping */

/* A released operation without a handle (MXI_OPF_INTERNAL): its maker's
 * reference, counted like a live handle */
static void mxi_internal_release(mxe_op_t *op)
{
    atomic_fetch_sub_explicit(&mxi.greqs_alive, 1, memory_order_relaxed);
    mxe_op_release(op);
}

static void mxi_reap_push(mxe_op_t *op)
{
    pthread_mutex_lock(&mxi.reap_lock);
    if (mxi.nreap == mxi.capreap) {
        size_t cap = mxi.capreap ? mxi.capreap * 2 : 64;
        mxe_op_t **n = realloc(mxi.reap, cap * sizeof(*n));
        if (!n) {
            pthread_mutex_unlock(&mxi.reap_lock);
            /* Cannot track it: wait for it here rather than lose it. */
            MXU_LOG(MXU_LOG_WARN, "reap list full; completing a request synchronously");
            mxe_op_wait_host(op, -1);
            if (op->user_flags & MXI_OPF_INTERNAL) {
                mxi_internal_release(op);
                return;
            }
            mxi_greq_sync(op);
            MPI_Request h = mxi_op_handle(op);
            mxu_locked_map_remove(&mxi.requests, MXI_REQ_KEY(h));
            PMPI_Request_free(&h);
            return;
        }
        mxi.reap = n;
        mxi.capreap = cap;
    }
    mxi.reap[mxi.nreap++] = op;
    atomic_store_explicit(&mxi.reap_pending, mxi.nreap, memory_order_relaxed);
    pthread_mutex_unlock(&mxi.reap_lock);
}

static void mxi_reap_(int all);

/* mxi_reap_, timed (MPIX_ACC_STATS) when there is something to reap */
void mxi_reap(int all)
{
    if (atomic_load_explicit(&mxi.reap_pending, memory_order_relaxed) == 0)
        return;
    uint64_t t = mxu_ct_inner_begin();
    mxi_reap_(all);
    mxu_ct_inner_end(MXU_CT_REAP, t);
}

static void mxi_reap_(int all)
{
    if (pthread_mutex_trylock(&mxi.reap_lock) != 0) {
        if (!all)
            return; /* another thread is reaping */
        pthread_mutex_lock(&mxi.reap_lock);
    }
    /* A bounded pass inspects 16 entries from a cursor that moves on, so
     * that incomplete entries cannot hide completed ones from every pass
     * (the generalized requests of those would never be freed, and MPICH
     * aborts once ~128k are alive: seen with 100k iterations enqueued ahead
     * on a host stream). Every call of the library passes here, so the
     * pass is short: 16 entries per call clear more than the 1-3 a call
     * adds. */
    size_t budget = all ? mxi.nreap : 16;
    size_t i = all || mxi.reap_cursor >= mxi.nreap ? 0 : mxi.reap_cursor;
    for (; mxi.nreap > 0 && budget > 0; budget--) {
        if (i >= mxi.nreap)
            i = 0;
        mxe_op_t *op = mxi.reap[i];
        if (!mxe_op_test_host(op)) { /* (a freed SX receive: its library step) */
            i++;
            continue;
        }
        mxi.reap[i] = mxi.reap[--mxi.nreap];
        mxu_status_t err = op->result.error;
        if (op->user_flags & MXI_OPF_STATUS_TO_USER) {
            /* The stream wait wrote the error into the user's status: seen
             * there, not to be reported again (MPIX_Acc_Wait(3)). */
        } else if (err != MXU_OK && err != MXU_ERR_TRUNCATED) {
            /* Nobody holds the handle any more: report here. */
            mxi.released_errors++;
            MXU_LOG(MXU_LOG_ERROR, "stream-waited %s (peer %d, tag %d, %zu bytes) failed: %s",
                    op->type == MXE_OP_SEND ? "send" : "receive", op->peer, op->tag, op->bytes,
                    mxu_status_string(err));
        } else if (err == MXU_ERR_TRUNCATED) {
            mxi.released_errors++;
            MXU_LOG(MXU_LOG_WARN, "stream-waited receive from %d (tag %d) was truncated",
                    op->result.source, op->result.tag);
        }
        if (op->user_flags & MXI_OPF_INTERNAL) {
            mxi_internal_release(op);
            continue;
        }
        mxi_greq_sync(op);
        MPI_Request h = mxi_op_handle(op);
        mxu_locked_map_remove(&mxi.requests, MXI_REQ_KEY(h)); /* the taken mark */
        PMPI_Request_free(&h);                                /* op may be freed now */
    }
    mxi.reap_cursor = i;
    atomic_store_explicit(&mxi.reap_pending, mxi.nreap, memory_order_relaxed);
    pthread_mutex_unlock(&mxi.reap_lock);
}

/* Give a user handle to the library: untrack it and reap it later. */
static void mxi_request_release(MPI_Request *req, mxe_op_t *op)
{
    if (mxu_locked_map_put(&mxi.requests, MXI_REQ_KEY(*req),
                           (void *)((uintptr_t)op | MXI_TAKEN_BIT)) != MXU_OK)
        mxu_locked_map_remove(&mxi.requests, MXI_REQ_KEY(*req));
    *req = MPI_REQUEST_NULL;
    mxi_reap_push(op);
}

static MPI_Comm mxi_op_comm(mxe_op_t *op)
{
    MPI_Comm c;
    memcpy(&c, &op->user_aux, sizeof(c));
    return c;
}

void mxi_request_retire(MPI_Request *req, mxe_op_t *op)
{
    mxu_locked_map_remove(&mxi.requests, MXI_REQ_KEY(*req));
    mxi_greq_sync(op);
    PMPI_Request_free(req);
    *req = MPI_REQUEST_NULL;
}

/* MPI error code of a completed op (MPI_SUCCESS for success/cancel). */
static int mxi_op_error(mxe_op_t *op) { return mxi_status_to_mpi(op->result.error); }

/* Finish a completed op whose handle the user holds: free the handle through
 * MPI, write the status from the op, report its error on its communicator. */
static int mxi_request_finish(MPI_Request *req, mxe_op_t *op, MPI_Status *status)
{
    mxe_op_retain(op); /* the free callback drops the handle's reference */
    mxu_locked_map_remove(&mxi.requests, MXI_REQ_KEY(*req));
    mxi_greq_sync(op);
    int rc = PMPI_Wait(req, MPI_STATUS_IGNORE);
    mxi_fill_status(op, status);
    int err = mxi_op_error(op);
    MPI_Comm comm = mxi_op_comm(op);
    int tmpl = (op->user_flags & (MXI_OPF_TEMPLATE | MXI_OPF_ORDERED)) != 0;
    mxe_op_release(op);
    if (rc == MPI_SUCCESS && tmpl)
        rc = mxi_raise(comm, MXI_E_REQUEST,
                       "the request of an operation captured into a host graph is completed by a "
                       "stream wait captured with it (each launch), not on the host; the request "
                       "is freed, the graph's operation goes unwaited");
    else if (rc == MPI_SUCCESS && err != MPI_SUCCESS)
        rc = mxi_raise_code(comm, err);
    return rc;
}

static void mxi_empty_status(MPI_Status *st)
{
    if (st == MPI_STATUS_IGNORE)
        return;
    st->MPI_SOURCE = MPI_ANY_SOURCE;
    st->MPI_TAG = MPI_ANY_TAG;
    st->MPI_ERROR = MPI_SUCCESS;
    PMPI_Status_set_elements_x(st, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(st, 0);
}

/* ------------------------------------------------------------ stream wait */

static int mxi_stream_waitall_(mxa_stream_t *s, int count, MPI_Request reqs[], MPI_Status *statuses,
                               MPI_Comm err_comm);

/* mxi_stream_waitall_ inside the stream wait's trace range and call timer */
int mxi_stream_waitall(mxa_stream_t *s, int count, MPI_Request reqs[], MPI_Status *statuses,
                       MPI_Comm err_comm)
{
    uint64_t t = mxu_ct_begin();
    mxu_trace_push(&mxi_tn_wait, count > 0 ? (uint64_t)count : 0);
    int rc = mxi_stream_waitall_(s, count, reqs, statuses, err_comm);
    mxu_trace_pop();
    mxu_ct_end(MXU_CT_STREAM_WAIT, t);
    return rc;
}

/* statuses: an array of count, or NULL */
static int mxi_stream_waitall_(mxa_stream_t *s, int count, MPI_Request reqs[], MPI_Status *statuses,
                               MPI_Comm err_comm)
{
    if (mxi_graph_capturing(s))
        return mxi_graph_wait(s, count, reqs, statuses, NULL, err_comm);
    mxe_op_t *ops_local[16];
    void *targets_local[16];
    mxe_op_t **ops = ops_local;
    void **targets = targets_local;
    if (count > 16) {
        ops = malloc(sizeof(*ops) * (size_t)count);
        targets = malloc(sizeof(*targets) * (size_t)count);
        if (!ops || !targets) {
            free(ops);
            free(targets);
            return mxi_raise(err_comm, MXI_E_NO_MEM, "stream wait of %d requests", count);
        }
    }
    int rc = MPI_SUCCESS, n = 0, stale = 0;
    mxi_reap(0);
    for (int i = 0; i < count; i++) {
        MPI_Status *want = statuses ? &statuses[i] : NULL;
        MPI_Status *st = want ? want : MPI_STATUS_IGNORE;
        void *v = mxi_request_lookup(reqs[i]);
        mxe_op_t *op = mxi_is_taken(v) ? NULL : v;
        if (op) {
            ops[n] = op;
            /* no status wanted: no target (MPI_STATUS_IGNORE is not NULL),
             * so an op the stream finishes itself needs no wait point */
            targets[n] = want;
            n++;
        } else if (v) {
            rc = mxi_stale_handle(err_comm, "stream wait");
            stale = 1;
            break;
        } else if (reqs[i] == MPI_REQUEST_NULL) {
            mxi_empty_status(st);
        } else {
            /* An ordinary MPI request: it completes on the host, now. */
            int r = PMPI_Wait(&reqs[i], st);
            if (r != MPI_SUCCESS && rc == MPI_SUCCESS)
                rc = r;
        }
    }
    int trc = stale ? rc : mxi_throttle(err_comm, s, 0);
    mxu_status_t est = MXU_OK;
    if (trc != MPI_SUCCESS) {
        rc = trc; /* nothing enqueued: the requests stay the caller's */
    } else if ((est = mxe_stream_wait(s, ops, targets, n)) != MXU_OK) {
        rc = mxi_raise_code(err_comm, mxi_status_to_mpi(est));
    } else {
        for (int i = 0; i < count; i++) {
            mxe_op_t *op = mxi_request_op(reqs[i]);
            if (op && statuses)
                op->user_flags |= MXI_OPF_STATUS_TO_USER;
            if (op)
                mxi_request_release(&reqs[i], op);
        }
    }
    if (ops != ops_local) {
        free(ops);
        free(targets);
    }
    return rc;
}

int mxi_stream_wait_ops(mxa_stream_t *s, int n, mxe_op_t *const *ops, MPI_Status *const *status_at,
                        MPI_Comm err_comm)
{
    uint64_t t = mxu_ct_begin();
    mxu_trace_push(&mxi_tn_wait, n > 0 ? (uint64_t)n : 0);
    mxe_op_t *w[MXI_WAIT_OPS_MAX];
    void *targets[MXI_WAIT_OPS_MAX];
    int m = 0;
    if (n > MXI_WAIT_OPS_MAX)
        return mxi_raise(err_comm, MXI_E_INTERN, "stream wait of %d operations without handles", n);
    for (int i = 0; i < n; i++)
        if (ops[i]) {
            w[m] = ops[i];
            targets[m++] = status_at ? status_at[i] : NULL;
        }
    mxi_reap(0);
    int rc = mxi_throttle(err_comm, s, 0);
    mxu_status_t est = MXU_OK;
    if (rc == MPI_SUCCESS && (est = mxe_stream_wait(s, w, targets, m)) != MXU_OK)
        rc = mxi_raise_code(err_comm, mxi_status_to_mpi(est));
    for (int i = 0; i < m; i++) {
        if (rc == MPI_SUCCESS && targets[i])
            w[i]->user_flags |= MXI_OPF_STATUS_TO_USER;
        mxi_reap_push(w[i]); /* released once complete; errors reported there */
    }
    mxu_trace_pop();
    mxu_ct_end(MXU_CT_STREAM_WAIT, t);
    return rc;
}

static int mxi_is_stream_origin(const mxe_op_t *op)
{
    return op->user_origin == MXI_ORIGIN_STREAMCOMM || op->user_origin == MXI_ORIGIN_DATATYPE;
}

/* Let the MPI library progress its own operations while we wait for ours. */
static void mxi_poke_mpi(void)
{
    int flag;
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);
}

/* -------------------------------------------------------------- wrappers */

int mxi_req_Wait(MPI_Request *req, MPI_Status *status)
{
    void *v = req ? mxi_request_lookup(*req) : NULL;
    if (!v)
        return PMPI_Wait(req, status);
    if (mxi_is_taken(v))
        return mxi_stale_handle(MPI_COMM_SELF, "MPI_Wait");
    mxe_op_t *op = v;
    if (mxi_is_stream_origin(op))
        return mxi_stream_waitall(op->stream, 1, req, status == MPI_STATUS_IGNORE ? NULL : status,
                                  MPI_COMM_SELF);
    mxe_op_wait_host(op, -1);
    return mxi_request_finish(req, op, status);
}

int mxi_req_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
    void *v = req ? mxi_request_lookup(*req) : NULL;
    if (!v)
        return PMPI_Test(req, flag, status);
    if (mxi_is_taken(v))
        return mxi_stale_handle(MPI_COMM_SELF, "MPI_Test");
    mxe_op_t *op = v;
    if (!mxe_op_test_host(op)) {
        *flag = 0;
        mxi_poke_mpi();
        return MPI_SUCCESS;
    }
    *flag = 1;
    return mxi_request_finish(req, op, status);
}

int mxi_req_Request_get_status(MPI_Request req, int *flag, MPI_Status *status)
{
    void *v = mxi_request_lookup(req);
    if (!v)
        return PMPI_Request_get_status(req, flag, status);
    if (mxi_is_taken(v))
        return mxi_stale_handle(MPI_COMM_SELF, "MPI_Request_get_status");
    mxe_op_t *op = v;
    *flag = mxe_op_test_host(op);
    if (*flag)
        mxi_fill_status(op, status);
    return *flag && status != MPI_STATUS_IGNORE ? status->MPI_ERROR : MPI_SUCCESS;
}

int mxi_req_Request_free(MPI_Request *req)
{
    void *v = req ? mxi_request_lookup(*req) : NULL;
    if (!v)
        return PMPI_Request_free(req);
    if (mxi_is_taken(v))
        return mxi_stale_handle(MPI_COMM_SELF, "MPI_Request_free");
    mxe_op_t *op = v;
    if (op->user_flags & (MXI_OPF_TEMPLATE | MXI_OPF_ORDERED)) { /* a captured operation's */
        mxi_request_retire(req, op);
        return MPI_SUCCESS;
    }
    mxi_request_release(req, op);
    return MPI_SUCCESS;
}

int mxi_req_Cancel(MPI_Request *req)
{
    void *v = req ? mxi_request_lookup(*req) : NULL;
    if (!v)
        return PMPI_Cancel(req);
    if (mxi_is_taken(v))
        return mxi_stale_handle(MPI_COMM_SELF, "MPI_Cancel");
    mxe_op_t *op = v;
    mxe_op_cancel(op); /* receives only; sends are not cancelled (allowed by MPI) */
    return MPI_SUCCESS;
}

/*
 * Multiple-completion calls. Our ops are first brought up to date: every
 * completed op's generalized request is completed and untracked (the MPI
 * call below may free it, and its handle value may be reused at once).
 * Then the MPI library's own call decides, on the whole array, exactly as
 * for ordinary requests. Afterwards the statuses and errors of our ops that
 * the call completed are written from the ops (mxi_post_*). Stream-origin
 * requests in MPI_Waitall become a stream wait first (mpix_acc(3), Requests); in the other
 * calls they are waited on the host.
 */

typedef struct {
    int nacc;        /* tracked ops in the array */
    int nincomplete; /* of which not complete */
    int nplain;      /* active requests that are not ours */
    int nstale;      /* stale copies of handles the library took */
} mxi_scan_t;

/* Sync completed ops, count what is left, and hold a reference to every op
 * found (mxi_scan_done drops them). */
static void mxi_scan(int count, MPI_Request reqs[], mxe_op_t **ops, mxi_scan_t *sc)
{
    memset(sc, 0, sizeof(*sc));
    for (int i = 0; i < count; i++) {
        void *v = mxi_request_lookup(reqs[i]);
        if (mxi_is_taken(v)) {
            ops[i] = NULL;
            sc->nstale++;
            continue;
        }
        ops[i] = v;
        if (!ops[i]) {
            if (reqs[i] != MPI_REQUEST_NULL)
                sc->nplain++;
            continue;
        }
        mxe_op_retain(ops[i]);
        sc->nacc++;
        if (mxe_op_test_host(ops[i])) {
            mxu_locked_map_remove(&mxi.requests, MXI_REQ_KEY(reqs[i]));
            mxi_greq_sync(ops[i]);
        } else {
            sc->nincomplete++;
        }
    }
}

static void mxi_scan_done(int count, mxe_op_t **ops)
{
    for (int i = 0; i < count; i++)
        if (ops[i]) {
            mxe_op_release(ops[i]);
            ops[i] = NULL;
        }
}

/* Put back the table entries of completed ops whose handles MPI did not free. */
static void mxi_retrack(int count, MPI_Request reqs[], mxe_op_t **ops)
{
    for (int i = 0; i < count; i++)
        if (ops[i] && reqs[i] != MPI_REQUEST_NULL &&
            (ops[i]->user_flags & MXI_OPF_GREQ_COMPLETED) && !mxi_request_op(reqs[i]))
            mxi_request_track(reqs[i], ops[i]);
}

/* Did the MPI call just complete (and free) our op at index i? */
static int mxi_freed_here(MPI_Request reqs[], mxe_op_t **ops, int i)
{
    return ops[i] && (ops[i]->user_flags & MXI_OPF_GREQ_COMPLETED) && reqs[i] == MPI_REQUEST_NULL;
}

/* Statuses/errors for entries completed by a multiple-completion call.
 * which[k] (k < n) are the indices to look at; their status is
 * statuses[which[k]] (all-calls, by_index) or statuses[k] (some-calls). */
static int mxi_post_multi(MPI_Request reqs[], mxe_op_t **ops, const int *which, int n,
                          MPI_Status *statuses, int by_index, int rc)
{
    int ecode = MPI_SUCCESS;
    MPI_Comm ecomm = MPI_COMM_NULL;
    for (int k = 0; k < n; k++) {
        int i = which[k];
        if (!mxi_freed_here(reqs, ops, i))
            continue;
        if (statuses != MPI_STATUSES_IGNORE)
            mxi_fill_status(ops[i], &statuses[by_index ? i : k]);
        int e = mxi_op_error(ops[i]);
        if (e != MPI_SUCCESS && ecode == MPI_SUCCESS) {
            ecode = e;
            ecomm = mxi_op_comm(ops[i]);
        }
    }
    if (ecode == MPI_SUCCESS || rc != MPI_SUCCESS)
        return rc;
    if (statuses == MPI_STATUSES_IGNORE)
        return mxi_raise_code(ecomm, ecode);
    for (int k = 0; k < n; k++)
        if (!mxi_freed_here(reqs, ops, which[k]))
            statuses[by_index ? which[k] : k].MPI_ERROR = MPI_SUCCESS;
    return mxi_raise_code(ecomm, MPI_ERR_IN_STATUS);
}

static int mxi_post_one(MPI_Request reqs[], mxe_op_t **ops, int index, MPI_Status *status, int rc)
{
    if (rc != MPI_SUCCESS || index == MPI_UNDEFINED || !mxi_freed_here(reqs, ops, index))
        return rc;
    mxi_fill_status(ops[index], status);
    int e = mxi_op_error(ops[index]);
    return e == MPI_SUCCESS ? rc : mxi_raise_code(mxi_op_comm(ops[index]), e);
}

/* Scratch arrays: on the stack for small counts. */
typedef struct {
    mxe_op_t *local_ops[32], *local_pending[32];
    int local_idx[32], local_rel[32];
    mxe_op_t **ops, **pending;
    int *idx;
    int *rel; /* MPI_Waitall: entries handed to a stream wait */
} mxi_scratch_t;

static int mxi_scratch_init(mxi_scratch_t *x, int count)
{
    if (count <= 32) {
        x->ops = x->local_ops;
        x->pending = x->local_pending;
        x->idx = x->local_idx;
        x->rel = x->local_rel;
        return 1;
    }
    x->ops = malloc(sizeof(mxe_op_t *) * (size_t)count);
    x->pending = malloc(sizeof(mxe_op_t *) * (size_t)count);
    x->idx = malloc(sizeof(int) * (size_t)count);
    x->rel = malloc(sizeof(int) * (size_t)count);
    return x->ops && x->pending && x->idx && x->rel;
}

static void mxi_scratch_free(mxi_scratch_t *x)
{
    if (x->ops != x->local_ops) {
        free(x->ops);
        free(x->pending);
        free(x->idx);
        free(x->rel);
    }
}

/* A multiple-completion call found a stale handle in its array: put the
 * table back as it was and fail the call. */
static int mxi_scan_stale(int count, MPI_Request reqs[], mxi_scratch_t *x, const char *call)
{
    mxi_retrack(count, reqs, x->ops);
    mxi_scan_done(count, x->ops);
    mxi_scratch_free(x);
    return mxi_stale_handle(MPI_COMM_SELF, call);
}

/* Wait (host) until one of the incomplete ops completes, letting the MPI
 * library progress in between if plain requests are involved. */
static void mxi_wait_some_op(int count, mxe_op_t **ops, mxe_op_t **pending, int with_plain)
{
    for (int i = 0; i < count; i++)
        pending[i] = (ops[i] && !mxe_op_test_host(ops[i])) ? ops[i] : NULL;
    mxe_op_wait_any_host(pending, count, with_plain ? 100000 : -1);
    if (with_plain)
        mxi_poke_mpi();
}

static int mxi_no_ops(void)
{
    return !mxi_on() || atomic_load_explicit(&mxi.requests.count, memory_order_relaxed) == 0;
}

/* MPI_Waitall step 1: stream-origin requests become one stream wait per
 * stream; their statuses are written when the stream passes the wait. */
static int mxi_waitall_stream_part(int count, MPI_Request reqs[], MPI_Status statuses[],
                                   int *released, int *released_any)
{
    for (int i = 0; i < count; i++)
        released[i] = 0;
    for (int i = 0; i < count; i++) {
        mxe_op_t *op = mxi_request_op(reqs[i]);
        if (!op || !mxi_is_stream_origin(op))
            continue;
        mxa_stream_t *s = op->stream;
        mxe_op_t *sub[32];
        void *targets[32];
        int at[32], m = 0;
        for (int j = i; j < count && m < 32; j++) {
            mxe_op_t *o = mxi_request_op(reqs[j]);
            if (o && mxi_is_stream_origin(o) && o->stream == s) {
                sub[m] = o;
                targets[m] = statuses == MPI_STATUSES_IGNORE ? NULL : (void *)&statuses[j];
                at[m++] = j;
            }
        }
        if (mxi_graph_capturing(s)) { /* a wait captured into a host graph */
            int grc = mxi_graph_wait(s, m, reqs, statuses == MPI_STATUSES_IGNORE ? NULL : statuses,
                                     at, MPI_COMM_SELF);
            if (grc != MPI_SUCCESS)
                return grc;
            for (int k = 0; k < m; k++)
                released[at[k]] = 1;
            *released_any = 1;
            i--;
            continue;
        }
        mxu_trace_push(&mxi_tn_wait, (uint64_t)m);
        int trc = mxi_throttle(MPI_COMM_SELF, s, 0);
        mxu_status_t est = trc == MPI_SUCCESS ? mxe_stream_wait(s, sub, targets, m) : MXU_OK;
        mxu_trace_pop();
        if (trc != MPI_SUCCESS)
            return trc;
        if (est != MXU_OK)
            return mxi_raise_code(MPI_COMM_SELF, mxi_status_to_mpi(est));
        for (int k = 0; k < m; k++) {
            if (targets[k])
                sub[k]->user_flags |= MXI_OPF_STATUS_TO_USER;
            mxi_request_release(&reqs[at[k]], sub[k]);
            released[at[k]] = 1;
        }
        *released_any = 1;
        i--; /* reqs[i] is now null; look again from here for other streams */
    }
    return MPI_SUCCESS;
}

static int mxi_req_waitall_(int count, MPI_Request reqs[], MPI_Status statuses[],
                            int *released_any);

/* timed as a stream wait when it handed requests to one (stream
 * communicators' MPI_Waitall) */
int mxi_req_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[])
{
    if (mxi_no_ops())
        return PMPI_Waitall(count, reqs, statuses);
    uint64_t t = mxu_ct_begin();
    int released_any = 0;
    int rc = mxi_req_waitall_(count, reqs, statuses, &released_any);
    if (released_any)
        mxu_ct_end(MXU_CT_STREAM_WAIT, t);
    else
        mxu_ct_drop(t);
    return rc;
}

static int mxi_req_waitall_(int count, MPI_Request reqs[], MPI_Status statuses[], int *released_any)
{
    mxi_scratch_t x;
    if (!mxi_scratch_init(&x, count)) {
        mxi_scratch_free(&x);
        return mxi_raise(MPI_COMM_SELF, MXI_E_NO_MEM, "MPI_Waitall of %d", count);
    }
    int rc = mxi_waitall_stream_part(count, reqs, statuses, x.rel, released_any);
    if (rc != MPI_SUCCESS) {
        mxi_scratch_free(&x);
        return rc;
    }
    /* Host part: wait for our remaining ops, then let MPI finish the array. */
    mxi_scan_t sc;
    for (;;) {
        mxi_scan(count, reqs, x.ops, &sc);
        if (sc.nstale)
            return mxi_scan_stale(count, reqs, &x, "MPI_Waitall");
        if (sc.nincomplete == 0)
            break;
        mxi_wait_some_op(count, x.ops, x.pending, sc.nplain > 0);
        mxi_retrack(count, reqs, x.ops);
        mxi_scan_done(count, x.ops);
    }
    if (!*released_any || statuses == MPI_STATUSES_IGNORE) {
        rc = PMPI_Waitall(count, reqs, statuses);
    } else {
        /* Entries handed to a stream wait are written by the engine later:
         * MPI must not touch them, so it gets a scratch array. */
        MPI_Status *tmp = malloc(sizeof(MPI_Status) * (size_t)count);
        if (!tmp) {
            mxi_scan_done(count, x.ops);
            mxi_scratch_free(&x);
            return mxi_raise(MPI_COMM_SELF, MXI_E_NO_MEM, "MPI_Waitall statuses");
        }
        rc = PMPI_Waitall(count, reqs, tmp);
        for (int i = 0; i < count; i++)
            if (!x.rel[i])
                statuses[i] = tmp[i];
        free(tmp);
    }
    int n = 0;
    for (int i = 0; i < count; i++)
        if (!x.rel[i])
            x.idx[n++] = i;
    rc = mxi_post_multi(reqs, x.ops, x.idx, n, statuses, 1, rc);
    mxi_scan_done(count, x.ops);
    mxi_scratch_free(&x);
    return rc;
}

int mxi_req_Testall(int count, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
    if (mxi_no_ops())
        return PMPI_Testall(count, reqs, flag, statuses);
    mxi_scratch_t x;
    if (!mxi_scratch_init(&x, count)) {
        mxi_scratch_free(&x);
        return mxi_raise(MPI_COMM_SELF, MXI_E_NO_MEM, "MPI_Testall of %d", count);
    }
    mxi_scan_t sc;
    mxi_scan(count, reqs, x.ops, &sc);
    if (sc.nstale)
        return mxi_scan_stale(count, reqs, &x, "MPI_Testall");
    int rc = MPI_SUCCESS;
    if (sc.nincomplete > 0) {
        *flag = 0; /* all or nothing: nothing is freed */
        mxi_poke_mpi();
    } else {
        rc = PMPI_Testall(count, reqs, flag, statuses);
        if (*flag) {
            for (int i = 0; i < count; i++)
                x.idx[i] = i;
            rc = mxi_post_multi(reqs, x.ops, x.idx, count, statuses, 1, rc);
        }
    }
    mxi_retrack(count, reqs, x.ops);
    mxi_scan_done(count, x.ops);
    mxi_scratch_free(&x);
    return rc;
}

int mxi_req_Testany(int count, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
    if (mxi_no_ops())
        return PMPI_Testany(count, reqs, index, flag, status);
    mxi_scratch_t x;
    if (!mxi_scratch_init(&x, count)) {
        mxi_scratch_free(&x);
        return mxi_raise(MPI_COMM_SELF, MXI_E_NO_MEM, "MPI_Testany of %d", count);
    }
    mxi_scan_t sc;
    mxi_scan(count, reqs, x.ops, &sc);
    if (sc.nstale)
        return mxi_scan_stale(count, reqs, &x, "MPI_Testany");
    int rc = PMPI_Testany(count, reqs, index, flag, status);
    if (*flag)
        rc = mxi_post_one(reqs, x.ops, *index, status, rc);
    mxi_retrack(count, reqs, x.ops);
    mxi_scan_done(count, x.ops);
    mxi_scratch_free(&x);
    return rc;
}

int mxi_req_Testsome(int incount, MPI_Request reqs[], int *outcount, int indices[],
                     MPI_Status statuses[])
{
    if (mxi_no_ops())
        return PMPI_Testsome(incount, reqs, outcount, indices, statuses);
    mxi_scratch_t x;
    if (!mxi_scratch_init(&x, incount)) {
        mxi_scratch_free(&x);
        return mxi_raise(MPI_COMM_SELF, MXI_E_NO_MEM, "MPI_Testsome of %d", incount);
    }
    mxi_scan_t sc;
    mxi_scan(incount, reqs, x.ops, &sc);
    if (sc.nstale)
        return mxi_scan_stale(incount, reqs, &x, "MPI_Testsome");
    int rc = PMPI_Testsome(incount, reqs, outcount, indices, statuses);
    if (*outcount != MPI_UNDEFINED)
        rc = mxi_post_multi(reqs, x.ops, indices, *outcount, statuses, 0, rc);
    mxi_retrack(incount, reqs, x.ops);
    mxi_scan_done(incount, x.ops);
    mxi_scratch_free(&x);
    return rc;
}

int mxi_req_Waitany(int count, MPI_Request reqs[], int *index, MPI_Status *status)
{
    if (mxi_no_ops())
        return PMPI_Waitany(count, reqs, index, status);
    mxi_scratch_t x;
    if (!mxi_scratch_init(&x, count)) {
        mxi_scratch_free(&x);
        return mxi_raise(MPI_COMM_SELF, MXI_E_NO_MEM, "MPI_Waitany of %d", count);
    }
    int rc, flag = 0;
    for (;;) {
        mxi_scan_t sc;
        mxi_scan(count, reqs, x.ops, &sc);
        if (sc.nstale)
            return mxi_scan_stale(count, reqs, &x, "MPI_Waitany");
        if (sc.nacc == sc.nincomplete && sc.nincomplete > 0 && sc.nplain == 0) {
            mxi_wait_some_op(count, x.ops, x.pending, 0); /* only ours: block */
            mxi_scan_done(count, x.ops);
            continue;
        }
        rc = PMPI_Testany(count, reqs, index, &flag, status);
        if (flag)
            rc = mxi_post_one(reqs, x.ops, *index, status, rc);
        mxi_retrack(count, reqs, x.ops);
        if (rc != MPI_SUCCESS || flag)
            break;
        mxi_wait_some_op(count, x.ops, x.pending, 1);
        mxi_scan_done(count, x.ops);
    }
    mxi_scan_done(count, x.ops);
    mxi_scratch_free(&x);
    return rc;
}

int mxi_req_Waitsome(int incount, MPI_Request reqs[], int *outcount, int indices[],
                     MPI_Status statuses[])
{
    if (mxi_no_ops())
        return PMPI_Waitsome(incount, reqs, outcount, indices, statuses);
    mxi_scratch_t x;
    if (!mxi_scratch_init(&x, incount)) {
        mxi_scratch_free(&x);
        return mxi_raise(MPI_COMM_SELF, MXI_E_NO_MEM, "MPI_Waitsome of %d", incount);
    }
    int rc;
    for (;;) {
        mxi_scan_t sc;
        mxi_scan(incount, reqs, x.ops, &sc);
        if (sc.nstale)
            return mxi_scan_stale(incount, reqs, &x, "MPI_Waitsome");
        if (sc.nacc == sc.nincomplete && sc.nincomplete > 0 && sc.nplain == 0) {
            mxi_wait_some_op(incount, x.ops, x.pending, 0);
            mxi_scan_done(incount, x.ops);
            continue;
        }
        rc = PMPI_Testsome(incount, reqs, outcount, indices, statuses);
        if (rc == MPI_SUCCESS && *outcount != MPI_UNDEFINED)
            rc = mxi_post_multi(reqs, x.ops, indices, *outcount, statuses, 0, rc);
        mxi_retrack(incount, reqs, x.ops);
        if (rc != MPI_SUCCESS || *outcount != 0)
            break; /* completions, or MPI_UNDEFINED when nothing is active */
        mxi_wait_some_op(incount, x.ops, x.pending, 1);
        mxi_scan_done(incount, x.ops);
    }
    mxi_scan_done(incount, x.ops);
    mxi_scratch_free(&x);
    return rc;
}
