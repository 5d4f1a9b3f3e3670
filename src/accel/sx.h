/*
 * sx.h - stream-executed (SX) links for the engine (sx.c; the protocol is
 * sx_proto.h). A link carries messages from one process to another of the
 * same node through a ring the receiver owns; the sender's stream writes
 * each message into a slot and the receiver's stream copies it out, with
 * no host thread in between. The engine decides which messages take a
 * link (engine/path.c).
 */
#ifndef MX_ACCEL_SX_H
#define MX_ACCEL_SX_H

#include "accel/accel.h"
#include "accel/sx_proto.h"

typedef struct mxa_sx_link mxa_sx_link_t;

/* Process-wide: records, the abort word, the deadline of every wait
 * (timeout_s, 0: none). mxa_sx_shutdown after every link is closed. */
mxu_status_t mxa_sx_setup(double timeout_s);
/* The accelerator layer met a device context (its first, in a process that
 * had none at mxa_sx_setup): the abort word is made now. */
void mxa_sx_context_ready(void);
void mxa_sx_shutdown(void);
/* Every receive step waiting anywhere stops (MXA_SX_ABORTED). */
void mxa_sx_abort_all(void);

/* Receiver: the link for one peer's messages: a control page and the
 * ring (LL words, sx_proto.h: slot_bytes of message take twice that in
 * ring) in POSIX shared memory `name` ("/..."). Host streams use it as it
 * is; for CUDA streams each process registers the segment with the driver
 * (cuMemHostRegister, PORTABLE) at first use: the GPUs read and write it
 * over PCIe or C2C. (A ring in device memory, faster over NVLink, needs
 * an export that is not bound to one context per peer process -- CUDA
 * IPC handles are: UCX's mappings in the library's context made the
 * application context's open fail with CUDA_ERROR_INVALID_HANDLE on the
 * H100 -- e.g. cuMemCreate with a POSIX file descriptor: next step.) */
mxu_status_t mxa_sx_link_create(const char *name, unsigned nslots, size_t slot_bytes,
                                mxa_sx_link_t **out);
/* Sender: open a peer's link (MXU_ERR_NOT_READY: not there yet). */
mxu_status_t mxa_sx_link_open(const char *name, mxa_sx_link_t **out);
/* Unmap (and, for the receiver, free the ring and unlink the name). */
void mxa_sx_link_close(mxa_sx_link_t *l);
unsigned mxa_sx_link_nslots(const mxa_sx_link_t *l);
size_t mxa_sx_link_slot_bytes(const mxa_sx_link_t *l);
/* Largest message a send on s may put on the link (see sx.c): the eager
 * limit, MXA_SX_DRING_EAGER_FACTOR times it into a mapped device ring, at
 * most a slot. */
#define MXA_SX_DRING_EAGER_FACTOR 4
size_t mxa_sx_link_send_limit(const mxa_sx_link_t *l, const mxa_stream_t *s, size_t eager_limit);
/* Largest bulk message a send on s may put on the link (0: none): into a
 * mapped device ring with bulk slots (MPIX_ACC_SX_BULK_SLOTS), at most
 * MXA_SX_BULK_EAGER_FACTOR times the eager limit and a bulk slot
 * (MPIX_ACC_SX_BULK_BYTES). Above mxa_sx_link_send_limit, a send is bulk. */
#define MXA_SX_BULK_EAGER_FACTOR 128
size_t mxa_sx_link_bulk_limit(const mxa_sx_link_t *l, const mxa_stream_t *s, size_t eager_limit);
unsigned mxa_sx_link_bulk_slots(const mxa_sx_link_t *l);
size_t mxa_sx_slot_stride(size_t slot_bytes);
/* Memory of one link (one peer process of the node, one direction) under
 * the settings: the shared-memory segment (control page and ring) and the
 * device ring (ring, bulk slots, counters; a GPU's is rounded up to its
 * allocation granularity). */
void mxa_sx_link_memory(size_t *shared, size_t *device);
/* The published ring's kind (MXA_SX_RING_*; NONE before publication). */
int mxa_sx_link_ring_kind(const mxa_sx_link_t *l);
/* Receiver: make the ring usable by stream s's executor (CUDA: register
 * the segment, application thread; on failure the ring is withdrawn, so
 * senders stop using it). */
mxu_status_t mxa_sx_link_publish(mxa_sx_link_t *l, mxa_stream_t *s);
/* Receiver: can stream s run receive steps on the published ring? */
int mxa_sx_link_published_for(const mxa_sx_link_t *l, const mxa_stream_t *s);
/* Sender: may stream s write into the peer's ring (CUDA: the segment is
 * registered at the first call)? MXU_OK yes, MXU_ERR_NOT_READY withdrawn,
 * MXU_ERR_UNSUPPORTED not from this stream. */
mxu_status_t mxa_sx_link_attach(mxa_sx_link_t *l, mxa_stream_t *s);
/* Sender: one step towards mapping the receiver's device ring for s (never
 * waits): at every send on the link, also those that take UCX, so that a
 * code whose messages all exceed the shared ring's limit still gets the
 * device ring's larger ones (LL up to 4 x the eager limit, bulk). */
void mxa_sx_link_advance(mxa_sx_link_t *l, mxa_stream_t *s);
/* Bounce buffers for send steps (host-visible; size classes up to 4 MiB). */
void *mxa_sx_bounce_alloc(size_t bytes);
void mxa_sx_bounce_free(void *b, size_t bytes);
/* Can the executor of s read or write memory of this type directly? */
int mxa_sx_stream_reaches(const mxa_stream_t *s, int memtype);

/* The host side of a receive (progress thread): is (ctx, tag, k) in the
 * ring (its slot, link number and size)? And: copy up to cap bytes of it
 * to host memory and free the slot; returns the bytes copied, (size_t)-1
 * when the rest of the message did not come (abort word, SX timeout). */
int mxa_sx_link_find(mxa_sx_link_t *l, uint32_t ctx, int tag, uint64_t k, unsigned *slot,
                     uint64_t *n, uint64_t *bytes);
/* *slot from mxa_sx_link_find has this bit when the message is in the
 * device ring */
#define MXA_SX_SLOT_DRING 0x100u
/* ... and this one when it is a bulk message (its data in a bulk slot) */
#define MXA_SX_SLOT_BULK 0x200u
size_t mxa_sx_link_take(mxa_sx_link_t *l, unsigned slot, uint64_t n, uint64_t bytes, void *dst,
                        size_t cap);

/* Records of receive steps (host-visible; a pool). */
mxa_sx_record_t *mxa_sx_record_alloc(void);
void mxa_sx_record_free(mxa_sx_record_t *r);

/* A send step: message n (ordinal k of channel (ctx, tag)) from src into
 * its slot if it is free when the step runs, else into the bounce buffer
 * (the record says which); then the stream's trigger word is raised to
 * trigger_seq (0: not). The caller attached the link. */
typedef struct {
    mxa_sx_link_t *link;
    const void *src;
    size_t bytes;
    uint32_t ctx;
    int tag;
    uint64_t k, n;
    uint64_t trigger_seq;
    void *bounce;            /* host-visible, >= bytes: the message if the slot is taken */
    mxa_sx_record_t *record; /* the step's outcome: MXA_SX_SENT or MXA_SX_BOUNCED */
    int early_claim;         /* the slot's previous message came from another stream (or none) */
    int bulk;     /* a bulk message (mxa_sx_link_bulk_limit): the device ring's bulk slot */
    int in_dring; /* out: the step writes into the device ring */
    /* NULL, or (not bulk) a fused pack: the step gathers pack->buf's
     * non-contiguous bytes into src (pack->packed) before it sends them;
     * the chunk list in memory the stream's executor reads */
    const mxa_pack_args_t *pack;
} mxa_sx_send_t;
mxu_status_t mxa_sx_enqueue_send(mxa_stream_t *s, mxa_sx_send_t *m);
/* Sender's progress thread: a send step of this link ran (in_dring: the
 * m->in_dring it was enqueued with). */
void mxa_sx_link_send_ran(mxa_sx_link_t *l, int in_dring);

/* Receiver, at a receive on the link from stream s: make the link's
 * device ring (MPIX_ACC_SX_DRING) if it has none yet. Application thread. */
void mxa_sx_link_want_dring(mxa_sx_link_t *l, mxa_stream_t *s);
/* Receiver's progress thread: hand device-ring fds to the senders that
 * asked (returns how many); the socket to watch for them (-1: none). */
int mxa_sx_serve(void);
int mxa_sx_listen_fd(void);
/* Named fds handed out by this socket too (partitioned requests' slots):
 * export (the fd is owned by the registry from then on; *sock: the
 * socket's name for the peer), unexport (closes it). A peer asks without
 * waiting: mxa_sx_fd_ask connects and asks (the socket, -1: failed), then
 * mxa_sx_fd_answer until it is not 0 (1: *fd and *bytes; -1: refused). */
mxu_status_t mxa_sx_export_fd(const char *name, int fd, uint64_t bytes, char *sock, size_t len);
void mxa_sx_unexport_fd(const char *name);
int mxa_sx_fd_ask(const char *sock, const char *name);
int mxa_sx_fd_answer(int sock, int *fd, uint64_t *bytes);
/* Device rings made here (receiver) and peers' mapped here (sender). */
void mxa_sx_dring_counts(uint64_t *made, uint64_t *mapped);

/* A receive step for n receives (each: wait for (ctx, tag, k) on its link,
 * copy up to cap bytes to dst, finish the record; `after`: first wait
 * until that stream's trigger word reaches after_seq). */
typedef struct {
    mxa_sx_link_t *link;
    void *dst;
    size_t cap;
    uint32_t ctx;
    int tag;
    uint64_t k;
    mxa_sx_record_t *record;
    mxa_stream_t *after;
    uint64_t after_seq;
    /* 1: publish the copy-out with a system-scope fence before the record
     * (the host may read dst when it sees the record: host or managed
     * memory, or a host wait); 0: later readers are ordered by the stream */
    int fence;
    /* NULL, or a word the step writes the received length into at its end
     * (what it copied; a message UCX delivered: the length the host gives
     * in the record; 0 if it gave up) */
    uint64_t *len_word;
    /* NULL, or a fused unpack (the caller keeps cap at most
     * MXA_SX_FUSE_UNPACK_MAX): after
     * the copy-out into dst (unpack->packed) the step scatters the received
     * length into unpack->buf, before its record and len_word */
    const mxa_pack_args_t *unpack;
} mxa_sx_recv_t;
/* Largest receive whose unpack a step fuses: a CUDA step copies larger
 * bulk messages with several blocks (MXA_SX_BULK_RECV_CHUNK each); the
 * fused unpack needs the whole message in one block's view. */
#define MXA_SX_FUSE_UNPACK_MAX MXA_SX_BULK_RECV_CHUNK
mxu_status_t mxa_sx_enqueue_recv(mxa_stream_t *s, const mxa_sx_recv_t *r, int n);
/* Stream s waits until other's trigger word reaches seq (same kind). */
mxu_status_t mxa_sx_enqueue_after(mxa_stream_t *s, mxa_stream_t *other, uint64_t seq);
/* Receiver: a library stream whose executor writes memory of this type
 * (host memory: a host stream; device memory: a CUDA stream of the
 * context the ring was registered for), for the receive steps the host
 * asks for. NULL: none. */
mxa_stream_t *mxa_sx_library_stream(mxa_sx_link_t *l, int memtype);

#endif
