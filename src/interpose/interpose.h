/*
 * interpose.h - the PMPI interposition layer (prefix mxi_).
 *
 * Each MPI_* wrapper decides "accelerated or pass-through" and hands over:
 * to PMPI_* for ordinary calls, to the engine for stream-ordered ones. This
 * layer is the only one that knows MPI; it maps communicators to matching
 * contexts, datatypes to byte counts, requests to engine operations, and
 * engine statuses to MPI error classes.
 */
#ifndef MX_INTERPOSE_H
#define MX_INTERPOSE_H

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>

#include "engine/engine.h"
#include "mpix_acc.h"
#include "util/settings.h"
#include "util/hashmap.h"
#include "util/trace.h"

/* How an operation was opted in: decides what MPI_Wait does with it. */
typedef enum {
    MXI_ORIGIN_EXPLICIT = 0,   /* MPIX_Acc_* call: MPI_Wait is a host wait */
    MXI_ORIGIN_STREAMCOMM = 1, /* stream communicator: MPI_Wait enqueues a stream wait */
    MXI_ORIGIN_DATATYPE = 2,   /* datatype attribute: likewise */
} mxi_origin_t;

/* op->user_flags bits */
#define MXI_OPF_GREQ_COMPLETED 0x1 /* PMPI_Grequest_complete was called */
#define MXI_OPF_STATUS_TO_USER 0x2 /* stream-waited with a status: its error reaches the user */
#define MXI_OPF_TEMPLATE 0x4 /* the request of an operation captured into a host graph (graph.c) */
#define MXI_OPF_ORDERED 0x8 /* a nonblocking collective's request captured into a graph (graph.c) */
/* an operation of the library's own blocking call on a stream (MPI_Send,
 * MPI_Recv, MPI_Sendrecv): no MPI handle; the reaper releases it */
#define MXI_OPF_INTERNAL 0x10

/* One info key as the user set it (returned by MPI_Comm_get_info). */
typedef struct {
    char key[32];
    char value[64];
} mxi_hint_t;

#define MXI_MAX_HINTS 6

/* What the library knows about a communicator. */
typedef struct {
    MPI_Comm handle;
    mxe_comm_t ec;      /* ctx id, rank, size, world ranks */
    mxe_comm_t coll_ec; /* the same with the collective context (ctx | MXE_CTX_COLL) */
    int *world_ranks;   /* owned storage behind ec.world_ranks */
    int supported;      /* 0: intercomm or too large for the tag layout */
    /* stream communicator hints */
    mxa_stream_t *stream; /* NULL: not a stream communicator */
    int recv_post_early;
    size_t eager_limit;
    int no_any_source; /* MPI-4 assertions (info keys mpi_assert_no_any_*) */
    int no_any_tag;
    mxi_hint_t hints[MXI_MAX_HINTS];
    int nhints;
    _Atomic int probe_warned;    /* a nonblocking probe's warning was logged */
    struct mxi_coll_ll *coll_ll; /* the one-kernel Allreduce's set-up (coll_ll.c), or NULL */
    _Atomic int remote_members;  /* 0 not known yet, 1 none, 2 a member on another node */
} mxi_comm_t;

typedef struct {
    int active;   /* engine running: accelerated paths available */
    int disabled; /* MPIX_ACC_DISABLE=1: pure pass-through */
    int world_rank;
    int world_size;
    int thread_level; /* what the application got */
    _Atomic uint32_t next_ctx_id;
    mxu_locked_map_t comms;     /* MPI_Comm -> mxi_comm_t* */
    mxu_locked_map_t requests;  /* MPI_Request -> mxe_op_t* (user-owned handles) */
    _Atomic long stream_comms;  /* communicators with a stream set */
    _Atomic long typed_streams; /* datatypes carrying MPIX_ACC_STREAM_KEYVAL */
    /* ops whose handles the library owns (stream-waited, freed early) */
    pthread_mutex_t reap_lock;
    mxe_op_t **reap;
    size_t nreap, capreap;
    size_t reap_cursor; /* where the next bounded reap pass starts */
    _Atomic size_t reap_pending;
    _Atomic long greqs_alive; /* generalized requests started, not yet freed by MPI */
    long released_errors;     /* errors seen in ops the user no longer holds */
} mxi_state_t;

extern mxi_state_t mxi;

/* ---- errors.c ---- */
typedef enum {
    MXI_E_BAD_STREAM,       /* MPI_ERR_ARG */
    MXI_E_COUNT,            /* MPI_ERR_COUNT */
    MXI_E_BUFFER,           /* MPI_ERR_BUFFER */
    MXI_E_RANK,             /* MPI_ERR_RANK */
    MXI_E_TAG,              /* MPI_ERR_TAG */
    MXI_E_REQUEST,          /* MPI_ERR_REQUEST */
    MXI_E_COMM,             /* MPI_ERR_COMM */
    MXI_E_COMM_UNSUPPORTED, /* MPI_ERR_COMM: intercomm / unknown to the library */
    MXI_E_INFO_VALUE,       /* MPI_ERR_INFO_VALUE */
    MXI_E_TYPE,             /* MPI_ERR_TYPE */
    MXI_E_ARG,              /* MPI_ERR_ARG (other) */
    MXI_E_NOT_ACTIVE,       /* library class: library not initialised / disabled */
    MXI_E_TRANSPORT,        /* library class: transport failure */
    MXI_E_PENDING,          /* library class: cancelled at MPI_Finalize */
    MXI_E_NO_MEM,           /* MPI_ERR_NO_MEM */
    MXI_E_INTERN,           /* MPI_ERR_INTERN */
    MXI_E_UNSUPPORTED,      /* MPI_ERR_UNSUPPORTED_OPERATION */
    MXI_E_TOO_MANY,         /* own class: MPIX_ACC_MAX_PENDING operations stuck in flight */
    MXI_E_OP,               /* MPI_ERR_OP */
    MXI_E_ROOT,             /* MPI_ERR_ROOT */
    MXI_E_COUNT_OF_ERRORS
} mxi_err_t;

/* Register error classes, codes and strings (after PMPI_Init). */
void mxi_errors_init(void);
/* MPI error code for a library error. */
int mxi_err_code(mxi_err_t e);
/* MPI error code for an engine status (MXU_OK -> MPI_SUCCESS). */
int mxi_status_to_mpi(mxu_status_t st);
/* Log the reason as a warning, raise through comm's error handler
 * (MPI_COMM_SELF when comm is invalid) and return the code. */
int mxi_raise(MPI_Comm comm, mxi_err_t e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int mxi_raise_code(MPI_Comm comm, int code);
/* As mxi_raise, but only log and return the code: for collective calls,
 * which agree on the outcome before any rank raises. */
int mxi_error(mxi_err_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- init.c ---- */
/* An MPIX_Acc_* call (named call) found the library inactive: if MPI was
 * initialised without this library's MPI_Init (linked after the MPI
 * library), log a warning naming the fix (once per process). */
void mxi_link_order_check(const char *call);

/* ---- comm.c ---- */
uint64_t mxi_handle_key(const void *handle, size_t size);
#define MXI_COMM_KEY(c) mxi_handle_key(&(c), sizeof(MPI_Comm))
#define MXI_REQ_KEY(r) mxi_handle_key(&(r), sizeof(MPI_Request))
/* Look up a communicator (NULL: not known). */
mxi_comm_t *mxi_comm_find(MPI_Comm comm);
/* Register a communicator after creation (collective over it: agrees on a
 * context id with one allreduce). MPI_COMM_NULL is ignored. */
int mxi_comm_register(MPI_Comm comm);
/* Record an info hint the library set or accepted on c (MPI_Comm_get_info
 * returns it); the caller owns c. */
void mxi_hint_record(mxi_comm_t *c, const char *key, const char *value);
/* Complete the non-blocking collective *req (named what, on comm), logging
 * every MPIX_ACC_WAIT_REPORT seconds while a rank has not reached it.
 * give_up_s > 0: return MXI_COLLECTIVE_GAVE_UP after that long (*req is
 * then still active); else wait for good. Otherwise PMPI_Test's code. */
#define MXI_COLLECTIVE_GAVE_UP (-1)
int mxi_collective_wait(MPI_Request *req, MPI_Comm comm, const char *what, double give_up_s);
/* The library's own collectives, non-blocking and waited for by
 * mxi_collective_wait (reported, never given up). */
int mxi_allreduce_int(const int *in, int *out, MPI_Op op, MPI_Comm comm, const char *what);
int mxi_allgather_int(const int *in, int *out, MPI_Comm comm, const char *what);
int mxi_allgatherv_bytes(const void *in, int len, void *out, const int *lens, const int *displs,
                         MPI_Comm comm, const char *what);
void mxi_comm_register_predefined(void);
void mxi_comm_forget(MPI_Comm comm);
/* Point-to-point messages staged through host memory so far (p2p.c,
 * MPIX_ACC_NET_STAGE): sends and receives of this process. */
void mxi_net_stage_counts(unsigned long long *sent, unsigned long long *received);
void mxi_comm_forget_all(void);
/* Apply our info keys from `info` to `c` (validating first). Returns an MPI
 * error code; MPI_SUCCESS if applied. */
int mxi_comm_apply_info(mxi_comm_t *c, MPI_Info info, MPI_Comm err_comm);
/* Copy of `info` without our keys (caller frees; MPI_INFO_NULL stays). */
int mxi_info_filter(MPI_Info info, MPI_Info *out);

/* ---- datatype.c ---- */
void mxi_datatype_init(void);
void mxi_datatype_finalize(void);
/* Stream attached to the datatype (0 if none). */
int mxi_datatype_stream(MPI_Datatype dt, void **stream_handle);
/* Bytes for count elements (size x count); MPI error code if unsupported.
 * With contiguous NULL a non-contiguous type is an error; else
 * *contiguous says which it is (typelayout.h moves the others). */
int mxi_datatype_bytes(MPI_Datatype dt, int count, size_t *bytes, int *contiguous);
/* 1: a valid committed datatype whose elements are dense and abut; 0: a
 * valid one that is not (a derived layout: typelayout.h); -1: not valid. */
int mxi_datatype_contiguous(MPI_Datatype dt);

/* ---- p2p.c ---- */
int mxi_isend(mxa_stream_t *s, mxi_origin_t origin, const void *buf, int count, MPI_Datatype dt,
              int dest, int tag, MPI_Comm comm, int synchronous, MPI_Request *req);
int mxi_irecv(mxa_stream_t *s, mxi_origin_t origin, void *buf, int count, MPI_Datatype dt,
              int source, int tag, MPI_Comm comm, MPI_Request *req);
/* Resolve a user stream handle (MPI_ERR_ARG raised on comm if invalid). */
int mxi_stream_resolve(void *handle, MPI_Comm comm, mxa_stream_t **out);
/* p2p.c: 1 stream-ordered (*s, *origin set), 0 host path, -1 error (*err) */
int mxi_route_checked(MPI_Comm comm, MPI_Datatype dt, mxa_stream_t **s, mxi_origin_t *origin,
                      int *err);
/* The routing of an MPI_* wrapper (p2p.c, persist.c), which returns from
 * the calling function in every case: declares s and origin, routes comm
 * and dt with mxi_route_checked and returns on_stream when the call is
 * stream-ordered (s, origin set), on_host when it passes to the MPI
 * library, and the raised error when dt's stream is no longer valid. */
#define MXI_ROUTE_RETURN(comm, dt, s, origin, on_stream, on_host)                                  \
    do {                                                                                           \
        mxa_stream_t *s;                                                                           \
        mxi_origin_t origin;                                                                       \
        int mxi_route_err_;                                                                        \
        switch (mxi_route_checked((comm), (dt), &s, &origin, &mxi_route_err_)) {                   \
        case 1:                                                                                    \
            return (on_stream);                                                                    \
        case -1:                                                                                   \
            return mxi_route_err_;                                                                 \
        default:                                                                                   \
            return (on_host);                                                                      \
        }                                                                                          \
    } while (0)
/* p2p.c: check a send's (is_send) or receive's arguments as MPI_Isend /
 * MPI_Irecv on a stream would (MPI error raised and returned) */
int mxi_p2p_check(int is_send, const void *buf, int count, MPI_Datatype dt, int peer, int tag,
                  MPI_Comm comm, MPI_Request *req);
/* request.c: the completion calls on requests that are not persistent
 * (persist.c's MPI_* wrappers put persistent requests' operations in) */
int mxi_req_Wait(MPI_Request *req, MPI_Status *status);
int mxi_req_Test(MPI_Request *req, int *flag, MPI_Status *status);
int mxi_req_Request_get_status(MPI_Request req, int *flag, MPI_Status *status);
int mxi_req_Request_free(MPI_Request *req);
int mxi_req_Cancel(MPI_Request *req);
int mxi_req_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[]);
int mxi_req_Testall(int count, MPI_Request reqs[], int *flag, MPI_Status statuses[]);
int mxi_req_Testany(int count, MPI_Request reqs[], int *index, int *flag, MPI_Status *status);
int mxi_req_Testsome(int incount, MPI_Request reqs[], int *outcount, int indices[],
                     MPI_Status statuses[]);
int mxi_req_Waitany(int count, MPI_Request reqs[], int *index, MPI_Status *status);
int mxi_req_Waitsome(int incount, MPI_Request reqs[], int *outcount, int indices[],
                     MPI_Status statuses[]);
/* persist.c: persistent requests. Around a call on a request array: put
 * each active persistent request's current operation in its place (in),
 * and the persistent handle back (out: inactive once that operation's
 * request was freed). `sw` is caller storage from mxi_persist_in (NULL
 * when there were none); both cost one load when no persistent request
 * exists. */
typedef struct mxi_pswap mxi_pswap_t;
mxi_pswap_t *mxi_persist_in(int count, MPI_Request reqs[]);
void mxi_persist_out(mxi_pswap_t *sw, MPI_Request reqs[]);
/* Partitioned requests (partitioned.c) are persistent requests whose
 * operations are their epochs: a shell in persist.c's table (add), the
 * partitioned request behind a handle and its active epoch's request slot
 * (NULL: not a partitioned request). */
typedef struct mxi_part mxi_part_t;
int mxi_persist_add_part(MPI_Comm comm, mxi_part_t *part, MPI_Request *req);
mxi_part_t *mxi_persist_part(MPI_Request h, MPI_Request **active);
/* partitioned.c: start an epoch on s (NULL: as MPI_Start would: the
 * communicator's stream, else none), its request into *active; and the
 * request's end (MPI_Request_free: an epoch in flight goes on). */
int mxi_part_start(mxi_part_t *part, mxa_stream_t *s, MPI_Request *active);
/* Register the partitioned requests' poller with the engine (before the
 * progress thread starts). */
void mxi_part_init(void);
/* Before a completion call on reqs: a partitioned request whose epoch
 * runs on the direct protocol gets its completion enqueued -- on s (a
 * stream wait; NULL: the host waits, or a stream communicator's request
 * waits on its stream) -- and, where the host waits, an op in its place. */
int mxi_part_prepare(int count, MPI_Request reqs[], mxa_stream_t *s);
void mxi_part_free(mxi_part_t *part);
/* p2p.c: hand op to the engine with a generalized request for it -- or,
 * while *mxi_internal_op is set on this thread, without one: op goes
 * there (MXI_OPF_INTERNAL) and *req is MPI_REQUEST_NULL */
int mxi_submit(mxe_op_t *op, mxi_origin_t origin, MPI_Comm comm, MPI_Request *req);
extern _Thread_local mxe_op_t **mxi_internal_op;
/* rc = call, a completion call on (count, reqs), between mxi_persist_in
 * and mxi_persist_out (reqs is evaluated more than once), after
 * mxi_part_prepare for a stream wait on s. */
#define MXI_PERSIST_CALL_ON(rc, count, reqs, s, call)                                              \
    do {                                                                                           \
        (rc) = mxi_part_prepare((count), (reqs), (s));                                             \
        if ((rc) == MPI_SUCCESS) {                                                                 \
            mxi_pswap_t *mxi_pswap_ = mxi_persist_in((count), (reqs));                             \
            (rc) = (call);                                                                         \
            mxi_persist_out(mxi_pswap_, (reqs));                                                   \
        }                                                                                          \
    } while (0)
/* ... a host completion call (s: NULL) */
#define MXI_PERSIST_CALL(rc, count, reqs, call) MXI_PERSIST_CALL_ON(rc, count, reqs, NULL, call)

/* ---- request.c ---- */
mxe_op_t *mxi_request_op(MPI_Request req);
void mxi_request_track(MPI_Request req, mxe_op_t *op);
/* Stream wait on requests: handles set to MPI_REQUEST_NULL, library owns
 * them. statuses: NULL to ignore (never MPI_STATUSES_IGNORE). */
/* NVTX name of the stream-wait enqueue range (p2p.c; util/trace.h) */
extern mxu_trace_name_t mxi_tn_wait;
int mxi_stream_waitall(mxa_stream_t *s, int count, MPI_Request reqs[], MPI_Status *statuses,
                       MPI_Comm err_comm);
/* One stream wait on n (at most MXI_WAIT_OPS_MAX: a blocking call's)
 * operations without handles (MXI_OPF_INTERNAL; NULL entries skipped), the
 * status of op i at status_at[i] (NULL: none); the reaper releases them. */
#define MXI_WAIT_OPS_MAX 2
int mxi_stream_wait_ops(mxa_stream_t *s, int n, mxe_op_t *const *ops, MPI_Status *const *status_at,
                        MPI_Comm err_comm);
/* Complete and free library-owned handles whose ops are done. */
void mxi_reap(int all);
/* Wait while MPIX_ACC_MAX_PENDING operations are alive (new_request) or s
 * (may be NULL) is MPIX_ACC_STREAM_DEPTH points ahead of its GPU (p2p.c). */
int mxi_throttle(MPI_Comm comm, mxa_stream_t *s, int new_request);
/* streamcoll.c: messages of stream-ordered collectives that ended with an error */
long mxi_streamcoll_failed(void);
/* Write an engine result into an MPI_Status (also the engine's writer). */
void mxi_fill_status(mxe_op_t *op, MPI_Status *status);
void mxi_result_writer(mxe_op_t *op, void *target);
/* Untrack a handle whose op is complete, complete and free it (graph.c:
 * a captured stream wait takes its requests). *req = MPI_REQUEST_NULL. */
void mxi_request_retire(MPI_Request *req, mxe_op_t *op);

/* p2p.c: MPI's status of an operation with MPI_PROC_NULL (source
 * MPI_PROC_NULL, tag MPI_ANY_TAG, count 0, not cancelled; MPI_ERROR is
 * left alone), as the shortcut's requests give it. */
void mxi_proc_null_status(MPI_Status *st);

/* ---- graph.c: host graphs (MPIX_Acc_Hoststream_begin_capture(3)) and
 * point-to-point in CUDA graphs ---- */
/* Is s a host or CUDA stream being captured (a driver query on CUDA
 * streams)? */
int mxi_graph_capturing(const mxa_stream_t *s);
/* The capture s is in cannot be completed correctly: a host stream's is
 * broken (its end fails saying why), a CUDA stream's invalidated. */
void mxi_graph_break(mxa_stream_t *s, const char *why);
/* The counter protocol's poller (the engine's; before its thread starts) */
void mxi_graph_init(void);
/* MPI_Finalize after its drain: every graph's waits released */
void mxi_graph_finalize(void);
/* Counter-protocol statistics: captures (graph states) made, operations
 * made for launches, launches whose waits were released; 1 if any state was
 * made, else 0. */
int mxi_graph_stats(unsigned long long *states, unsigned long long *made, unsigned long long *done);
/* A send or receive enqueued on a capturing stream (arguments checked):
 * recorded as a template; *req its placeholder request. layout: NULL for
 * contiguous data, else the layout of count elements of a non-contiguous
 * datatype at buf, `bytes` packed bytes (the reference is the call's: kept
 * with the graph, or dropped on failure) -- the graph packs a send before
 * its fire and unpacks a receive after its captured wait (host streams: in
 * heap memory; CUDA: device buffers with the pack kernel, in a block of
 * accel's pool that the same call made before the capture left, host ones
 * in host nodes). */
struct mxi_layout;
int mxi_graph_p2p(mxa_stream_t *s, mxi_origin_t origin, int is_send, void *buf, size_t bytes,
                  struct mxi_layout *layout, int count, int peer, int tag, MPI_Comm comm,
                  mxi_comm_t *c, int synchronous, MPI_Request *req);
/* The request of a nonblocking collective captured on s (its blocking form
 * recorded just before): a stream wait captured on s takes it with nothing
 * to wait for -- s's order completes it --, one on another stream fails;
 * a host wait gets MPI_ERR_REQUEST. */
int mxi_graph_ordered_request(mxa_stream_t *s, mxi_origin_t origin, MPI_Comm comm,
                              MPI_Request *req);
/* A stream wait on a capturing stream: recorded; the requests are retired.
 * Its count requests are reqs[at[i]] (at NULL: reqs[0..count-1]), their
 * statuses the same elements of statuses (NULL: none wanted). */
int mxi_graph_wait(mxa_stream_t *s, int count, MPI_Request reqs[], MPI_Status *statuses,
                   const int *at, MPI_Comm err_comm);
/* A stream-ordered collective (streamcoll.c) on a capturing stream: each
 * round's sends and receives become templates without requests
 * (mxi_graph_coll_post; ec: the communicator's collective context, peer
 * and tag engine forms) whose operations the round's wait entry takes
 * (mxi_graph_coll_wait); its copies and reductions are steps fn(arg) run
 * at every launch, arg (malloc'ed) the graph's (mxi_graph_step); memory
 * they use is the graph's (mxi_graph_keep). On a CUDA stream the copies
 * and reductions are enqueued as usual and become the graph's nodes (steps
 * and kept memory are host streams' only). Every one frees what it was
 * given when it fails (and the capture is then broken). */
typedef struct mxi_tmpl mxi_tmpl_t;
mxu_status_t mxi_graph_coll_post(mxa_stream_t *s, int is_send, void *buf, size_t bytes,
                                 const mxe_comm_t *ec, int peer, int tag, size_t eager_limit,
                                 mxi_tmpl_t **out);
mxu_status_t mxi_graph_coll_wait(mxa_stream_t *s, mxi_tmpl_t *const *t, int n);
mxu_status_t mxi_graph_step(mxa_stream_t *s, void (*fn)(void *), void *arg);
mxu_status_t mxi_graph_keep(mxa_stream_t *s, void *p);

/* Grequest callbacks */
int mxi_greq_query(void *extra_state, MPI_Status *status);
int mxi_greq_free(void *extra_state);
int mxi_greq_cancel(void *extra_state, int complete);

static inline int mxi_on(void) { return mxi.active; }

/* coll_ll.c: the one-kernel Allreduce of small messages on CUDA streams
 * between processes of a node. Takes the call (returns 1, its MPI code in
 * *rc) or leaves it to the round-based path (0). src: this member's data;
 * dst: the result's place (NULL: not wanted, a Reduce off the root).
 * Collective at its first use on a communicator (set-up). */
int mxi_coll_ll_allreduce(mxi_comm_t *c, MPI_Comm comm, mxa_stream_t *s, const void *src, void *dst,
                          size_t n, size_t esize, mxa_red_kind_t kind, mxa_red_op_t op, int *rc);
void mxi_coll_ll_free(struct mxi_coll_ll *ll);

#endif
