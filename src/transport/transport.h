/*
 * transport.h - the UCX transport: one context, one worker, endpoints made
 * from worker addresses exchanged at init, tagged send/receive.
 *
 * Layering: util <- transport. Nothing here knows MPI. All functions except
 * mxt_local_address(), mxt_create() and mxt_destroy() are called ONLY by the
 * engine's progress thread (the worker is UCS_THREAD_MODE_SINGLE).
 */
#ifndef MX_TRANSPORT_H
#define MX_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "util/status.h"

/* Completion callback: status is MXU_OK, MXU_ERR_TRUNCATED, MXU_ERR_CANCELED or
 * MXU_ERR_TRANSPORT; for receives, sender_tag/length describe the message. */
typedef void (*mxt_complete_fn)(void *user, mxu_status_t status, uint64_t sender_tag,
                                size_t length);

typedef struct {
    int world_rank;
    int world_size;
    int enable_wakeup;       /* request UCP_FEATURE_WAKEUP (blocking progress) */
    const char *net_devices; /* UCX NET_DEVICES for this context, or NULL */
    int peer_errors;         /* endpoints report a failed peer (UCX error mode "peer") */
    int shared_gpu;          /* more ranks on the node than visible GPUs (ucx.c overrides) */
} mxt_config_t;

mxu_status_t mxt_create(const mxt_config_t *cfg);
void mxt_destroy(void);
/* Finalize has begun on every rank (after its barrier): peers closing their
 * endpoints from now on is expected, not an error (any thread). */
void mxt_expect_disconnects(void);

/* Worker address of this process (valid until mxt_destroy). */
mxu_status_t mxt_local_address(const void **addr, size_t *len);
/* Install the address table (copied): addr of rank r is blob+offsets[r],
 * length offsets[r+1]-offsets[r]. Endpoints are created lazily. */
mxu_status_t mxt_set_peer_addresses(const void *blob, const size_t *offsets, int nranks);

/* Nonblocking tagged send/receive. Returns MXU_OK if posted (the callback
 * will be called exactly once, possibly from inside this call) or an error
 * (callback not called). `handle` receives an opaque pointer for cancel, or
 * NULL when the callback already ran. synchronous: complete only once the
 * receiver matched the message (MPI_Ssend). */
mxu_status_t mxt_tag_send(int world_dest, const void *buf, size_t len, int memtype_hint, void *reg,
                          int synchronous, uint64_t tag, mxt_complete_fn cb, void *user,
                          void **handle);
mxu_status_t mxt_tag_recv(void *buf, size_t len, int memtype_hint, void *reg, uint64_t tag,
                          uint64_t tag_mask, mxt_complete_fn cb, void *user, void **handle);
/* A registration of [buf, buf + len) (memory type memtype_hint, given, so
 * nothing is detected) with UCX; passed to mxt_tag_send / mxt_tag_recv
 * (`reg`, NULL: none) it spares those calls UCX's memory type detection,
 * which for device memory that UCX did not allocate calls cuCtxSetFlags
 * every time (UCX 1.22) -- a call that waits for a driver lock that a
 * thread blocked in a CUDA graph launch holds. Progress thread only
 * (engine's mxe_mem_register). */
mxu_status_t mxt_mem_register(void *buf, size_t len, int memtype_hint, void **reg);
void mxt_mem_deregister(void *reg);
/* Control messages: small host-memory messages (eager, never rendezvous)
 * between the engines of two processes, delivered to one handler, called on
 * the progress thread from mxt_progress() with data valid during the call.
 * mxt_control_send takes ownership of buf (malloc'd; freed once sent or on
 * error). Messages to one peer are not promised to arrive in order. */
typedef void (*mxt_control_fn)(const void *data, size_t len);
void mxt_set_control_handler(mxt_control_fn fn);
mxu_status_t mxt_control_send(int world_dest, void *buf, size_t len);

/* Cancel a posted receive; its callback is called with MXU_ERR_CANCELED
 * unless it already matched. */
void mxt_cancel(void *handle);

/* A peer failed (its endpoint reported an error, "peer" error mode only;
 * not at finalize, where peers closing is expected). Called on the progress
 * thread from mxt_progress(), after UCX's callbacks, once per peer. From
 * then on, sends to that rank and mxt_watch_peer() fail with MXU_ERR_PEER.
 * UCX itself completes the sends it had to that rank with an error; posted
 * receives are not tied to an endpoint, so completing the ones that name
 * that rank is the hook's job. */
typedef void (*mxt_peer_failed_fn)(int world_rank);
void mxt_set_peer_failure_hook(mxt_peer_failed_fn fn);
/* Non-zero once rank's endpoint reported a failure. */
int mxt_peer_failed(int world_rank);
/* Receives from world_rank: in the "peer" error mode, make sure an endpoint
 * to it exists, so that its failure is detected even when this process
 * never sends to it (endpoints are otherwise made on the first send).
 * MXU_ERR_PEER when it failed already. No-op in the default mode. */
mxu_status_t mxt_watch_peer(int world_rank);

/* Drive the worker; returns the number of events processed. */
unsigned mxt_progress(void);
/* Event fd to epoll on when idle (-1 if wakeup is unavailable), and the arm
 * call to make before blocking (MXU_ERR_BUSY: events pending, do not block). */
int mxt_event_fd(void);
mxu_status_t mxt_arm(void);

/* Before the progress thread starts (the caller owns the worker): do now
 * what UCX otherwise does lazily on first use and what may synchronize the
 * GPU (protocol selection allocates and frees memory of each type;
 * cuMemFree waits for every stream of the context). On the progress thread,
 * with a stream blocked on a wait that thread must release, that deadlocks.
 * Connects to every rank when connect_all, and sends eager and rendezvous
 * messages to self with host memory and, when with_cuda, CUDA device and
 * managed memory. With node_peers (world ranks of this node's processes,
 * this one included, the same list in the same order on each of them;
 * collective over them), also a rendezvous message of device memory to and
 * from each of them: UCX's cuda_ipc then opens a peer's memory once, which
 * enables peer access between the two GPUs (a step that was seen to stall a
 * progress thread behind a stream waiting on it, 2 x H200). */
/* Eager and rendezvous loopback messages through the endpoint to self with
 * host memory and (with_cuda) device and managed memory allocated on the
 * current context's device: UCX's protocol selection and its one-time
 * probing allocations, which synchronize the device, happen here rather
 * than under a stream wait. Progress-thread (or pre-start) only. */
mxu_status_t mxt_warm_memory(int with_cuda);
/* device_memory: a device context is current (device memory can be
 * allocated); node peers (with_cuda) exchange messages with host memory
 * otherwise: every process of the node takes part in every round */
mxu_status_t mxt_warm_up(int with_cuda, int device_memory, int connect_all, const int *node_peers,
                         int npeers);

/* Flush all endpoints and close them (finalize). */
/* Flush the worker and close every endpoint, progressing until all closes
 * are done; then, still progressing, until fence(arg) returns non-zero
 * (fence may be NULL). fence is first called once this rank's closes are
 * done (it may start a non-blocking barrier there and test it afterwards):
 * a peer's close can need this worker's progress. */
mxu_status_t mxt_flush_and_close(int (*fence)(void *arg), void *arg);

/* Finalize without the peers (one failed or never came): with the "peer"
 * error mode, force-close every endpoint (bounded); otherwise leave them to
 * the worker's destruction (a normal close could wait for the missing
 * peer). No flush, no fence. */
void mxt_abandon(void);

/* Versions and transports for mpixacc_info. */
void mxt_describe(char *buf, size_t len);
/* The endpoints made so far, by the set of UCX transports their lanes use
 * ("tcp/eth0 x3, sysv/memory+cma/memory x1"; "unknown" with a UCX older than
 * 1.14, which cannot be asked). Returns the number of endpoints. Any thread. */
int mxt_endpoint_summary(char *buf, size_t len);
const char *mxt_ucx_version(void);
/* The UCX this process actually loaded (one libucp.so.0 serves the whole
 * process: whichever library loaded it first chose it), against the headers
 * the library was built with. Any thread, no initialisation needed. */
typedef struct {
    char path[512];                 /* libucp file (dladdr of ucp_init); "" unknown */
    unsigned major, minor, release; /* ucp_get_version() */
    unsigned hdr_major, hdr_minor;  /* UCP_API_MAJOR/MINOR of the headers */
    int older;                      /* 1: loaded major.minor below the headers' */
    char module_dir[512];           /* where UCX loads its transport modules */
    int has_cuda;                   /* libuct_cuda.so there (cuda_copy, cuda_ipc); -1 unknown */
    int has_ib;                     /* libuct_ib*.so there (rc, ud, dc over verbs); -1 unknown */
    int has_rdmacm;                 /* libuct_rdmacm*.so there (RDMA connection manager) */
} mxt_ucx_loaded_t;
void mxt_ucx_loaded(mxt_ucx_loaded_t *out);

#endif
