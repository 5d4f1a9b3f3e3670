/*
 * persist.c - persistent requests on stream-ordered communicators:
 * MPI_Send_init (and the B/R/S forms), MPI_Recv_init, MPI_Start,
 * MPI_Startall, and every completion call on them.
 *
 * A persistent request keeps its arguments; each MPI_Start enqueues the
 * operation on the communicator's stream (or the datatype's) exactly as
 * MPI_Isend/MPI_Irecv would at that moment: it is matched anew, in call
 * order with every other operation of the channel (MPI semantics; only
 * partitioned requests match once). The handle the application holds is
 * a real MPI persistent request that the library never starts (a receive
 * from MPI_PROC_NULL on MPI_COMM_SELF): wherever it is inactive, the MPI
 * library itself treats it as MPI defines inactive persistent requests
 * (complete at once, empty status, never set to MPI_REQUEST_NULL). While
 * active, the completion calls below put the current operation's
 * request in its place, let request.c decide, and put the handle back;
 * once that operation's request is freed (completed, or handed to a
 * stream wait) the persistent request is inactive again and may be
 * started anew.
 *
 * On other communicators everything passes to the MPI library.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "interpose/interpose.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util/hashmap.h"

typedef struct {
    int is_send, sync;
    const void *buf;
    int count;
    MPI_Datatype dt;
    int peer, tag;
    int own_dt; /* dt is the library's dup of a non-contiguous type (freed with the request) */
    MPI_Comm comm;
    MPI_Request shell;  /* the handle the application holds */
    MPI_Request active; /* the started operation's request; MPI_REQUEST_NULL: inactive */
    mxi_part_t *part;   /* a partitioned request (partitioned.c): its epochs are the operations */
} mxi_preq_t;

struct mxi_pswap {
    int n;
    int *idx;
    mxi_preq_t **p;
};

static struct {
    pthread_once_t once;
    mxu_locked_map_t map; /* shell handle -> mxi_preq_t */
    _Atomic long live;
} pq = {.once = PTHREAD_ONCE_INIT};

static void pq_init(void) { (void)mxu_locked_map_init(&pq.map); }

static mxi_preq_t *preq_of(MPI_Request h)
{
    if (atomic_load_explicit(&pq.live, memory_order_relaxed) == 0 || h == MPI_REQUEST_NULL)
        return NULL;
    return mxu_locked_map_get(&pq.map, MXI_REQ_KEY(h));
}

/* ------------------------------------------------------------- create */

/* Give p its shell (the handle the application holds) and enter it in the
 * table; on failure nothing is entered and the caller frees p. */
static int preq_publish(mxi_preq_t *p, MPI_Comm comm, MPI_Request *req, const char *what)
{
    pthread_once(&pq.once, pq_init);
    p->active = MPI_REQUEST_NULL;
    int rc = PMPI_Recv_init(NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_SELF, &p->shell);
    if (rc != MPI_SUCCESS)
        return rc;
    if (mxu_locked_map_put(&pq.map, MXI_REQ_KEY(p->shell), p) != MXU_OK) {
        PMPI_Request_free(&p->shell);
        return mxi_raise(comm, MXI_E_NO_MEM, "%s", what);
    }
    atomic_fetch_add(&pq.live, 1);
    *req = p->shell;
    return MPI_SUCCESS;
}

static int persist_init(int is_send, int sync, const void *buf, int count, MPI_Datatype dt,
                        int peer, int tag, MPI_Comm comm, MPI_Request *req)
{
    /* the same checks (and error classes) as the non-blocking call */
    int rc = mxi_p2p_check(is_send, buf, count, dt, peer, tag, comm, req);
    if (rc != MPI_SUCCESS)
        return rc;
    mxi_preq_t *p = calloc(1, sizeof(*p));
    if (!p)
        return mxi_raise(comm, MXI_E_NO_MEM, "persistent request");
    /* a non-contiguous type may be freed by the application while the
     * request lives: each start uses the library's dup */
    int own = count > 0 && mxi_datatype_contiguous(dt) == 0;
    if (own && PMPI_Type_dup(dt, &dt) != MPI_SUCCESS) {
        free(p);
        return mxi_raise(comm, MXI_E_NO_MEM, "persistent request (datatype)");
    }
    *p = (mxi_preq_t){.is_send = is_send,
                      .sync = sync,
                      .buf = buf,
                      .count = count,
                      .dt = dt,
                      .own_dt = own,
                      .peer = peer,
                      .tag = tag,
                      .comm = comm};
    rc = preq_publish(p, comm, req, "persistent request");
    if (rc != MPI_SUCCESS) {
        if (own)
            PMPI_Type_free(&p->dt);
        free(p);
    }
    return rc;
}

#define MXI_WRAP_SEND_INIT(name, sync)                                                             \
    int name(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,        \
             MPI_Request *req)                                                                     \
    {                                                                                              \
        MXI_ROUTE_RETURN(comm, dt, s, origin,                                                      \
                         persist_init(1, sync, buf, count, dt, dest, tag, comm, req),              \
                         P##name(buf, count, dt, dest, tag, comm, req));                           \
    }

MXI_WRAP_SEND_INIT(MPI_Send_init, 0)
MXI_WRAP_SEND_INIT(MPI_Bsend_init, 0)
MXI_WRAP_SEND_INIT(MPI_Rsend_init, 0)
MXI_WRAP_SEND_INIT(MPI_Ssend_init, 1)

int MPI_Recv_init(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                  MPI_Request *req)
{
    MXI_ROUTE_RETURN(comm, dt, s, origin,
                     persist_init(0, 0, buf, count, dt, source, tag, comm, req),
                     PMPI_Recv_init(buf, count, dt, source, tag, comm, req));
}

int mxi_persist_add_part(MPI_Comm comm, mxi_part_t *part, MPI_Request *req)
{
    mxi_preq_t *p = calloc(1, sizeof(*p));
    if (!p)
        return mxi_raise(comm, MXI_E_NO_MEM, "partitioned request");
    p->comm = comm;
    p->part = part;
    int rc = preq_publish(p, comm, req, "partitioned request");
    if (rc != MPI_SUCCESS)
        free(p);
    return rc;
}

mxi_part_t *mxi_persist_part(MPI_Request h, MPI_Request **active)
{
    mxi_preq_t *p = preq_of(h);
    if (!p || !p->part)
        return NULL;
    if (active)
        *active = &p->active;
    return p->part;
}

/* -------------------------------------------------------------- start */

/* Start p's operation on stream s. */
static int persist_start_on(mxi_preq_t *p, mxa_stream_t *s, mxi_origin_t origin)
{
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = p->is_send ? mxi_isend(s, origin, p->buf, p->count, p->dt, p->peer, p->tag, p->comm,
                                    p->sync, &r)
                        : mxi_irecv(s, origin, (void *)(uintptr_t)p->buf, p->count, p->dt, p->peer,
                                    p->tag, p->comm, &r);
    if (rc == MPI_SUCCESS)
        p->active = r;
    return rc;
}

static int persist_start(mxi_preq_t *p)
{
    if (p->active != MPI_REQUEST_NULL)
        return mxi_raise(p->comm, MXI_E_REQUEST,
                         "MPI_Start of a persistent request that is still active (its last "
                         "start was not completed by a wait or test)");
    /* the stream as at an MPI_Isend now (the communicator's, or the
     * datatype's attribute) */
    MXI_ROUTE_RETURN(p->comm, p->dt, s, origin, persist_start_on(p, s, origin),
                     mxi_raise(p->comm, MXI_E_COMM,
                               "MPI_Start: the persistent request's communicator or datatype no "
                               "longer names a stream"));
}

int MPI_Start(MPI_Request *req)
{
    mxi_preq_t *p = req ? preq_of(*req) : NULL;
    if (!p)
        return PMPI_Start(req);
    if (p->part)
        return mxi_part_start(p->part, NULL, &p->active);
    return persist_start(p);
}

int MPI_Startall(int count, MPI_Request reqs[])
{
    if (atomic_load_explicit(&pq.live, memory_order_relaxed) == 0)
        return PMPI_Startall(count, reqs);
    /* one by one, in order: starts are matched in call order */
    for (int i = 0; i < count; i++) {
        int rc = MPI_Start(&reqs[i]);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}

/* ---------------------------------------------------- request arrays */

mxi_pswap_t *mxi_persist_in(int count, MPI_Request reqs[])
{
    if (atomic_load_explicit(&pq.live, memory_order_relaxed) == 0 || count <= 0 || !reqs)
        return NULL;
    mxi_pswap_t *sw = NULL;
    for (int i = 0; i < count; i++) {
        mxi_preq_t *p = preq_of(reqs[i]);
        if (!p || p->active == MPI_REQUEST_NULL)
            continue; /* inactive: the MPI library completes it at once */
        if (!sw) {
            sw = calloc(1, sizeof(*sw));
            if (sw) {
                sw->idx = malloc(sizeof(int) * (size_t)count);
                sw->p = malloc(sizeof(*sw->p) * (size_t)count);
            }
            if (!sw || !sw->idx || !sw->p) {
                if (sw) {
                    free(sw->idx);
                    free(sw->p);
                    free(sw);
                }
                return NULL; /* out of memory: the handles pass as inactive */
            }
        }
        sw->idx[sw->n] = i;
        sw->p[sw->n++] = p;
        reqs[i] = p->active;
    }
    return sw;
}

void mxi_persist_out(mxi_pswap_t *sw, MPI_Request reqs[])
{
    if (!sw)
        return;
    for (int j = 0; j < sw->n; j++) {
        int i = sw->idx[j];
        mxi_preq_t *p = sw->p[j];
        p->active = reqs[i]; /* MPI_REQUEST_NULL: done, inactive again */
        reqs[i] = p->shell;
    }
    free(sw->idx);
    free(sw->p);
    free(sw);
}

/* ------------------------------------------------ completion wrappers */

int MPI_Wait(MPI_Request *req, MPI_Status *status)
{
    int rc;
    MXI_PERSIST_CALL(rc, 1, req, mxi_req_Wait(req, status));
    return rc;
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
    int rc;
    MXI_PERSIST_CALL(rc, 1, req, mxi_req_Test(req, flag, status));
    return rc;
}

int MPI_Request_get_status(MPI_Request req, int *flag, MPI_Status *status)
{
    int rc = mxi_part_prepare(1, &req, NULL);
    if (rc != MPI_SUCCESS)
        return rc;
    mxi_preq_t *p = preq_of(req);
    if (p && p->active != MPI_REQUEST_NULL)
        req = p->active; /* not freed by this call */
    return mxi_req_Request_get_status(req, flag, status);
}

int MPI_Request_free(MPI_Request *req)
{
    mxi_preq_t *p = req ? preq_of(*req) : NULL;
    if (!p)
        return mxi_req_Request_free(req);
    int rc = MPI_SUCCESS;
    if (p->active != MPI_REQUEST_NULL) /* the operation goes on to completion */
        rc = mxi_req_Request_free(&p->active);
    mxu_locked_map_remove(&pq.map, MXI_REQ_KEY(p->shell));
    atomic_fetch_sub(&pq.live, 1);
    PMPI_Request_free(&p->shell);
    if (p->part)
        mxi_part_free(p->part);
    if (p->own_dt)
        PMPI_Type_free(&p->dt);
    free(p);
    *req = MPI_REQUEST_NULL;
    return rc;
}

int MPI_Cancel(MPI_Request *req)
{
    mxi_preq_t *p = req ? preq_of(*req) : NULL;
    if (p && p->active != MPI_REQUEST_NULL)
        return mxi_req_Cancel(&p->active);
    return mxi_req_Cancel(req);
}

int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[])
{
    int rc;
    MXI_PERSIST_CALL(rc, count, reqs, mxi_req_Waitall(count, reqs, statuses));
    return rc;
}

int MPI_Testall(int count, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
    int rc;
    MXI_PERSIST_CALL(rc, count, reqs, mxi_req_Testall(count, reqs, flag, statuses));
    return rc;
}

int MPI_Testany(int count, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
    int rc;
    MXI_PERSIST_CALL(rc, count, reqs, mxi_req_Testany(count, reqs, index, flag, status));
    return rc;
}

int MPI_Testsome(int incount, MPI_Request reqs[], int *outcount, int indices[],
                 MPI_Status statuses[])
{
    int rc;
    MXI_PERSIST_CALL(rc, incount, reqs,
                     mxi_req_Testsome(incount, reqs, outcount, indices, statuses));
    return rc;
}

int MPI_Waitany(int count, MPI_Request reqs[], int *index, MPI_Status *status)
{
    int rc;
    MXI_PERSIST_CALL(rc, count, reqs, mxi_req_Waitany(count, reqs, index, status));
    return rc;
}

int MPI_Waitsome(int incount, MPI_Request reqs[], int *outcount, int indices[],
                 MPI_Status statuses[])
{
    int rc;
    MXI_PERSIST_CALL(rc, incount, reqs,
                     mxi_req_Waitsome(incount, reqs, outcount, indices, statuses));
    return rc;
}
