/*
 * settings.h - the MPIX_ACC_* settings registry: one declarative table.
 *
 * MXU_CONFIG_TABLE drives everything: the fields of mxu_config_t, the
 * environment variable names (MPIX_ACC_<NAME>), the defaults, the parsing,
 * the help text printed by `mpixacc_info -c`, the warnings about malformed
 * values and unknown MPIX_ACC_* variables, and the README's settings table.
 * Adding a setting is adding one row here.
 *
 * Row: X(NAME, TYPE, field, "default", "range", "help")
 *   TYPE   field type   accepted values
 *   BOOL   int          1/0, yes/no, true/false, on/off, y/n
 *   INT    long         decimal integer
 *   SIZE   size_t       bytes with optional k/m/g (KiB, MiB, GiB) suffix
 *   DOUBLE double       finite number
 *   STRING const char * any text (kept for the life of the process)
 *   LOGLEVEL int        error, warn(ing), info, debug
 *
 * "range" narrows what the type accepts; every INT, SIZE, DOUBLE and STRING
 * row has one (BOOL and LOGLEVEL rows: "", their words are the type's):
 *   "lo..hi"     INT, SIZE, DOUBLE: lo <= value <= hi, both bounds written
 *                like a value of the type ("0..1g", "-2..8191")
 *   "w1|w2|..."  STRING: exactly one of these words
 *   "*"          STRING: any text (a file name, a pattern)
 * mxu_config_parse_setting() is the one check (type, then range); a value of
 * the environment that fails it is reported, naming the variable, the value
 * and the default, and the default is used. The help text says what the
 * special values of a range mean (0 turns a limit off, -1 chooses, ...).
 *
 * mxu_config holds the defaults from program start; mxu_config_load() (at
 * MPI_Init and in mpixacc_info) reads the environment. Fields are read
 * without locks: a load writes only the fields that change.
 *
 * (Named settings.h, not config.h: "config.h" is autoconf's header.)
 */
#ifndef MXU_SETTINGS_H
#define MXU_SETTINGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/status.h"

/* clang-format off */
#define MXU_CONFIG_TABLE(X)                                                                       \
    X(DISABLE, BOOL, disable, "0", "",                                                           \
      "Make every MPI wrapper a pure pass-through to the MPI library (the library does "          \
      "nothing; MPIX_Acc_* calls return MPI_ERR_OTHER)")                                         \
    X(LOG, LOGLEVEL, log_level, "warn", "",                                                      \
      "Log threshold: error, warn, info or debug")                                               \
    X(LOG_FILE, STRING, log_file, "", "*",                                                       \
      "File the log goes to instead of stderr (appended to; created at the first message): "     \
      "%h is replaced by the host name, %p by the process id, %% by %, so that each process "    \
      "can have its own (for example mpixacc-%h-%p.log)")                                        \
    X(PROGRESS_CPU, INT, progress_cpu, "-1", "-2..8191",                                         \
      "Core to bind the progress thread to; -1 chooses one with hwloc (near the GPU, else on "    \
      "the calling thread's NUMA node; one core per rank of the node; unbound when the node "     \
      "has fewer than 2 CPUs per process), -2 disables binding")                                 \
    X(PROGRESS_SPIN_US, INT, progress_spin_us, "100", "0..1000000",                              \
      "Microseconds the progress thread spins without work before it blocks; 0 blocks at once")  \
    X(PROGRESS_POLL_US, INT, progress_poll_us, "20", "1..1000000",                               \
      "When accelerator triggers must be polled, longest sleep between polls while idle "         \
      "(microseconds)")                                                                          \
    X(WAIT_SPIN_US, INT, wait_spin_us, "20", "0..1000000",                                       \
      "Microseconds a host-side wait spins before it sleeps; 0 sleeps at once")                  \
    X(EAGER_LIMIT, SIZE, eager_limit, "8192", "0..1g",                                           \
      "Default for the mpix_acc_eager_limit hint: sends up to this size are copied into a "       \
      "library buffer when they start, so they complete at once")                                \
    X(NET_STAGE, STRING, net_stage, "auto", "auto|all|off",                                        \
      "Point-to-point messages of at most MPIX_ACC_NET_STAGE_BYTES travel through a library "      \
      "buffer in host memory: the send copies them there on its stream before it starts (a "       \
      "kernel writing pinned memory for device buffers), UCX sends host memory eagerly, and "      \
      "the receive copies them out behind its stream wait. auto: device and managed buffers "      \
      "on CUDA streams whose peer is a process of another node (no rendezvous, no cuda_copy "      \
      "unpack on the progress thread); all: every such message, any memory, any peer (for "        \
      "UCX builds without GPU support, and how CI runs the path on host streams); off: never")     \
    X(NET_STAGE_BYTES, SIZE, net_stage_bytes, "8k", "0..1m",                                       \
      "Largest message that MPIX_ACC_NET_STAGE stages through host memory")                        \
    X(RECV_POST, STRING, recv_post, "ordered", "ordered|early",                                  \
      "Default for the mpix_acc_recv_post hint: ordered (post when the stream reaches the "       \
      "receive) or early (post at call time)")                                                   \
    X(MAX_PENDING, INT, max_pending, "32768", "1..1000000000",                                   \
      "Stream-ordered operations alive per process at most (each holds an MPI generalized "     \
      "request until it is done and let go of; MPICH allows about 128k live requests): a call "  \
      "beyond it waits, like a full CUDA stream queue, until some are done, and fails with the " \
      "library's \"too many stream-ordered operations\" error after 10 s without one")           \
    X(STREAM_DEPTH, INT, stream_depth, "128", "0..1000000000",                                  \
      "Stream-ordered operations one stream may have ahead of it (sends and receives it has not " \
      "reached, waits not released); a call beyond it waits until the stream catches up (an "   \
      "MPI error after 10 s without progress), so a CUDA driver queue never fills behind a "     \
      "stream wait (a deadlock); 0 turns the limit off")                                         \
    X(WAIT_REPORT, DOUBLE, wait_report, "30", "0..86400",                                      \
      "Seconds a blocking call of the library (host waits, host-stream synchronize, the "        \
      "collectives of communicator creation and MPI_Finalize) waits before it logs what it is "  \
      "waiting for, and again every as many seconds; 0 never reports")                           \
    X(FINALIZE_TIMEOUT, DOUBLE, finalize_timeout, "10", "0..86400",                              \
      "Seconds MPI_Finalize waits for pending stream-ordered operations before it reports and "   \
      "cancels them; 0 reports and cancels at once")                                             \
    X(FINALIZE_PEER_TIMEOUT, DOUBLE, finalize_peer_timeout, "600", "0.001..1e9",                 \
      "Seconds MPI_Finalize waits, after the drain, for every rank to reach it (a non-blocking "  \
      "world barrier, reported every MPIX_ACC_WAIT_REPORT seconds); then, or at once when a "     \
      "peer is known to have failed (with MPIX_ACC_PEER_ERRORS on), it reports, skips the MPI "   \
      "library's finalize (which would wait for the missing rank forever) and returns an error") \
    X(SX, STRING, sx, "auto", "auto|on|off",                                                     \
      "Stream-executed path between processes of a node on communicators without wildcard "      \
      "receives (mpi_assert_no_any_source and _tag): the sending stream writes the message into " \
      "the receiver's ring, the receiving stream copies it out. auto: on for host streams; with " \
      "CUDA on when the node has at least as many GPUs as processes (its receive steps poll: " \
      "where processes share a GPU use on with MPS)")                                            \
    X(SX_SLOTS, INT, sx_slots, "16", "1..64",                                                    \
      "Slots of each stream-executed ring (one per peer process of the node and direction): "   \
      "messages to one peer in flight at once before sends take the UCX path")                   \
    X(SX_SLOT_BYTES, SIZE, sx_slot_bytes, "32k", "64..16m",                                      \
      "Slot payload of the stream-executed path: its largest message together with the "        \
      "communicator's eager limit (the smaller; 4 x the eager limit once the receiver's ring "  \
      "is in its GPU memory); larger ones take the UCX path. Messages are written as LL words " \
      "(4 bytes of data under a 4-byte flag), so ring memory per peer and direction is slots x " \
      "(2 x this + 64 bytes)")                                                                   \
    X(SX_BULK_SLOTS, INT, sx_bulk_slots, "4", "0..8",                                          \
      "Bulk slots of each stream-executed link's device ring (GPU memory of the receiver, or a " \
      "memfd where MPIX_ACC_SX_DRING is on): messages above the LL limit and up to the bulk "  \
      "limit are copied there by a multi-block send step (data, then a fenced header) and out "  \
      "by a multi-block receive step; 0: such messages take the UCX path")                       \
    X(SX_BULK_BYTES, SIZE, sx_bulk_bytes, "512k", "64k..64m",                                   \
      "Size of a bulk slot: the largest message the stream-executed path carries, together "     \
      "with 128 x the communicator's eager limit (the smaller; 512k: bulk steps beat UCX's "     \
      "CUDA IPC copy up to 512 KiB and lose at 1 MiB on 2 x H100); device memory per peer and "  \
      "direction grows by MPIX_ACC_SX_BULK_SLOTS x this")                                        \
    X(SX_FUSE_PACK, BOOL, sx_fuse_pack, "1", "",                                                 \
      "Non-contiguous datatypes on the stream-executed path: a send step packs the buffer "       \
      "itself and a receive step of the library's blocking calls (MPI_Recv, MPI_Sendrecv on a "  \
      "stream) unpacks it, one launch per message instead of two; 0 launches the pack and "      \
      "unpack kernels (host calls on host streams) on their own")                                \
    X(SX_PDL, BOOL, sx_pdl, "1", "",                                                             \
      "Launch the stream-executed path's CUDA steps with programmatic dependent launch "       \
      "(compute capability 9.0 and up): a send step starts while the kernel before it on its "   \
      "stream still runs and claims its slot, then waits for that kernel before it reads the "   \
      "buffer; a receive step scans meanwhile and waits before it writes; so are the pack and "  \
      "unpack kernels of non-contiguous datatypes on a stream; 0 launches them plainly")        \
    X(SX_DRING, STRING, sx_dring, "auto", "auto|on|off",                                         \
      "A second ring per stream-executed link in the receiver's own memory, which the sender "   \
      "maps through a file descriptor the receiver hands out on a Unix socket at first use: "    \
      "auto: for CUDA streams (GPU memory: the receive step polls local memory, the sender "     \
      "writes over NVLink); on: also for host streams (a memfd: how the CPU tests run the "      \
      "hand-over); off: the shared-memory ring only")                                            \
    X(SX_STAGE, STRING, sx_stage, "device", "device|all|off",                                   \
      "Messages of the stream-executed path's channels that come by UCX (their slot was taken) " \
      "are received into host staging and copied out by the receive step: device (into device " \
      "buffers; UCX then never copies into device memory on the progress thread while receive " \
      "steps poll, which can stall it), all (host buffers too; tests), off (UCX writes the "    \
      "buffer itself)")                                                                          \
    X(SX_RECV_POINT, STRING, sx_recv_point, "always", "always|lazy",                             \
      "Stream points of non-blocking receives on the stream-executed path (up to 4 x the eager " \
      "limit): always (each marks its receive's place in the stream: a host test or wait "      \
      "completes once the stream is there); lazy (none: a stream wait puts the receive step "    \
      "in order; a host test or wait enqueues it then, so it completes once the stream passes " \
      "the host's call -- saves a memop per receive, about 1.3 us of host time on H100). "      \
      "Blocking calls' receives have none either way")                                           \
    X(SX_TIMEOUT, DOUBLE, sx_timeout, "600", "0..1e9",                                           \
      "Seconds a stream-executed receive step waits for its message before it completes the "    \
      "receive with an error (0: no limit; finalize and a failed peer stop it anyway)")          \
    X(GRAPH_PROTOCOL, STRING, graph_protocol, "auto", "auto|counter",                          \
      "How a graph's launches run its captured messages: auto (host graphs: on the stream's "    \
      "thread, a fire entry makes a launch's operation and a wait entry waits for it; CUDA "     \
      "graphs: counters, a fire node increments a counter the progress thread watches and a "   \
      "wait node waits for the count of launches it published), counter (host graphs too: "     \
      "the CUDA graphs' protocol tested without a GPU)")                                        \
    X(KI, STRING, ki, "auto", "auto|proxy",                                                     \
      "Partitioned requests (MPIX_Acc_Psend_init): auto (device buffers of two processes of a "  \
      "node whose GPUs reach each other: the direct path, the kernels write into the peer; "     \
      "otherwise the host proxy), proxy (always the host proxy: the progress thread sends each " \
      "partition once it is ready)")                                                             \
    X(KI_LL_BYTES, SIZE, ki_ll_bytes, "4k", "0..1g",                                             \
      "Partitions of a partitioned request on the direct path up to this size travel as LL "      \
      "lines (4 data bytes and a flag per 8 bytes: no fence, twice the bytes); larger ones as "   \
      "plain bytes, a fence and one flag per partition")                                         \
    X(KI_TIMEOUT, DOUBLE, ki_timeout, "60", "0..1e9",                                            \
      "Seconds a device-side wait of a partitioned request (pready for the receiver's credit, "  \
      "parrived_wait, the completion of an epoch) spins before it reports "                      \
      "MPIX_ACC_DERR_TIMEOUT (0: no limit)")                                                     \
    X(UNPACK_OFFLOAD_BYTES, SIZE, unpack_offload_bytes, "64k", "0..1g",                            \
      "Receives of a non-contiguous datatype into host memory that the progress thread would "     \
      "unpack (on CUDA streams; on host streams when they complete before a stream waits for "    \
      "them): packed messages of at least this many bytes are unpacked by the "                   \
      "library's host stream, and the receive completes after it, so the progress thread "         \
      "goes on meanwhile (smaller ones: by the progress thread; 0: all offloaded). Device "        \
      "memory is always unpacked on a library CUDA stream that the progress thread does not "      \
      "wait for")                                                                                  \
    X(ALLREDUCE_RSAG, SIZE, allreduce_rsag, "256k", "0..1g" ,                                     \
      "Stream-ordered Allreduce and Reduce of at least this many bytes: reduce-scatter by "       \
      "recursive halving, then allgather by recursive doubling (each process sends "              \
      "2(p-1)/p of the data); smaller ones by recursive doubling (log2 p times all of it). "      \
      "Both combine the processes' data in the same order: the same bits")                       \
    X(COLL_LL_BYTES, SIZE, coll_ll_bytes, "16k", "0..16k",                                      \
      "Stream-ordered Allreduce and Reduce on CUDA streams of up to this many bytes between "     \
      "processes of one node whose GPUs reach each other run as one kernel per call: each "      \
      "round writes LL lines (4 data bytes and a flag per 8 bytes) straight into the partner's " \
      "GPU memory and spins on the partner's (set up at the first such call on a "              \
      "communicator; 0: off, every call takes the round-based path)")                           \
    X(CUDA, BOOL, cuda, "1", "",                                                                 \
      "Use the CUDA backend when a CUDA driver and device are present")                          \
    X(MEMOPS, BOOL, memops, "1", "",                                                             \
      "Use CUDA stream memory operations for triggers and waits; 0 forces the kernel fallback")  \
    X(IPC_CONTEXT, BOOL, ipc_context, "1", "",                                                 \
      "Map peers' device buffers (UCX cuda_ipc) in a CUDA context of the library's own per "    \
      "device, so that unmapping one never waits for the application's streams (one extra "   \
      "CUDA context per device)")                                                               \
    X(PEER_ERRORS, BOOL, peer_errors, "0", "",                                                 \
      "UCX endpoints report a failed peer as an error instead of ending the job; UCX then "      \
      "leaves out its shared-memory transports (messages within a node go over TCP loopback)")  \
    X(SET_NET_DEVICES, BOOL, set_net_devices, "1", "",                                           \
      "Set UCX_NET_DEVICES to the NIC closest to the GPU unless the user set it")                \
    X(NVTX, BOOL, nvtx, "1", "",                                                                 \
      "Record NVTX ranges (domain mpix-acc) of every enqueue, transfer and stream wait, "          \
      "seen when a tool is attached (Nsight Systems or Compute, NVTX_INJECTION64_PATH); 0 makes " \
      "no NVTX call at all. Builds without CUDA have no NVTX (mpixacc_info -f says)")            \
    X(STATS, BOOL, stats, "0", "",                                                               \
      "Log per-process operation counters, messages and bytes per path, call-order matching "    \
      "counters, engine phase timers and the library's host time per call (p50/p99/mean of "      \
      "sends, receives, stream waits; CUDA launches, stream points, wake-ups inside them) at "    \
      "MPI_Finalize, at INFO level whatever MPIX_ACC_LOG says (to stderr or MPIX_ACC_LOG_FILE)")  \
    X(HANGDUMP_AFTER, DOUBLE, hangdump_after, "0", "0..1e9",                                     \
      "Seconds after which the preloadable watchdog tools/mpixacc_hangdump.so (LD_PRELOAD) "      \
      "prints every thread's backtrace and exits with status 124; 0 never. The watchdog is not "  \
      "linked with the library: it reads the variable itself (getenv, atof) when it is loaded; "  \
      "the library only lists it")                                                               \
    X(PROF, STRING, prof, "", "*",                                                                \
      "Where the preloadable sampling profiler tools/mpixacc_prof.so (LD_PRELOAD) writes the "    \
      "main thread's stack samples at exit (PREFIX.<pid>.prof, for scripts/prof-report.py); "     \
      "empty: it does nothing. Read by the profiler itself (getenv), like the two below")         \
    X(PROF_US, INT, prof_us, "200", "1..1000000",                                                 \
      "Sampling period of tools/mpixacc_prof.so in microseconds")                                 \
    X(PROF_CLOCK, STRING, prof_clock, "wall", "wall|cpu",                                         \
      "What tools/mpixacc_prof.so's period counts: wall-clock time (samples where the thread "    \
      "waits too) or the main thread's CPU time (the kernel's tick bounds the period)")
/* clang-format on */

typedef enum {
    MXU_CFG_BOOL,
    MXU_CFG_INT,
    MXU_CFG_SIZE,
    MXU_CFG_DOUBLE,
    MXU_CFG_STRING,
    MXU_CFG_LOGLEVEL,
} mxu_config_type_t;

/* C type of a field, by table type */
#define MXU_CFG_CTYPE_BOOL int
#define MXU_CFG_CTYPE_INT long
#define MXU_CFG_CTYPE_SIZE size_t
#define MXU_CFG_CTYPE_DOUBLE double
#define MXU_CFG_CTYPE_STRING const char *
#define MXU_CFG_CTYPE_LOGLEVEL int

typedef struct {
#define MXU_CFG_FIELD_(name, type, field, def, range, help) MXU_CFG_CTYPE_##type field;
    MXU_CONFIG_TABLE(MXU_CFG_FIELD_)
#undef MXU_CFG_FIELD_
} mxu_config_t;

/* One row of the registry, as printed and tested. */
typedef struct {
    const char *name; /* full variable name, MPIX_ACC_... */
    mxu_config_type_t type;
    const char *default_value; /* literal, parsed like an environment value */
    const char *range;         /* "lo..hi", "w1|w2" or "" (see above) */
    const char *help;
    int from_env; /* set by the last mxu_config_load() */
} mxu_config_entry_t;

/* The settings in effect. */
extern mxu_config_t mxu_config;

/* Read the MPIX_ACC_* environment into mxu_config; warns (once per value)
 * about malformed values, which keep their default, and about unknown
 * MPIX_ACC_* variables, naming the closest known setting. */
mxu_status_t mxu_config_load(void);

/* MPIX_ACC_WAIT_REPORT in nanoseconds, 0 when reports are off: the one
 * interval every blocking path of the library reports at. */
uint64_t mxu_wait_report_ns(void);

/* Parse `value` as `type` into *out (the field's C type, see above). */
mxu_status_t mxu_config_parse_value(mxu_config_type_t type, const char *value, void *out);
/* The validation of row i: `value` parsed as the row's type and within its
 * range, into *out (written only on success; a STRING is stored as the
 * pointer `value`, which the caller keeps alive). MXU_ERR_INVALID_PARAM when
 * it does not parse or lies outside the range. */
mxu_status_t mxu_config_parse_setting(int i, const char *value, void *out);
/* What row i accepts, in words: "integer -2..8191", "one of ordered|early",
 * "bool: 1/0, yes/no, true/false, on/off" (printed by mpixacc_info -c). */
void mxu_config_describe(int i, char *buf, size_t len);
/* Parse a size: digits, optional k/m/g multiplier, optional b/B or iB. */
mxu_status_t mxu_parse_size(const char *value, size_t *out);

/* Registry rows for listing: 0 <= i < mxu_config_count(); NULL outside. */
int mxu_config_count(void);
const mxu_config_entry_t *mxu_config_entry(int i);
/* Current value of row i as text ("" for an invalid row). */
void mxu_config_value_string(int i, char *buf, size_t len);
/* NAME=value lines, with wrapped help and defaults when with_help. */
void mxu_config_print(FILE *out, int with_help);

#endif
