/*
 * test_sx.c - the stream-executed path's protocol (src/accel/sx_proto.h) and
 * links (src/accel/sx.c) on host streams, without MPI: a receiver's link in
 * shared memory, a sender's view of it, send steps that claim a free slot
 * or leave the message in the bounce buffer when the slot is still taken,
 * the host-side find/take of a receive, LL words (a header half rewritten
 * is no match), a host receive step with its record, the abort word, and
 * the device-ring hand-over (socket, fd, switch, mirror, both rings
 * scanned, the shared one closing).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accel/sx.h"
#include "unit_check.h"
#include "util/settings.h"

static mxa_stream_t *host_stream(void **h)
{
    CHECK(mxa_host_stream_create(h) == MXU_OK, "host stream");
    mxa_stream_t *s = mxa_host_stream_find(*h);
    CHECK(s != NULL, "host stream lookup");
    return s;
}

/* one send step on s, run to completion; returns the record's outcome */
static int send_one(mxa_stream_t *s, void *h, mxa_sx_link_t *l, const void *src, size_t n,
                    uint64_t k, uint64_t seq_no, void *bounce)
{
    mxa_sx_record_t *rec = mxa_sx_record_alloc();
    CHECK(rec != NULL, "record");
    mxa_sx_send_t m = {.link = l,
                       .src = src,
                       .bytes = n,
                       .ctx = 3,
                       .tag = 9,
                       .k = k,
                       .n = seq_no,
                       .bounce = bounce,
                       .record = rec};
    CHECK(mxa_sx_enqueue_send(s, &m) == MXU_OK, "enqueue send");
    CHECK(mxa_host_stream_synchronize(h) == MXU_OK, "synchronize");
    uint64_t done = __atomic_load_n(&rec->done, __ATOMIC_ACQUIRE);
    CHECK(done & 1, "send record done");
    CHECK_EQ_LL(mxa_sx_done_bytes(done), n);
    int out = mxa_sx_done_error(done);
    mxa_sx_record_free(rec);
    return out;
}

/* One receive step of (ctx 3, tag 9, k) into dst on r, run to completion:
 * its done word. */
static uint64_t recv_one(mxa_stream_t *r, void *h, mxa_sx_link_t *l, uint64_t k, void *dst,
                         size_t cap)
{
    mxa_sx_record_t *rec = mxa_sx_record_alloc();
    CHECK(rec != NULL, "record");
    mxa_sx_recv_t rv = {
        .link = l, .dst = dst, .cap = cap, .ctx = 3, .tag = 9, .k = k, .record = rec};
    CHECK(mxa_sx_enqueue_recv(r, &rv, 1) == MXU_OK, "enqueue receive k=%llu",
          (unsigned long long)k);
    CHECK(mxa_host_stream_synchronize(h) == MXU_OK, "synchronize receive");
    uint64_t done = __atomic_load_n(&rec->done, __ATOMIC_ACQUIRE);
    mxa_sx_record_free(rec);
    return done;
}

/* The device-ring hand-over (MPIX_ACC_SX_DRING=on: a memfd for host
 * streams), both sides in this process: the receiver makes and publishes
 * it; the sender asks (socket), the receiver's "progress thread"
 * (mxa_sx_serve) answers with the fd, the sender maps it at a later send
 * and writes there from then on; the shared ring keeps its message until
 * it is taken; host_final once every host-ring step ran. */
static void device_ring(const char *name)
{
    setenv("MPIX_ACC_SX_DRING", "on", 1);
    CHECK(mxu_config_load() == MXU_OK, "settings");
    mxa_sx_link_t *rx = NULL, *tx = NULL;
    CHECK(mxa_sx_link_create(name, 2, 256, &rx) == MXU_OK, "create (device ring)");
    CHECK(mxa_sx_link_open(name, &tx) == MXU_OK, "open (device ring)");
    void *hs = NULL, *hr = NULL;
    mxa_stream_t *s = host_stream(&hs), *r = host_stream(&hr);
    unsigned char msg[64], got[64], bounce[256];
    for (int i = 0; i < 64; i++)
        msg[i] = (unsigned char)(i * 7 + 3);

    /* the receiver makes its ring at its first receive; the sender's first
     * attach asks for it, its send still takes the shared ring */
    mxa_sx_link_want_dring(rx, r);
    CHECK(mxa_sx_listen_fd() >= 0, "the receiver listens for senders");
    CHECK(mxa_sx_link_attach(tx, s) == MXU_OK, "attach (asks for the device ring)");
    /* into the shared ring: the eager limit (the message crosses a bus
     * twice), at most a slot */
    CHECK_EQ_LL(mxa_sx_link_send_limit(tx, s, 32), 32);
    CHECK_EQ_LL(mxa_sx_link_send_limit(tx, s, 1000), 256);
    mxa_sx_send_t m = {.link = tx,
                       .src = msg,
                       .bytes = 10,
                       .ctx = 3,
                       .tag = 9,
                       .k = 0,
                       .n = 0,
                       .bounce = bounce,
                       .record = mxa_sx_record_alloc()};
    CHECK(mxa_sx_enqueue_send(s, &m) == MXU_OK && !m.in_dring, "k=0 into the shared ring");
    CHECK(mxa_host_stream_synchronize(hs) == MXU_OK, "synchronize send 0");
    mxa_sx_record_free(m.record);

    /* the receiver's progress thread answers; the next attach maps it */
    int served = 0;
    for (int i = 0; i < 1000 && !served; i++) {
        served = mxa_sx_serve();
        if (!served)
            usleep(1000);
    }
    CHECK(served == 1, "the receiver handed out its device ring (%d)", served);
    CHECK(mxa_sx_link_attach(tx, s) == MXU_OK, "attach (maps the device ring)");
    uint64_t made = 0, mapped = 0;
    mxa_sx_dring_counts(&made, &mapped);
    CHECK(made == 1 && mapped == 1, "device rings made %llu mapped %llu", (unsigned long long)made,
          (unsigned long long)mapped);
    /* into the mapped device ring: MXA_SX_DRING_EAGER_FACTOR x the eager
     * limit, still at most a slot */
    CHECK_EQ_LL(mxa_sx_link_send_limit(tx, s, 32), 32 * MXA_SX_DRING_EAGER_FACTOR);
    CHECK_EQ_LL(mxa_sx_link_send_limit(tx, s, 64), 256);
    CHECK_EQ_LL(mxa_sx_link_send_limit(tx, s, (size_t)-1), 256);

    /* k=1 goes into the device ring (its header mirrored for the host) */
    m = (mxa_sx_send_t){.link = tx,
                        .src = msg + 1,
                        .bytes = 33,
                        .ctx = 3,
                        .tag = 9,
                        .k = 1,
                        .n = 1,
                        .bounce = bounce,
                        .record = mxa_sx_record_alloc()};
    CHECK(mxa_sx_enqueue_send(s, &m) == MXU_OK && m.in_dring, "k=1 into the device ring");
    CHECK(mxa_host_stream_synchronize(hs) == MXU_OK, "synchronize send 1");
    mxa_sx_record_free(m.record);
    unsigned slot = 0;
    uint64_t n = 0, bytes = 0;
    CHECK(mxa_sx_link_find(rx, 3, 9, 1, &slot, &n, &bytes) && slot == (1 | MXA_SX_SLOT_DRING) &&
              n == 1 && bytes == 33,
          "k=1 found through the mirror: slot %#x n %llu bytes %llu", slot, (unsigned long long)n,
          (unsigned long long)bytes);
    CHECK(mxa_sx_link_find(rx, 3, 9, 0, &slot, &n, &bytes) && slot == 0,
          "k=0 still in the shared ring (slot %#x)", slot);

    /* a receive step scans both rings: k=1 from the device ring */
    memset(got, 0, sizeof got);
    uint64_t done = recv_one(r, hr, rx, 1, got, sizeof got);
    CHECK(mxa_sx_done_error(done) == MXA_SX_OK && mxa_sx_done_bytes(done) == 33 &&
              memcmp(got, msg + 1, 33) == 0,
          "k=1 received from the device ring (error %d, %llu bytes)", mxa_sx_done_error(done),
          (unsigned long long)mxa_sx_done_bytes(done));
    /* the host takes k=0 from the shared ring; every host-ring step ran:
     * the shared ring closes */
    memset(got, 0, sizeof got);
    CHECK(mxa_sx_link_find(rx, 3, 9, 0, &slot, &n, &bytes), "k=0 again");
    CHECK_EQ_LL(mxa_sx_link_take(rx, slot, n, bytes, got, sizeof got), 10);
    CHECK(memcmp(got, msg, 10) == 0, "k=0's payload from the shared ring");
    mxa_sx_link_send_ran(tx, 0);
    mxa_sx_link_send_ran(tx, 1);
    /* slot 0 is free again (k=0 taken): k=2 (n=2) goes into the device
     * ring; the host takes it too (a GPU ring would be copied over) */
    m = (mxa_sx_send_t){.link = tx,
                        .src = msg + 2,
                        .bytes = 7,
                        .ctx = 3,
                        .tag = 9,
                        .k = 2,
                        .n = 2,
                        .bounce = bounce,
                        .record = mxa_sx_record_alloc()};
    CHECK(mxa_sx_enqueue_send(s, &m) == MXU_OK && m.in_dring, "k=2 into the device ring");
    CHECK(mxa_host_stream_synchronize(hs) == MXU_OK, "synchronize send 2");
    mxa_sx_record_free(m.record);
    CHECK(mxa_sx_link_find(rx, 3, 9, 2, &slot, &n, &bytes) && slot == (0 | MXA_SX_SLOT_DRING),
          "k=2 in the device ring's slot 0 (%#x)", slot);
    memset(got, 0, sizeof got);
    CHECK_EQ_LL(mxa_sx_link_take(rx, slot, n, bytes, got, 5), 5);
    CHECK(memcmp(got, msg + 2, 5) == 0 && got[5] == 0, "k=2 taken, truncated to 5 bytes");
    /* and k=3 (n=3, slot 1, free: k=1 consumed) by a receive step, the
     * shared ring no longer scanned */
    m = (mxa_sx_send_t){.link = tx,
                        .src = msg + 3,
                        .bytes = 61,
                        .ctx = 3,
                        .tag = 9,
                        .k = 3,
                        .n = 3,
                        .bounce = bounce,
                        .record = mxa_sx_record_alloc()};
    CHECK(mxa_sx_enqueue_send(s, &m) == MXU_OK && m.in_dring, "k=3 into the device ring");
    CHECK(mxa_host_stream_synchronize(hs) == MXU_OK, "synchronize send 3");
    mxa_sx_record_free(m.record);
    memset(got, 0, sizeof got);
    done = recv_one(r, hr, rx, 3, got, 60);
    CHECK(mxa_sx_done_error(done) == MXA_SX_TRUNCATED && mxa_sx_done_bytes(done) == 60 &&
              memcmp(got, msg + 3, 60) == 0,
          "k=3: truncated to 60 (error %d)", mxa_sx_done_error(done));
    CHECK(mxa_host_stream_free(hs) == MXU_OK && mxa_host_stream_free(hr) == MXU_OK, "free");
    mxa_sx_link_close(tx);
    mxa_sx_link_close(rx);
    unsetenv("MPIX_ACC_SX_DRING");
}

int main(void)
{
    char name[96];
    snprintf(name, sizeof name, "/mpixacc-sx-unit-%d", (int)getpid());
    CHECK(mxa_sx_setup(5.0) == MXU_OK, "setup");

    mxa_sx_link_t *missing = NULL;
    CHECK(mxa_sx_link_open(name, &missing) == MXU_ERR_NOT_READY, "open before create");

    /* receiver's link: 2 slots of 256 bytes; sender's view of it */
    mxa_sx_link_t *rx = NULL, *tx = NULL;
    CHECK(mxa_sx_link_create(name, 2, 256, &rx) == MXU_OK, "create");
    CHECK(mxa_sx_link_open(name, &tx) == MXU_OK, "open");
    CHECK_EQ_LL(mxa_sx_link_nslots(tx), 2);
    CHECK_EQ_LL(mxa_sx_link_slot_bytes(tx), 256);
    CHECK_EQ_LL(mxa_sx_link_ring_kind(tx), MXA_SX_RING_HOST);

    void *hs = NULL;
    mxa_stream_t *s = host_stream(&hs);
    CHECK(mxa_sx_link_attach(tx, s) == MXU_OK, "attach from a host stream");
    CHECK(mxa_sx_link_published_for(rx, s), "the receiver's ring serves host streams");
    CHECK(mxa_sx_stream_reaches(s, MXA_MEM_HOST) && !mxa_sx_stream_reaches(s, MXA_MEM_DEVICE),
          "a host stream reaches host memory only");

    unsigned char msg[256], got[256], bounce[256];
    for (int i = 0; i < 256; i++)
        msg[i] = (unsigned char)(i * 13 + 1);

    /* message n=0 (slot 0), k=0: into the ring */
    CHECK_EQ_LL(send_one(s, hs, tx, msg, 100, 0, 0, bounce), MXA_SX_SENT);
    unsigned slot = 99;
    uint64_t n = 99, bytes = 0;
    CHECK(!mxa_sx_link_find(rx, 3, 9, 1, &slot, &n, &bytes), "k=1 is not there");
    CHECK(!mxa_sx_link_find(rx, 3, 8, 0, &slot, &n, &bytes), "tag 8 is not there");
    CHECK(!mxa_sx_link_find(rx, 4, 9, 0, &slot, &n, &bytes), "context 4 is not there");
    CHECK(mxa_sx_link_find(rx, 3, 9, 0, &slot, &n, &bytes), "k=0 is there");
    CHECK_EQ_LL(slot, 0);
    CHECK_EQ_LL(n, 0);
    CHECK_EQ_LL(bytes, 100);

    /* message n=1 (slot 1), k=1; then n=2 wants slot 0, not consumed yet: bounce */
    CHECK_EQ_LL(send_one(s, hs, tx, msg + 1, 50, 1, 1, bounce), MXA_SX_SENT);
    memset(bounce, 0, sizeof bounce);
    CHECK_EQ_LL(send_one(s, hs, tx, msg + 2, 60, 2, 2, bounce), MXA_SX_BOUNCED);
    CHECK(memcmp(bounce, msg + 2, 60) == 0, "the bounced message is in the bounce buffer");
    CHECK(!mxa_sx_link_find(rx, 3, 9, 2, &slot, &n, &bytes), "the bounced k=2 is not in the ring");

    /* take k=0 (truncated to 40 bytes), which frees slot 0 */
    CHECK(mxa_sx_link_find(rx, 3, 9, 0, &slot, &n, &bytes), "k=0 again");
    memset(got, 0, sizeof got);
    CHECK_EQ_LL(mxa_sx_link_take(rx, slot, n, bytes, got, 40), 40);
    CHECK(memcmp(got, msg, 40) == 0 && got[40] == 0, "take copied 40 bytes");

    /* n=3 (slot 1: still holds n=1) bounces; n=4 (slot 0, free again) goes in */
    CHECK_EQ_LL(send_one(s, hs, tx, msg, 10, 3, 3, bounce), MXA_SX_BOUNCED);
    CHECK_EQ_LL(send_one(s, hs, tx, msg, 256, 4, 4, bounce), MXA_SX_SENT);
    CHECK(mxa_sx_link_find(rx, 3, 9, 4, &slot, &n, &bytes) && slot == 0 && n == 4 && bytes == 256,
          "k=4 in slot 0 as message 4");

    /* a receive step on a host stream: k=1 (in slot 1) into a buffer */
    void *hr = NULL;
    mxa_stream_t *r = host_stream(&hr);
    mxa_sx_record_t *rec = mxa_sx_record_alloc();
    memset(got, 0, sizeof got);
    mxa_sx_recv_t rv = {
        .link = rx, .dst = got, .cap = 256, .ctx = 3, .tag = 9, .k = 1, .record = rec};
    CHECK(mxa_sx_enqueue_recv(r, &rv, 1) == MXU_OK, "enqueue receive");
    CHECK(mxa_host_stream_synchronize(hr) == MXU_OK, "synchronize receive");
    CHECK(rec->done == mxa_sx_done_word(50, MXA_SX_OK, 1) && mxa_sx_done_error(rec->done) == 0 &&
              mxa_sx_done_bytes(rec->done) == 50 && mxa_sx_done_slot(rec->done) == 1,
          "receive record: done %llx", (unsigned long long)rec->done);
    CHECK(memcmp(got, msg + 1, 50) == 0, "received payload");
    /* the step consumed slot 1: message 5 (slot 1) goes into the ring now */
    CHECK_EQ_LL(send_one(s, hs, tx, msg + 5, 20, 5, 5, bounce), MXA_SX_SENT);
    CHECK(mxa_sx_link_find(rx, 3, 9, 5, &slot, &n, &bytes) && slot == 1 && n == 5, "k=5 in slot 1");

    /* a receive step told by the engine that its message came another way */
    mxa_sx_record_free(rec);
    rec = mxa_sx_record_alloc();
    __atomic_store_n(&rec->desc, MXA_SX_DESC_DELIVERED, __ATOMIC_RELEASE);
    rv.k = 7; /* never sent */
    rv.record = rec;
    CHECK(mxa_sx_enqueue_recv(r, &rv, 1) == MXU_OK, "enqueue receive 2");
    CHECK(mxa_host_stream_synchronize(hr) == MXU_OK, "synchronize receive 2");
    CHECK((rec->done & 1) && mxa_sx_done_error(rec->done) == MXA_SX_DELIVERED &&
              mxa_sx_done_slot(rec->done) == -1,
          "delivered: error %d", mxa_sx_done_error(rec->done));

    /* a step told its message comes by UCX (desc UCX) does not take it from
     * the ring even when a message with its (ctx, tag, k) is there; it
     * finishes on the desc that follows */
    mxa_sx_record_free(rec);
    rec = mxa_sx_record_alloc();
    __atomic_store_n(&rec->desc, MXA_SX_DESC_UCX, __ATOMIC_RELEASE);
    rv.k = 5; /* in slot 1 (above) */
    rv.record = rec;
    CHECK(mxa_sx_enqueue_recv(r, &rv, 1) == MXU_OK, "enqueue receive (UCX hint)");
    usleep(20000);
    CHECK(__atomic_load_n(&rec->done, __ATOMIC_ACQUIRE) == 0, "UCX hint: still waiting");
    __atomic_store_n(&rec->desc, MXA_SX_DESC_DELIVERED, __ATOMIC_RELEASE);
    CHECK(mxa_host_stream_synchronize(hr) == MXU_OK, "synchronize receive (UCX hint)");
    CHECK(mxa_sx_done_error(rec->done) == MXA_SX_DELIVERED, "UCX hint: delivered, error %d",
          mxa_sx_done_error(rec->done));
    CHECK(mxa_sx_link_find(rx, 3, 9, 5, &slot, &n, &bytes), "k=5 still in the ring");

    /* the abort word stops a receive step waiting for a message that never comes */
    mxa_sx_record_free(rec);
    rec = mxa_sx_record_alloc();
    rv.record = rec;
    rv.k = 8;
    mxa_sx_abort_all();
    CHECK(mxa_sx_enqueue_recv(r, &rv, 1) == MXU_OK, "enqueue receive 3");
    CHECK(mxa_host_stream_synchronize(hr) == MXU_OK, "synchronize receive 3");
    CHECK((rec->done & 1) && mxa_sx_done_error(rec->done) == MXA_SX_ABORTED, "aborted: error %d",
          mxa_sx_done_error(rec->done));
    mxa_sx_record_free(rec);

    /* LL words: a header is whole only when all 8 words carry one flag and
     * that flag is its message's; payload words at any alignment and
     * length round-trip through gather/scatter */
    mxa_sx_send_desc_t d = {.n = 5, .k = 0x100000002ull, .ctx = 3, .tag = -9, .bytes = 7};
    uint64_t w[MXA_SX_LL_HDR_WORDS];
    uint32_t f = 0;
    mxa_sx_ll_header(&d, w);
    CHECK(mxa_sx_ll_match(w, 3, -9, 0x100000002ull, &n, &bytes, &f) && n == 5 && bytes == 7 &&
              f == mxa_sx_ll_flag(5),
          "whole header: match (n %llu bytes %llu flag %u)", (unsigned long long)n,
          (unsigned long long)bytes, f);
    CHECK(!mxa_sx_ll_match(w, 3, -9, 2, &n, &bytes, &f), "k's high word counts");
    uint64_t old[MXA_SX_LL_HDR_WORDS];
    mxa_sx_send_desc_t d4 = d;
    d4.n = 4;
    mxa_sx_ll_header(&d4, old);
    for (int i = 0; i < MXA_SX_LL_HDR_WORDS; i++) {
        uint64_t torn[MXA_SX_LL_HDR_WORDS];
        memcpy(torn, w, sizeof torn);
        torn[i] = old[i]; /* one word still of the slot's previous message */
        CHECK(!mxa_sx_ll_match(torn, 3, -9, 0x100000002ull, &n, &bytes, &f),
              "torn header (word %d old): no match", i);
        CHECK(!mxa_sx_ll_whole(torn, &f), "torn header (word %d old): not whole", i);
    }
    w[6] = mxa_sx_ll_word(6, mxa_sx_ll_flag(5)); /* number and flag disagree */
    CHECK(!mxa_sx_ll_match(w, 3, -9, 0x100000002ull, &n, &bytes, &f), "n vs flag: no match");
    f = 0;
    CHECK(mxa_sx_ll_whole(w, &f) && f == mxa_sx_ll_flag(5) && mxa_sx_ll_n(w) == 6,
          "n vs flag: whole all the same (flag %u)", f);
    uint64_t zero[MXA_SX_LL_HDR_WORDS] = {0};
    CHECK(!mxa_sx_ll_match(zero, 0, 0, 0, &n, &bytes, &f), "an empty slot: no match");
    CHECK(!mxa_sx_ll_whole(zero, &f), "an empty slot: not whole");
    CHECK(mxa_sx_ll_flag(0) == 1 && mxa_sx_ll_flag(0xfffffffeull) == 0xffffffffu &&
              mxa_sx_ll_flag(0xffffffffull) == 1,
          "flags are never 0");
    for (size_t off = 0; off < 4; off++)
        for (size_t len = 0; len < 13; len++) {
            unsigned char out[24];
            memset(out, 0xee, sizeof out);
            for (uint64_t i = 0; i < mxa_sx_ll_words(len); i++)
                mxa_sx_ll_scatter(out + off, len, i, mxa_sx_ll_gather(msg + off, len, i));
            CHECK(memcmp(out + off, msg + off, len) == 0 && out[off + len] == 0xee,
                  "gather/scatter offset %zu length %zu", off, len);
        }
    CHECK(mxa_sx_done_bytes(mxa_sx_done_word((1ull << 40) + 3, MXA_SX_TRUNCATED, 63)) ==
                  (1ull << 40) + 3 &&
              mxa_sx_done_error(mxa_sx_done_word(0, MXA_SX_TRUNCATED, 63)) == MXA_SX_TRUNCATED &&
              mxa_sx_done_slot(mxa_sx_done_word(0, MXA_SX_OK, 63)) == 63,
          "done word round trip");

    CHECK(mxa_host_stream_free(hs) == MXU_OK && mxa_host_stream_free(hr) == MXU_OK, "free");
    mxa_sx_link_close(tx);
    mxa_sx_link_close(rx);
    CHECK(mxa_sx_link_open(name, &missing) == MXU_ERR_NOT_READY, "the name is gone after close");

    device_ring(name);
    mxa_sx_shutdown();
    CHECK(mxa_sx_listen_fd() < 0, "the device-ring socket is closed at shutdown");
    TEST_PASS("test_sx");
}
